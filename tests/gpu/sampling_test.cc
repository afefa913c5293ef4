// Argmax and top-k / top-p sampling on the device against an exact host reference of the executor
// sampler's rules (order: larger value first, then lower id; inverse CDF in ascending id order).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "gpu_test_util.h"
#include "kernels/cuda/sampling.h"

namespace inflight::gpu_test {
namespace {

int HostArgMax(const float* row, int vocab) {
  int best = 0;
  for (int i = 1; i < vocab; ++i)
    if (row[i] > row[best]) best = i;
  return best;
}

struct HostDraw {
  int token = -1;
  bool borderline = false;  // the draw or the top-p cut sits within float rounding of a boundary
};

HostDraw HostSample(const float* row, int vocab, float temperature, int top_k, float top_p,
                    float u) {
  HostDraw out;
  if (temperature <= 0.0f) {
    out.token = HostArgMax(row, vocab);
    return out;
  }
  const float inv_temp = 1.0f / temperature;
  std::vector<float> z(static_cast<std::size_t>(vocab));
  for (int i = 0; i < vocab; ++i) z[static_cast<std::size_t>(i)] = row[i] * inv_temp;
  std::vector<int> order(static_cast<std::size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return z[static_cast<std::size_t>(a)] != z[static_cast<std::size_t>(b)]
               ? z[static_cast<std::size_t>(a)] > z[static_cast<std::size_t>(b)]
               : a < b;
  });
  std::size_t keep = static_cast<std::size_t>(vocab);
  if (top_k > 0 && top_k < vocab) keep = static_cast<std::size_t>(top_k);
  const double z_max = z[static_cast<std::size_t>(order[0])];
  std::vector<double> p(static_cast<std::size_t>(vocab), 0.0);
  double total = 0.0;
  for (std::size_t r = 0; r < keep; ++r) {
    const auto i = static_cast<std::size_t>(order[r]);
    p[i] = std::exp(static_cast<double>(z[i]) - z_max);
    total += p[i];
  }
  if (top_p > 0.0f && top_p < 1.0f) {
    double cumulative = 0.0;
    std::size_t n = 0;
    while (n < keep) {
      cumulative += p[static_cast<std::size_t>(order[n])] / total;
      ++n;
      if (std::fabs(cumulative - top_p) < 1e-4) out.borderline = true;
      if (cumulative >= top_p) break;
    }
    for (std::size_t r = n; r < keep; ++r) p[static_cast<std::size_t>(order[r])] = 0.0;
    keep = n;
    total = 0.0;
    for (double x : p) total += x;
  }
  double cumulative = 0.0;
  for (int i = 0; i < vocab; ++i) {
    if (p[static_cast<std::size_t>(i)] == 0.0) continue;
    cumulative += p[static_cast<std::size_t>(i)] / total;
    if (std::fabs(cumulative - u) < 1e-4) out.borderline = true;
    if (cumulative > u && out.token < 0) out.token = i;
  }
  if (out.token < 0) {
    for (int i = vocab - 1; i >= 0; --i)
      if (p[static_cast<std::size_t>(i)] > 0.0) {
        out.token = i;
        break;
      }
  }
  return out;
}

GPU_TEST(ArgMaxMatchesHostWithTies) {
  for (int vocab : {1, 111, 32000, 128256}) {
    const int rows = 7;
    auto logits = RandomVector(static_cast<std::size_t>(rows * vocab), -10, 10);
    // Row 1: the maximum twice; the lower id must win.
    if (vocab > 10) {
      logits[static_cast<std::size_t>(vocab + vocab - 1)] = 50.0f;
      logits[static_cast<std::size_t>(vocab + vocab / 2)] = 50.0f;
    }
    DeviceArray<float> d_logits(logits);
    DeviceArray<std::int32_t> d_ids(static_cast<std::size_t>(rows));
    CUDA_OK(kernels::cuda::ArgMax(d_ids.get(), d_logits.get(), rows, vocab, vocab, nullptr));
    const auto ids = d_ids.Download();
    for (int r = 0; r < rows; ++r) {
      const int expected =
          HostArgMax(logits.data() + static_cast<std::ptrdiff_t>(r) * vocab, vocab);
      if (ids[static_cast<std::size_t>(r)] != expected) {
        Fail("argmax vocab=" + std::to_string(vocab) + " row " + std::to_string(r) + ": found " +
             std::to_string(ids[static_cast<std::size_t>(r)]) + " expected " +
             std::to_string(expected) + " seed " + std::to_string(Seed()));
      }
    }
  }
}

GPU_TEST(SampleMatchesHostReference) {
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  for (int vocab : {1, 111, 32000, 128256}) {
    const int rows = 48;
    // Peaked logits, so top-p cuts somewhere interesting; a few exact ties.
    auto logits = RandomVector(static_cast<std::size_t>(rows * vocab), -4, 4);
    for (int r = 0; r < rows && vocab > 3; ++r) {
      logits[static_cast<std::size_t>(r * vocab + 2)] =
          logits[static_cast<std::size_t>(r * vocab + 1)];
    }
    std::vector<float> temperature(static_cast<std::size_t>(rows)), top_p(temperature.size()),
        uniform(temperature.size());
    std::vector<std::int32_t> top_k(temperature.size());
    const int ks[] = {0, 1, 2, 5, 50, 1000};
    const float ps[] = {1.0f, 0.9f, 0.5f, 0.05f, 0.0f};
    for (int r = 0; r < rows; ++r) {
      const auto i = static_cast<std::size_t>(r);
      temperature[i] = r % 11 == 0 ? 0.0f : 0.3f + unit(Rng());
      top_k[i] = ks[r % 6];
      top_p[i] = ps[(r / 6) % 5];
      uniform[i] = unit(Rng());
    }
    DeviceArray<float> d_logits(logits), d_t(temperature), d_p(top_p), d_u(uniform);
    DeviceArray<std::int32_t> d_k(top_k), d_ids(static_cast<std::size_t>(rows));
    CUDA_OK(kernels::cuda::SampleTopKTopP(d_ids.get(), d_logits.get(), rows, vocab, vocab,
                                          d_t.get(), d_k.get(), d_p.get(), d_u.get(), nullptr));
    const auto ids = d_ids.Download();
    int borderline = 0;
    for (int r = 0; r < rows; ++r) {
      const auto i = static_cast<std::size_t>(r);
      const HostDraw want = HostSample(logits.data() + static_cast<std::ptrdiff_t>(r) * vocab,
                                       vocab, temperature[i], top_k[i], top_p[i], uniform[i]);
      if (ids[i] == want.token) continue;
      if (want.borderline) {
        ++borderline;
        continue;
      }
      Fail("sample vocab=" + std::to_string(vocab) + " row " + std::to_string(r) +
           " (t=" + std::to_string(temperature[i]) + " k=" + std::to_string(top_k[i]) +
           " p=" + std::to_string(top_p[i]) + " u=" + std::to_string(uniform[i]) + "): found " +
           std::to_string(ids[i]) + " expected " + std::to_string(want.token) + " seed " +
           std::to_string(Seed()));
    }
    std::printf("  sample vocab=%d: %d rows checked, %d differ only at a rounding boundary\n",
                vocab, rows, borderline);
  }
}

GPU_TEST(SampleFrequenciesFollowTruncatedDistribution) {
  // One logits row repeated: top_k = 3 keeps ids {7, 500, 20000}; every draw must be one of them
  // and their frequencies must follow the renormalised probabilities.
  const int vocab = 32000, rows = 4000;
  auto row = RandomVector(static_cast<std::size_t>(vocab), -5, 0);
  row[7] = 3.0f;
  row[500] = 2.0f;
  row[20000] = 2.5f;
  std::vector<float> logits;
  for (int r = 0; r < rows; ++r) logits.insert(logits.end(), row.begin(), row.end());
  const auto uniform = RandomVector(static_cast<std::size_t>(rows), 0.0f, 1.0f);
  DeviceArray<float> d_logits(logits), d_u(uniform);
  DeviceArray<std::int32_t> d_k(std::vector<std::int32_t>(static_cast<std::size_t>(rows), 3));
  DeviceArray<std::int32_t> d_ids(static_cast<std::size_t>(rows));
  CUDA_OK(kernels::cuda::SampleTopKTopP(d_ids.get(), d_logits.get(), rows, vocab, vocab, nullptr,
                                        d_k.get(), nullptr, d_u.get(), nullptr));
  const auto ids = d_ids.Download();
  const double e7 = std::exp(3.0), e500 = std::exp(2.0), e20000 = std::exp(2.5);
  const double total = e7 + e500 + e20000;
  const int ids_kept[] = {7, 500, 20000};
  const double probs[] = {e7 / total, e500 / total, e20000 / total};
  int counts[3] = {0, 0, 0};
  for (std::int32_t id : ids) {
    bool kept = false;
    for (int j = 0; j < 3; ++j)
      if (id == ids_kept[j]) {
        ++counts[j];
        kept = true;
      }
    if (!kept) {
      Fail("drew id " + std::to_string(id) + " outside top-k {7, 500, 20000}, seed " +
           std::to_string(Seed()));
      return;
    }
  }
  for (int j = 0; j < 3; ++j) {
    const double freq = static_cast<double>(counts[j]) / rows;
    const double sigma = std::sqrt(probs[j] * (1 - probs[j]) / rows);
    std::printf("  id %d: frequency %.4f, probability %.4f (5 sigma = %.4f)\n", ids_kept[j], freq,
                probs[j], 5 * sigma);
    if (std::fabs(freq - probs[j]) > 5 * sigma) {
      Fail("id " + std::to_string(ids_kept[j]) + " frequency " + std::to_string(freq) +
           " vs probability " + std::to_string(probs[j]) + ", seed " + std::to_string(Seed()));
    }
  }
}

}  // namespace
}  // namespace inflight::gpu_test
