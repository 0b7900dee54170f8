// The daemon's YAML configuration: schema, errors with key/line/column, every
// error reported, overrides, and the shipped config/pystrobe.yaml.
#include "config/config_loader.h"

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "config/config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::SizeIs;

ConfigParseResult Parse(const std::string& yaml) { return ParseConfig(yaml, "pystrobe.yaml"); }

// The one error of a result that must have exactly one.
ConfigError OnlyError(const ConfigParseResult& result) {
  EXPECT_THAT(result.errors, SizeIs(1)) << result.ErrorText();
  return result.errors.empty() ? ConfigError{} : result.errors[0];
}

TEST(ConfigDefaultsTest, MatchTheDocumentedValues) {
  DaemonConfig c;
  EXPECT_EQ(c.rate_hz, 19);
  EXPECT_TRUE(c.targets.all);
  EXPECT_TRUE(c.python.walk);
  EXPECT_EQ(c.python.max_depth, 128);
  EXPECT_EQ(c.python.native_table_mib, 32);
  EXPECT_FALSE(c.off_cpu);
  EXPECT_FALSE(c.memory);
  EXPECT_TRUE(c.gpu);
  EXPECT_EQ(c.window, absl::Seconds(60));
  EXPECT_EQ(c.exporters.profile_dir, "/var/lib/pystrobe/profiles");
  EXPECT_EQ(c.exporters.retention.max_age, absl::Hours(24 * 7));
  EXPECT_EQ(c.exporters.retention.max_total_size_bytes, uint64_t{1} << 30);
  EXPECT_EQ(c.exporters.push.url, "");
  EXPECT_EQ(c.exporters.prometheus.listen, "127.0.0.1:9464");
  EXPECT_EQ(c.limits.memory_bytes, uint64_t{256} << 20);
  EXPECT_TRUE(c.labels.empty());
}

TEST(ParseConfigTest, EmptyFileAndEmptyMappingGiveTheDefaults) {
  for (const char* text : {"", "# only a comment\n", "{}\n", "---\n"}) {
    ConfigParseResult result = Parse(text);
    EXPECT_TRUE(result.ok()) << result.ErrorText();
    EXPECT_EQ(result.config, DaemonConfig{}) << text;
  }
}

TEST(ParseConfigTest, ReadsEveryKey) {
  ConfigParseResult result = Parse(R"(
rate: 49
targets:
  all: false
  pids: [1, 4194304]
  process_names: ["python3(\\.[0-9]+)?", gunicorn]
  cgroups: [/system.slice/nginx.service, /kubepods.slice]
  containers:
    - 0123456789ab
    - 3f4e5d6c7b8a9f0e1d2c3b4a5f6e7d8c9b0a1f2e3d4c5b6a7f8e9d0c1b2a3f4e
python:
  walk: false
  max_depth: 384
  native_table_mib: 96
off_cpu: true
memory: true
gpu: false
window: 5m
exporters:
  profile_dir: /srv/profiles
  retention:
    max_age: 24h
    max_total_size: 500MiB
  push:
    url: http://pyroscope:4040
    timeout: 2s
    max_queue: 3
  prometheus:
    listen: "[::]:9100"
limits:
  memory: 1GiB
  tracked_processes: 100
  metric_series: 50
labels:
  cluster: prod-eu
  role: web
  shard: 7
)");
  ASSERT_TRUE(result.ok()) << result.ErrorText();
  const DaemonConfig& c = result.config;
  EXPECT_EQ(c.rate_hz, 49);
  EXPECT_FALSE(c.targets.all);
  EXPECT_THAT(c.targets.pids, ElementsAre(1, 4194304));
  EXPECT_THAT(c.targets.process_names, ElementsAre("python3(\\.[0-9]+)?", "gunicorn"));
  EXPECT_THAT(c.targets.cgroups, ElementsAre("/system.slice/nginx.service", "/kubepods.slice"));
  EXPECT_THAT(c.targets.containers,
              ElementsAre("0123456789ab",
                          "3f4e5d6c7b8a9f0e1d2c3b4a5f6e7d8c9b0a1f2e3d4c5b6a7f8e9d0c1b2a3f4e"));
  EXPECT_FALSE(c.python.walk);
  EXPECT_EQ(c.python.max_depth, 384);
  EXPECT_EQ(c.python.native_table_mib, 96);
  EXPECT_TRUE(c.off_cpu);
  EXPECT_TRUE(c.memory);
  EXPECT_FALSE(c.gpu);
  EXPECT_EQ(c.window, absl::Minutes(5));
  EXPECT_EQ(c.exporters.profile_dir, "/srv/profiles");
  EXPECT_EQ(c.exporters.retention.max_age, absl::Hours(24));
  EXPECT_EQ(c.exporters.retention.max_total_size_bytes, uint64_t{500} << 20);
  EXPECT_EQ(c.exporters.push.url, "http://pyroscope:4040");
  EXPECT_EQ(c.exporters.push.timeout, absl::Seconds(2));
  EXPECT_EQ(c.exporters.push.max_queue, 3);
  EXPECT_EQ(c.exporters.prometheus.listen, "[::]:9100");
  EXPECT_EQ(c.limits.memory_bytes, uint64_t{1} << 30);
  EXPECT_EQ(c.limits.tracked_processes, 100);
  EXPECT_EQ(c.limits.metric_series, 50);
  EXPECT_EQ(c.labels.size(), 3u);
  EXPECT_EQ(c.labels.at("cluster"), "prod-eu");
  EXPECT_EQ(c.labels.at("shard"), "7");
}

