// Error checks shared by host launchers. A failed check throws KernelError with file:line;
// only the binding turns it into a JS error (STYLE.md: one error type per layer).
#pragma once
#include <cuda_runtime.h>
#include <stdexcept>
#include <string>

namespace dispatch {

struct KernelError : std::runtime_error {
  explicit KernelError(const std::string& what) : std::runtime_error(what) {}
};

[[noreturn]] inline void fail(const char* file, int line, const std::string& msg) {
  throw KernelError(std::string(file) + ":" + std::to_string(line) + ": " + msg);
}

}  // namespace dispatch

#define DK_CHECK(cond, msg)                                                  \
  do {                                                                       \
    if (!(cond)) ::dispatch::fail(__FILE__, __LINE__, std::string("check failed: ") + #cond + ": " + (msg)); \
  } while (0)

#define DK_CUDA(call)                                                        \
  do {                                                                       \
    cudaError_t err_ = (call);                                               \
    if (err_ != cudaSuccess)                                                 \
      ::dispatch::fail(__FILE__, __LINE__, std::string(#call) + ": " + cudaGetErrorString(err_)); \
  } while (0)

// After a launch: catches bad configurations without waiting for the kernel.
#define DK_LAUNCHED() DK_CUDA(cudaGetLastError())
