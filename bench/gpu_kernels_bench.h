// inflight-bench-gpu-kernels (gpu_kernels_bench.cu): what its sections share. The sampling section
// is in gpu_kernels_bench_sampling.cu, mlp-fp8 in gpu_kernels_bench_mlp_fp8.cu.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "gpu_bench_util.h"
#include "table.h"

namespace inflight::bench::gpu::kernel_bench {

const std::vector<std::string> kAllSections = {"decode", "context",  "norm",   "mlp",
                                               "rope",   "sampling", "mlp-fp8"};

struct Options {
  std::set<std::string> sections{kAllSections.begin(), kAllSections.end()};
  std::vector<std::int64_t> batches = {1, 8, 64, 256};
  std::vector<std::int64_t> contexts = {512, 2048, 4096, 8192, 16384, 32768};
  std::vector<std::int64_t> prefill = {512, 1024, 2048, 4096, 8192, 16384};
  std::vector<std::int64_t> decode_partitions = {0};  // keys per split; 0: the runner's choice
  std::vector<std::int64_t> decode_windows = {0};     // sliding windows; 0: full attention
  std::vector<std::int64_t> mlp_tokens = {256, 1024, 2048, 3790, 8192};
  double budget_ms = 200;
};

// The run's ceilings, measured at its start.
struct Ceilings {
  DeviceInfo device;
  CopyCeiling copy;
  double gemm_tflops = 0;  // cuBLASLt bf16 8192^3, this run
};

std::string Gb(double bytes);  // "1.23 GB"
std::string Mb(double bytes);  // "4.104" / "32.8" (no unit)

// The columns AddSeparateAndFusedRows fills.
const std::vector<std::string> kPairColumns = {
    "path", "tokens", "median", "p10..p90", "TFLOP/s", "% of 8192^3", "fused / separate", "sets"};

// Times `separate`, then `fused` (each enqueues call i's work on `stream`; call i uses input set
// i % sets) within opt.budget_ms each, and adds a row for each to `t`: TFLOP/s of `flops` a call,
// its share of c.gemm_tflops (bf16 8192^3), and fused's median over separate's.
void AddSeparateAndFusedRows(Table& t, const Options& opt, const Ceilings& c, std::int64_t tokens,
                             int sets, double flops,
                             const std::function<cudaError_t(int)>& separate,
                             const std::function<cudaError_t(int)>& fused, cudaStream_t stream);

// Argmax and top-k/top-p over 128256 fp32 logits a row (the section "sampling").
void Sampling(const Options& opt, const Ceilings& c, cudaStream_t stream);

// The FP8 gate/up layer to the down linear's codes: cuBLASLt then the codes pass, against one
// kernel (the section "mlp-fp8").
void MlpFp8(const Options& opt, const Ceilings& c, cudaStream_t stream);

}  // namespace inflight::bench::gpu::kernel_bench
