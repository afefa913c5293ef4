// The sampling kernels against the CPU sampler (executor/sampling: ApplyLogitsProcessors, Sample)
// on fresh random rows at awkward sizes:
//   SampleRows   the processed row bit for bit; the token equal to Sample's except where the host's
//                own double sums put a decision within 1e-6 of a boundary (counted, printed); the
//                log-probability within float rounding; the error codes of unsampleable rows
//   ArgMax, SampleTopKTopP   the older launchers, against an exact host reference
// plus draw frequencies against the truncated distribution.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <string>

#include "executor/sampling/decode_context.h"
#include "executor/sampling/logits_processors.h"
#include "executor/sampling/philox.h"
#include "executor/sampling/sampler.h"
#include "gpu_test_util.h"
#include "kernels/cuda/sampling.h"

namespace inflight::gpu_test {
namespace {

namespace kc = kernels::cuda;
constexpr float kInf = std::numeric_limits<float>::infinity();

int HostArgMax(const float* row, int vocab) {
  int best = 0;
  for (int i = 1; i < vocab; ++i)
    if (row[i] > row[best]) best = i;
  return best;
}

// ---- SampleRows ----------------------------------------------------------------------------

// One row's request-side inputs, as the host sampler sees them.
struct HostRow {
  SamplingConfig config;
  VecTokens prompt, generated;
  std::optional<TokenIdType> end_id;
  std::vector<VecTokens> bad_words;
  std::vector<float> bias;  // empty: none
  std::uint64_t seed = 0;
  bool normalize = true;
  std::string Describe() const {
    const SamplingConfig& c = config;
    return "greedy " + std::to_string(c.IsGreedy()) + " T " +
           std::to_string(c.temperature.value_or(-1.0f)) + " k " +
           std::to_string(c.top_k.value_or(0)) + " p " + std::to_string(c.top_p.value_or(0.0f)) +
           " rep " + std::to_string(c.repetition_penalty.value_or(1.0f)) + " pres " +
           std::to_string(c.presence_penalty.value_or(0.0f)) + " freq " +
           std::to_string(c.frequency_penalty.value_or(0.0f)) + " min_tokens " +
           std::to_string(c.min_tokens.value_or(0)) + " bad words " +
           std::to_string(bad_words.size()) + " bias " + (bias.empty() ? "no" : "yes") +
           " history " + std::to_string(prompt.size()) + "+" + std::to_string(generated.size()) +
           " normalize " + std::to_string(normalize);
  }
  sampling::DecodeContext Context() const {
    sampling::DecodeContext ctx;
    ctx.prompt = prompt;
    ctx.generated = generated;
    ctx.end_id = end_id;
    ctx.bad_words = bad_words;
    ctx.embedding_bias = bias;
    return ctx;
  }
};

// A random row set-up: every processor in turn, alone and mixed, greedy and sampled.
HostRow RandomHostRow(int r, int vocab) {
  std::mt19937_64& rng = Rng();
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  // A small pool of ids, so histories repeat tokens.
  std::uniform_int_distribution<TokenIdType> tok(0, std::min(vocab, 40) - 1);
  HostRow h;
  h.seed = rng();
  h.normalize = r % 5 != 3;
  h.prompt.resize(1 + rng() % 20);
  for (auto& t : h.prompt) t = tok(rng);
  h.generated.resize(rng() % 30);
  for (auto& t : h.generated) t = tok(rng);
  SamplingConfig& c = h.config;
  switch (r % 6) {
    case 0:
      c.temperature = 0.0f;  // greedy
      break;
    case 1:
      c.top_k = 1;  // greedy with a temperature
      c.temperature = 0.5f + unit(rng);
      break;
    case 2:
      c.temperature = 0.4f + unit(rng);
      c.top_k = std::max(1, static_cast<int>(rng() % static_cast<std::uint64_t>(vocab)) / 3);
      break;
    case 3:
      c.temperature = r % 4 == 0 ? 1.0f : 0.6f + unit(rng);
      c.top_p = 0.05f + 0.9f * unit(rng);
      break;
    case 4:
      c.top_k = 1 + static_cast<int>(rng() % 64);
      c.top_p = 0.3f + 0.6f * unit(rng);
      break;
    default:
      c.temperature = 0.7f + unit(rng);
      c.top_p = 1.0f;  // the full vocabulary (temperature alone is greedy)
      break;
  }
  if (r % 3 != 0) c.repetition_penalty = r % 2 == 0 ? 0.6f : 1.7f;
  if (r % 4 < 2) c.presence_penalty = r % 8 < 4 ? 0.8f : -0.5f;
  if (r % 5 < 2) c.frequency_penalty = r % 10 < 5 ? 0.3f : -0.15f;
  if (r % 7 == 2) {
    c.min_tokens = static_cast<SizeType>(h.generated.size()) + 1;
    h.end_id = tok(rng);
  }
  if (r % 4 == 1) {
    // Multi-token words whose prefix ends the history (they ban), and random ones (they mostly
    // do not).
    const auto last = [&](std::size_t back) {
      return back < h.generated.size()
                 ? h.generated[h.generated.size() - 1 - back]
                 : h.prompt[h.prompt.size() - 1 -
                            std::min(back - h.generated.size(), h.prompt.size() - 1)];
    };
    h.bad_words.push_back({last(1), last(0), tok(rng)});
    h.bad_words.push_back({last(0), tok(rng)});
    h.bad_words.push_back({tok(rng)});
    h.bad_words.push_back({tok(rng), tok(rng), tok(rng)});
  }
  if (r % 5 == 4) {
    h.bias.resize(static_cast<std::size_t>(vocab));
    for (auto& b : h.bias) b = rng() % 23 == 0 ? -kInf : 3.0f * unit(rng) - 1.5f;
  }
  return h;
}

// The kernel's inputs for one row, built independently of the executor's builder: a map for the
// penalty counts, the host helpers for the bans.
void AddDeviceRow(const HostRow& h, int vocab, const float* device_bias,
                  std::vector<kc::SamplingParams>& params, std::vector<std::int32_t>& lists) {
  const SamplingConfig& c = h.config;
  kc::SamplingParams p;
  p.embedding_bias = h.bias.empty() ? nullptr : device_bias;
  p.uniform = sampling::PhiloxUniform(h.seed, 0);
  p.temperature = c.temperature.value_or(1.0f);
  p.top_k = c.top_k.value_or(0);
  p.top_p = c.top_p.value_or(0.0f);
  p.repetition_penalty = c.repetition_penalty.value_or(1.0f);
  p.presence_penalty = c.presence_penalty.value_or(0.0f);
  p.frequency_penalty = c.frequency_penalty.value_or(0.0f);
  p.greedy = c.IsGreedy() ? 1 : 0;
  p.normalize_log_prob = h.normalize ? 1 : 0;
  std::map<TokenIdType, std::int32_t> counts;
  if (p.repetition_penalty != 1.0f)
    for (TokenIdType t : h.prompt) counts.emplace(t, 0);
  for (TokenIdType t : h.generated) ++counts[t];
  p.penalty_offset = static_cast<std::int32_t>(lists.size());
  p.num_penalty_tokens = static_cast<std::int32_t>(counts.size());
  for (auto [t, n] : counts) {
    lists.push_back(t);
    lists.push_back(n);
  }
  VecTokens banned =
      sampling::BadWordBans(h.bad_words, h.prompt, h.generated, static_cast<std::size_t>(vocab));
  if (sampling::MinTokensBansEndId(static_cast<SizeType>(h.generated.size()),
                                   c.min_tokens.value_or(0), h.end_id,
                                   static_cast<std::size_t>(vocab))) {
    banned.push_back(*h.end_id);
  }
  std::sort(banned.begin(), banned.end());
  banned.erase(std::unique(banned.begin(), banned.end()), banned.end());
  p.ban_offset = static_cast<std::int32_t>(lists.size());
  p.num_banned = static_cast<std::int32_t>(banned.size());
  lists.insert(lists.end(), banned.begin(), banned.end());
  params.push_back(p);
}

// Whether a decision of Sample on this processed row sits within `tol` (relative to the masses
// involved) of a boundary: the top-p cut or the draw. Recomputes the host's double sums.
bool Borderline(const std::vector<float>& processed, const SamplingConfig& c, double u,
                double tol) {
  if (c.IsGreedy()) return false;
  const std::size_t n = processed.size();
  std::vector<TokenIdType> order;
  for (std::size_t i = 0; i < n; ++i)
    if (!std::isinf(processed[i])) order.push_back(static_cast<TokenIdType>(i));
  std::sort(order.begin(), order.end(), [&](TokenIdType a, TokenIdType b) {
    const float la = processed[static_cast<std::size_t>(a)];
    const float lb = processed[static_cast<std::size_t>(b)];
    return la != lb ? la > lb : a < b;
  });
  const int k = c.top_k.value_or(0);
  if (k > 0 && static_cast<std::size_t>(k) < order.size())
    order.resize(static_cast<std::size_t>(k));
  const double z_max = processed[static_cast<std::size_t>(order[0])];
  const auto mass = [&](TokenIdType t) {
    return std::exp(static_cast<double>(processed[static_cast<std::size_t>(t)]) - z_max);
  };
  double total = 0.0;
  for (TokenIdType t : order) total += mass(t);
  const float top_p = c.top_p.value_or(0.0f);
  if (top_p > 0.0f && top_p < 1.0f) {
    const double target = top_p * total;
    double cumulative = 0.0;
    std::size_t keep = 0;
    while (keep < order.size()) {
      const double before = cumulative;
      cumulative += mass(order[keep++]);
      if (std::fabs(before - target) <= tol * total ||
          std::fabs(cumulative - target) <= tol * total)
        return true;
      if (cumulative >= target) break;
    }
    order.resize(keep);
    total = cumulative;
  }
  std::sort(order.begin(), order.end());
  const double target = u * total;
  double cumulative = 0.0;
  for (TokenIdType t : order) {
    cumulative += mass(t);
    if (std::fabs(cumulative - target) <= tol * total) return true;
    if (cumulative > target) break;
  }
  return false;
}

// Runs SampleRows on `rows` random rows of `vocab` logits and checks each against the host.
// quantum > 0 rounds the logits to its multiples: long runs of equal values, so the selections'
// buckets hold many ties (and the candidate sets of truncated rows overflow more often).
void CheckSampleRows(int vocab, int rows, float quantum = 0.0f) {
  std::vector<HostRow> host(static_cast<std::size_t>(rows));
  for (int r = 0; r < rows; ++r) host[static_cast<std::size_t>(r)] = RandomHostRow(r, vocab);
  // Logits in [-4, 4], a tie for the maximum and ties around the middle; one NaN row and one
  // all-banned row (bias of -inf everywhere) when there are enough rows.
  auto logits = RandomVector(static_cast<std::size_t>(rows) * vocab, -4.0f, 4.0f);
  if (quantum > 0.0f) {
    for (float& l : logits) l = std::round(l / quantum) * quantum;
  }
  for (int r = 0; r < rows && vocab > 3; ++r) {
    float* row = logits.data() + static_cast<std::ptrdiff_t>(r) * vocab;
    const int top = HostArgMax(row, vocab);
    row[(top + 1 + r % 2) % vocab] = row[top];
    row[vocab / 2] = row[vocab / 3];
  }
  const int nan_row = rows >= 8 ? 5 : -1, banned_row = rows >= 8 ? 7 : -1;
  if (nan_row >= 0) logits[static_cast<std::size_t>(nan_row) * vocab + vocab / 2] = std::nanf("");
  if (banned_row >= 0) {
    host[static_cast<std::size_t>(banned_row)].bias.assign(static_cast<std::size_t>(vocab), -kInf);
  }

  std::vector<float> biases(static_cast<std::size_t>(rows) * vocab, 0.0f);
  for (int r = 0; r < rows; ++r) {
    const HostRow& h = host[static_cast<std::size_t>(r)];
    std::copy(h.bias.begin(), h.bias.end(),
              biases.begin() + static_cast<std::ptrdiff_t>(r) * vocab);
  }
  DeviceArray<float> d_bias(biases), d_logits(logits);
  std::vector<kc::SamplingParams> params;
  std::vector<std::int32_t> lists;
  for (int r = 0; r < rows; ++r) {
    AddDeviceRow(host[static_cast<std::size_t>(r)], vocab,
                 d_bias.get() + static_cast<std::ptrdiff_t>(r) * vocab, params, lists);
  }
  lists.push_back(0);  // never empty
  DeviceArray<kc::SamplingParams> d_params(params);
  DeviceArray<std::int32_t> d_lists(lists), d_ids(static_cast<std::size_t>(rows));
  DeviceArray<float> d_log_probs(static_cast<std::size_t>(rows));
  CUDA_OK(kc::SampleRows(d_ids.get(), d_log_probs.get(), d_logits.get(), rows, vocab, vocab,
                         d_params.get(), d_lists.get(), nullptr));
  const auto ids = d_ids.Download();
  const auto log_probs = d_log_probs.Download();
  const auto processed_device = d_logits.Download();

  int borderline = 0, checked_processed = 0;
  for (int r = 0; r < rows; ++r) {
    const HostRow& h = host[static_cast<std::size_t>(r)];
    const std::string where = "vocab=" + std::to_string(vocab) + " row " + std::to_string(r) +
                              " (" + h.Describe() + ") seed " + std::to_string(Seed());
    const float* raw = logits.data() + static_cast<std::ptrdiff_t>(r) * vocab;
    const sampling::DecodeContext ctx = h.Context();
    // 1. The processed row, bit for bit (NaN: only NaN).
    std::vector<float> processed(raw, raw + vocab);
    sampling::ApplyLogitsProcessors(processed, h.config, ctx);
    const float* found = processed_device.data() + static_cast<std::ptrdiff_t>(r) * vocab;
    for (int i = 0; i < vocab; ++i) {
      const float want = processed[static_cast<std::size_t>(i)];
      const bool same = std::isnan(want) ? std::isnan(found[i])
                                         : std::memcmp(&found[i], &want, sizeof(float)) == 0;
      if (!same) {
        Fail("processed logit " + std::to_string(i) + ", " + where + ": found " +
             std::to_string(found[i]) + " expected " + std::to_string(want));
        break;
      }
    }
    ++checked_processed;
    // 2. Token and log-probability.
    std::vector<float> work(raw, raw + vocab);
    sampling::SamplerState state(h.seed);
    const auto want = sampling::Sample(work, h.config, ctx, state, h.normalize);
    const std::int32_t got = ids[static_cast<std::size_t>(r)];
    const float got_lp = log_probs[static_cast<std::size_t>(r)];
    if (!want.ok()) {
      const bool nan_or_inf = want.status().message().find("is nan") != std::string::npos ||
                              want.status().message().find("is +inf") != std::string::npos;
      const std::int32_t code = nan_or_inf ? kc::kSampledNotFinite : kc::kSampledAllBanned;
      if (got != code || !std::isnan(got_lp)) {
        Fail("error row, " + where + ": found " + std::to_string(got) + " (log-prob " +
             std::to_string(got_lp) + ") expected code " + std::to_string(code) + " for \"" +
             want.status().ToString() + "\"");
      }
      continue;
    }
    // Near a boundary the device's float probabilities may decide the other way (another token,
    // or the same token from a kept set one token apart, which moves the normalised log-prob).
    if (Borderline(processed, h.config, sampling::PhiloxUniform(h.seed, 0), 1e-6)) {
      borderline += got != want->token ? 1 : 0;
      continue;
    }
    if (got != want->token) {
      Fail("token, " + where + ": found " + std::to_string(got) + " expected " +
           std::to_string(want->token));
      continue;
    }
    const float tol = 2e-5f + 2e-6f * std::fabs(want->log_prob);
    if (!(std::fabs(got_lp - want->log_prob) <= tol)) {
      Fail("log-prob of token " + std::to_string(got) + ", " + where + ": found " +
           std::to_string(got_lp) + " expected " + std::to_string(want->log_prob) + " tolerance " +
           std::to_string(tol));
    }
  }
  std::printf(
      "  SampleRows vocab=%d rows=%d: %d processed rows compared, %d tokens differ only at a "
      "rounding boundary\n",
      vocab, rows, checked_processed, borderline);
}

GPU_TEST(SampleRowsMatchesHostSampler) {
  std::uniform_int_distribution<int> num_rows(1, 64);
  for (int vocab : {1, 3, 1000, 128256}) {
    CheckSampleRows(vocab, 64);
    CheckSampleRows(vocab, num_rows(Rng()));
    // A decode batch of a few rows: rows are shared by thread-block clusters on sm_90.
    CheckSampleRows(vocab, 1);
    CheckSampleRows(vocab, 9);
  }
  for (int vocab : {5000, 128256}) {
    CheckSampleRows(vocab, 64, 0.25f);
    CheckSampleRows(vocab, 64, 1.0f / 64.0f);
  }
}

GPU_TEST(SampleRowsFrequenciesFollowTheProcessedDistribution) {
  // One row repeated, each with its own draw: a bias lifts ids 7, 500 and 20000 far above the
  // rest, a frequency penalty lowers 500, top_k 3 keeps those three. Every draw must be one of
  // them, with the frequencies of their renormalised processed probabilities.
  const int vocab = 32000, rows = 4000;
  auto row = RandomVector(static_cast<std::size_t>(vocab), -5, 0);
  std::vector<float> bias(static_cast<std::size_t>(vocab), 0.0f);
  bias[7] = 8.0f;
  bias[500] = 7.5f;
  bias[20000] = 7.0f;
  std::vector<float> logits;
  for (int r = 0; r < rows; ++r) logits.insert(logits.end(), row.begin(), row.end());
  DeviceArray<float> d_logits(logits), d_bias(bias);
  const std::vector<std::int32_t> lists = {500, 2};  // generated twice
  std::vector<kc::SamplingParams> params(static_cast<std::size_t>(rows));
  for (int r = 0; r < rows; ++r) {
    kc::SamplingParams& p = params[static_cast<std::size_t>(r)];
    p.embedding_bias = d_bias.get();
    p.uniform = sampling::PhiloxUniform(Seed(), static_cast<std::uint64_t>(r));
    p.top_k = 3;
    p.frequency_penalty = 0.25f;
    p.num_penalty_tokens = 1;
  }
  DeviceArray<kc::SamplingParams> d_params(params);
  DeviceArray<std::int32_t> d_lists(lists), d_ids(static_cast<std::size_t>(rows));
  CUDA_OK(kc::SampleRows(d_ids.get(), nullptr, d_logits.get(), rows, vocab, vocab, d_params.get(),
                         d_lists.get(), nullptr));
  const auto ids = d_ids.Download();
  const int kept[] = {7, 500, 20000};
  const double z[] = {static_cast<double>(row[7] + 8.0f),
                      static_cast<double>(row[500] + 7.5f - 2.0f * 0.25f),
                      static_cast<double>(row[20000] + 7.0f)};
  const double total = std::exp(z[0]) + std::exp(z[1]) + std::exp(z[2]);
  int counts[3] = {0, 0, 0};
  for (std::int32_t id : ids) {
    const int* at = std::find(std::begin(kept), std::end(kept), id);
    if (at == std::end(kept)) {
      Fail("drew id " + std::to_string(id) + " outside top-k {7, 500, 20000}, seed " +
           std::to_string(Seed()));
      return;
    }
    ++counts[at - std::begin(kept)];
  }
  for (int j = 0; j < 3; ++j) {
    const double prob = std::exp(z[j]) / total;
    const double freq = static_cast<double>(counts[j]) / rows;
    const double sigma = std::sqrt(prob * (1 - prob) / rows);
    std::printf("  id %d: frequency %.4f, probability %.4f (5 sigma = %.4f)\n", kept[j], freq, prob,
                5 * sigma);
    if (std::fabs(freq - prob) > 5 * sigma) {
      Fail("id " + std::to_string(kept[j]) + " frequency " + std::to_string(freq) +
           " vs probability " + std::to_string(prob) + ", seed " + std::to_string(Seed()));
    }
  }
}

// ---- ArgMax and SampleTopKTopP -------------------------------------------------------------

struct HostDraw {
  int token = -1;
  bool borderline = false;  // the draw or the top-p cut sits within float rounding of a boundary
};

// SampleTopKTopP's contract: z = logits * (1 / temperature), then top-k, top-p and the draw.
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
      if (std::fabs(cumulative - top_p) < 1e-6) out.borderline = true;
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
    if (std::fabs(cumulative - u) < 1e-6) out.borderline = true;
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
    CUDA_OK(kc::ArgMax(d_ids.get(), d_logits.get(), rows, vocab, vocab, nullptr));
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

GPU_TEST(SampleTopKTopPMatchesHostReference) {
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
    CUDA_OK(kc::SampleTopKTopP(d_ids.get(), d_logits.get(), rows, vocab, vocab, d_t.get(),
                               d_k.get(), d_p.get(), d_u.get(), nullptr));
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
  CUDA_OK(kc::SampleTopKTopP(d_ids.get(), d_logits.get(), rows, vocab, vocab, nullptr, d_k.get(),
                             nullptr, d_u.get(), nullptr));
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
