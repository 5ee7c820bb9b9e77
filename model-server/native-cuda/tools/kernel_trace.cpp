// A kernel tracer to preload into any process that runs CUDA (LD_PRELOAD): CUPTI's activity API records
// every kernel's start and end on the GPU, kernels of replayed CUDA graphs node by node, without
// serializing them (CONCURRENT_KERNEL), so Programmatic Dependent Launch overlap shows. One CSV line per
// kernel goes to $KERNEL_TRACE_OUT (default kernel-trace.csv):
//   start_ns,end_ns,graph_id,graph_node_id,grid,block,cluster,name
// For machines without Nsight Systems (the H200 machine has CUPTI but no nsys). Build on that machine:
//   g++ -O2 -shared -fPIC -I/usr/local/cuda/include kernel_trace.cpp -L/usr/local/cuda/lib64 -lcupti -o ktrace.so
// model-server/native-cuda/scripts/timeline.sh builds it, runs the decode probe under it and reports.
#include <cupti.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <mutex>
#include <thread>

namespace {

FILE* g_out = nullptr;
std::mutex g_mu;
constexpr size_t kBufferBytes = 256u << 10;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::lock_guard<std::mutex> lock(g_mu);
  CUpti_Activity* record = nullptr;
  while (g_out && cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && record->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    std::fprintf(g_out, "%llu,%llu,%u,%llu,%dx%dx%d,%dx%dx%d,%ux%ux%u,%s\n", (unsigned long long)k->start,
                 (unsigned long long)k->end, k->graphId, (unsigned long long)k->graphNodeId, k->gridX, k->gridY,
                 k->gridZ, k->blockX, k->blockY, k->blockZ, k->clusterX, k->clusterY, k->clusterZ,
                 k->name ? k->name : "?");
  }
  if (g_out) std::fflush(g_out);
  std::free(buffer);
}

void flush_at_exit() {
  cuptiActivityFlushAll(1);
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_out) std::fclose(g_out);
  g_out = nullptr;
}

__attribute__((constructor)) void start_trace() {
  const char* path = std::getenv("KERNEL_TRACE_OUT");
  g_out = std::fopen(path && *path ? path : "kernel-trace.csv", "w");
  if (!g_out) return;
  std::fprintf(g_out, "start_ns,end_ns,graph_id,graph_node_id,grid,block,cluster,name\n");
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "kernel_trace: CUPTI did not start\n");
    return;
  }
  std::atexit(flush_at_exit);
  // Bun's exit does not always run atexit handlers: a detached thread forces a flush every 200 ms, so at most
  // the last 200 ms of kernels can be missing from the file.
  std::thread([] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    }
  }).detach();
}

}  // namespace
