#include "nccl_loader.h"
#include <dlfcn.h>
#include <cstdlib>
#include <mutex>
#include <type_traits>
#include "check.h"

namespace dispatch::ep {

const NcclApi* loadNccl(std::string* why) {
  static NcclApi api;
  static std::string error;
  static bool ok = false;
  static std::once_flag once;
  std::call_once(once, [] {
    // DISPATCH_EP_NCCL_LIB names a specific library; else the usual sonames.
    const char* env = std::getenv("DISPATCH_EP_NCCL_LIB");
    void* h = nullptr;
    for (const char* name : {env, "libnccl.so.2", "libnccl.so"}) {
      if (name && (h = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    }
    if (!h) {
      error = std::string("libnccl not found: ") + dlerror();
      return;
    }
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
      if (!fn && error.empty()) error = std::string("libnccl lacks ") + name;
    };
    sym(api.getVersion, "ncclGetVersion");
    sym(api.getUniqueId, "ncclGetUniqueId");
    sym(api.commInitRank, "ncclCommInitRank");
    sym(api.commDestroy, "ncclCommDestroy");
    sym(api.getErrorString, "ncclGetErrorString");
    sym(api.groupStart, "ncclGroupStart");
    sym(api.groupEnd, "ncclGroupEnd");
    sym(api.send, "ncclSend");
    sym(api.recv, "ncclRecv");
    sym(api.broadcast, "ncclBroadcast");
    ok = error.empty();
  });
  if (!ok && why) *why = error;
  return ok ? &api : nullptr;
}

}  // namespace dispatch::ep
