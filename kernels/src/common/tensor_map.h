// 2-D TMA tensor maps for the grouped GEMMs: a row-major [rows, k] matrix in global memory, boxes
// of box_k x box_rows elements, 128B swizzle, zeros outside the tensor. Host only (no stream
// work), so encoding during CUDA-graph capture is fine.
#pragma once
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <string>
#include "check.h"

namespace dispatch {

inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encode_fn() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    DK_CUDA(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q));
    DK_CHECK(q == cudaDriverEntryPointSuccess && p, "cuTensorMapEncodeTiled not found in the driver");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// elem: CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 (2 bytes) or CU_TENSOR_MAP_DATA_TYPE_UINT8 (1 byte);
// box_k * element bytes must be <= 128 (the swizzle span).
inline CUtensorMap make_tensor_map_2d(const void* base, CUtensorMapDataType elem, uint64_t rows, uint64_t k,
                                      uint32_t box_k, uint32_t box_rows) {
  const uint64_t elem_bytes = elem == CU_TENSOR_MAP_DATA_TYPE_UINT8 ? 1 : 2;
  CUtensorMap map;
  const cuuint64_t dims[2] = {k, rows};
  const cuuint64_t strides[1] = {k * elem_bytes};
  const cuuint32_t box[2] = {box_k, box_rows};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = tensor_map_encode_fn()(&map, elem, 2, const_cast<void*>(base), dims, strides, box, elem_strides,
                                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  DK_CHECK(r == CUDA_SUCCESS, "cuTensorMapEncodeTiled failed with code " + std::to_string(int(r)));
  return map;
}

}  // namespace dispatch
