#include "gpu_bench_util.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kernels/cuda/cuda_common.cuh"
#include "table.h"

namespace inflight::bench::gpu {
namespace {

__device__ __forceinline__ std::uint64_t Mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Grid: (enough blocks to cover n with a grid-stride loop), block: 256.
template <typename T>
__global__ void FillUniformKernel(T* dst, std::size_t n, float lo, float span, std::uint64_t seed) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const std::uint64_t r = Mix(seed * 0x9e3779b97f4a7c15ull + i);
    // 24 random bits in [0, 1), then nudged off zero so that no value is exactly 0.
    const float u = static_cast<float>(r >> 40) * (1.0f / 16777216.0f);
    float v = lo + span * u;
    if (v == 0.0f) v = span * 1e-3f;
    dst[i] = kernels::cuda::FromFloat<T>(v);
  }
}

// Grid: (a few blocks per SM), block: 256. 16-byte loads, four in flight per thread before the
// first store, so that the copy is limited by memory and not by latency.
__global__ void CopyKernel(int4* __restrict__ dst, const int4* __restrict__ src, std::size_t n) {
  constexpr int kUnroll = 4;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
    int4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = src[i + u * stride];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) dst[i + u * stride] = v[u];
  }
  for (; i < n; i += stride) dst[i] = src[i];
}

// Grid: (a few blocks per SM), block: 256. Reads every 16 bytes once; one word per block comes out
// so that the compiler cannot drop the loads.
__global__ void ReadKernel(unsigned* __restrict__ out, const int4* __restrict__ src,
                           std::size_t n) {
  constexpr int kUnroll = 4;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  unsigned acc = 0;
  for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
    int4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = src[i + u * stride];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      acc ^= static_cast<unsigned>(v[u].x ^ v[u].y ^ v[u].z ^ v[u].w);
  }
  for (; i < n; i += stride) acc ^= static_cast<unsigned>(src[i].x ^ src[i].w);
  for (int offset = 16; offset > 0; offset >>= 1) acc ^= __shfl_xor_sync(0xffffffffu, acc, offset);
  if ((threadIdx.x & 31) == 0) atomicXor(out + blockIdx.x, acc);
}

class Events {
 public:
  explicit Events(std::size_t n) : events_(n) {
    for (auto& e : events_) BENCH_CUDA(cudaEventCreate(&e));
  }
  ~Events() {
    for (auto& e : events_) cudaEventDestroy(e);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  cudaEvent_t operator[](std::size_t i) const { return events_[i]; }

 private:
  std::vector<cudaEvent_t> events_;
};

void CheckCall(cudaError_t err, const char* where) {
  if (err != cudaSuccess) Die(__FILE__, __LINE__, where, cudaGetErrorString(err));
}

}  // namespace

void Die(const char* file, int line, const std::string& what, const std::string& error) {
  std::fprintf(stderr, "FATAL: %s failed at %s:%d: %s\n", what.c_str(), file, line, error.c_str());
  std::fflush(stdout);
  std::exit(1);
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes > 0) {
    const cudaError_t err = cudaMalloc(&ptr_, bytes);
    if (err != cudaSuccess) {
      Die(__FILE__, __LINE__, "cudaMalloc of " + std::to_string(bytes) + " bytes",
          cudaGetErrorString(err));
    }
  }
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ != nullptr) cudaFree(ptr_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
  o.ptr_ = nullptr;
  o.bytes_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_ != nullptr) cudaFree(ptr_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

void FillUniform(void* dst, DType dtype, std::size_t n, float lo, float hi, std::uint64_t seed,
                 cudaStream_t stream) {
  if (n == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<std::size_t>((n + 255) / 256, 65536));
  switch (dtype) {
    case DType::kFloat32:
      FillUniformKernel<<<blocks, 256, 0, stream>>>(static_cast<float*>(dst), n, lo, hi - lo, seed);
      break;
    case DType::kFloat16:
      FillUniformKernel<<<blocks, 256, 0, stream>>>(static_cast<__half*>(dst), n, lo, hi - lo,
                                                    seed);
      break;
    case DType::kBFloat16:
      FillUniformKernel<<<blocks, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(dst), n, lo,
                                                    hi - lo, seed);
      break;
    default:
      Die(__FILE__, __LINE__, "FillUniform",
          std::string("dtype ") + DTypeName(dtype) + " is not one of: float32, float16, bfloat16");
  }
  BENCH_CUDA(cudaGetLastError());
}

