// Paged attention (context and decode kernels) against cpu::PagedAttention on the same pools, and
// against cpu::ReferenceAttention on contiguous K/V, with and without sliding windows and sinks.
// Pools hold NaN everywhere a sequence has no token, and with a window also at the positions none
// of its queries sees; block tables are random and non-monotonic.
#include <cmath>
#include <limits>
#include <string>

#include "gpu_test_util.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/reference_attention.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cuda/paged_attention_context.h"
#include "kernels/cuda/paged_attention_decode.h"

namespace inflight::gpu_test {
namespace {

kernels::cpu::ThreadPool& Pool() {
  static kernels::cpu::ThreadPool pool(0);
  return pool;
}

struct AttentionCase {
  DType dtype;
  std::vector<int> query_lens, cached;
  int num_heads, num_kv_heads, head_dim, tokens_per_block;
  bool decode = false;
  int partition_tokens = 0;  // decode only; 0 = auto
  float q_range = 1.0f;      // q uniform in [-q_range, q_range]: larger makes peaked softmaxes
  // Decode only: launch as a captured CUDA graph does, for this max_kv_len (above every sequence's)
  // with table rows that long.
  int graph_max_kv_len = 0;
  kernels::cpu::AttentionWindow window = {};  // {0, 0}: full causal attention
};

// hb's block tables with rows of `width` entries, the new ones far out of range.
std::vector<std::int32_t> WidenedTables(const HostPagedBatch& hb, int width) {
  std::vector<std::int32_t> wide(static_cast<std::size_t>(hb.num_seqs() * width), 1 << 30);
  for (int s = 0; s < hb.num_seqs(); ++s)
    for (int j = 0; j < hb.max_blocks_per_seq; ++j)
      wide[static_cast<std::size_t>(s * width + j)] =
          hb.block_tables[static_cast<std::size_t>(s * hb.max_blocks_per_seq + j)];
  return wide;
}

void CheckAttention(const AttentionCase& c) {
  const int D = c.head_dim;
  std::string name = std::string(c.decode ? "decode " : "context ") + Describe(c.dtype) +
                     " hd=" + std::to_string(D) + " heads=" + std::to_string(c.num_heads) + "/" +
                     std::to_string(c.num_kv_heads) + " tpb=" + std::to_string(c.tokens_per_block) +
                     " seqs(q+cached)=";
  for (std::size_t s = 0; s < c.query_lens.size() && s < 6; ++s) {
    name += std::to_string(c.query_lens[s]) + "+" + std::to_string(c.cached[s]) + ",";
  }
  if (c.query_lens.size() > 6) name += "...(" + std::to_string(c.query_lens.size()) + ")";
  if (c.decode) name += " partition=" + std::to_string(c.partition_tokens);
  if (c.graph_max_kv_len > 0) name += " graph_max_kv_len=" + std::to_string(c.graph_max_kv_len);
  if (c.window.windowed()) {
    name += " window=" + std::to_string(c.window.window) + " sink=" + std::to_string(c.window.sink);
  }

  const HostPagedBatch hb = MakePagedBatch(c.query_lens, c.cached, c.tokens_per_block);
  const kernels::cpu::PagedKvShape shape{c.num_kv_heads, c.tokens_per_block, D};
  const std::size_t pool_n = static_cast<std::size_t>(hb.num_blocks * shape.BlockFloats());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> k_pool(pool_n, nan), v_pool(pool_n, nan);
  // Every position [0, cached + query_len) of every sequence holds a K/V (the step's own rows too,
  // as after RopeKvWrite).
  std::vector<std::vector<float>> contiguous_k(c.query_lens.size()),
      contiguous_v(c.query_lens.size());
  for (int s = 0; s < hb.num_seqs(); ++s) {
    const int kv_len =
        c.cached[static_cast<std::size_t>(s)] + c.query_lens[static_cast<std::size_t>(s)];
    auto k = RoundTo(c.dtype,
                     RandomVector(static_cast<std::size_t>(kv_len * c.num_kv_heads * D), -1, 1));
    auto v = RoundTo(c.dtype, RandomVector(k.size(), -1, 1));
    for (int p = 0; p < kv_len; ++p)
      for (int h = 0; h < c.num_kv_heads; ++h)
        for (int d = 0; d < D; ++d) {
          const std::size_t src = static_cast<std::size_t>((p * c.num_kv_heads + h) * D + d);
          const std::size_t dst =
              static_cast<std::size_t>(shape.Offset(hb.Block(s, p), h, p % c.tokens_per_block) + d);
          k_pool[dst] = k[src];
          v_pool[dst] = v[src];
        }
    // Positions no query of the sequence sees (past the sinks, before its first query's window)
    // back to NaN: a kernel that reads one puts NaN in the output.
    const int first_query = c.cached[static_cast<std::size_t>(s)];
    for (int p = c.window.sink; p < c.window.RecentBegin(first_query); ++p)
      for (int h = 0; h < c.num_kv_heads; ++h)
        for (int d = 0; d < D; ++d) {
          const std::size_t dst =
              static_cast<std::size_t>(shape.Offset(hb.Block(s, p), h, p % c.tokens_per_block) + d);
          k_pool[dst] = v_pool[dst] = std::numeric_limits<float>::quiet_NaN();
        }
    contiguous_k[static_cast<std::size_t>(s)] = std::move(k);
    contiguous_v[static_cast<std::size_t>(s)] = std::move(v);
  }
  const int tokens = hb.num_tokens();
  // q rows strided as in a fused qkv output.
  const int q_stride = (c.num_heads + 2 * c.num_kv_heads) * D;
  const auto q = RoundTo(
      c.dtype, RandomVector(static_cast<std::size_t>(tokens) * q_stride, -c.q_range, c.q_range));
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));

