// One tile of K/V rows from the paged cache into shared memory with 16-byte cp.async, for the prefill attention
// kernels (attention_flash.cu, attention_flash_wgmma.cu).
//
// Thread layout: a key row's kChunks 16-byte chunks are copied by kChunks / 2 threads, chunks c and c + kChunks / 2
// each, so each warp-wide copy instruction reads whole contiguous halves of rows (full 32-byte sectors) and writes
// distinct banks; each thread looks its key's block up once per row and steps through the block table by adding to
// the offset instead of dividing per chunk. Keys past `last` and chunks past D are zero-filled without a read.
#pragma once
#include <cstdint>
#include "ops.h"

namespace dcuda::paged_kv {

// 16 bytes global -> shared; src_bytes 0 writes zeros (padding, keys past the range).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(
                   static_cast<uint32_t>(__cvta_generic_to_shared(dst))),
               "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }
// bar's arrival count drops by one once every cp.async this thread issued before has landed (the mbarrier counts
// these arrivals in its expected count: .noinc)
__device__ __forceinline__ void cp_async_arrive_noinc(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(
                   static_cast<uint32_t>(__cvta_generic_to_shared(bar)))
               : "memory");
}

// Keys kb .. kb + kKeys - 1 of KV head kvh into sK / sV (the same layout: dst(row, chunk) is the byte offset of
// 16-byte chunk `chunk` of key row `row` in either tile), by threads 0 .. kThreads - 1 (`thread`).
template <int kChunks, int kKeys, int kThreads, class DstOffset>
__device__ __forceinline__ void copy_tile(const AttentionArgs& a, const int32_t* table, int kvh, int kb, int last,
                                          uint8_t* sK, uint8_t* sV, int thread, DstOffset dst) {
  static_assert(kChunks % 2 == 0, "two chunks per thread");
  constexpr int kPerKey = kChunks / 2;       // threads per key row
  constexpr int kPass = kThreads / kPerKey;  // key rows per pass
  static_assert(kThreads % kPerKey == 0 && kKeys % kPass == 0, "whole rows per pass, whole passes per tile");
  const int key0 = thread / kPerKey, c0 = thread % kPerKey, c1 = c0 + kPerKey;
  const int n0 = c0 * 8 < a.D ? 16 : 0, n1 = c1 * 8 < a.D ? 16 : 0;  // bytes read per chunk (D padding: none)
  const size_t head = size_t(kvh) * a.D + c0 * 8;
  const size_t row = size_t(a.Hkv) * a.D;  // elements per cache row (slot)
  int j = kb + key0;
  int blk = j / a.B, off = j - blk * a.B;
#pragma unroll
  for (int p = 0; p < kKeys / kPass; ++p) {
    const int jj = p * kPass + key0;
    const bool ok = j <= last;
    const size_t base = ok ? (size_t(table[blk]) * a.B + off) * row + head : 0;
    const int o0 = dst(jj, c0), o1 = dst(jj, c1);
    cp_async16(sK + o0, a.k_cache + base, ok ? n0 : 0);
    cp_async16(sK + o1, a.k_cache + base + kPerKey * 8, ok ? n1 : 0);
    cp_async16(sV + o0, a.v_cache + base, ok ? n0 : 0);
    cp_async16(sV + o1, a.v_cache + base + kPerKey * 8, ok ? n1 : 0);
    j += kPass, off += kPass;
    while (off >= a.B) off -= a.B, ++blk;
  }
}

}  // namespace dcuda::paged_kv
