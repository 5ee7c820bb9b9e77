// What the launchers ask of the current device, asked once per device (ops.h).
#include <atomic>
#include "check.h"
#include "ops.h"

namespace dcuda {

int current_device_sms() {
  static std::atomic<int> sms[64] = {};
  int dev = 0;
  DC_CUDA(cudaGetDevice(&dev));
  if (dev >= 64) {
    int n = 0;
    DC_CUDA(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    return n;
  }
  if (sms[dev].load() == 0) {
    int n = 0;
    DC_CUDA(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    sms[dev].store(n);
  }
  return sms[dev].load();
}

}  // namespace dcuda
