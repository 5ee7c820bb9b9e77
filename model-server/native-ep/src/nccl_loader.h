// NCCL loaded at run time (dlopen), so the addon loads on a machine without NCCL (this
// CPU machine, CI) and reports ncclAvailable() = false there instead of failing to load.
// The function types come from nccl.h (the real one where installed, else third_party/).
#pragma once
#include <nccl.h>
#include <string>

namespace dispatch::ep {

struct NcclApi {
  decltype(&ncclGetVersion) getVersion = nullptr;
  decltype(&ncclGetUniqueId) getUniqueId = nullptr;
  decltype(&ncclCommInitRank) commInitRank = nullptr;
  decltype(&ncclCommDestroy) commDestroy = nullptr;
  decltype(&ncclGetErrorString) getErrorString = nullptr;
  decltype(&ncclGroupStart) groupStart = nullptr;
  decltype(&ncclGroupEnd) groupEnd = nullptr;
  decltype(&ncclSend) send = nullptr;
  decltype(&ncclRecv) recv = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;
};

// The loaded API, or nullptr with the reason in *why (library or symbol missing).
const NcclApi* loadNccl(std::string* why);

}  // namespace dispatch::ep

#define EP_NCCL(api, expr) \
  do { ncclResult_t r_ = (api)->expr; if (r_ != ncclSuccess) ::dispatch::ep::fail(__FILE__, __LINE__, std::string("nccl ") + #expr + ": " + (api)->getErrorString(r_)); } while (0)