TEST(ParseConfigTest, ZeroRetentionMeansNoLimit) {
  ConfigParseResult result =
      Parse("exporters:\n  retention:\n    max_age: 0\n    max_total_size: 0\n");
  ASSERT_TRUE(result.ok()) << result.ErrorText();
  EXPECT_EQ(result.config.exporters.retention.max_age, absl::ZeroDuration());
  EXPECT_EQ(result.config.exporters.retention.max_total_size_bytes, 0u);
}

TEST(ParseConfigTest, SectionsLeftEmptyKeepTheirDefaults) {
  ConfigParseResult result = Parse("targets:\npython:\nexporters:\n  push:\nlabels:\n");
  ASSERT_TRUE(result.ok()) << result.ErrorText();
  EXPECT_EQ(result.config, DaemonConfig{});
}

TEST(ParseConfigTest, EmptyPushUrlTurnsPushOff) {
  ConfigParseResult result = Parse("exporters:\n  push:\n    url: \"\"\n");
  ASSERT_TRUE(result.ok()) << result.ErrorText();
  EXPECT_EQ(result.config.exporters.push.url, "");
}

// Files the push settings point at, in a directory of the test's own.
class PushFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/pystrobe-config-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& content) {
    std::string path = absl::StrCat(dir_, "/", name);
    std::ofstream(path) << content;
    return path;
  }

  std::string dir_;
};

TEST_F(PushFilesTest, ReadsTlsAuthTenantAndHeaders) {
  std::string ca = Write("ca.pem", "-----BEGIN CERTIFICATE-----\n");
  std::string cert = Write("client.pem", "cert");
  std::string key = Write("client.key", "key");
  std::string password = Write("password", "s3cret-pw\n");
  ConfigParseResult result = Parse(absl::StrCat(R"(
exporters:
  push:
    url: https://profiles.example.com/pyroscope
    tls:
      ca_file: )",
                                                ca, R"(
      cert_file: )",
                                                cert, R"(
      key_file: )",
                                                key, R"(
      insecure_skip_verify: false
    basic_auth:
      username: alice
      password_file: )",
                                                password, R"(
    tenant_id: team-a
    headers:
      X-Api-Key: abc
      X-Team: profiling
)"));
  ASSERT_TRUE(result.ok()) << result.ErrorText();
  const PushConfig& push = result.config.exporters.push;
  EXPECT_EQ(push.url, "https://profiles.example.com/pyroscope");
  EXPECT_EQ(push.tls.ca_file, ca);
  EXPECT_EQ(push.tls.cert_file, cert);
  EXPECT_EQ(push.tls.key_file, key);
  EXPECT_FALSE(push.tls.insecure_skip_verify);
  EXPECT_EQ(push.basic_auth.username, "alice");
  EXPECT_EQ(push.basic_auth.password_file, password);  // the path; the secret is read later
  EXPECT_EQ(push.tenant_id, "team-a");
  EXPECT_EQ(push.headers.size(), 2u);
  EXPECT_EQ(push.headers.at("X-Api-Key"), "abc");
}

