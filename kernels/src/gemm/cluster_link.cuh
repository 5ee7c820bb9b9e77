// The unit queue between the producers of a 2-CTA cluster (the ping-pong kernel's pairs): rank 0's producer (the
// leader) takes each unit and sends its index to rank 1's producer, so both walk the same units in the same order.
// kQueue entries live in rank 1 (link_full there, one arrival each); link_empty lives in rank 0 (one arrival each,
// rank 1's after its read). Unit -1 ends the walk.
#pragma once
#include "../common/cluster.cuh"
#include "../common/sm90.cuh"

namespace dispatch {

// The leader: unit w as entry i (after rank 1 read entry i - kQueue).
template <int kQueue>
__device__ __forceinline__ void link_send(uint64_t* link_full, uint64_t* link_empty, int* s_link, int i, int w) {
  const int q = i % kQueue;
  cluster::wait_acquire(&link_empty[q], ((i / kQueue) & 1) ^ 1);
  cluster::store_s32(cluster::map(sm90::smem_addr(&s_link[q]), 1), w);
  cluster::arrive_remote(cluster::map(sm90::smem_addr(&link_full[q]), 1));  // release: orders the store
}

// Rank 1: entry i, its slot handed back to the leader after the read.
template <int kQueue>
__device__ __forceinline__ int link_recv(uint64_t* link_full, uint64_t* link_empty, const int* s_link, int i) {
  const int q = i % kQueue;
  cluster::wait_acquire(&link_full[q], (i / kQueue) & 1);
  const int w = s_link[q];
  cluster::arrive_remote(cluster::map(sm90::smem_addr(&link_empty[q]), 0));  // release: after the read
  return w;
}

}  // namespace dispatch
