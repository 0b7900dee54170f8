// Which native frames wait on the GPU: CUDA's synchronisations (device,
// context, stream, event) and its blocking copies, in the driver (libcuda)
// or the runtime (libcudart), whatever their version suffix. A sample whose
// native stack goes through one ends in "[gpu wait]": time the CPU spent
// waiting for the GPU, not working.
#ifndef PYSTROBE_DAEMON_GPU_GPU_WAIT_H_
#define PYSTROBE_DAEMON_GPU_GPU_WAIT_H_

#include <string_view>

namespace pystrobe {

inline constexpr char kGpuWaitFrame[] = "[gpu wait]";

// `symbol`, a native frame's function name (demangled, as profiles show it),
// is one of CUDA's waits: cuCtxSynchronize, cuStreamSynchronize,
// cuEventSynchronize, cudaDeviceSynchronize, cudaStreamSynchronize,
// cudaEventSynchronize, cudaThreadSynchronize, and the copies that return
// when done (cuMemcpy*, cudaMemcpy* without "Async"), with any suffix such as
// _v2 or _ptsz.
bool IsGpuWaitSymbol(std::string_view symbol);

// `path` (a mapped file) is CUDA's driver or runtime library:
// libcuda.so*, libcudart.so*.
bool IsCudaLibrary(std::string_view path);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_GPU_GPU_WAIT_H_