TEST_F(PushFilesTest, BearerTokenFile) {
  std::string token = Write("token", "tok-123\n");
  ConfigParseResult result = Parse(absl::StrCat(
      "exporters:\n  push:\n    url: https://store\n    bearer_token_file: ", token, "\n"));
  ASSERT_TRUE(result.ok()) << result.ErrorText();
  EXPECT_EQ(result.config.exporters.push.bearer_token_file, token);
  EXPECT_EQ(*ReadSecretFile(token), "tok-123");  // the newline of `echo tok > file` is not sent
}

TEST_F(PushFilesTest, UnreadableFilesAreErrorsNamingTheKeyAndPath) {
  std::string missing = absl::StrCat(dir_, "/missing.pem");
  std::string empty = Write("empty", "");
  std::string blank_password = Write("blank", "\n");
  ConfigParseResult result = Parse(absl::StrCat(R"(exporters:
  push:
    url: https://store
    tls:
      ca_file: )",
                                                missing, R"(
      cert_file: )",
                                                dir_, R"(
      key_file: )",
                                                empty, R"(
    basic_auth:
      username: alice
      password_file: )",
                                                blank_password, R"(
    bearer_token_file: relative/token
)"));
  ASSERT_EQ(result.errors.size(), 5u) << result.ErrorText();
  EXPECT_EQ(result.errors[0].key, "exporters.push.tls.ca_file");
  EXPECT_EQ(result.errors[0].line, 5);
  EXPECT_THAT(result.errors[0].message,
              HasSubstr(absl::StrCat("cannot read ", missing, ": No such file or directory")));
  EXPECT_EQ(result.errors[1].key, "exporters.push.tls.cert_file");
  EXPECT_THAT(result.errors[1].message, HasSubstr(absl::StrCat(dir_, ": not a file")));
  EXPECT_EQ(result.errors[2].key, "exporters.push.tls.key_file");
  EXPECT_THAT(result.errors[2].message, HasSubstr(absl::StrCat(empty, " is empty")));
  EXPECT_EQ(result.errors[3].key, "exporters.push.basic_auth.password_file");
  EXPECT_THAT(result.errors[3].message, HasSubstr(absl::StrCat(blank_password, " is empty")));
  EXPECT_EQ(result.errors[4].key, "exporters.push.bearer_token_file");
  EXPECT_THAT(result.errors[4].message, HasSubstr("not an absolute path"));
}

TEST_F(PushFilesTest, SettingsThatContradictEachOther) {
  std::string password = Write("password", "pw");
  std::string token = Write("token", "tok");
  std::string key = Write("client.key", "key");
  auto errors = [](const ConfigParseResult& result) {
    std::vector<std::string> lines;
    for (const ConfigError& e : result.errors) lines.push_back(e.key + ": " + e.message);
    return lines;
  };
  EXPECT_THAT(errors(Parse(absl::StrCat("exporters:\n  push:\n    url: http://store\n"
                                        "    tls:\n      insecure_skip_verify: true\n"))),
              ElementsAre(HasSubstr("exporters.push.tls: TLS settings need an https:// url")));
  EXPECT_THAT(errors(Parse(absl::StrCat("exporters:\n  push:\n    url: https://store\n"
                                        "    tls:\n      key_file: ",
                                        key, "\n"))),
              ElementsAre(HasSubstr("key_file: a client key needs its certificate")));
  EXPECT_THAT(errors(Parse(absl::StrCat("exporters:\n  push:\n    url: https://store\n"
                                        "    basic_auth:\n      password_file: ",
                                        password, "\n"))),
              ElementsAre(HasSubstr("basic_auth: password_file needs a username")));
  EXPECT_THAT(errors(Parse(absl::StrCat("exporters:\n  push:\n    url: https://store\n"
                                        "    basic_auth:\n      username: a\n"
                                        "      password_file: ",
                                        password, "\n    bearer_token_file: ", token, "\n"))),
              ElementsAre(HasSubstr("cannot both be used")));
}

