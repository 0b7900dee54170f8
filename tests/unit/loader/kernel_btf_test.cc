#include "daemon/loader/kernel_btf.h"

#include <bpf/btf.h>
#include <linux/btf.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

using ::testing::HasSubstr;

// Builds a BTF file of hand-made types, in this machine's byte order.
class BtfBuilder {
 public:
  uint32_t String(const std::string& text) {
    uint32_t offset = static_cast<uint32_t>(strings_.size());
    strings_ += text;
    strings_.push_back('\0');
    return offset;
  }
  // A type's fixed part; `trailing` words follow it.
  uint32_t Type(uint32_t kind, uint32_t vlen, const std::string& name, uint32_t size_or_type,
                std::vector<uint32_t> trailing = {}) {
    Word(name.empty() ? 0 : String(name));
    Word(kind << 24 | vlen);
    Word(size_or_type);
    for (uint32_t word : trailing) Word(word);
    return ++types_count_;
  }
  std::string Bytes(uint16_t magic = BTF_MAGIC) const {
    btf_header header{};
    header.magic = magic;
    header.version = BTF_VERSION;
    header.hdr_len = sizeof(header);
    header.type_off = 0;
    header.type_len = static_cast<uint32_t>(types_.size());
    header.str_off = header.type_len;
    header.str_len = static_cast<uint32_t>(strings_.size());
    std::string out(reinterpret_cast<const char*>(&header), sizeof(header));
    return out + types_ + strings_;
  }

 private:
  void Word(uint32_t word) { types_.append(reinterpret_cast<const char*>(&word), 4); }
  std::string types_, strings_{'\0'};
  uint32_t types_count_ = 0;
};

class KernelBtfTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& bytes) {
    std::ofstream(path_, std::ios::binary) << bytes;
    return path_;
  }
  void TearDown() override { unlink(path_.c_str()); }

  std::string path_ = ::testing::TempDir() + "/kernel_btf_test." + std::to_string(getpid());
};

// Two tracepoints as the kernel declares them, and what a scanner must not
// trip over: a typedef that loops, a name of a different kind, and every
// kind whose trailing part differs in size.
std::string TwoTracepoints() {
  BtfBuilder b;
  uint32_t int_type = b.Type(BTF_KIND_INT, 0, "int", 4, {32});
  uint32_t void_pointer = b.Type(BTF_KIND_PTR, 0, "", 0);
  uint32_t task = b.Type(BTF_KIND_STRUCT, 2, "task_struct", 16, {0, int_type, 0, 0, int_type, 64});
  b.Type(BTF_KIND_ENUM, 2, "state", 4, {0, 1, 0, 2});
  b.Type(BTF_KIND_ARRAY, 0, "", 0, {int_type, int_type, 4});
  uint32_t task_pointer = b.Type(BTF_KIND_PTR, 0, "", task);
  uint32_t const_task_pointer = b.Type(BTF_KIND_CONST, 0, "", task_pointer);
  uint32_t victim_proto =
      b.Type(BTF_KIND_FUNC_PROTO, 3, "", 0, {0, void_pointer, 0, const_task_pointer, 0, int_type});
  b.Type(BTF_KIND_TYPEDEF, 0, "btf_trace_with_task", b.Type(BTF_KIND_PTR, 0, "", victim_proto));
  uint32_t pid_proto = b.Type(BTF_KIND_FUNC_PROTO, 2, "", 0, {0, void_pointer, 0, int_type});
  b.Type(BTF_KIND_FUNC, 0, "btf_trace_with_pid", pid_proto);  // a function: not it
  b.Type(BTF_KIND_TYPEDEF, 0, "btf_trace_with_pid", b.Type(BTF_KIND_PTR, 0, "", pid_proto));
  b.Type(BTF_KIND_TYPEDEF, 0, "btf_trace_loop", 15);  // type 15: itself
  b.Type(BTF_KIND_DATASEC, 1, ".data", 8, {int_type, 0, 4});
  return b.Bytes();
}