  DeviceArray<std::uint16_t> d_k(ToBits(c.dtype, k_pool)), d_v(ToBits(c.dtype, v_pool)),
      d_q(ToBits(c.dtype, q)), d_out(static_cast<std::size_t>(tokens * c.num_heads * D));
  // NaN (all ones in fp16 and bf16) in every output element that the kernel fails to write.
  CUDA_OK(cudaMemset(d_out.get(), 0xff, d_out.size() * sizeof(std::uint16_t)));
  DevicePagedBatch db(hb);
  if (c.decode) {
    kernels::cuda::PagedBatch batch = db.batch;
    const int width = std::max(hb.max_blocks_per_seq,
                               (c.graph_max_kv_len + c.tokens_per_block - 1) / c.tokens_per_block);
    DeviceArray<std::int32_t> wide_tables(WidenedTables(hb, width));
    batch.block_tables = wide_tables.get();
    batch.max_blocks_per_seq = width;
    batch.max_kv_len = std::max(hb.max_kv_len, c.graph_max_kv_len);
    const std::int32_t partition = c.partition_tokens > 0 ? c.partition_tokens
                                                          : kernels::cuda::DecodePartitionTokens(
                                                                batch, c.num_kv_heads, c.window);
    const std::size_t ws_bytes = kernels::cuda::PagedAttentionDecodeWorkspaceBytes(
        batch, c.num_heads, D, partition, c.window);
    DeviceArray<unsigned char> ws(ws_bytes);
    CUDA_OK(kernels::cuda::PagedAttentionDecode(
        d_out.get(), d_q.get(), q_stride, d_k.get(), d_v.get(), batch, shape, c.num_heads, scale,
        c.window, c.dtype, c.partition_tokens, ws.get(), ws_bytes, nullptr));
  } else {
    CUDA_OK(kernels::cuda::PagedAttentionContext(d_out.get(), d_q.get(), q_stride, d_k.get(),
                                                 d_v.get(), db.batch, shape, c.num_heads, scale,
                                                 c.window, c.dtype, nullptr));
  }
  const auto found = FromBits(c.dtype, d_out.Download());

  std::vector<float> ref(found.size());
  const kernels::cpu::PagedBatch cb{hb.num_seqs(), hb.query_start.data(), hb.num_cached.data(),
                                    hb.block_tables.data(), hb.max_blocks_per_seq};
  kernels::cpu::PagedAttention(ref.data(), q.data(), q_stride, k_pool.data(), v_pool.data(), cb,
                               shape, c.num_heads, scale, c.window, &Pool());
  const float e = Epsilon(c.dtype);
  // Outputs are convex combinations of V rows in [-1, 1]: an absolute bound of a few roundings.
  ExpectClose(name + " vs paged cpu", found, ref, 2 * e, e);

