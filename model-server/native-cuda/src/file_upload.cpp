// See file_upload.h.
#include "file_upload.h"
#include <cuda_runtime.h>
#include <fcntl.h>
#include <unistd.h>
#include <cstring>
#include "check.h"
#include "ops.h"

namespace dcuda {
namespace {

constexpr size_t kStage = size_t(64) << 20;  // bytes per staging piece

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  int exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      exp = 1;
      while (!(mant & 0x400)) mant <<= 1, --exp;
      mant &= 0x3ff;
      bits = sign | uint32_t(exp + 112) << 23 | mant << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | uint32_t(exp + 112) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

}  // namespace

UploadStaging::~UploadStaging() {
  if (raw) cudaFreeHost(raw);
  if (converted) cudaFreeHost(converted);
}

void UploadStaging::ensure() {
  if (!raw) DC_CUDA(cudaMallocHost(&raw, kStage));
  if (!converted) DC_CUDA(cudaMallocHost(&converted, kStage * 2));
}

size_t upload_file_ranges(const std::vector<std::string>& files, const std::vector<FileRange>& ranges, void* dst,
                          bool as_bf16, UploadStaging& staging) {
  std::vector<Fd> fds(files.size());
  staging.ensure();
  unsigned char* stage = staging.raw;         // raw file bytes
  unsigned char* staged = staging.converted;  // converted values (pinned, copied to the device)
  const size_t out_width = as_bf16 ? 2 : 4;
  size_t written = 0;
  {
    for (const FileRange& r : ranges) {
      DC_CHECK(r.file >= 0 && r.file < int(files.size()), "range names no file");
      DC_CHECK(r.end >= r.begin, "range ends before it begins");
      const size_t in_width = r.dtype == FileDType::kF32 ? 4 : 2;
      DC_CHECK((r.end - r.begin) % in_width == 0, "range is not a whole number of values");
      Fd& f = fds[r.file];
      if (f.fd < 0) {
        f.fd = open(files[r.file].c_str(), O_RDONLY);
        DC_CHECK(f.fd >= 0, "cannot open " + files[r.file]);
      }
      for (int64_t at = r.begin; at < r.end;) {
        const size_t n = std::min<size_t>(kStage, size_t(r.end - at));
        size_t got = 0;
        while (got < n) {
          const ssize_t k = pread(f.fd, stage + got, n - got, at + int64_t(got));
          DC_CHECK(k > 0, "short read in " + files[r.file]);
          got += size_t(k);
        }
        const size_t count = n / in_width;
        const void* src = stage;
        if (r.dtype == FileDType::kBF16 && as_bf16) {
          src = stage;  // as stored
        } else if (r.dtype == FileDType::kF32 && !as_bf16) {
          src = stage;
        } else if (r.dtype == FileDType::kF32) {
          f32_to_bf16_host(reinterpret_cast<const float*>(stage), reinterpret_cast<uint16_t*>(staged), count);
          src = staged;
        } else {
          // F16 -> fp32 (-> bf16), BF16 -> fp32
          float* tmp = reinterpret_cast<float*>(staged);
          const uint16_t* h = reinterpret_cast<const uint16_t*>(stage);
          for (size_t i = 0; i < count; ++i) {
            if (r.dtype == FileDType::kBF16) {
              const uint32_t bits = uint32_t(h[i]) << 16;
              std::memcpy(&tmp[i], &bits, 4);
            } else {
              tmp[i] = half_to_float(h[i]);
            }
          }
          src = staged;
          if (as_bf16) {  // the raw bytes are consumed: their buffer takes the bf16 values
            f32_to_bf16_host(tmp, reinterpret_cast<uint16_t*>(stage), count);
            src = stage;
          }
        }
        DC_CUDA(cudaMemcpy(static_cast<unsigned char*>(dst) + written * out_width, src, count * out_width,
                           cudaMemcpyHostToDevice));
        written += count;
        at += int64_t(n);
      }
    }
  }
  return written;
}

}  // namespace dcuda