TEST_F(KernelBtfTest, FollowsEachTracepointsTypedefToItsPrototype) {
  auto declared = ReadRawTracepointParams(Write(TwoTracepoints()),
                                          {"with_task", "with_pid", "loop", "not_declared"});
  ASSERT_TRUE(declared.ok()) << declared.status();
  ASSERT_EQ(declared->size(), 2u);
  EXPECT_EQ(declared->at("with_task").count, 3);
  EXPECT_TRUE(declared->at("with_task").first_is_pointer);  // through the const
  EXPECT_EQ(declared->at("with_pid").count, 2);
  EXPECT_FALSE(declared->at("with_pid").first_is_pointer);
}

TEST_F(KernelBtfTest, BadFilesAreErrorsNamingTheFile) {
  EXPECT_EQ(ReadRawTracepointParams(path_, {"x"}).status().code(), absl::StatusCode::kNotFound);

  BtfBuilder wrong_order;
  auto status = ReadRawTracepointParams(Write(wrong_order.Bytes(0x9feb)), {"x"}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr(path_ + ": no BTF header"));

  BtfBuilder unknown;
  unknown.Type(BTF_KIND_INT, 0, "int", 4, {32});
  unknown.Type(31, 0, "", 0);
  status = ReadRawTracepointParams(Write(unknown.Bytes()), {"x"}).status();
  EXPECT_THAT(status.message(), HasSubstr("type 2 is of unknown kind 31"));

  std::string whole = TwoTracepoints();
  btf_header header;
  std::memcpy(&header, whole.data(), sizeof(header));
  header.type_len -= 4;  // the last type's trailing word cut off
  header.str_off -= 4;
  std::string cut(reinterpret_cast<const char*>(&header), sizeof(header));
  cut += whole.substr(sizeof(header), header.type_len);
  cut += whole.substr(sizeof(header) + header.type_len + 4);
  status = ReadRawTracepointParams(Write(cut), {"with_pid"}).status();
  EXPECT_THAT(status.message(), HasSubstr("runs past the type section"));

  status = ReadRawTracepointParams(Write(whole.substr(0, whole.size() - 40)), {"nowhere"}).status();
  EXPECT_THAT(status.message(), HasSubstr("runs past 64 KiB or the section's end"));
}

// The running kernel's answers, against libbpf's parse of the same file.
TEST(KernelBtfRealTest, AgreesWithLibbpfOnThisKernel) {
  const std::string path = "/sys/kernel/btf/vmlinux";
  if (access(path.c_str(), R_OK) != 0) GTEST_SKIP() << path << " is not readable here";
  std::vector<std::string> names = {"sched_switch",      "mark_victim",        "sched_wakeup",
                                    "sys_enter",         "sched_process_exec", "block_rq_issue",
                                    "no_such_tracepoint"};
  auto declared = ReadRawTracepointParams(path, names);
  ASSERT_TRUE(declared.ok()) << declared.status();
  std::unique_ptr<btf, decltype(&btf__free)> vmlinux(btf__parse(path.c_str(), nullptr), &btf__free);
  ASSERT_NE(vmlinux, nullptr);
  int found = 0;
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    int id = btf__find_by_name_kind(vmlinux.get(), ("btf_trace_" + name).c_str(), BTF_KIND_TYPEDEF);
    if (id <= 0) {
      EXPECT_FALSE(declared->contains(name));
      continue;
    }
    ++found;
    const btf_type* type = btf__type_by_id(vmlinux.get(), btf__resolve_type(vmlinux.get(), id));
    ASSERT_TRUE(btf_is_ptr(type));
    const btf_type* proto = btf__type_by_id(vmlinux.get(), type->type);
    ASSERT_TRUE(btf_is_func_proto(proto));
    const btf_type* first =
        btf__type_by_id(vmlinux.get(), btf__resolve_type(vmlinux.get(), btf_params(proto)[1].type));
    ASSERT_TRUE(declared->contains(name));
    EXPECT_EQ(declared->at(name).count, btf_vlen(proto));
    EXPECT_EQ(declared->at(name).first_is_pointer, btf_is_ptr(first));
  }
  EXPECT_GE(found, 5);  // every one but the made-up name, on any kernel with BTF
}

}  // namespace
}  // namespace pystrobe
