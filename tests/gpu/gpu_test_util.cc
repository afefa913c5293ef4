#include "gpu_test_util.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace inflight::gpu_test {
namespace {

struct TestCase {
  const char* name;
  void (*fn)();
};

std::vector<TestCase>& Registry() {
  static std::vector<TestCase> tests;
  return tests;
}

struct TestAborted {};

bool g_failed = false;

}  // namespace

Registrar::Registrar(const char* name, void (*fn)()) {
  Registry().push_back({name, fn});
}

void Fail(const std::string& message) {
  g_failed = true;
  std::printf("  FAILURE: %s\n", message.c_str());
}

void Abort(const char* file, int line, const std::string& message) {
  Fail(std::string(file) + ":" + std::to_string(line) + ": " + message);
  throw TestAborted{};
}

std::uint64_t Seed() {
  static const std::uint64_t seed = [] {
    if (const char* env = std::getenv("INFLIGHT_GPU_TEST_SEED"))
      return static_cast<std::uint64_t>(std::strtoull(env, nullptr, 10));
    std::random_device rd;
    return (static_cast<std::uint64_t>(rd()) << 32) ^ static_cast<std::uint64_t>(rd());
  }();
  return seed;
}

std::mt19937_64& Rng() {
  static std::mt19937_64 rng(Seed());
  return rng;
}

std::vector<float> RandomVector(std::size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(Rng());
  return v;
}

float Epsilon(DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
      return 1.0f / 1024.0f;
    case DType::kBFloat16:
      return 1.0f / 128.0f;
    default:
      return 1.1920929e-7f;
  }
}

std::vector<std::uint16_t> ToBits(DType dtype, const std::vector<float>& v) {
  std::vector<std::uint16_t> bits(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    bits[i] = dtype == DType::kFloat16 ? FloatToFp16(v[i]) : FloatToBf16(v[i]);
  }
  return bits;
}

std::vector<float> FromBits(DType dtype, const std::vector<std::uint16_t>& bits) {
  std::vector<float> v(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) {
    v[i] = dtype == DType::kFloat16 ? Fp16ToFloat(bits[i]) : Bf16ToFloat(bits[i]);
  }
  return v;
}

std::vector<float> RoundTo(DType dtype, const std::vector<float>& v) {
  return FromBits(dtype, ToBits(dtype, v));
}

std::uint16_t NanBits(DType dtype) {
  return dtype == DType::kFloat16 ? 0x7e00 : 0x7fc0;
}

bool ExpectClose(const std::string& what, const std::vector<float>& found,
                 const std::vector<float>& expected, float atol, float rtol) {
  if (found.size() != expected.size()) {
    Fail(what + ": size " + std::to_string(found.size()) + ", expected " +
         std::to_string(expected.size()));
    return false;
  }
  std::size_t bad = 0;
  double worst = 0.0;
  for (std::size_t i = 0; i < found.size(); ++i) {
    const float f = found[i], e = expected[i];
    const float tol = atol + rtol * std::fabs(e);
    bool ok;
    if (std::isnan(e) || std::isnan(f)) {
      ok = std::isnan(e) && std::isnan(f);
    } else {
      ok = std::fabs(f - e) <= tol;
      worst = std::max(worst, static_cast<double>(std::fabs(f - e)) / tol);
    }
    if (!ok) {
      if (bad < 5) {
        std::printf("  mismatch %s [%zu]: found %.7g expected %.7g tolerance %.3g (seed %llu)\n",
                    what.c_str(), i, static_cast<double>(f), static_cast<double>(e),
                    static_cast<double>(tol), static_cast<unsigned long long>(Seed()));
      }
      ++bad;
    }
  }
  if (bad > 0) {
    Fail(what + ": " + std::to_string(bad) + " of " + std::to_string(found.size()) +
         " elements out of tolerance");
    return false;
  }
  std::printf("  ok %s: %zu elements, worst error %.2f of tolerance\n", what.c_str(), found.size(),
              worst);
  return true;
}

