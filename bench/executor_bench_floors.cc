#include "executor_bench_floors.h"

#include <algorithm>
#include <filesystem>
#include <thread>

#include "common/dtype.h"
#include "memcpy_bandwidth.h"
#include "model/checkpoint_converter.h"
#ifdef INFLIGHT_BENCH_HAVE_GPU
#include "gpu_bench_util.h"
#endif

namespace inflight::bench {

namespace fs = std::filesystem;

std::int64_t WeightBytesPerStep(const std::string& engine_dir, const model::EngineConfig& cfg) {
  std::int64_t total = 0;
  for (const auto& entry : fs::directory_iterator(engine_dir)) {
    if (entry.path().extension() == ".safetensors")
      total += static_cast<std::int64_t>(entry.file_size());
  }
  if (total == 0 && cfg.random_weights.has_value()) {
    // Weights made at load (inflight-build --weights_at_load): the bytes the rank files would hold.
    model::BuildSummary summary;
    for (std::int32_t rank = 0; rank < cfg.tp_size * cfg.pp_size; ++rank) {
      model::CountPlan(cfg, model::RankFilePlan(cfg, rank), &summary);
    }
    total = static_cast<std::int64_t>(summary.num_bytes);
  }
  if (!cfg.tie_word_embeddings) {
    total -= cfg.vocab_size * cfg.hidden_size * static_cast<std::int64_t>(DTypeSize(cfg.dtype));
  }
  return total;
}

std::int64_t KvBytes(const model::EngineConfig& cfg, double context, std::int64_t bytes_per_value) {
  return static_cast<std::int64_t>(
      2.0 * static_cast<double>(cfg.num_layers * cfg.num_kv_heads * cfg.head_dim) * context *
      static_cast<double>(bytes_per_value));
}

double PrefillFlops(const model::EngineConfig& c, std::int64_t len) {
  const double H = static_cast<double>(c.hidden_size), hd = static_cast<double>(c.head_dim);
  const double nq = static_cast<double>(c.num_attention_heads);
  const double inter = static_cast<double>(c.intermediate_size);
  const double mlp_in = c.activation == model::Activation::kSwiGlu ? 2 * inter : inter;
  const double per_layer =
      H * static_cast<double>(c.QkvRows(1)) + nq * hd * H + H * mlp_in + inter * H;
  const double L = static_cast<double>(len);
  const double dense = 2.0 * L * per_layer * static_cast<double>(c.num_layers);
  const double attention = 4.0 * nq * hd * (L * (L + 1) / 2) * static_cast<double>(c.num_layers);
  return dense + attention + 2.0 * H * static_cast<double>(c.vocab_size);
}

std::optional<FloorBandwidth> MeasureDeviceCopy() {
#ifdef INFLIGHT_BENCH_HAVE_GPU
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();
    return std::nullopt;
  }
  cudaStream_t stream = nullptr;
  if (cudaStreamCreate(&stream) != cudaSuccess) return std::nullopt;
  const gpu::CopyCeiling copy = gpu::MeasureCopyCeiling(std::size_t{1} << 30, stream);
  cudaStreamDestroy(stream);
  return FloorBandwidth{copy.copy_gbps(), "device-to-device copy, 1 GiB, read+written (" +
                                              gpu::QueryDevice().name + ")"};
#else
  return std::nullopt;
#endif
}

FloorBandwidth DecodeFloorBandwidth(double given_gbps, bool on_gpu,
                                    const std::optional<FloorBandwidth>& device_copy) {
  if (given_gbps > 0) return {given_gbps, "--bandwidth_gbps"};
  if (on_gpu && device_copy) return *device_copy;
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return {MeasureMemcpyGBps(std::size_t{512} << 20, threads, 5),
          "memcpy, 512 MiB, " + std::to_string(threads) + " threads, read+write"};
}

}  // namespace inflight::bench