DeviceInfo QueryDevice() {
  int device = 0;
  BENCH_CUDA(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  BENCH_CUDA(cudaGetDeviceProperties(&prop, device));
  DeviceInfo info;
  info.name = prop.name;
  info.sm_count = prop.multiProcessorCount;
  info.compute_capability = prop.major * 10 + prop.minor;
  info.l2_bytes = static_cast<std::size_t>(prop.l2CacheSize);
  info.total_bytes = prop.totalGlobalMem;
  int mem_khz = 0, bus_bits = 0;
  if (cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, device) == cudaSuccess &&
      cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device) == cudaSuccess) {
    // Double data rate: two transfers per clock of the reported memory clock.
    info.attribute_peak_gbps = 2.0 * mem_khz * 1e3 * (bus_bits / 8.0) / 1e9;
  }
  (void)cudaGetLastError();
  return info;
}

std::string Describe(const DeviceInfo& info) {
  return info.name + ", " + std::to_string(info.sm_count) + " SMs, compute capability " +
         std::to_string(info.compute_capability) + ", L2 " +
         Fmt(static_cast<double>(info.l2_bytes) / 1048576.0, 0) + " MiB, memory " +
         Fmt(static_cast<double>(info.total_bytes) / 1073741824.0, 1) +
         " GiB, attribute peak (2 x memory clock x bus width) " + Fmt(info.attribute_peak_gbps, 0) +
         " GB/s";
}

std::size_t FreeBytes() {
  std::size_t free_bytes = 0, total = 0;
  BENCH_CUDA(cudaMemGetInfo(&free_bytes, &total));
  return free_bytes;
}

int Rotations(std::size_t set_bytes, std::size_t l2_bytes, std::size_t max_total_bytes) {
  if (set_bytes == 0) return 1;
  const std::size_t want = (4 * l2_bytes + set_bytes - 1) / set_bytes;
  const std::size_t fit = std::max<std::size_t>(1, max_total_bytes / set_bytes);
  return static_cast<int>(std::clamp<std::size_t>(std::min(want, fit), 1, 64));
}

Timing TimeCalls(const std::function<cudaError_t(int)>& call, cudaStream_t stream,
                 const TimingOptions& options) {
  int counter = 0;
  for (int i = 0; i < options.warmup_calls; ++i) CheckCall(call(counter++), "warm-up call");
  BENCH_CUDA(cudaStreamSynchronize(stream));

  // A rough per-call time (best of three single calls) sizes the samples.
  Events probe(2);
  double estimate_us = 1e30;
  for (int i = 0; i < 3; ++i) {
    BENCH_CUDA(cudaEventRecord(probe[0], stream));
    CheckCall(call(counter++), "probe call");
    BENCH_CUDA(cudaEventRecord(probe[1], stream));
    BENCH_CUDA(cudaEventSynchronize(probe[1]));
    float ms = 0;
    BENCH_CUDA(cudaEventElapsedTime(&ms, probe[0], probe[1]));
    estimate_us = std::min(estimate_us, static_cast<double>(ms) * 1e3);
  }
  estimate_us = std::max(estimate_us, 0.5);

  Timing t;
  t.calls_per_sample =
      static_cast<int>(std::clamp(std::ceil(options.target_sample_us / estimate_us), 1.0,
                                  static_cast<double>(options.max_calls_per_sample)));
  const int rounds = std::max(1, options.rotations);
  t.calls_per_sample = (t.calls_per_sample + rounds - 1) / rounds * rounds;
  const double sample_us = estimate_us * t.calls_per_sample;
  t.samples = static_cast<int>(std::clamp(std::floor(options.budget_ms * 1e3 / sample_us),
                                          static_cast<double>(options.min_samples),
                                          static_cast<double>(options.max_samples)));

  // Capture calls_per_sample calls once; each sample replays the graph, so the CPU's launch rate
  // does not show in the timings of small kernels.
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed) == cudaSuccess) {
    bool ok = true;
    for (int i = 0; i < t.calls_per_sample; ++i) ok = ok && call(counter++) == cudaSuccess;
    const cudaError_t end = cudaStreamEndCapture(stream, &graph);
    ok = ok && end == cudaSuccess && graph != nullptr &&
         cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
    if (!ok) {
      if (exec != nullptr) cudaGraphExecDestroy(exec);
      exec = nullptr;
    }
  }
  (void)cudaGetLastError();  // a failed capture leaves its error behind; plain launches follow
  t.graph = exec != nullptr;
  if (t.graph) {
    BENCH_CUDA(cudaGraphLaunch(exec, stream));  // the first replay uploads the graph
    BENCH_CUDA(cudaStreamSynchronize(stream));
  }

  Events events(2 * static_cast<std::size_t>(t.samples));
  for (std::size_t s = 0; s < static_cast<std::size_t>(t.samples); ++s) {
    BENCH_CUDA(cudaEventRecord(events[2 * s], stream));
    if (t.graph) {
      BENCH_CUDA(cudaGraphLaunch(exec, stream));
    } else {
      for (int i = 0; i < t.calls_per_sample; ++i) CheckCall(call(counter++), "timed call");
    }
    BENCH_CUDA(cudaEventRecord(events[2 * s + 1], stream));
  }
  BENCH_CUDA(cudaStreamSynchronize(stream));
  BENCH_CUDA(cudaGetLastError());
  std::vector<double> per_call;
  for (std::size_t s = 0; s < static_cast<std::size_t>(t.samples); ++s) {
    float ms = 0;
    BENCH_CUDA(cudaEventElapsedTime(&ms, events[2 * s], events[2 * s + 1]));
    per_call.push_back(static_cast<double>(ms) * 1e3 / t.calls_per_sample);
  }
  if (exec != nullptr) cudaGraphExecDestroy(exec);
  if (graph != nullptr) cudaGraphDestroy(graph);
  t.median_us = Median(per_call);
  t.p10_us = Percentile(per_call, 0.1);
  t.p90_us = Percentile(per_call, 0.9);
  return t;
}