bool ExpectCloseThroughFp8(const std::string& what, const std::vector<float>& found,
                           const std::vector<float>& expected, float atol, float hard_atol,
                           double max_fraction_over) {
  if (found.size() != expected.size()) {
    Fail(what + ": size " + std::to_string(found.size()) + ", expected " +
         std::to_string(expected.size()));
    return false;
  }
  std::size_t over = 0, beyond_hard = 0;
  double worst = 0.0;
  for (std::size_t i = 0; i < found.size(); ++i) {
    const float f = found[i], e = expected[i];
    const double err = std::isnan(f) || std::isnan(e) ? INFINITY : std::fabs(f - e);
    worst = std::max(worst, err);
    if (err > atol) ++over;
    if (err > hard_atol) {
      if (beyond_hard < 5) {
        std::printf(
            "  mismatch %s [%zu]: found %.7g expected %.7g hard tolerance %.3g (seed %llu)\n",
            what.c_str(), i, static_cast<double>(f), static_cast<double>(e),
            static_cast<double>(hard_atol), static_cast<unsigned long long>(Seed()));
      }
      ++beyond_hard;
    }
  }
  const double fraction = found.empty() ? 0.0 : static_cast<double>(over) / found.size();
  std::printf(
      "  %s %s: %zu elements, %zu over %.3g (%.2f%%, allowed %.2f%%), worst error %.3g "
      "(hard bound %.3g)\n",
      beyond_hard == 0 && fraction <= max_fraction_over ? "ok" : "FAIL", what.c_str(), found.size(),
      over, static_cast<double>(atol), 100.0 * fraction, 100.0 * max_fraction_over, worst,
      static_cast<double>(hard_atol));
  if (beyond_hard > 0 || fraction > max_fraction_over) {
    Fail(what + ": " + std::to_string(over) + " of " + std::to_string(found.size()) +
         " elements over the tolerance, " + std::to_string(beyond_hard) + " over the hard bound");
    return false;
  }
  return true;
}

HostPagedBatch MakePagedBatch(const std::vector<int>& query_lens, const std::vector<int>& cached,
                              int tokens_per_block) {
  HostPagedBatch b;
  b.tokens_per_block = tokens_per_block;
  const int num_seqs = static_cast<int>(query_lens.size());
  b.query_start.push_back(0);
  std::vector<int> blocks_needed;
  int total_blocks = 0;
  for (int s = 0; s < num_seqs; ++s) {
    const int kv_len = cached[s] + query_lens[s];
    b.query_start.push_back(b.query_start.back() + query_lens[s]);
    b.num_cached.push_back(cached[s]);
    b.max_query_len = std::max(b.max_query_len, query_lens[s]);
    b.max_kv_len = std::max(b.max_kv_len, kv_len);
    blocks_needed.push_back((kv_len + tokens_per_block - 1) / tokens_per_block);
    total_blocks += blocks_needed.back();
    b.max_blocks_per_seq = std::max(b.max_blocks_per_seq, blocks_needed.back() + 1);
  }
  b.num_blocks = total_blocks + 3;
  std::vector<std::int32_t> perm(static_cast<std::size_t>(b.num_blocks));
  for (int i = 0; i < b.num_blocks; ++i) perm[static_cast<std::size_t>(i)] = i;
  std::shuffle(perm.begin(), perm.end(), Rng());
  b.block_tables.assign(static_cast<std::size_t>(num_seqs * b.max_blocks_per_seq), 1 << 30);
  std::size_t next = 0;
  for (int s = 0; s < num_seqs; ++s) {
    for (int j = 0; j < blocks_needed[static_cast<std::size_t>(s)]; ++j) {
      b.block_tables[static_cast<std::size_t>(s * b.max_blocks_per_seq + j)] = perm[next++];
    }
  }
  return b;
}

DevicePagedBatch::DevicePagedBatch(const HostPagedBatch& host)
    : query_start(host.query_start), num_cached(host.num_cached), block_tables(host.block_tables) {
  batch.num_seqs = host.num_seqs();
  batch.num_tokens = host.num_tokens();
  batch.max_query_len = host.max_query_len;
  batch.max_kv_len = host.max_kv_len;
  batch.query_start = query_start.get();
  batch.num_cached = num_cached.get();
  batch.block_tables = block_tables.get();
  batch.max_blocks_per_seq = host.max_blocks_per_seq;
}

std::string Describe(DType dtype) {
  return DTypeName(dtype);
}

}  // namespace inflight::gpu_test

int main(int argc, char** argv) {
  using namespace inflight::gpu_test;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("SKIPPED: no CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("device: %s; seed %llu (INFLIGHT_GPU_TEST_SEED repeats it)\n", prop.name,
              static_cast<unsigned long long>(Seed()));
  const char* filter = argc > 1 ? argv[1] : nullptr;
  int num_failed = 0, num_run = 0;
  for (const TestCase& t : Registry()) {
    if (filter != nullptr && std::strstr(t.name, filter) == nullptr) continue;
    ++num_run;
    g_failed = false;
    std::printf("[ RUN ] %s\n", t.name);
    std::fflush(stdout);
    const auto start = std::chrono::steady_clock::now();
    try {
      t.fn();
    } catch (const TestAborted&) {
    } catch (const std::exception& e) {
      Fail(std::string("exception: ") + e.what());
    }
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (g_failed) ++num_failed;
    std::printf("[ %s ] %s (%.0f ms)\n", g_failed ? "FAIL" : "OK", t.name, ms);
    std::fflush(stdout);
  }
  std::printf("%d of %d tests passed (seed %llu)\n", num_run - num_failed, num_run,
              static_cast<unsigned long long>(Seed()));
  return num_failed == 0 ? 0 : 1;
}
