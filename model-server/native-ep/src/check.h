// Error checks with file:line. Native code throws dispatch::ep::EpNativeError; only the
// binding turns it into a JS error (code DEP_NATIVE).
#pragma once
#include <cuda_runtime.h>
#include <stdexcept>
#include <string>

namespace dispatch::ep {

struct EpNativeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void fail(const char* file, int line, const std::string& what) {
  throw EpNativeError(std::string(file) + ":" + std::to_string(line) + ": " + what);
}

}  // namespace dispatch::ep

#define EP_CHECK(cond, msg) \
  do { if (!(cond)) ::dispatch::ep::fail(__FILE__, __LINE__, std::string("check failed: ") + #cond + ": " + (msg)); } while (0)
#define EP_CUDA(expr) \
  do { cudaError_t e_ = (expr); if (e_ != cudaSuccess) ::dispatch::ep::fail(__FILE__, __LINE__, std::string(#expr) + ": " + cudaGetErrorString(e_)); } while (0)
