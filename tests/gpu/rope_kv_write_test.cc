// RoPE + K/V cache write against cpu::ApplyRope (on q and k) followed by cpu::KvCacheWrite, on a
// random non-monotonic block table with every untouched pool slot holding NaN. Every scaling's
// table, yarn's attention factor on cos and sin, and dynamic RoPE's table per sequence; with
// Qwen3's q/k norm, cpu::HeadRmsNorm on q and k first.
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "gpu_test_util.h"
#include "kernels/cpu/kv_cache_write.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cuda/rope_kv_write.h"

namespace inflight::gpu_test {
namespace {

struct RopeCase {
  DType dtype;
  std::vector<int> query_lens, cached;
  int num_heads, num_kv_heads, head_dim, tokens_per_block;
  bool rope;
  kernels::cpu::RopeScaling scaling = kernels::cpu::RopeScaling::kNone;
  bool qk_norm = false;
  float q_scale = 1.0f;  // q and k uniform in [-q_scale, q_scale]: the norm must undo the scale
};

const char* ScalingName(kernels::cpu::RopeScaling s) {
  using kernels::cpu::RopeScaling;
  return s == RopeScaling::kLlama3    ? " llama3"
         : s == RopeScaling::kYarn    ? " yarn"
         : s == RopeScaling::kDynamic ? " dynamic"
         : s == RopeScaling::kLinear  ? " linear"
                                      : "";
}

void CheckRopeKvWrite(const RopeCase& c) {
  const std::string name =
      "rope_kv_write " + Describe(c.dtype) + " seqs=" + std::to_string(c.query_lens.size()) +
      " hd=" + std::to_string(c.head_dim) + " heads=" + std::to_string(c.num_heads) + "/" +
      std::to_string(c.num_kv_heads) + (c.rope ? " rope" : " no-rope") + ScalingName(c.scaling) +
      (c.qk_norm ? " qk_norm" : "") +
      " tokens=" + std::to_string(std::accumulate(c.query_lens.begin(), c.query_lens.end(), 0));
  const HostPagedBatch hb = MakePagedBatch(c.query_lens, c.cached, c.tokens_per_block);
  const int tokens = hb.num_tokens(), D = c.head_dim;
  const int stride = (c.num_heads + 2 * c.num_kv_heads) * D;
  auto qkv = RoundTo(
      c.dtype, RandomVector(static_cast<std::size_t>(tokens) * stride, -c.q_scale, c.q_scale));
  // Norm weights around 1 with a spread, as trained ones are.
  const auto q_norm = RoundTo(c.dtype, RandomVector(static_cast<std::size_t>(D), 0.25f, 2.0f));
  const auto k_norm = RoundTo(c.dtype, RandomVector(static_cast<std::size_t>(D), 0.25f, 2.0f));
  const float eps = 1e-6f;
  kernels::cpu::PagedKvShape shape{c.num_kv_heads, c.tokens_per_block, D};
  const std::size_t pool_n = static_cast<std::size_t>(hb.num_blocks * shape.BlockFloats());

  using kernels::cpu::RopeScaling;
  kernels::cpu::RopeParams params;
  params.head_dim = D;
  params.theta = 500000.0;
  params.scaling = c.scaling;
  params.factor = 8.0;
  params.original_max_position_embeddings = c.scaling == RopeScaling::kDynamic ? 40.0 : 8192.0;
  // Yarn's attention factor for factor 8, 0.1 ln 8 + 1; 1 for the others.
  const float scale = c.scaling == RopeScaling::kYarn ? 1.2079442f : 1.0f;
  // Dynamic: a table per sequence for its length in this step (cached + new), else one table.
  const bool per_sequence = c.scaling == RopeScaling::kDynamic;
  const std::size_t half = static_cast<std::size_t>(D / 2);
  std::vector<float> inv_freq(per_sequence ? half * c.query_lens.size() : half);
  for (std::size_t s = 0; s < inv_freq.size() / half; ++s) {
    kernels::cpu::RopeDynamicInvFrequencies(params, c.cached[s] + c.query_lens[s],
                                            inv_freq.data() + s * half);
  }

  DeviceArray<std::uint16_t> d_qkv(ToBits(c.dtype, qkv));
  DeviceArray<std::uint16_t> d_k_pool(std::vector<std::uint16_t>(pool_n, NanBits(c.dtype)));
  DeviceArray<std::uint16_t> d_v_pool(std::vector<std::uint16_t>(pool_n, NanBits(c.dtype)));
  DeviceArray<float> d_inv_freq(inv_freq);
  DeviceArray<std::uint16_t> d_q_norm(ToBits(c.dtype, q_norm)), d_k_norm(ToBits(c.dtype, k_norm));
  kernels::cuda::QkNormWeights norm;
  if (c.qk_norm) norm = {d_q_norm.get(), d_k_norm.get(), eps};
  DevicePagedBatch db(hb);
  std::uint16_t* base = d_qkv.get();
  CUDA_OK(kernels::cuda::RopeKvWrite(
      base, base + c.num_heads * D, base + (c.num_heads + c.num_kv_heads) * D, stride, c.num_heads,
      d_k_pool.get(), d_v_pool.get(), db.batch, shape,
      kernels::cuda::RopeTable{c.rope ? d_inv_freq.get() : nullptr,
                               per_sequence ? static_cast<std::int32_t>(half) : 0, scale},
      norm, c.dtype, nullptr));

  std::vector<std::int32_t> positions;
  for (int s = 0; s < hb.num_seqs(); ++s)
    for (int j = 0; j < c.query_lens[static_cast<std::size_t>(s)]; ++j)
      positions.push_back(hb.num_cached[s] + j);
  if (c.qk_norm) {
    kernels::cpu::HeadRmsNorm(qkv.data(), tokens, c.num_heads, D, stride,
                              kernels::cpu::WeightPtr(q_norm.data()), eps);
    kernels::cpu::HeadRmsNorm(qkv.data() + c.num_heads * D, tokens, c.num_kv_heads, D, stride,
                              kernels::cpu::WeightPtr(k_norm.data()), eps);
  }
  for (int s = 0; c.rope && s < hb.num_seqs(); ++s) {
    const int r0 = hb.query_start[s], n = hb.query_start[s + 1] - r0;
    const float* inv = inv_freq.data() + (per_sequence ? s * half : 0);
    kernels::cpu::ApplyRope(qkv.data() + r0 * stride, n, c.num_heads, D, stride,
                            positions.data() + r0, inv, scale);
    kernels::cpu::ApplyRope(qkv.data() + r0 * stride + c.num_heads * D, n, c.num_kv_heads, D,
                            stride, positions.data() + r0, inv, scale);
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> k_pool(pool_n, nan), v_pool(pool_n, nan);
  kernels::cpu::PagedBatch cb{hb.num_seqs(), hb.query_start.data(), hb.num_cached.data(),
                              hb.block_tables.data(), hb.max_blocks_per_seq};
  kernels::cpu::KvCacheWrite(k_pool.data(), v_pool.data(), qkv.data() + c.num_heads * D,
                             qkv.data() + (c.num_heads + c.num_kv_heads) * D, stride, cb, shape);
  // One rounding of the result (the device keeps fp32 from the load to the store); normalised
  // heads reach |x| ~ sqrt(head_dim) x weight, hence the relative term.
  const float e = Epsilon(c.dtype);
  ExpectClose(name + " qkv", FromBits(c.dtype, d_qkv.Download()), qkv, e, e);
  ExpectClose(name + " k_pool", FromBits(c.dtype, d_k_pool.Download()), k_pool, e, e);
  ExpectClose(name + " v_pool", FromBits(c.dtype, d_v_pool.Download()), v_pool, 0.0f, 0.0f);
}

GPU_TEST(RopeKvWriteMatchesCpu) {
  using kernels::cpu::RopeScaling;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (int D : {64, 80, 96, 128}) {
      CheckRopeKvWrite({dtype, {1}, {0}, 4, 2, D, 16, true});
      CheckRopeKvWrite({dtype, {3, 19, 1}, {5, 0, 77}, 8, 2, D, 16, true, RopeScaling::kLlama3});
      CheckRopeKvWrite({dtype, {3, 19, 1}, {5, 0, 77}, 8, 2, D, 16, true, RopeScaling::kYarn});
      // Dynamic: the sequences end at lengths 8, 19 and 78, on either side of 40.
      CheckRopeKvWrite({dtype, {3, 19, 1}, {5, 0, 77}, 8, 2, D, 16, true, RopeScaling::kDynamic});
    }
    CheckRopeKvWrite(
        {dtype, {99, 1, 3}, {1000, 9000, 3}, 6, 1, 128, 64, true, RopeScaling::kLlama3});
    CheckRopeKvWrite({dtype, {989}, {17}, 4, 4, 64, 32, false});
    // 256 rows or more: one block a row, each thread looping over its heads.
    CheckRopeKvWrite({dtype, {300, 2}, {0, 50}, 32, 8, 128, 64, true, RopeScaling::kLlama3});
    CheckRopeKvWrite({dtype, {300, 2}, {0, 50}, 32, 8, 128, 64, true, RopeScaling::kDynamic});
    // head_dim 72 is not a whole number of 16-byte pairs: the scalar kernel.
    CheckRopeKvWrite({dtype, {3, 19, 1}, {5, 0, 77}, 8, 2, 72, 16, true});
    CheckRopeKvWrite({dtype, {3, 19, 1}, {5, 0, 77}, 8, 2, 72, 16, true, RopeScaling::kYarn});
    CheckRopeKvWrite({dtype, {3, 19, 1}, {5, 0, 77}, 8, 2, 72, 16, true, RopeScaling::kDynamic});
  }
}

// Qwen3's q/k norm fused into the rotation: every head dim (80 and 96 have 5 and 6 threads a head,
// padded to 8 lanes for the shuffles), GQA groups, decode-sized rows (heads split over blocks) and
// prompt-sized ones (one block a row, threads looping over heads), inputs far from unit scale, and
// the tables of yarn and dynamic RoPE (the norm's kernel takes every table).
GPU_TEST(RopeKvWriteWithQkNormMatchesCpu) {
  using kernels::cpu::RopeScaling;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (int D : {64, 80, 96, 128}) {
      CheckRopeKvWrite({dtype, {1}, {0}, 4, 2, D, 16, true, RopeScaling::kNone, true});
      CheckRopeKvWrite(
          {dtype, {3, 19, 1}, {5, 0, 77}, 16, 2, D, 16, true, RopeScaling::kYarn, true, 30.0f});
      CheckRopeKvWrite(
          {dtype, {300, 2}, {0, 50}, 12, 4, D, 64, true, RopeScaling::kNone, true, 0.05f});
    }
    CheckRopeKvWrite({dtype,
                      {1, 1, 1},
                      {100, 9000, 3},
                      40,
                      8,
                      128,
                      32,
                      true,
                      RopeScaling::kDynamic,
                      true,
                      4.0f});
  }
}

// The norm is refused where the kernel cannot fuse it: no rotary embedding, or the scalar kernel.
GPU_TEST(RopeKvWriteQkNormRefusesUnfusableShapes) {
  const HostPagedBatch hb = MakePagedBatch({2}, {0}, 16);
  DevicePagedBatch db(hb);
  for (int D : {64, 72}) {
    const int stride = 3 * D;
    DeviceArray<std::uint16_t> qkv(static_cast<std::size_t>(2 * stride)), pool(16 * 64 * 2);
    DeviceArray<std::uint16_t> w(static_cast<std::size_t>(D));
    DeviceArray<float> inv_freq(static_cast<std::size_t>(D / 2));
    const kernels::cpu::PagedKvShape shape{1, 16, D};
    const kernels::cuda::QkNormWeights norm{w.get(), w.get(), 1e-6f};
    const cudaError_t no_rope = kernels::cuda::RopeKvWrite(
        qkv.get(), qkv.get() + D, qkv.get() + 2 * D, stride, 1, pool.get(), pool.get(), db.batch,
        shape, kernels::cuda::RopeTable{}, norm, DType::kBFloat16, nullptr);
    GPU_CHECK(no_rope == cudaErrorInvalidValue,
              "no rope: " + std::string(cudaGetErrorString(no_rope)));
    if (D % 16 != 0) {
      const cudaError_t scalar = kernels::cuda::RopeKvWrite(
          qkv.get(), qkv.get() + D, qkv.get() + 2 * D, stride, 1, pool.get(), pool.get(), db.batch,
          shape, kernels::cuda::RopeTable{inv_freq.get(), 0, 1.0f}, norm, DType::kBFloat16,
          nullptr);
      GPU_CHECK(scalar == cudaErrorInvalidValue,
                "hd 72: " + std::string(cudaGetErrorString(scalar)));
    }
  }
}

}  // namespace
}  // namespace inflight::gpu_test
