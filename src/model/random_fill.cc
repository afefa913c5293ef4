// Deterministic random weights: the same bytes on every machine, thread count and shard layout.
//
// Each tensor's stream is seeded from (seed, tensor name) and cut into fixed chunks, each with its
// own generator, so threads can fill chunks in any order. NOTE: samples are a sum of four uniforms
// (Irwin-Hall), scaled to unit variance, rather than Box-Muller: Box-Muller needs log/cos, whose
// last bit differs between libm builds, while integer sums and one correctly-rounded multiply give
// identical bytes everywhere. The shape (bell, bounded at ±3.46 sigma) is all random weights need.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

#include "model/random_checkpoint.h"

namespace inflight::model {
namespace {

constexpr std::size_t kChunk = 1 << 16;

std::uint64_t SplitMix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// xoshiro256** (Blackman and Vigna), seeded through splitmix64 as its authors recommend.
class Xoshiro256 {
 public:
  explicit Xoshiro256(std::uint64_t seed) {
    for (auto& w : s_) w = SplitMix64(seed);
  }
  std::uint64_t Next() {
    const std::uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

 private:
  static std::uint64_t Rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4];
};

std::uint64_t HashName(std::string_view name) {  // FNV-1a
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (char ch : name) {
    h ^= static_cast<unsigned char>(ch);
    h *= 0x100000001b3ull;
  }
  return h;
}

void FillChunk(std::uint64_t tensor_seed, std::size_t chunk, InitKind init, double init_std,
               DType dtype, std::byte* dst, std::size_t n) {
  std::uint64_t s = tensor_seed ^ (chunk * 0xd1b54a32d192ed03ull);
  Xoshiro256 rng(SplitMix64(s));
  // Four 16-bit uniforms: mean 4 * 65535 / 2, variance 4 * (65536^2 - 1) / 12.
  const double inv_sd = 1.0 / std::sqrt(4.0 * (65536.0 * 65536.0 - 1.0) / 12.0);
  const double scale = (init == InitKind::kBias ? 0.1 * init_std : init_std) * inv_sd;
  const double offset = init == InitKind::kNormWeight ? 1.0 : 0.0;
  std::vector<float> buf(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t r = rng.Next();
    const std::int64_t sum = static_cast<std::int64_t>((r & 0xffff) + ((r >> 16) & 0xffff) +
                                                       ((r >> 32) & 0xffff) + (r >> 48)) -
                             2 * std::int64_t{65535};
    buf[i] = static_cast<float>(offset + static_cast<double>(sum) * scale);
  }
  ConvertFromFloat(dtype, buf.data(), dst, n);
}

}  // namespace

void FillRandomTensor(std::uint64_t seed, std::string_view name, InitKind init, double init_std,
                      DType dtype, std::byte* dst, std::size_t n, unsigned num_threads) {
  std::uint64_t s = seed ^ HashName(name);
  const std::uint64_t tensor_seed = SplitMix64(s);
  const std::size_t esize = DTypeSize(dtype);
  const std::size_t num_chunks = (n + kChunk - 1) / kChunk;
  auto fill = [&](std::size_t c) {
    const std::size_t begin = c * kChunk, count = std::min(kChunk, n - begin);
    FillChunk(tensor_seed, c, init, init_std, dtype, dst + begin * esize, count);
  };
  if (num_threads == 0) num_threads = std::clamp(std::thread::hardware_concurrency(), 1u, 16u);
  const auto workers = static_cast<unsigned>(std::min<std::size_t>(num_threads, num_chunks));
  if (workers <= 1) {
    for (std::size_t c = 0; c < num_chunks; ++c) fill(c);
    return;
  }
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < workers; ++t) {
    threads.emplace_back([&] {
      for (std::size_t c = next++; c < num_chunks; c = next++) fill(c);
    });
  }
  for (auto& th : threads) th.join();
}

}  // namespace inflight::model