TEST_F(PushFilesTest, OtlpEndpointProtocolTlsAndHeadersFromFiles) {
  std::string ca = Write("ca.pem", "-----BEGIN CERTIFICATE-----\n");
  std::string cert = Write("client.pem", "cert");
  std::string key = Write("client.key", "key");
  std::string api_key = Write("api-key", "Bearer k-123\n");
  ConfigParseResult result = Parse(absl::StrCat(R"(
exporters:
  otlp:
    endpoint: https://collector.example:4317
    protocol: grpc
    timeout: 3s
    tls:
      ca_file: )",
                                                ca, R"(
      cert_file: )",
                                                cert, R"(
      key_file: )",
                                                key, R"(
    headers:
      X-Scope-OrgID: team-a
    header_files:
      Authorization: )",
                                                api_key, R"(
    service_name: checkout
)"));
  ASSERT_TRUE(result.ok()) << result.ErrorText();
  const OtlpConfig& otlp = result.config.exporters.otlp;
  EXPECT_EQ(otlp.endpoint, "https://collector.example:4317");
  EXPECT_EQ(otlp.protocol, "grpc");
  EXPECT_EQ(otlp.timeout, absl::Seconds(3));
  EXPECT_EQ(otlp.tls.cert_file, cert);
  EXPECT_FALSE(otlp.tls.insecure_skip_verify);
  EXPECT_EQ(otlp.headers.at("X-Scope-OrgID"), "team-a");
  EXPECT_EQ(otlp.header_files.at("Authorization"), api_key);  // the path; read by the export
  EXPECT_EQ(otlp.service_name, "checkout");
}

TEST(ParseConfigErrorsTest, OtlpProtocolHeadersAndTlsAreChecked) {
  ConfigParseResult result = Parse(R"(exporters:
  otlp:
    endpoint: http://collector:4318
    protocol: http/json
    headers:
      grpc-timeout: 1s
      Content-Type: "application/json"
    header_files:
      Authorization: relative/path
)");
  ASSERT_EQ(result.errors.size(), 4u) << result.ErrorText();
  EXPECT_EQ(result.errors[0].key, "exporters.otlp.protocol");
  EXPECT_THAT(result.errors[0].message, HasSubstr("grpc or http/protobuf"));
  EXPECT_EQ(result.errors[1].key, "exporters.otlp.headers.grpc-timeout");
  EXPECT_EQ(result.errors[2].key, "exporters.otlp.headers.Content-Type");
  EXPECT_EQ(result.errors[3].key, "exporters.otlp.header_files.Authorization");

  ConfigParseResult tls = Parse(R"(exporters:
  otlp:
    endpoint: http://collector:4317
    tls:
      insecure_skip_verify: true
)");
  ASSERT_EQ(tls.errors.size(), 1u) << tls.ErrorText();
  EXPECT_THAT(tls.errors[0].message, HasSubstr("https://"));
}

TEST(ParseConfigErrorsTest, PushHeadersAndTenantAreChecked) {
  ConfigParseResult result = Parse(R"(exporters:
  push:
    url: https://store
    tenant_id: "team a"
    headers:
      Authorization: Basic abc
      "Bad Name": x
      X-Scope-OrgID: t
)");
  ASSERT_EQ(result.errors.size(), 4u) << result.ErrorText();
  EXPECT_EQ(result.errors[0].key, "exporters.push.tenant_id");
  EXPECT_EQ(result.errors[1].key, "exporters.push.headers.Authorization");
  EXPECT_THAT(result.errors[1].message, HasSubstr("basic_auth or bearer_token_file"));
  EXPECT_THAT(result.errors[1].message, Not(HasSubstr("abc")));  // a value may be a secret
  EXPECT_THAT(result.errors[2].message, HasSubstr("not a header name"));
  EXPECT_THAT(result.errors[3].message, HasSubstr("tenant_id"));
}

TEST(ParseConfigErrorsTest, CredentialsInThePushUrlAreRefusedWithoutBeingRepeated) {
  ConfigParseResult result = Parse("exporters:\n  push:\n    url: https://alice:s3cret@store\n");
  ConfigError error = OnlyError(result);
  EXPECT_EQ(error.key, "exporters.push.url");
  EXPECT_THAT(error.message, HasSubstr("basic_auth"));
  EXPECT_THAT(result.ErrorText(), Not(HasSubstr("s3cret")));
}