CopyCeiling MeasureCopyCeiling(std::size_t buffer_bytes, cudaStream_t stream) {
  CopyCeiling c;
  c.buffer_bytes = buffer_bytes / 16 * 16;
  DeviceBuffer src(c.buffer_bytes), dst(c.buffer_bytes);
  const DeviceInfo info = QueryDevice();
  const unsigned blocks = static_cast<unsigned>(info.sm_count * 8);
  DeviceBuffer sink(blocks * sizeof(unsigned));
  FillUniform(src.get(), DType::kFloat32, c.buffer_bytes / 4, -1.0f, 1.0f, 11, stream);
  FillUniform(dst.get(), DType::kFloat32, c.buffer_bytes / 4, -1.0f, 1.0f, 12, stream);
  BENCH_CUDA(cudaMemsetAsync(sink.get(), 0, sink.bytes(), stream));
  const std::size_t n16 = c.buffer_bytes / 16;
  TimingOptions opt;
  opt.min_samples = 30;
  opt.budget_ms = 300;
  c.memcpy_timing = TimeCalls(
      [&](int) {
        return cudaMemcpyAsync(dst.get(), src.get(), c.buffer_bytes, cudaMemcpyDeviceToDevice,
                               stream);
      },
      stream, opt);
  c.kernel_timing = TimeCalls(
      [&](int) {
        CopyKernel<<<blocks, 256, 0, stream>>>(dst.get<int4>(), src.get<int4>(), n16);
        return cudaGetLastError();
      },
      stream, opt);
  c.read_timing = TimeCalls(
      [&](int) {
        ReadKernel<<<blocks, 256, 0, stream>>>(sink.get<unsigned>(), src.get<int4>(), n16);
        return cudaGetLastError();
      },
      stream, opt);
  const auto moved = 2.0 * static_cast<double>(c.buffer_bytes);
  c.memcpy_gbps = moved / (c.memcpy_timing.median_us * 1e3);
  c.kernel_gbps = moved / (c.kernel_timing.median_us * 1e3);
  c.read_gbps = static_cast<double>(c.buffer_bytes) / (c.read_timing.median_us * 1e3);
  return c;
}

Timing TimeRead(std::size_t bytes, int rotations, int sm_count, double budget_ms,
                cudaStream_t stream) {
  const std::size_t n16 = bytes / 16;
  constexpr std::size_t kThreads = 256, kLoadsPerThread = 4;  // ReadKernel's unroll
  const auto blocks = static_cast<unsigned>(
      std::clamp<std::size_t>((n16 + kThreads * kLoadsPerThread - 1) / (kThreads * kLoadsPerThread),
                              1, static_cast<std::size_t>(sm_count) * 8));
  std::vector<DeviceBuffer> sets;
  for (int i = 0; i < rotations; ++i) {
    sets.emplace_back(n16 * 16);
    FillUniform(sets.back().get(), DType::kFloat32, n16 * 4, -1.0f, 1.0f, 40 + i, stream);
  }
  DeviceBuffer sink(blocks * sizeof(unsigned));
  BENCH_CUDA(cudaMemsetAsync(sink.get(), 0, sink.bytes(), stream));
  TimingOptions opt;
  opt.budget_ms = budget_ms;
  opt.rotations = rotations;
  return TimeCalls(
      [&](int call) {
        ReadKernel<<<blocks, kThreads, 0, stream>>>(
            sink.get<unsigned>(), sets[static_cast<std::size_t>(call % rotations)].get<int4>(),
            n16);
        return cudaGetLastError();
      },
      stream, opt);
}

const char* CublasStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    default:
      return "cublasStatus_t (other)";
  }
}

