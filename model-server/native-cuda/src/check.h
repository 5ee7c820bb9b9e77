// Error checks of the CUDA backend. A failed check throws CudaError with file:line; only the
// binding (addon.cpp) turns it into a JS error (STYLE.md: one error type per layer).
#pragma once
#include <cuda_runtime.h>
#include <stdexcept>
#include <string>

namespace dcuda {

struct CudaError : std::runtime_error {
  explicit CudaError(const std::string& what) : std::runtime_error(what) {}
};

[[noreturn]] inline void fail(const char* file, int line, const std::string& msg) {
  throw CudaError(std::string(file) + ":" + std::to_string(line) + ": " + msg);
}

}  // namespace dcuda

#define DC_CHECK(cond, msg)                                                                           \
  do {                                                                                                \
    if (!(cond)) ::dcuda::fail(__FILE__, __LINE__, std::string("check failed: ") + #cond + ": " + (msg)); \
  } while (0)

#define DC_CUDA(call)                                                                                 \
  do {                                                                                                \
    cudaError_t err_ = (call);                                                                        \
    if (err_ != cudaSuccess) ::dcuda::fail(__FILE__, __LINE__, std::string(#call) + ": " + cudaGetErrorString(err_)); \
  } while (0)

#define DC_LAUNCHED() DC_CUDA(cudaGetLastError())