  // Sequence 0 once more, against attention on contiguous K/V.
  const int n_q = c.query_lens[0], kv_len = c.cached[0] + n_q;
  std::vector<float> q0(static_cast<std::size_t>(n_q * c.num_heads * D));
  for (int r = 0; r < n_q; ++r)
    for (int i = 0; i < c.num_heads * D; ++i)
      q0[static_cast<std::size_t>(r * c.num_heads * D + i)] =
          q[static_cast<std::size_t>(r * q_stride + i)];
  std::vector<float> ref0(q0.size());
  kernels::cpu::ReferenceAttention(ref0.data(), q0.data(), contiguous_k[0].data(),
                                   contiguous_v[0].data(), n_q, kv_len, c.num_heads, c.num_kv_heads,
                                   D, scale, c.window);
  ExpectClose(
      name + " seq0 vs unpaged",
      std::vector<float>(found.begin(), found.begin() + static_cast<std::ptrdiff_t>(q0.size())),
      ref0, 2 * e, e);
}

GPU_TEST(ContextAttentionMatchesCpu) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16})
    for (int D : {64, 80, 96, 128}) {
      CheckAttention({dtype, {1, 3, 19, 99}, {0, 17, 5, 130}, 8, 2, D, 16});
      CheckAttention({dtype, {3, 1}, {64, 0}, 6, 6, D, 32});
    }
}

GPU_TEST(ContextAttentionLongPromptMatchesCpu) {
  CheckAttention({DType::kBFloat16, {989, 19}, {40, 0}, 4, 1, 128, 64});
  CheckAttention({DType::kFloat16, {989}, {0}, 8, 2, 64, 16});
}

// Edges of the tensor-core kernels' tiling (128 query rows a CTA, 64 or 128 keys a tile): sequences
// that end one row either side of a query tile, cached prefixes that put the causal diagonal mid
// key tile, pool blocks that no tile boundary lines up with (7, 48, 100, 1 tokens), mixed batches
// of 1-row and long sequences, GQA groups of 2, 3 and 7, and peaked softmaxes (large q) whose
// running max moves from tile to tile, and blocks longer than a key tile (128, 256 tokens).
GPU_TEST(ContextAttentionTileEdgesMatchCpu) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    CheckAttention({dtype, {127, 128, 129, 255, 257}, {0, 37, 64, 1, 100}, 4, 2, 128, 7});
    CheckAttention({dtype, {1, 1, 300, 1, 65}, {900, 3, 41, 0, 63}, 6, 2, 96, 48});
    CheckAttention({dtype, {200, 1, 129}, {5, 511, 0}, 28, 4, 80, 100});
    CheckAttention({dtype, {64, 190}, {0, 1}, 3, 1, 64, 1});
    CheckAttention({dtype, {150, 40}, {70, 0}, 4, 4, 128, 16, false, 0, 8.0f});
    CheckAttention({dtype, {300, 20}, {100, 0}, 8, 2, 128, 256});
    CheckAttention({dtype, {200, 70}, {60, 3}, 4, 2, 64, 128});
  }
}

// Many more query tiles than SMs, of many lengths, over several waves of CTAs.
GPU_TEST(ContextAttentionManyWavesMatchCpu) {
  std::vector<int> lens, cached;
  for (int i = 0; i < 32; ++i) {
    lens.push_back(1 + (i * 97) % 300);
    cached.push_back((i * 53) % 200);
  }
  CheckAttention({DType::kBFloat16, lens, cached, 32, 8, 128, 16});
  CheckAttention({DType::kFloat16, lens, cached, 16, 4, 64, 32});
}

GPU_TEST(ContextAttentionVeryLongPromptMatchesCpu) {
  CheckAttention({DType::kBFloat16, {4100}, {0}, 2, 1, 128, 64});
  CheckAttention({DType::kFloat16, {1500, 1}, {3000, 4000}, 4, 2, 128, 32, false, 0, 4.0f});
}

GPU_TEST(DecodeAttentionMatchesCpu) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16})
    for (int D : {64, 80, 96, 128}) {
      CheckAttention({dtype, {1}, {0}, 8, 2, D, 16, true});
      CheckAttention({dtype, {1, 1, 1}, {2, 130, 700}, 32, 8, D, 16, true});
      CheckAttention({dtype, {1, 1, 1}, {2, 130, 700}, 32, 8, D, 16, true, 64});
    }
}

GPU_TEST(DecodeAttentionManySequencesAndSplits) {
  std::uniform_int_distribution<int> len(0, 1500);
  std::vector<int> ones(19, 1), cached(19);
  for (int& x : cached) x = len(Rng());
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    CheckAttention({dtype, ones, cached, 28, 4, 128, 16, true});       // Qwen-like GQA 7
    CheckAttention({dtype, ones, cached, 28, 4, 128, 16, true, 192});  // forced splits
    CheckAttention({dtype, {1}, {4000}, 32, 1, 64, 64, true});         // MQA, long: auto split
    CheckAttention({dtype, {1, 1}, {4000, 3}, 12, 12, 80, 32, true, 256});
  }
}

