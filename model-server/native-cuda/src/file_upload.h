// Checkpoint tensors straight from safetensors files to device memory: byte ranges are read
// (pread) into a pinned staging buffer, converted on the host to the device dtype when the file's
// differs (F32/F16/BF16 -> bf16 or fp32), and copied to consecutive offsets of one device buffer,
// so fused tensors (q|k|v, gate|up, [E, 2I, H] experts) are assembled where they live.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dcuda {

enum class FileDType : int { kF32 = 0, kF16 = 1, kBF16 = 2 };

struct FileRange {
  int file;  // index into the files list
  int64_t begin, end;
  FileDType dtype;
};

// Pinned staging memory for upload_file_ranges, allocated once and reused across tensors (pinned
// allocations are slow; a checkpoint has hundreds of tensors).
struct UploadStaging {
  unsigned char* raw = nullptr;        // 64 MiB of file bytes
  unsigned char* converted = nullptr;  // 128 MiB (F16/BF16 -> fp32 doubles the size)
  ~UploadStaging();
  void ensure();
};

// Copies the ranges, in order, to dst (device), converting to bf16 (as_bf16) or fp32. Returns the
// number of values written; throws CudaError on a short read or a bad dtype.
size_t upload_file_ranges(const std::vector<std::string>& files, const std::vector<FileRange>& ranges, void* dst,
                          bool as_bf16, UploadStaging& staging);

}  // namespace dcuda
