// What the GPU benchmarks share: error checks that stop the program with the failing call, device
// buffers, random fills on the device, timing with CUDA events (graph replays of many calls,
// median over samples) and the device-to-device copy ceiling. Needs only the CUDA runtime and
// common/dtype.h, so it builds in bench/gpu_standalone on a device machine without our other deps.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/flags.h"
#include "kernels/cuda/gemm.h"

namespace inflight::bench::gpu {

// Prints "<what> failed at file:line: <error>" and exits 1: a benchmark with a failed call has
// nothing left worth printing.
[[noreturn]] void Die(const char* file, int line, const std::string& what,
                      const std::string& error);

#define BENCH_CUDA(expr)                                                                \
  do {                                                                                  \
    const cudaError_t err_ = (expr);                                                    \
    if (err_ != cudaSuccess)                                                            \
      ::inflight::bench::gpu::Die(__FILE__, __LINE__, #expr, cudaGetErrorString(err_)); \
  } while (0)

// Device memory owned by the benchmark for the lifetime of the object.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;

  template <typename T = void>
  T* get() const {
    return static_cast<T*>(ptr_);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// n values of `dtype` (fp32, fp16 or bf16) uniform in [lo, hi), a pure function of (seed, index):
// never zeros, so that no kernel or library takes a shortcut the real data would not allow.
void FillUniform(void* dst, DType dtype, std::size_t n, float lo, float hi, std::uint64_t seed,
                 cudaStream_t stream);

struct DeviceInfo {
  std::string name;
  int sm_count = 0;
  int compute_capability = 0;  // 90 for Hopper
  std::size_t l2_bytes = 0;
  std::size_t total_bytes = 0;
  double attribute_peak_gbps = 0;  // 2 * memory clock * bus width (the datasheet figure), or 0
};
DeviceInfo QueryDevice();
// One line: name, SMs, L2, memory, the attribute peak.
std::string Describe(const DeviceInfo& info);
// Device memory free now.
std::size_t FreeBytes();

// How many copies of a working set of `set_bytes` to rotate through so that a call's inputs are
// no longer in L2 when it runs again: enough for 4x L2 in all, at most `max_total_bytes` in all
// (and at least 1).
int Rotations(std::size_t set_bytes, std::size_t l2_bytes, std::size_t max_total_bytes);

struct TimingOptions {
  int warmup_calls = 5;
  double target_sample_us = 400;  // calls per sample chosen to make one sample about this long
  double budget_ms = 250;         // samples chosen to spend about this long (bounded below/above)
  int min_samples = 15;
  int max_samples = 200;
  int max_calls_per_sample = 256;
  // Input sets the call rotates through (call(i) uses set i % rotations): a sample's calls are a
  // whole number of rounds, so that every replay of the graph touches every set.
  int rotations = 1;
};

struct Timing {
  double median_us = 0;  // per call
  double p10_us = 0;
  double p90_us = 0;
  int samples = 0;
  int calls_per_sample = 0;
  bool graph = false;  // the sample was a CUDA graph replay (launch gaps hidden)
};

// Times `call` (one enqueue on `stream`; its argument counts calls, for rotating input sets) as
// METHOD.md asks: warm-up calls, then samples of calls_per_sample calls between two events, each
// sample one replay of a CUDA graph captured from the calls (plain launches when capture fails),
// median and 10th/90th percentiles per call. A call that returns an error stops the program.
Timing TimeCalls(const std::function<cudaError_t(int)>& call, cudaStream_t stream,
                 const TimingOptions& options = {});

struct CopyCeiling {
  std::size_t buffer_bytes = 0;
  Timing memcpy_timing, kernel_timing, read_timing;
  double memcpy_gbps = 0;  // cudaMemcpyAsync device to device, (read + written) / time
  double kernel_gbps = 0;  // a 16-byte-per-access copy kernel, (read + written) / time
  double read_gbps = 0;    // a read-only reduction kernel, bytes read / time (not a copy)
  // The copy ceiling the other figures are set against: the better of the two copies.
  double copy_gbps() const { return memcpy_gbps > kernel_gbps ? memcpy_gbps : kernel_gbps; }
};
// Copies buffer_bytes between two device buffers (well beyond L2, so from and to HBM).
CopyCeiling MeasureCopyCeiling(std::size_t buffer_bytes, cudaStream_t stream);

// The read-only stream over `bytes` (rounded down to 16), one kernel a call, rotating through
// `rotations` buffers of that size so that L2 does not hold them: what any one kernel that only
// reads those bytes from HBM can reach, launch and ramp included. Small reads get one load per
// thread in flight at once (as many blocks as that takes, up to eight per SM of sm_count).
Timing TimeRead(std::size_t bytes, int rotations, int sm_count, double budget_ms,
                cudaStream_t stream);

// One y[m, n] = x[m, k] * w[n, k]^T through the runner's CublasLtGemm: bf16 x and w, y in
// out_dtype (bf16, or fp32 as the runner's lm_head writes its logits); add: y += (LinearAdd, as
// the runner's attention-output and down layers update the residual stream).
struct GemmShape {
  std::string name;
  std::int64_t m = 0, n = 0, k = 0;
  DType out_dtype = DType::kBFloat16;
  bool add = false;
  double Flops() const {
    return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  }
};

struct GemmResult {
  Timing timing;
  double tflops = 0;
  double bytes = 0;  // x, w and y once each (y twice with add: read and written)
  double gbps = 0;
  int rotations = 1;
};

// Times `gemm` (one product of `s` on input set `set`, of `rotations`) and fills the rates, with
// `bytes` moved per call; a failing cuBLAS status stops the program, naming `what` and the shape.
GemmResult TimeGemmCalls(const GemmShape& s, const std::string& what, int rotations, double bytes,
                         const std::function<cublasStatus_t(int set)>& gemm, double budget_ms,
                         cudaStream_t stream);

// Random x and w (|w| ~ 1/sqrt(k), as a trained layer's), (x, w, y) sets rotated past L2; a
// failing Linear stops the program with its cuBLAS status.
GemmResult TimeGemm(kernels::cuda::CublasLtGemm& gemm, const GemmShape& shape,
                    const DeviceInfo& device, double budget_ms, cudaStream_t stream);
const char* CublasStatusName(cublasStatus_t status);

// Parses the command line into `flags`' targets: exits 0 after --help, 2 (with the error on
// stderr) on a bad flag.
void ParseFlagsOrExit(tools::FlagSet& flags, int argc, char** argv);
// Exits 77 (what the rounds read as "skipped") with "<program>: no CUDA device visible" when the
// runtime sees no device.
void ExitUnlessDeviceVisible(const char* program);
// --budget_ms: the timing budget of a row, whole milliseconds in [1, 10000]; *budget_ms holds the
// default.
void AddBudgetFlag(tools::FlagSet& flags, double* budget_ms);

// "1.23 us" style durations and GB/s against a ceiling in percent, for the tables.
std::string FmtUs(double us);
std::string Percent(double value, double ceiling);
// A timing's "p10..p90" column.
std::string Range(const Timing& t);

}  // namespace inflight::bench::gpu
