// Quantized linears (kernels/cuda/quant_linear.h) on every path — the GEMV that dequantizes in
// registers, cuBLASLt's FP8 GEMM with its scale epilogue, the weight-only mma.sync GEMM (with k
// split over the grid and not), and dequantize-to-scratch + the float GEMM — against the CPU
// reference of the runner (kernels/cpu/dequantize.h, fp8_activation.h, an fp64 dot product) on the
// same random codes, scales, zero points, g_idx and inputs.
//
// Bound, per output: |found - expected| <= 3 eps(dtype) * mag, with mag = sum_i |x_i w_i| (+ |bias|
// + |y_old|): the device rounds the E4M3 inputs (fp8) and the dequantized weights (fallback path)
// to the activation dtype, each at most eps/2 of a term, and the output once; fp32 sums in another
// order are far below that. The NMSE (sum (found - expected)^2 / sum expected^2) is printed beside.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "common/fp8_e4m3.h"
#include "gpu_test_util.h"
#include "kernels/cpu/dequantize.h"
#include "kernels/cpu/fp8_activation.h"
#include "kernels/cuda/activations.h"
#include "kernels/cuda/quant_activation_fp8.h"
#include "kernels/cuda/quant_gemm_fp8.h"
#include "kernels/cuda/quant_linear.h"