// Edges of the decode kernel's tiling (16-key warp steps, 4 warps a block, 8 query heads a block):
// contexts past 4096 over many splits (more than 32), splits and sequences that end mid step, pool
// blocks no step lines up with (1, 7, 48, 100 tokens), groups of 1, 4, 8, 12 and 32 (MQA: head
// tiles), peaked softmaxes (large q), a batch of 256, and launches sized for a longer max_kv_len
// than any sequence's (graph capture: most splits past a sequence's end).
GPU_TEST(DecodeAttentionTilingEdgesMatchCpu) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    CheckAttention({dtype, {1, 1}, {4096, 5000}, 32, 8, 128, 64, true});
    CheckAttention({dtype, {1, 1}, {4096, 5000}, 32, 8, 128, 64, true, 64});  // 79 splits
    CheckAttention({dtype, {1, 1, 1, 1}, {15, 16, 63, 79}, 8, 8, 128, 7, true, 64});
    CheckAttention({dtype, {1, 1, 1}, {1, 0, 333}, 8, 1, 96, 1, true, 128});
    CheckAttention({dtype, {1, 1}, {2100, 77}, 32, 1, 128, 48, true});
    CheckAttention({dtype, {1}, {1000}, 24, 2, 80, 100, true, 192});
    CheckAttention({dtype, {1, 1, 1}, {3000, 500, 9}, 16, 4, 64, 32, true, 0, 8.0f});
    CheckAttention({dtype, {1, 1, 1}, {40, 700, 3}, 32, 8, 128, 64, true, 0, 1.0f, 8192});
    CheckAttention({dtype, {1, 1}, {100, 2000}, 8, 2, 80, 16, true, 128, 1.0f, 4099});
  }
  std::uniform_int_distribution<int> len(0, 700);
  std::vector<int> ones(256, 1), cached(256);
  for (int& x : cached) x = len(Rng());
  CheckAttention({DType::kBFloat16, ones, cached, 32, 8, 128, 64, true});
  CheckAttention({DType::kFloat16, ones, cached, 8, 2, 64, 16, true, 64});
}

// Sliding windows in the context kernels: W = 1 (each row sees itself), windows smaller than a
// query tile, than a key tile, crossing paged blocks and tiles at every offset, larger than the
// sequence, with sinks that end mid tile or cover whole tiles, over chunks whose first rows need
// keys from before the chunk (cached prefixes longer than the window), and peaked softmaxes.
GPU_TEST(ContextAttentionWindowsMatchCpu) {
  using W = kernels::cpu::AttentionWindow;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (int D : {64, 80, 96, 128}) {
      for (W w : {W{1, 0}, W{7, 0}, W{40, 3}, W{2000, 0}, W{100, 130}}) {
        CheckAttention({dtype, {1, 3, 19, 99}, {0, 17, 5, 130}, 8, 2, D, 16, false, 0, 1.0f, 0, w});
      }
    }
    CheckAttention({dtype, {989, 19}, {40, 0}, 4, 1, 128, 64, false, 0, 1.0f, 0, {256, 4}});
    CheckAttention({dtype, {989}, {0}, 8, 2, 64, 16, false, 0, 4.0f, 0, {129, 0}});
    CheckAttention(
        {dtype, {300, 1, 129}, {900, 2000, 0}, 8, 2, 128, 7, false, 0, 1.0f, 0, {300, 2}});
    CheckAttention({dtype, {257, 64}, {1000, 130}, 6, 2, 96, 48, false, 0, 8.0f, 0, {64, 0}});
    CheckAttention({dtype, {200, 70}, {60, 3}, 4, 2, 64, 128, false, 0, 1.0f, 0, {128, 64}});
    CheckAttention({dtype, {150, 40}, {70, 0}, 4, 4, 128, 1, false, 0, 1.0f, 0, {33, 200}});
    CheckAttention({dtype, {1500, 1}, {3000, 4000}, 4, 2, 128, 32, false, 0, 4.0f, 0, {500, 1}});
  }
  std::vector<int> lens, cached;
  for (int i = 0; i < 32; ++i) {
    lens.push_back(1 + (i * 97) % 300);
    cached.push_back((i * 53) % 700);
  }
  CheckAttention({DType::kBFloat16, lens, cached, 32, 8, 128, 16, false, 0, 1.0f, 0, {96, 0}});
  CheckAttention({DType::kFloat16, lens, cached, 16, 4, 64, 32, false, 0, 1.0f, 0, {250, 16}});
}

