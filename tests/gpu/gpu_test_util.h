// A small test harness for the GPU kernel tests: no gtest, so that the same binaries build on a
// device machine that has only CMake and the CUDA toolkit (tests/gpu/standalone). Each binary exits
// 77 (ctest SKIP_RETURN_CODE) when no CUDA device is present.
//
// Inputs are fresh random values each run; the seed is printed and INFLIGHT_GPU_TEST_SEED repeats
// it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "kernels/cuda/paged_batch.h"

namespace inflight::gpu_test {

struct Registrar {
  Registrar(const char* name, void (*fn)());
};

#define GPU_TEST(name)                                                        \
  static void name();                                                         \
  static const ::inflight::gpu_test::Registrar name##_registrar(#name, name); \
  static void name()

// Records a failure of the running test and goes on.
void Fail(const std::string& message);
// Records a failure and abandons the running test (a CUDA error leaves nothing worth checking).
[[noreturn]] void Abort(const char* file, int line, const std::string& message);

#define CUDA_OK(expr)                                                                      \
  do {                                                                                     \
    const cudaError_t err_ = (expr);                                                       \
    if (err_ != cudaSuccess)                                                               \
      ::inflight::gpu_test::Abort(__FILE__, __LINE__,                                      \
                                  std::string(#expr) + " -> " + cudaGetErrorString(err_)); \
  } while (0)

#define GPU_CHECK(cond, message)                                                              \
  do {                                                                                        \
    if (!(cond))                                                                              \
      ::inflight::gpu_test::Abort(__FILE__, __LINE__, std::string(#cond) + ": " + (message)); \
  } while (0)

std::uint64_t Seed();
std::mt19937_64& Rng();  // seeded from Seed() once per process

std::vector<float> RandomVector(std::size_t n, float lo, float hi);
// Machine epsilon of a float dtype (fp16 2^-10, bf16 2^-7, fp32 2^-23).
float Epsilon(DType dtype);
// Host bits of fp16 / bf16 values, and back; RoundTo gives what the device will hold.
std::vector<std::uint16_t> ToBits(DType dtype, const std::vector<float>& v);
std::vector<float> FromBits(DType dtype, const std::vector<std::uint16_t>& bits);
std::vector<float> RoundTo(DType dtype, const std::vector<float>& v);
std::uint16_t NanBits(DType dtype);

// Passes when every |found - expected| <= atol + rtol * |expected| (NaN only matches NaN). On a
// failure prints the count and the first mismatches with index, found, expected, tolerance, seed.
bool ExpectClose(const std::string& what, const std::vector<float>& found,
                 const std::vector<float>& expected, float atol, float rtol);

// For values computed through an FP8 quantization (activations, KV cache) that the device applies
// to bf16/fp16-rounded inputs and the CPU reference to fp32 ones: an input within half a bf16 ulp
// of an E4M3 rounding boundary takes the neighbouring code on one side only, a 6-12% change of that
// value, so a few outputs may pass `atol`. Passes when at most `max_fraction_over` of the elements
// exceed `atol` and none exceeds `hard_atol`; prints both counts and the worst error.
bool ExpectCloseThroughFp8(const std::string& what, const std::vector<float>& found,
                           const std::vector<float>& expected, float atol, float hard_atol,
                           double max_fraction_over);

// Device memory owned for a test's lifetime.
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(std::size_t n) : n_(n) {
    if (n > 0) CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&ptr_), n * sizeof(T)));
  }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) { Upload(host); }
  ~DeviceArray() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& o) noexcept : ptr_(o.ptr_), n_(o.n_) {
    o.ptr_ = nullptr;
    o.n_ = 0;
  }

  void Upload(const std::vector<T>& host) {
    GPU_CHECK(host.size() == n_, "upload size mismatch");
    if (n_ > 0) CUDA_OK(cudaMemcpy(ptr_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> Download() const {
    std::vector<T> host(n_);
    CUDA_OK(cudaDeviceSynchronize());
    if (n_ > 0) CUDA_OK(cudaMemcpy(host.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  T* get() const { return ptr_; }
  std::size_t size() const { return n_; }

 private:
  T* ptr_ = nullptr;
  std::size_t n_ = 0;
};

// A random paged batch: sequence s has query_lens[s] new rows after cached[s] cached positions.
// Its blocks are a random permutation of [0, num_blocks) (non-monotonic tables, spare blocks
// unused); table entries past a sequence's last block hold an id far out of range, so reading
// one faults.
struct HostPagedBatch {
  std::vector<std::int32_t> query_start, num_cached, block_tables;
  std::int32_t max_blocks_per_seq = 0;
  std::int32_t num_blocks = 0;
  std::int32_t tokens_per_block = 0;
  std::int32_t max_query_len = 0;
  std::int32_t max_kv_len = 0;
  std::int32_t num_tokens() const { return query_start.back(); }
  std::int32_t num_seqs() const { return static_cast<std::int32_t>(num_cached.size()); }
  // Pool row (block, slot) of position p of sequence s.
  std::int64_t Block(int s, int p) const {
    return block_tables[static_cast<std::size_t>(s * max_blocks_per_seq + p / tokens_per_block)];
  }
};
HostPagedBatch MakePagedBatch(const std::vector<int>& query_lens, const std::vector<int>& cached,
                              int tokens_per_block);

struct DevicePagedBatch {
  explicit DevicePagedBatch(const HostPagedBatch& host);
  DeviceArray<std::int32_t> query_start, num_cached, block_tables;
  kernels::cuda::PagedBatch batch;
};

std::string Describe(DType dtype);

}  // namespace inflight::gpu_test