TEST(ParseConfigErrorsTest, UnknownKeyAtDepthNamesThePathLineAndColumn) {
  ConfigParseResult result = Parse(
      "rate: 19\n"
      "exporters:\n"
      "  retention:\n"
      "    max_age: 7d\n"
      "    max_size: 1GiB\n");
  ConfigError error = OnlyError(result);
  EXPECT_EQ(error.key, "exporters.retention.max_size");
  EXPECT_EQ(error.line, 5);
  EXPECT_EQ(error.column, 5);
  EXPECT_THAT(error.message, HasSubstr("unknown key (expected one of: max_age, max_total_size)"));
  EXPECT_EQ(result.ErrorText(),
            "pystrobe.yaml:5:5: exporters.retention.max_size: unknown key (expected one of: "
            "max_age, max_total_size)");
}

TEST(ParseConfigErrorsTest, UnknownTopLevelKey) {
  ConfigError error = OnlyError(Parse("rate: 19\nsampling_rate: 99\n"));
  EXPECT_EQ(error.key, "sampling_rate");
  EXPECT_EQ(error.line, 2);
  EXPECT_EQ(error.column, 1);
}

TEST(ParseConfigErrorsTest, BadDurationPointsAtTheValue) {
  ConfigParseResult result = Parse(
      "exporters:\n"
      "  retention:\n"
      "    max_age: 7 days\n");
  ConfigError error = OnlyError(result);
  EXPECT_EQ(result.ErrorText(),
            "pystrobe.yaml:3:14: exporters.retention.max_age: \"7 days\" is not a duration (use "
            "e.g. 90m, 24h, 7d)");
  EXPECT_EQ(error.line, 3);
  EXPECT_EQ(error.column, 14);
}

TEST(ParseConfigErrorsTest, BadSize) {
  ConfigError error = OnlyError(Parse("limits:\n  memory: lots\n"));
  EXPECT_EQ(error.key, "limits.memory");
  EXPECT_EQ(error.message, "\"lots\" is not a size (use e.g. 500MiB, 1GiB)");
  EXPECT_EQ(error.line, 2);
  EXPECT_EQ(error.column, 11);
}

TEST(ParseConfigErrorsTest, SizesAndDurationsOutOfRange) {
  ConfigParseResult result = Parse(
      "limits:\n"
      "  memory: 1MiB\n"
      "exporters:\n"
      "  retention:\n"
      "    max_total_size: 10KiB\n"
      "  push:\n"
      "    timeout: 10m\n");
  ASSERT_THAT(result.errors, SizeIs(3)) << result.ErrorText();
  EXPECT_EQ(result.errors[0].key, "limits.memory");
  EXPECT_THAT(result.errors[0].message, HasSubstr("too small (at least 32MiB)"));
  EXPECT_EQ(result.errors[1].key, "exporters.retention.max_total_size");
  EXPECT_EQ(result.errors[2].key, "exporters.push.timeout");
  EXPECT_THAT(result.errors[2].message, HasSubstr("out of range (100ms to 5m)"));
}

TEST(ParseConfigErrorsTest, WrongTypesNameWhatWasExpected) {
  ConfigParseResult result = Parse(
      "rate: [19]\n"             // 1
      "targets: all\n"           // 2
      "python:\n"                // 3
      "  walk: sometimes\n"      // 4
      "  max_depth: deep\n"      // 5
      "off_cpu: {on: true}\n"    // 6
      "exporters:\n"             // 7
      "  profile_dir: [a, b]\n"  // 8
      "  prometheus: 9464\n"     // 9
      "labels: [cluster]\n");    // 10
  ASSERT_THAT(result.errors, SizeIs(8)) << result.ErrorText();
  EXPECT_EQ(result.errors[0].ToString("f"), "f:1:7: rate: expected an integer, got a list");
  EXPECT_EQ(result.errors[1].ToString("f"),
            "f:2:10: targets: expected a mapping of keys, got \"all\"");
  EXPECT_EQ(result.errors[2].ToString("f"),
            "f:4:9: python.walk: \"sometimes\" is not a boolean (use true or false)");
  EXPECT_EQ(result.errors[3].ToString("f"), "f:5:14: python.max_depth: \"deep\" is not an integer");
  EXPECT_EQ(result.errors[4].ToString("f"),
            "f:6:10: off_cpu: expected true or false, got a mapping");
  EXPECT_EQ(result.errors[5].key, "exporters.profile_dir");
  EXPECT_EQ(result.errors[6].key, "exporters.prometheus");
  EXPECT_EQ(result.errors[7].key, "labels");
}