GemmResult TimeGemm(kernels::cuda::CublasLtGemm& gemm, const GemmShape& s, const DeviceInfo& device,
                    double budget_ms, cudaStream_t stream) {
  const std::size_t out_size = DTypeSize(s.out_dtype);
  const auto x_bytes = static_cast<std::size_t>(s.m * s.k) * 2;
  const auto w_bytes = static_cast<std::size_t>(s.n * s.k) * 2;
  const auto y_bytes = static_cast<std::size_t>(s.m * s.n) * out_size;
  const std::size_t set = x_bytes + w_bytes + y_bytes;
  const std::size_t moved = set + (s.add ? y_bytes : 0);
  const int rotations =
      Rotations(set, device.l2_bytes, std::min<std::size_t>(FreeBytes() / 2, 8ull << 30));
  std::vector<DeviceBuffer> xs, ws, ys;
  const float w_scale = 1.0f / std::sqrt(static_cast<float>(s.k));
  for (int i = 0; i < rotations; ++i) {
    xs.emplace_back(x_bytes);
    ws.emplace_back(w_bytes);
    ys.emplace_back(y_bytes);
    FillUniform(xs.back().get(), DType::kBFloat16, x_bytes / 2, -1.0f, 1.0f, 100 + i, stream);
    FillUniform(ws.back().get(), DType::kBFloat16, w_bytes / 2, -w_scale, w_scale, 200 + i, stream);
    FillUniform(ys.back().get(), s.out_dtype, y_bytes / out_size, -1.0f, 1.0f, 300 + i, stream);
  }
  return TimeGemmCalls(
      s, s.add ? "CublasLtGemm::LinearAdd" : "CublasLtGemm::Linear", rotations,
      static_cast<double>(moved),
      [&](int i) {
        return s.add ? gemm.LinearAdd(ys[i].get(), s.out_dtype, s.n, xs[i].get(), s.k, ws[i].get(),
                                      nullptr, DType::kBFloat16, s.m, s.n, s.k, stream)
                     : gemm.Linear(ys[i].get(), s.out_dtype, s.n, xs[i].get(), s.k, ws[i].get(),
                                   nullptr, DType::kBFloat16, s.m, s.n, s.k, stream);
      },
      budget_ms, stream);
}

GemmResult TimeGemmCalls(const GemmShape& s, const std::string& what, int rotations, double bytes,
                         const std::function<cublasStatus_t(int set)>& gemm, double budget_ms,
                         cudaStream_t stream) {
  GemmResult r;
  r.rotations = rotations;
  TimingOptions opt;
  opt.budget_ms = budget_ms;
  opt.rotations = rotations;
  r.timing = TimeCalls(
      [&](int call) {
        const cublasStatus_t st = gemm(call % rotations);
        if (st != CUBLAS_STATUS_SUCCESS) {
          Die(__FILE__, __LINE__,
              what + " m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) +
                  " k=" + std::to_string(s.k),
              CublasStatusName(st));
        }
        return cudaGetLastError();
      },
      stream, opt);
  r.bytes = bytes;
  r.tflops = s.Flops() / (r.timing.median_us * 1e-6) / 1e12;
  r.gbps = r.bytes / (r.timing.median_us * 1e3);
  return r;
}

void ExitUnlessDeviceVisible(const char* program) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "%s: no CUDA device visible\n", program);
    std::exit(77);
  }
}

void ParseFlagsOrExit(tools::FlagSet& flags, int argc, char** argv) {
  const Result<bool> parsed = flags.Parse(argc, argv);
  if (!parsed.ok()) {
    std::fprintf(stderr, "%s\n", parsed.status().ToString().c_str());
    std::exit(2);
  }
  if (!parsed.value()) std::exit(0);
}

void AddBudgetFlag(tools::FlagSet& flags, double* budget_ms) {
  flags.Add("budget_ms", "MS", "timing budget per row (default " + Fmt(*budget_ms, 0) + ")",
            [budget_ms](const std::string& v) {
              std::int64_t ms = 0;
              RETURN_IF_ERROR(tools::ParseInt("--budget_ms", v, 1, 10000, &ms));
              *budget_ms = static_cast<double>(ms);
              return Status::Ok();
            });
}

std::string FmtUs(double us) {
  if (us >= 1e4) return Fmt(us / 1e3, 2) + " ms";
  return Fmt(us, us < 100 ? 2 : 1) + " us";
}

std::string Range(const Timing& t) {
  return FmtUs(t.p10_us) + ".." + FmtUs(t.p90_us);
}

std::string Percent(double value, double ceiling) {
  if (ceiling <= 0) return "-";
  return Fmt(100.0 * value / ceiling, 1) + "%";
}

}  // namespace inflight::bench::gpu
