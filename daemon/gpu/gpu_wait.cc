#include "daemon/gpu/gpu_wait.h"

#include <array>

namespace pystrobe {
namespace {

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// A name and what may follow it: nothing, or a version or per-thread-stream
// suffix ("_v2", "_ptsz", "_ptds"), or a GLIBC-style "@...".
bool IsNameWithSuffix(std::string_view symbol, std::string_view name) {
  if (!StartsWith(symbol, name)) return false;
  std::string_view rest = symbol.substr(name.size());
  return rest.empty() || rest.front() == '_' || rest.front() == '@';
}

constexpr std::array<std::string_view, 7> kSynchronizations = {
    "cuCtxSynchronize",      "cuStreamSynchronize",   "cuEventSynchronize",
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
    "cudaThreadSynchronize",
};

}  // namespace

bool IsGpuWaitSymbol(std::string_view symbol) {
  for (std::string_view name : kSynchronizations) {
    if (IsNameWithSuffix(symbol, name)) return true;
  }
  // Copies: the driver's cuMemcpy, cuMemcpyDtoH_v2, cuMemcpy2D..., the
  // runtime's cudaMemcpy, cudaMemcpy2D, cudaMemcpyFromSymbol...; the Async
  // forms return at once and do not wait.
  bool copy = StartsWith(symbol, "cuMemcpy") || StartsWith(symbol, "cudaMemcpy");
  return copy && symbol.find("Async") == std::string_view::npos;
}

bool IsCudaLibrary(std::string_view path) {
  size_t slash = path.rfind('/');
  std::string_view base = slash == std::string_view::npos ? path : path.substr(slash + 1);
  return StartsWith(base, "libcuda.so") || StartsWith(base, "libcudart.so");
}

}  // namespace pystrobe