TEST(ParseConfigErrorsTest, KeyWithoutValueIsAnError) {
  ConfigError error = OnlyError(Parse("rate:\n"));
  EXPECT_EQ(error.key, "rate");
  EXPECT_THAT(error.message, HasSubstr("has no value (expected an integer)"));
}

TEST(ParseConfigErrorsTest, OutOfRangeValuesNameTheRange) {
  ConfigParseResult result = Parse(
      "rate: 0\n"
      "python:\n"
      "  max_depth: 385\n"
      "window: 0\n"
      "limits:\n"
      "  tracked_processes: 1\n"
      "  metric_series: 0\n"
      "exporters:\n"
      "  push:\n"
      "    max_queue: 5000\n");
  ASSERT_THAT(result.errors, SizeIs(6)) << result.ErrorText();
  EXPECT_EQ(result.errors[0].ToString("f"), "f:1:7: rate: 0 is out of range (1 to 1000)");
  EXPECT_EQ(result.errors[1].ToString("f"),
            "f:3:14: python.max_depth: 385 is out of range (1 to 384)");
  EXPECT_EQ(result.errors[2].key, "window");
  EXPECT_EQ(result.errors[3].key, "limits.tracked_processes");
  EXPECT_EQ(result.errors[4].key, "limits.metric_series");
  EXPECT_EQ(result.errors[5].key, "exporters.push.max_queue");
}

TEST(ParseConfigErrorsTest, ListItemsAreNamedByIndex) {
  ConfigParseResult result = Parse(
      "targets:\n"
      "  all: false\n"
      "  pids: [12, 0, -3, abc]\n"
      "  process_names: [\"python(\"]\n"
      "  cgroups: [relative/path]\n"
      "  containers: [NOTHEX0123456]\n");
  ASSERT_THAT(result.errors, SizeIs(6)) << result.ErrorText();
  EXPECT_EQ(result.errors[0].key, "targets.pids[1]");
  EXPECT_EQ(result.errors[0].line, 3);
  EXPECT_EQ(result.errors[0].column, 14);
  EXPECT_EQ(result.errors[1].key, "targets.pids[2]");
  EXPECT_EQ(result.errors[2].key, "targets.pids[3]");
  EXPECT_EQ(result.errors[3].key, "targets.process_names[0]");
  EXPECT_EQ(result.errors[4].key, "targets.cgroups[0]");
  EXPECT_EQ(result.errors[5].key, "targets.containers[0]");
}

TEST(ParseConfigErrorsTest, TargetListsNeedAllFalse) {
  ConfigParseResult result = Parse("targets:\n  all: true\n  pids: [1]\n");
  ConfigError error = OnlyError(result);
  EXPECT_EQ(error.key, "targets.all");
  EXPECT_EQ(error.line, 2);
  EXPECT_THAT(error.message, HasSubstr("set it to false"));

  error = OnlyError(Parse("targets:\n  cgroups: [/system.slice]\n"));
  EXPECT_EQ(error.key, "targets.all");
  EXPECT_THAT(error.message, HasSubstr("defaults to true"));
}

TEST(ParseConfigErrorsTest, AllFalseWithoutListsProfilesNothing) {
  ConfigError error = OnlyError(Parse("targets:\n  all: false\n"));
  EXPECT_EQ(error.key, "targets.all");
  EXPECT_THAT(error.message, HasSubstr("nothing would be profiled"));
}

TEST(ParseConfigErrorsTest, BadListItemIsNotAlsoReportedAsAnEmptyList) {
  ConfigError error = OnlyError(Parse("targets:\n  all: false\n  pids: [0]\n"));
  EXPECT_EQ(error.key, "targets.pids[0]");
}