namespace inflight::gpu_test {
namespace {

namespace kc = kernels::cuda;
namespace kcpu = kernels::cpu;

struct QuantCase {
  std::string name;
  kc::QuantWeightKind kind;
  std::int64_t n, k;
  std::int64_t group_size = 0;  // 0: per channel
  bool per_tensor = false;      // fp8
  bool zeros = false;           // int
  bool g_idx = false;           // int, act-order
  bool static_scale = false;    // fp8
  // fp8 per channel: rows in runs of one scale, ending at these rows and at n (q, k, v fused).
  std::vector<std::int64_t> scalar_runs = {};
  DType dtype = DType::kBFloat16;
  // The m values run: the GEMV's 1..8; the mixed GEMM's token tiles of 16 (9), 32 (24) and 64
  // (33; 200 in four tiles, the last partial).
  std::vector<std::int64_t> rows = {1, 3, 8, 9, 24, 33, 200};
};

// A random quantized weight in the engine's layout, host side.
struct HostWeight {
  std::vector<std::uint8_t> codes, zeros;
  std::vector<float> scales;
  std::vector<std::int32_t> g_idx;
  std::int64_t num_groups = 1;
};

HostWeight MakeWeight(const QuantCase& c) {
  HostWeight w;
  auto& rng = Rng();
  const bool int4 = c.kind == kc::QuantWeightKind::kInt4;
  w.num_groups = c.group_size > 0 ? (c.k + c.group_size - 1) / c.group_size : 1;
  const std::int64_t num_scales = c.per_tensor ? 1 : c.n * w.num_groups;
  w.scales = RandomVector(static_cast<std::size_t>(num_scales), 0.002f, 0.02f);
  for (std::size_t r = 0; r < c.scalar_runs.size(); ++r) {
    const std::int64_t end = r + 1 < c.scalar_runs.size() ? c.scalar_runs[r + 1] : c.n;
    std::fill(w.scales.begin() + c.scalar_runs[r], w.scales.begin() + end,
              w.scales[static_cast<std::size_t>(c.scalar_runs[r])]);
  }
  if (!c.scalar_runs.empty())
    std::fill(w.scales.begin(), w.scales.begin() + c.scalar_runs[0], w.scales[0]);
  w.codes.resize(static_cast<std::size_t>(c.n * (int4 ? c.k / 2 : c.k)));
  if (c.kind == kc::QuantWeightKind::kFp8E4M3) {
    // Normal-ish values across E4M3's range (the quantizer's amax / 448 puts a row's largest at
    // 448), subnormals included.
    std::normal_distribution<float> dist(0.0f, 120.0f);
    for (auto& b : w.codes) b = FloatToFp8E4M3(dist(rng));
  } else if (c.kind == kc::QuantWeightKind::kInt8) {
    std::uniform_int_distribution<int> dist(-127, 127);
    for (auto& b : w.codes) b = static_cast<std::uint8_t>(static_cast<std::int8_t>(dist(rng)));
  } else {
    std::uniform_int_distribution<int> dist(0, 255);
    for (auto& b : w.codes) b = static_cast<std::uint8_t>(dist(rng));
  }
  if (c.zeros) {
    w.zeros.resize(static_cast<std::size_t>(c.n * w.num_groups));
    std::uniform_int_distribution<int> dist(int4 ? 0 : -8, int4 ? 16 : 8);
    for (auto& z : w.zeros) z = static_cast<std::uint8_t>(static_cast<std::int8_t>(dist(rng)));
  }
  if (c.g_idx) {
    // Act-order: each group's group_size columns scattered over the row.
    std::vector<std::int32_t> perm(static_cast<std::size_t>(c.k));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    w.g_idx.resize(perm.size());
    for (std::size_t i = 0; i < perm.size(); ++i)
      w.g_idx[i] = static_cast<std::int32_t>(perm[i] / c.group_size);
  }
  return w;
}

kcpu::QuantizedWeightView HostView(const QuantCase& c, const HostWeight& w) {
  kcpu::QuantizedWeightView v;
  v.kind = c.kind == kc::QuantWeightKind::kFp8E4M3 ? kcpu::QuantizedWeightKind::kFp8E4M3
           : c.kind == kc::QuantWeightKind::kInt8  ? kcpu::QuantizedWeightKind::kInt8
                                                   : kcpu::QuantizedWeightKind::kInt4;
  v.codes = w.codes.data();
  v.scales = w.scales.data();
  v.per_tensor = c.per_tensor;
  v.num_groups = w.num_groups;
  v.zeros = w.zeros.empty() ? nullptr : w.zeros.data();
  v.g_idx = w.g_idx.empty() ? nullptr : w.g_idx.data();
  v.group_size = c.group_size;
  return v;
}

struct DeviceWeight {
  explicit DeviceWeight(const HostWeight& h)
      : codes(h.codes), scales(h.scales), zeros(h.zeros), g_idx(h.g_idx) {}
  DeviceArray<std::uint8_t> codes;
  DeviceArray<float> scales;
  DeviceArray<std::uint8_t> zeros;
  DeviceArray<std::int32_t> g_idx;
};

struct Scratch {
  explicit Scratch(const kc::QuantScratchBytes& b)
      : weight(static_cast<std::size_t>(b.weight)),
        codes(static_cast<std::size_t>(b.act_codes)),
        scales(static_cast<std::size_t>(b.act_scales / 4)),
        raw(static_cast<std::size_t>(b.raw_out)) {
    view = {weight.get(), b.weight,     codes.get(), b.act_codes,
            scales.get(), b.act_scales, raw.get(),   b.raw_out};
  }
  DeviceArray<std::uint8_t> weight, codes;
  DeviceArray<float> scales;
  DeviceArray<std::uint8_t> raw;
  kc::QuantScratch view;
};

// The kernels' view of a case's weight on the device.
kc::QuantWeight ViewOf(const QuantCase& c, const HostWeight& hw, const DeviceWeight& dw) {
  kc::QuantWeight w;
  w.kind = c.kind;
  w.codes = dw.codes.get();
  w.scales = dw.scales.get();
  w.per_tensor = c.per_tensor;
  w.num_groups = hw.num_groups;
  w.group_size = c.group_size;
  w.zeros = hw.zeros.empty() ? nullptr : dw.zeros.get();
  w.g_idx = hw.g_idx.empty() ? nullptr : dw.g_idx.get();
  if (!c.scalar_runs.empty()) {
    w.num_scalar_runs = static_cast<int>(c.scalar_runs.size()) + 1;
    for (std::size_t r = 0; r < c.scalar_runs.size(); ++r) w.scalar_run_ends[r] = c.scalar_runs[r];
    w.scalar_run_ends[c.scalar_runs.size()] = c.n;
  }
  return w;
}

// fp8_gemm: the FP8 GEMM `linear` was made with, or null.
void CheckCase(const QuantCase& c, kc::QuantLinear& linear, kc::CublasLtFp8Gemm* fp8_gemm) {
  const HostWeight hw = MakeWeight(c);
  const DeviceWeight dw(hw);
  kc::QuantWeight w = ViewOf(c, hw, dw);
  std::vector<float> dense(static_cast<std::size_t>(c.n * c.k));
  kcpu::DequantizeWeight(HostView(c, hw), c.n, c.k, dense.data(), nullptr);

  const std::int64_t max_m = *std::max_element(c.rows.begin(), c.rows.end());
  Scratch scratch(kc::QuantLinearScratchBytes(c.kind, max_m, c.n, c.k, c.n * c.k, 2));
  for (std::int64_t m : c.rows) {
    const bool with_bias = m % 2 == 1, accumulate = m == 3 || m == 200;
    const auto n_x = static_cast<std::size_t>(m * c.k), n_y = static_cast<std::size_t>(m * c.n);
    const std::vector<float> x = RoundTo(c.dtype, RandomVector(n_x, -2.0f, 2.0f));
    const std::vector<float> bias =
        RoundTo(c.dtype, RandomVector(static_cast<std::size_t>(c.n), -1, 1));
    const std::vector<float> y0 = RoundTo(c.dtype, RandomVector(n_y, -2.0f, 2.0f));
    float input_scale = 0.0f;
    if (c.static_scale) {
      // A calibrated scale a little under the amax: the largest inputs saturate, as they may.
      float amax = 0.0f;
      for (float v : x) amax = std::max(amax, std::fabs(v));
      input_scale = amax / kFp8E4M3Max * 0.9f;
    }
    w.input_scale = input_scale;
    // The reference: the CPU runner's fp32 E4M3 rounding of the inputs, then an fp64 dot product.
    std::vector<float> xq = x;
    if (c.kind == kc::QuantWeightKind::kFp8E4M3)
      kcpu::QuantizeActivationsFp8(xq.data(), m, c.k, c.k, input_scale);
    std::vector<float> expected(n_y), mag(n_y);
    for (std::int64_t t = 0; t < m; ++t) {
      for (std::int64_t o = 0; o < c.n; ++o) {
        double sum = 0.0, abs_sum = 0.0;
        for (std::int64_t i = 0; i < c.k; ++i) {
          const double p = static_cast<double>(xq[t * c.k + i]) * dense[o * c.k + i];
          sum += p;
          abs_sum += std::fabs(p);
        }
        const std::size_t at = static_cast<std::size_t>(t * c.n + o);
        if (with_bias) {
          sum += bias[o];
          abs_sum += std::fabs(bias[o]);
        }
        if (accumulate) {
          sum += y0[at];
          abs_sum += std::fabs(y0[at]);
        }
        expected[at] = static_cast<float>(sum);
        mag[at] = static_cast<float>(abs_sum);
      }
    }
    DeviceArray<std::uint16_t> d_bias(ToBits(c.dtype, bias));
    // Each path; the FP8 GEMM twice: scales in the epilogue kernel, and in cuBLASLt (scalars for a
    // per-tensor weight under a static scale, else outer vectors) where the library offers that
    // (else the epilogue again, said so); the mixed GEMM twice: k split over the grid into the
    // scratch, and whole (no scratch).
    struct Variant {
      kc::QuantLinearPath path;
      bool alternate;  // the FP8 GEMM's cuBLASLt scales, the mixed GEMM's whole k
    };
    std::vector<Variant> paths = {{kc::QuantLinearPath::kDequantGemm, false}};
    if (m <= kc::kQuantGemvMaxRows && c.k % kc::QuantColumnsPerChunk(c.kind) == 0) {
      paths.push_back({kc::QuantLinearPath::kGemv, false});
    }
    if (fp8_gemm != nullptr && c.kind == kc::QuantWeightKind::kFp8E4M3) {
      paths.push_back({kc::QuantLinearPath::kFp8Gemm, false});
      paths.push_back({kc::QuantLinearPath::kFp8Gemm, true});
    }
    if (kc::QuantMixedGemmLayoutTakes(c.kind, c.k, c.group_size, c.per_tensor, c.g_idx)) {
      paths.push_back({kc::QuantLinearPath::kMixedGemm, false});
      paths.push_back({kc::QuantLinearPath::kMixedGemm, true});
    }
    for (const auto& [path, alternate] : paths) {
      DeviceArray<std::uint16_t> d_x(ToBits(c.dtype, x));
      // The old y: random when accumulating, NaN (never read) otherwise.
      DeviceArray<std::uint16_t> d_y(
          accumulate ? ToBits(c.dtype, y0) : std::vector<std::uint16_t>(n_y, NanBits(c.dtype)));
      linear.force_path(path);
      const bool gemm_scales = alternate && path == kc::QuantLinearPath::kFp8Gemm;
      const bool whole_k = alternate && path == kc::QuantLinearPath::kMixedGemm;
      linear.set_fp8_outer_vector_scales(gemm_scales);
      linear.set_fp8_scalar_scales(gemm_scales);
      std::string variant;
      kc::QuantScratch run_scratch = scratch.view;
      if (whole_k) {
        variant = " k whole";
        run_scratch.weight_bytes = 0;
      } else if (gemm_scales) {
        const bool runs = !c.scalar_runs.empty() && c.static_scale;
        const bool scalars = (c.per_tensor || runs) && c.static_scale;
        bool offered = true;
        std::int64_t begin = 0;
        for (std::size_t r = 0; r <= (runs ? c.scalar_runs.size() : 0); ++r) {
          const std::int64_t end = runs && r < c.scalar_runs.size() ? c.scalar_runs[r] : c.n;
          offered =
              offered && fp8_gemm->OffersScaled(c.dtype, m, end - begin, c.k,
                                                {!c.per_tensor && !runs, !scalars}, with_bias, c.n);
          begin = end;
        }
        variant = std::string(runs      ? " scalar runs"
                              : scalars ? " scalar"
                                        : " outer-vector") +
                  " scales" + (offered ? "" : " not offered: epilogue");
        // Every FP8 device has the scalar-scaled GEMM (the classic FP8 mode).
        if (scalars && !offered && !with_bias) {
          Fail(c.name + " m=" + std::to_string(m) + ": cuBLASLt offers no scalar-scaled FP8 GEMM");
        }
      }
      const kc::QuantLinearPath ran = linear.PathFor(w, c.dtype, m, c.n, c.k, d_x.get(), c.k);
      const std::string name = c.name + " " + Describe(c.dtype) + " m=" + std::to_string(m) +
                               " path=" + kc::QuantLinearPathName(path) + variant +
                               (with_bias ? " +bias" : "") + (accumulate ? " +=" : "");
      if (ran != path) {
        Fail(name + ": the forced path is not taken (got " + kc::QuantLinearPathName(ran) + ")");
        continue;
      }
      CUDA_OK(linear.Run(d_y.get(), c.n, d_x.get(), c.k, w, with_bias ? d_bias.get() : nullptr,
                         c.dtype, m, c.n, c.k, accumulate, run_scratch, nullptr));
      const std::vector<float> found = FromBits(c.dtype, d_y.Download());
      double err2 = 0.0, ref2 = 0.0, worst = 0.0;
      std::size_t bad = 0, first_bad = n_y;
      const double eps = Epsilon(c.dtype);
      for (std::size_t i = 0; i < n_y; ++i) {
        const double d = static_cast<double>(found[i]) - expected[i];
        err2 += d * d;
        ref2 += static_cast<double>(expected[i]) * expected[i];
        const double rel = std::fabs(d) / std::max(1e-30, static_cast<double>(mag[i]));
        worst = std::max(worst, std::isnan(d) ? 1e30 : rel);
        if (!(std::fabs(d) <= 3.0 * eps * mag[i])) {
          if (bad++ == 0) first_bad = i;
        }
      }
      std::printf("  %-70s NMSE %.3g  max |err|/mag %.3g (bound %.3g)\n", name.c_str(), err2 / ref2,
                  worst, 3.0 * eps);
      if (bad > 0) {
        Fail(name + ": " + std::to_string(bad) + " of " + std::to_string(n_y) +
             " outputs past 3 eps * mag; first at " + std::to_string(first_bad) + ": found " +
             std::to_string(found[first_bad]) + ", expected " +
             std::to_string(expected[first_bad]) + ", mag " + std::to_string(mag[first_bad]) +
             ", seed " + std::to_string(Seed()));
      }
    }
    linear.force_path(std::nullopt);
    linear.set_fp8_outer_vector_scales(false);
    linear.set_fp8_scalar_scales(true);
  }
}

struct Engines {
  Engines() : fp8_available(kc::CublasLtFp8Gemm::DeviceSupportsFp8()) {
    GPU_CHECK(gemm.status() == CUBLAS_STATUS_SUCCESS, "cuBLASLt init");
    GPU_CHECK(fp8_gemm.status() == CUBLAS_STATUS_SUCCESS, "cuBLASLt init (FP8)");
  }
  // Whether the device has FP8 tensor cores; says so when it has none (nothing to compare).
  bool Fp8OrSay() const {
    if (!fp8_available) std::printf("  no FP8 tensor cores on this device: nothing to compare\n");
    return fp8_available;
  }
  kc::CublasLtGemm gemm;
  kc::CublasLtFp8Gemm fp8_gemm;
  bool fp8_available;
};

// K = 4096 + 128 and N = 688: not powers of two, several GEMV row passes, a partial last group.
constexpr std::int64_t kN = 688, kK = 4096 + 128;

GPU_TEST(QuantLinearFp8MatchesCpu) {
  Engines e;
  kc::QuantLinear linear(e.gemm, e.fp8_available ? &e.fp8_gemm : nullptr);
  QuantCase c{"fp8 per-channel dynamic", kc::QuantWeightKind::kFp8E4M3, kN, kK};
  CheckCase(c, linear, e.fp8_available ? &e.fp8_gemm : nullptr);
  c.name = "fp8 per-channel static";
  c.static_scale = true;
  CheckCase(c, linear, e.fp8_available ? &e.fp8_gemm : nullptr);
  c.name = "fp8 per-tensor static";
  c.per_tensor = true;
  c.dtype = DType::kFloat16;
  CheckCase(c, linear, e.fp8_available ? &e.fp8_gemm : nullptr);
  // A checkpoint's per-tensor q, k and v fused: three runs of one scale (rows 384 and 512 start
  // 256-byte aligned columns of a 2-byte output, as an 8B model's 4096 and 5120 do).
  c.name = "fp8 q/k/v runs static";
  c.per_tensor = false;
  c.scalar_runs = {384, 512};
  c.dtype = DType::kBFloat16;
  CheckCase(c, linear, e.fp8_available ? &e.fp8_gemm : nullptr);
}

// RunSwiGlu (the FP8 GEMM's epilogue fused with SwiGLU) against Run then the SwiGLU kernel: the
// same bits, with and without a bias, over several scratch chunks (a 64-row scratch for 200 rows);
// at GEMV sizes it refuses (cudaErrorNotSupported) and writes nothing.
GPU_TEST(QuantLinearFp8SwiGluEqualsRunThenSwiGlu) {
  Engines e;
  if (!e.Fp8OrSay()) return;
  kc::QuantLinear linear(e.gemm, &e.fp8_gemm);
  const std::int64_t inter = kN / 2, k = kK;
  const QuantCase c{"fp8 gate/up", kc::QuantWeightKind::kFp8E4M3, 2 * inter, k};
  const HostWeight hw = MakeWeight(c);
  const DeviceWeight dw(hw);
  const kc::QuantWeight w = ViewOf(c, hw, dw);
  Scratch scratch(kc::QuantLinearScratchBytes(c.kind, 64, c.n, k, c.n * k, 2));
  DeviceArray<std::uint16_t> d_bias(
      ToBits(c.dtype, RoundTo(c.dtype, RandomVector(static_cast<std::size_t>(c.n), -1, 1))));
  for (std::int64_t m : {3, 9, 200}) {
    const auto n_act = static_cast<std::size_t>(m * inter);
    const std::vector<std::uint16_t> x =
        ToBits(c.dtype, RandomVector(static_cast<std::size_t>(m * k), -2.0f, 2.0f));
    const void* bias = m == 9 ? nullptr : d_bias.get();
    DeviceArray<std::uint16_t> x_fused(x), x_plain(x);
    DeviceArray<std::uint16_t> fused(std::vector<std::uint16_t>(n_act, NanBits(c.dtype)));
    DeviceArray<std::uint16_t> gate_up(static_cast<std::size_t>(m * c.n)), plain(n_act);
    const cudaError_t err = linear.RunSwiGlu(fused.get(), x_fused.get(), k, w, bias, c.dtype, m,
                                             inter, k, scratch.view, nullptr);
    const std::string name = "m=" + std::to_string(m) + (bias ? " +bias" : "");
    if (linear.PathFor(w, c.dtype, m, c.n, k, x_plain.get(), k) != kc::QuantLinearPath::kFp8Gemm) {
      GPU_CHECK(err == cudaErrorNotSupported, name + ": a GEMV-sized call is not refused");
      const std::vector<std::uint16_t> untouched = fused.Download();
      GPU_CHECK(std::all_of(untouched.begin(), untouched.end(),
                            [&](std::uint16_t b) { return b == NanBits(c.dtype); }),
                name + ": a refused call wrote its output");
      continue;
    }
    CUDA_OK(err);
    CUDA_OK(linear.Run(gate_up.get(), c.n, x_plain.get(), k, w, bias, c.dtype, m, c.n, k, false,
                       scratch.view, nullptr));
    CUDA_OK(kc::SwiGlu(plain.get(), gate_up.get(), c.dtype, m, inter, nullptr));
    const std::vector<std::uint16_t> a = fused.Download(), b = plain.Download();
    std::size_t differ = 0;
    for (std::size_t i = 0; i < n_act; ++i) differ += a[i] != b[i];
    std::printf("  fused SwiGLU epilogue %-12s %zu of %zu outputs differ from Run + SwiGlu\n",
                name.c_str(), differ, n_act);
    GPU_CHECK(differ == 0, name + ": " + std::to_string(differ) + " outputs differ");
  }
}

GPU_TEST(QuantLinearInt8MatchesCpu) {
  Engines e;
  kc::QuantLinear linear(e.gemm, nullptr);
  QuantCase c{"int8 per-channel", kc::QuantWeightKind::kInt8, kN, kK};
  CheckCase(c, linear, nullptr);
  c.name = "int8 group 128 zeros";
  c.group_size = 128;
  c.zeros = true;
  c.dtype = DType::kFloat16;
  CheckCase(c, linear, nullptr);
  // A group smaller than a 16-column code chunk and not dividing it: scales per column.
  c.name = "int8 group 24 zeros";
  c.group_size = 24;
  c.dtype = DType::kBFloat16;
  CheckCase(c, linear, nullptr);
  // Rows that are not whole 8-element vectors: the scalar dequantizing kernel.
  c.name = "int8 per-channel k=4100";
  c.group_size = 0;
  c.zeros = false;
  c.k = 4100;
  CheckCase(c, linear, nullptr);
}

GPU_TEST(QuantLinearInt4MatchesCpu) {
  Engines e;
  kc::QuantLinear linear(e.gemm, nullptr);
  QuantCase c{"int4 group 128 zeros", kc::QuantWeightKind::kInt4, kN, kK, 128};
  c.zeros = true;
  CheckCase(c, linear, nullptr);
  c.name = "int4 group 128 implicit zero";
  c.zeros = false;
  c.dtype = DType::kFloat16;
  CheckCase(c, linear, nullptr);
  c.name = "int4 group 128 g_idx (act-order) zeros";
  c.zeros = true;
  c.g_idx = true;
  c.dtype = DType::kBFloat16;
  CheckCase(c, linear, nullptr);
  // Groups of 32 columns: each lane of the mixed GEMM in a group of its own.
  c.name = "int4 group 32 zeros";
  c.group_size = 32;
  c.g_idx = false;
  c.rows = {9, 33};
  CheckCase(c, linear, nullptr);
  c.rows = QuantCase{}.rows;
  c.name = "int4 group 48 zeros";
  c.group_size = 48;
  c.g_idx = false;
  CheckCase(c, linear, nullptr);
}

// One row with more output rows than the one-row kernel's resident warps (3,168 on an H200), so
// each warp carries its loads from one row's last batch into its next row's first.
GPU_TEST(QuantGemvOneRowManyRowsPerWarp) {
  Engines e;
  kc::QuantLinear linear(e.gemm, e.fp8_available ? &e.fp8_gemm : nullptr);
  const std::int64_t n = 20000 + 8;
  QuantCase c{"fp8 per-channel dynamic n=20008", kc::QuantWeightKind::kFp8E4M3, n, kK};
  c.rows = {1};
  c.dtype = DType::kFloat16;
  CheckCase(c, linear, nullptr);
  c = {"int8 group 128 zeros n=20008", kc::QuantWeightKind::kInt8, n, kK, 128};
  c.zeros = true;
  c.rows = {1};
  CheckCase(c, linear, nullptr);
  c = {"int4 group 128 zeros n=20008", kc::QuantWeightKind::kInt4, n, kK, 128};
  c.zeros = true;
  c.rows = {1};
  CheckCase(c, linear, nullptr);
}

// K = 4096 + 16: int4 rows are not whole 16-byte chunks, so even one row takes the fallback.
GPU_TEST(QuantLinearInt4OddColumnsFallsBack) {
  Engines e;
  kc::QuantLinear linear(e.gemm, nullptr);
  kc::QuantWeight w;
  w.kind = kc::QuantWeightKind::kInt4;
  DeviceArray<std::uint8_t> codes(16);
  w.codes = codes.get();
  GPU_CHECK(linear.PathFor(w, DType::kBFloat16, 1, 64, 4096 + 16, codes.get(), 4096 + 16) ==
                kc::QuantLinearPath::kDequantGemm,
            "int4 k=4112 should take the dequantizing fallback");
  QuantCase c{"int4 k=4112 group 16", kc::QuantWeightKind::kInt4, 96, 4096 + 16, 16};
  c.zeros = true;
  CheckCase(c, linear, nullptr);
}

// RunFp8Rows and RunSwiGluFp8Rows, fed the codes and scales the quantize pass makes of x, against
// Run and RunSwiGlu (+ the quantize pass of act) on x itself: the same bits, over several scratch
// chunks (a 64-row scratch for 200 rows, a short last chunk), with accumulation into y.
GPU_TEST(QuantLinearFp8RowsEqualRun) {
  Engines e;
  if (!e.Fp8OrSay()) return;
  kc::QuantLinear linear(e.gemm, &e.fp8_gemm);
  const std::int64_t inter = kN / 2, k = kK;
  for (const bool static_scale : {false, true}) {
    QuantCase c{"fp8 gate/up", kc::QuantWeightKind::kFp8E4M3, 2 * inter, k};
    c.per_tensor = static_scale;
    const HostWeight hw = MakeWeight(c);
    const DeviceWeight dw(hw);
    kc::QuantWeight w = ViewOf(c, hw, dw);
    // A static scale near the inputs' amax / 448 (they lie in [-2, 2]); the act codes take theirs.
    const float act_scale = static_scale ? 0.02f : 0.0f;
    w.input_scale = static_scale ? 2.1f / 448.0f : 0.0f;
    Scratch scratch(kc::QuantLinearScratchBytes(c.kind, 64, c.n, k, c.n * k, 2));
    for (std::int64_t m : {9, 200}) {
      const std::string name =
          std::string(static_scale ? "static" : "dynamic") + " m=" + std::to_string(m);
      if (!linear.TakesFp8Rows(w, c.dtype, m, c.n, k, scratch.view.raw_out, k, scratch.view)) {
        GPU_CHECK(m < 9, name + ": the FP8 GEMM path refused rows it should take");
        continue;
      }
      const std::vector<std::uint16_t> x =
          ToBits(c.dtype, RandomVector(static_cast<std::size_t>(m * k), -2.0f, 2.0f));
      DeviceArray<std::uint16_t> x_plain(x), x_quant(x);
      DeviceArray<std::uint8_t> codes(static_cast<std::size_t>(m * k));
      DeviceArray<float> scales(static_cast<std::size_t>(m));
      CUDA_OK(kc::QuantizeActivationsFp8(x_quant.get(), k, c.dtype, m, k, w.input_scale,
                                         codes.get(), scales.get(), nullptr));
      const kc::Fp8Rows rows{codes.get(), scales.get()};
      // A linear of n = 2 * inter outputs added onto y.
      const std::vector<std::uint16_t> y0 =
          ToBits(c.dtype, RandomVector(static_cast<std::size_t>(m * c.n), -1.0f, 1.0f));
      DeviceArray<std::uint16_t> y_rows(y0), y_run(y0);
      CUDA_OK(linear.RunFp8Rows(y_rows.get(), c.n, rows, w, nullptr, c.dtype, m, c.n, k, true,
                                scratch.view, nullptr));
      CUDA_OK(linear.Run(y_run.get(), c.n, x_plain.get(), k, w, nullptr, c.dtype, m, c.n, k, true,
                         scratch.view, nullptr));
      const std::vector<std::uint16_t> a = y_rows.Download(), b = y_run.Download();
      std::size_t differ = 0;
      for (std::size_t i = 0; i < a.size(); ++i) differ += a[i] != b[i];
      std::printf("  RunFp8Rows %-12s %zu of %zu outputs differ from Run\n", name.c_str(), differ,
                  a.size());
      GPU_CHECK(differ == 0, name + ": " + std::to_string(differ) + " outputs differ from Run");

      // Gate/up + SwiGLU with the activations going out as codes.
      const auto n_act = static_cast<std::size_t>(m * inter);
      DeviceArray<std::uint8_t> act_codes(n_act), ref_codes(n_act);
      DeviceArray<float> act_scales(static_cast<std::size_t>(m)),
          ref_scales(static_cast<std::size_t>(m));
      DeviceArray<std::uint16_t> act(n_act), x_swiglu(x);
      CUDA_OK(linear.RunSwiGluFp8Rows({act_codes.get(), act_scales.get()}, act_scale, rows, w,
                                      nullptr, c.dtype, m, inter, k, scratch.view, nullptr));
      CUDA_OK(linear.RunSwiGlu(act.get(), x_swiglu.get(), k, w, nullptr, c.dtype, m, inter, k,
                               scratch.view, nullptr));
      CUDA_OK(kc::QuantizeActivationsFp8(act.get(), inter, c.dtype, m, inter, act_scale,
                                         ref_codes.get(), ref_scales.get(), nullptr));
      const std::vector<std::uint8_t> ca = act_codes.Download(), cb = ref_codes.Download();
      std::size_t code_differ = 0, nonzero = 0;
      for (std::size_t i = 0; i < n_act; ++i) {
        code_differ += ca[i] != cb[i];
        nonzero += (ca[i] & 0x7f) != 0;
      }
      const std::vector<float> sa = act_scales.Download(), sb = ref_scales.Download();
      std::printf("  RunSwiGluFp8Rows %-12s %zu of %zu codes differ; scales %s\n", name.c_str(),
                  code_differ, n_act, sa == sb ? "equal" : "DIFFER");
      GPU_CHECK(code_differ == 0 && sa == sb, name + ": the SwiGLU codes differ");
      GPU_CHECK(nonzero > n_act / 2, name + ": most act codes are zero: nothing was compared");
    }
  }
}

}  // namespace
}  // namespace inflight::gpu_test