// Sliding windows in the decode kernels (each run with the bulk and the register-stream kernel by
// the tests' INFLIGHT_DECODE_BULK): W = 1, windows above and below the split size, sinks over more
// than one split (70 sinks in 64-key splits), sequences shorter than the window, long sequences of
// which only the window is visible (all else NaN), pool blocks of 1, 7 and 48 tokens, and launches
// sized for graphs (most splits past a sequence's visible keys).
GPU_TEST(DecodeAttentionWindowsMatchCpu) {
  using W = kernels::cpu::AttentionWindow;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (int D : {64, 80, 96, 128}) {
      for (W w : {W{1, 0}, W{64, 0}, W{100, 3}, W{1000, 0}, W{300, 70}}) {
        CheckAttention({dtype, {1, 1, 1}, {2, 130, 700}, 32, 8, D, 16, true, 0, 1.0f, 0, w});
        CheckAttention({dtype, {1, 1, 1}, {2, 130, 700}, 32, 8, D, 16, true, 64, 1.0f, 0, w});
      }
    }
    CheckAttention({dtype, {1, 1}, {4096, 5000}, 32, 8, 128, 64, true, 0, 1.0f, 0, {512, 4}});
    CheckAttention({dtype, {1, 1}, {4096, 5000}, 32, 8, 128, 64, true, 64, 1.0f, 0, {700, 0}});
    CheckAttention(
        {dtype, {1, 1, 1, 1}, {15, 16, 63, 79}, 8, 8, 128, 7, true, 64, 1.0f, 0, {17, 2}});
    CheckAttention({dtype, {1, 1, 1}, {1, 0, 333}, 8, 1, 96, 1, true, 128, 1.0f, 0, {129, 1}});
    CheckAttention({dtype, {1, 1, 1}, {3000, 500, 9}, 16, 4, 64, 32, true, 0, 8.0f, 0, {200, 8}});
    CheckAttention({dtype, {1, 1, 1}, {40, 700, 3}, 32, 8, 128, 64, true, 0, 1.0f, 8192, {128, 0}});
    CheckAttention({dtype, {1, 1}, {100, 2000}, 8, 2, 80, 48, true, 128, 1.0f, 4099, {300, 5}});
  }
  std::uniform_int_distribution<int> len(0, 3000);
  std::vector<int> ones(64, 1), cached(64);
  for (int& x : cached) x = len(Rng());
  CheckAttention({DType::kBFloat16, ones, cached, 32, 8, 128, 64, true, 0, 1.0f, 0, {1024, 4}});
  CheckAttention({DType::kFloat16, ones, cached, 8, 2, 64, 16, true, 64, 1.0f, 0, {333, 0}});
}

// Bad windows are refused, not run: a negative window or sink, sinks without a window.
GPU_TEST(AttentionRefusesBadWindows) {
  const HostPagedBatch hb = MakePagedBatch({1}, {10}, 16);
  DevicePagedBatch db(hb);
  const kernels::cpu::PagedKvShape shape{1, 16, 64};
  DeviceArray<std::uint16_t> q(3 * 64), pool(static_cast<std::size_t>(hb.num_blocks) * 16 * 64),
      out(64);
  for (kernels::cpu::AttentionWindow w :
       {kernels::cpu::AttentionWindow{-1, 0}, kernels::cpu::AttentionWindow{8, -1},
        kernels::cpu::AttentionWindow{0, 4}}) {
    const std::string what =
        "window " + std::to_string(w.window) + " sink " + std::to_string(w.sink);
    const cudaError_t context = kernels::cuda::PagedAttentionContext(
        out.get(), q.get(), 3 * 64, pool.get(), pool.get(), db.batch, shape, 1, 0.125f, w,
        DType::kBFloat16, nullptr);
    GPU_CHECK(context == cudaErrorInvalidValue, "context, " + what);
    const cudaError_t decode = kernels::cuda::PagedAttentionDecode(
        out.get(), q.get(), 3 * 64, pool.get(), pool.get(), db.batch, shape, 1, 0.125f, w,
        DType::kBFloat16, 64, nullptr, 0, nullptr);
    GPU_CHECK(decode == cudaErrorInvalidValue, "decode, " + what);
  }
}

}  // namespace
}  // namespace inflight::gpu_test