TEST(ParseConfigErrorsTest, LabelNamesMustBeValidPrometheusNames) {
  ConfigParseResult result = Parse(
      "labels:\n"
      "  cluster: prod\n"
      "  team-name: x\n"
      "  __meta: x\n"
      "  pid: x\n"
      "  empty: \"\"\n"
      "  nested: {a: b}\n");
  ASSERT_THAT(result.errors, SizeIs(5)) << result.ErrorText();
  EXPECT_EQ(result.errors[0].key, "labels.team-name");
  EXPECT_EQ(result.errors[0].line, 3);
  EXPECT_EQ(result.errors[0].column, 3);
  EXPECT_THAT(result.errors[0].message, HasSubstr("not a valid Prometheus label name"));
  EXPECT_EQ(result.errors[1].key, "labels.__meta");
  EXPECT_EQ(result.errors[2].key, "labels.pid");
  EXPECT_EQ(result.errors[3].key, "labels.empty");
  EXPECT_EQ(result.errors[4].key, "labels.nested");
}

TEST(ParseConfigErrorsTest, DuplicateKeysAreErrors) {
  ConfigError error = OnlyError(Parse("rate: 19\nwindow: 60\nrate: 99\n"));
  EXPECT_EQ(error.key, "rate");
  EXPECT_EQ(error.line, 3);
  EXPECT_EQ(error.message, "duplicate key");
}

TEST(ParseConfigErrorsTest, EveryErrorIsReportedInFileOrder) {
  ConfigParseResult result = Parse(
      "rate: 5000\n"
      "bogus: 1\n"
      "python:\n"
      "  walk: maybe\n"
      "exporters:\n"
      "  prometheus:\n"
      "    listen: 9464\n");
  ASSERT_THAT(result.errors, SizeIs(4)) << result.ErrorText();
  EXPECT_EQ(result.errors[0].line, 1);
  EXPECT_EQ(result.errors[1].line, 2);
  EXPECT_EQ(result.errors[2].line, 4);
  EXPECT_EQ(result.errors[3].line, 7);
  EXPECT_EQ(result.errors[3].key, "exporters.prometheus.listen");
  // A bad file never hands out a half-read configuration.
  EXPECT_EQ(result.config, DaemonConfig{});
}

TEST(ParseConfigErrorsTest, ErrorsBeyondTheLimitAreCounted) {
  std::string yaml;
  for (int i = 0; i < kMaxConfigErrors + 5; ++i) absl::StrAppend(&yaml, "unknown_", i, ": 1\n");
  ConfigParseResult result = Parse(yaml);
  EXPECT_THAT(result.errors, SizeIs(kMaxConfigErrors));
  EXPECT_EQ(result.errors_not_shown, 5);
  EXPECT_THAT(result.ErrorText(), HasSubstr("pystrobe.yaml: ... and 5 more errors"));
}

TEST(ParseConfigErrorsTest, SyntaxErrorsHaveALineAndColumn) {
  ConfigParseResult result = Parse("rate: 19\ntargets:\n  pids: [1, 2\n");
  ConfigError error = OnlyError(result);
  EXPECT_GT(error.line, 0);
  EXPECT_THAT(result.ErrorText(), HasSubstr("not valid YAML"));
  EXPECT_THAT(result.ErrorText(), testing::StartsWith("pystrobe.yaml:"));
}

TEST(ParseConfigErrorsTest, TopLevelMustBeAMapping) {
  ConfigError error = OnlyError(Parse("- rate\n- 19\n"));
  EXPECT_EQ(error.line, 1);
  EXPECT_THAT(error.message, HasSubstr("expected a mapping of keys, got a list"));
}

TEST(ApplyOverridesTest, FlagsReplaceFileValues) {
  DaemonConfig config;
  ConfigOverrides overrides;
  overrides.prometheus_listen = "0.0.0.0:9100";
  overrides.profile_dir = "/tmp/profiles";
  overrides.window = "10";
  overrides.rate = "99";
  ASSERT_TRUE(ApplyOverrides(overrides, &config).ok());
  EXPECT_EQ(config.exporters.prometheus.listen, "0.0.0.0:9100");
  EXPECT_EQ(config.exporters.profile_dir, "/tmp/profiles");
  EXPECT_EQ(config.window, absl::Seconds(10));
  EXPECT_EQ(config.rate_hz, 99);
}

