// Thread-block cluster primitives (sm_90): this CTA's rank, another CTA's shared-memory address, the cluster
// barrier, stores and mbarrier arrivals into another CTA's shared memory. Plain PTX wrappers; the kernels that use
// them (cluster_split_k.cuh, the ping-pong prefill GEMM's pairs) hold the protocol.
#pragma once
#include <cstdint>
#include "sm90.cuh"

namespace dispatch {

namespace cluster {

__device__ __forceinline__ uint32_t rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}

// Shared address of the same variable in CTA `rank` of the cluster.
__device__ __forceinline__ uint32_t map(uint32_t saddr, uint32_t rank) {
  uint32_t d;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(d) : "r"(saddr), "r"(rank));
  return d;
}

// Every thread of every CTA of the cluster (aligned: whole warps).
__device__ __forceinline__ void sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

// Split form of sync(): arrive (release) now, wait (acquire) later, with independent work between.
__device__ __forceinline__ void arrive() { asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory"); }

__device__ __forceinline__ void wait() { asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory"); }

__device__ __forceinline__ int load_s32(uint32_t caddr) {
  int v;
  asm volatile("ld.shared::cluster.s32 %0, [%1];\n" : "=r"(v) : "r"(caddr) : "memory");
  return v;
}

__device__ __forceinline__ void store_v4(uint32_t caddr, float a, float b, float c, float d) {
  asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(caddr), "f"(a), "f"(b), "f"(c), "f"(d)
               : "memory");
}

__device__ __forceinline__ void store_s32(uint32_t caddr, int v) {
  asm volatile("st.shared::cluster.s32 [%0], %1;\n" ::"r"(caddr), "r"(v) : "memory");
}

// An arrival without cluster-scope release (the default .release.cta): for barriers whose waiters need no memory
// writes of the arriving thread (a ring stage freed after wgmma reads that wgmma_wait completed), without the
// fence a cluster-scope release costs.
__device__ __forceinline__ void arrive_relaxed(uint32_t cbar) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(cbar) : "memory");
}

__device__ __forceinline__ void arrive_remote(uint32_t cbar) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(cbar) : "memory");
}

// Wait on a barrier of this CTA that other CTAs of the cluster arrive on: acquire at cluster scope, so their
// stores before the arrival are visible after it.
__device__ __forceinline__ void wait_acquire(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%0], %1;\n"
      "@!p bra WAIT_%=;\n"
      "}\n" ::"r"(sm90::smem_addr(bar)),
      "r"(parity)
      : "memory");
}

}  // namespace cluster

}  // namespace dispatch