TEST(ApplyOverridesTest, BadFlagsAreAllNamedAndChangeNothing) {
  DaemonConfig config;
  ConfigOverrides overrides;
  overrides.prometheus_listen = "9100";
  overrides.profile_dir = "relative";
  overrides.window = "0";
  overrides.rate = "1001";
  absl::Status status = ApplyOverrides(overrides, &config);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("--prometheus-listen: \"9100\" is not a HOST:PORT"));
  EXPECT_THAT(status.message(), HasSubstr("--profile-dir: \"relative\" is not an absolute path"));
  EXPECT_THAT(status.message(), HasSubstr("--window: \"0\" is out of range"));
  EXPECT_THAT(status.message(), HasSubstr("--rate: 1001 is out of range (1 to 1000)"));
  EXPECT_EQ(config, DaemonConfig{});

  overrides = ConfigOverrides{};
  overrides.rate = "5";
  overrides.window = "soon";
  EXPECT_FALSE(ApplyOverrides(overrides, &config).ok());
  EXPECT_EQ(config.rate_hz, 19) << "a good flag next to a bad one is not applied either";
}

std::string ShippedConfigPath() {
  return absl::StrCat(PYSTROBE_SOURCE_DIR, "/config/pystrobe.yaml");
}

TEST(ShippedConfigTest, ParsesToExactlyTheDefaults) {
  absl::StatusOr<ConfigParseResult> result = ReadConfigFile(ShippedConfigPath());
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_TRUE(result->ok()) << result->ErrorText();
  EXPECT_EQ(result->config, DaemonConfig{});
}

TEST(ShippedConfigTest, EveryKeyOfTheSchemaIsWrittenOut) {
  std::ifstream in(ShippedConfigPath());
  std::stringstream text;
  text << in.rdbuf();
  for (const char* key : {"\nrate:",
                          "\ntargets:",
                          "  all:",
                          "  pids:",
                          "  process_names:",
                          "  cgroups:",
                          "  containers:",
                          "\npython:",
                          "  walk:",
                          "  max_depth:",
                          "\noff_cpu:",
                          "\nwindow:",
                          "\nexporters:",
                          "  profile_dir:",
                          "  retention:",
                          "    max_age:",
                          "    max_total_size:",
                          "  push:",
                          "    url:",
                          "    timeout:",
                          "    max_queue:",
                          "    tls:",
                          "      ca_file:",
                          "      cert_file:",
                          "      key_file:",
                          "      insecure_skip_verify:",
                          "    basic_auth:",
                          "      username:",
                          "      password_file:",
                          "    bearer_token_file:",
                          "    tenant_id:",
                          "    headers:",
                          "  prometheus:",
                          "    listen:",
                          "\nlimits:",
                          "  memory:",
                          "  tracked_processes:",
                          "  metric_series:",
                          "\nlabels:"}) {
    EXPECT_THAT(text.str(), HasSubstr(key));
  }
}

TEST(ReadConfigFileTest, MissingFileIsNotFound) {
  absl::StatusOr<ConfigParseResult> result = ReadConfigFile("/nonexistent/pystrobe.yaml");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(result.status().message(), HasSubstr("/nonexistent/pystrobe.yaml"));
}

TEST(ReadConfigFileTest, DirectoryIsNotAConfiguration) {
  absl::StatusOr<ConfigParseResult> result = ReadConfigFile(PYSTROBE_SOURCE_DIR);
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr("Is a directory"));
}

TEST(LoadEffectiveConfigTest, BadFileIsRejectedWithEveryError) {
  absl::StatusOr<DaemonConfig> config =
      LoadEffectiveConfig("/nonexistent/pystrobe.yaml", ConfigOverrides{});
  EXPECT_EQ(config.status().code(), absl::StatusCode::kNotFound);
}

TEST(LoadEffectiveConfigTest, FileThenOverrides) {
  ConfigOverrides overrides;
  overrides.rate = "7";
  absl::StatusOr<DaemonConfig> config = LoadEffectiveConfig(ShippedConfigPath(), overrides);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->rate_hz, 7);
  absl::StatusOr<DaemonConfig> defaults = LoadEffectiveConfig("", ConfigOverrides{});
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(*defaults, DaemonConfig{});
}

}  // namespace
}  // namespace pystrobe
