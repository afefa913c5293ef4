// The build-time quantizer answers every part of a linear (codes, scales) and every rank of a
// tensor-parallel engine from one quantization of its checkpoint tensor: loads from many threads
// at once get what a fresh quantizer gives a single caller, and the source is read once a tensor.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "model/quant_sources.h"

namespace inflight::model {
namespace {

constexpr std::int64_t kRows = 24, kCols = 40;

// Weights that differ per tensor name and element, with a spread of magnitudes.
FloatWeightSource CountingSource(std::atomic<int>* reads) {
  FloatWeightSource s;
  s.check = [](const std::string&, const std::vector<std::int64_t>&) { return Status::Ok(); };
  s.read = [reads](const std::string& name, const std::vector<std::int64_t>& shape,
                   std::vector<float>* out) {
    ++*reads;
    out->resize(static_cast<std::size_t>(shape[0] * shape[1]));
    const auto salt = static_cast<float>(std::hash<std::string>{}(name) % 97);
    for (std::size_t i = 0; i < out->size(); ++i)
      (*out)[i] = 0.01f * static_cast<float>((i * 37 + 11) % 101) - 0.5f + 0.001f * salt;
    return Status::Ok();
  };
  return s;
}

TEST(BuildTimeQuantizerLoads, ConcurrentLoadsShareOneQuantizationAndEqualAFreshOne) {
  QuantConfig q;
  q.quant_algo = QuantAlgo::kFp8;
  q.weight_granularity = WeightScaleGranularity::kPerChannel;
  q.activation_scaling = ActivationScaling::kDynamicPerToken;
  const std::vector<std::string> names = {"a.weight", "b.weight", "c.weight", "d.weight"};
  const std::vector<std::int64_t> shape = {kRows, kCols};

  std::atomic<int> fresh_reads{0}, shared_reads{0};
  std::vector<QuantizedMatrix> expected;
  for (const std::string& name : names) {
    auto m = MakeBuildTimeQuantizer(CountingSource(&fresh_reads), q)->Load(name, shape);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    expected.push_back(**m);
  }

  auto shared = MakeBuildTimeQuantizer(CountingSource(&shared_reads), q);
  constexpr int kThreads = 8, kRounds = 3;
  std::vector<std::vector<std::shared_ptr<const QuantizedMatrix>>> got(kThreads);
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        for (const std::string& name : names) {
          auto m = shared->Load(name, shape);
          if (m.ok()) got[static_cast<std::size_t>(t)].push_back(*m);  // the shared matrix
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();

  EXPECT_EQ(shared_reads.load(), static_cast<int>(names.size()));  // one read a tensor
  for (int t = 0; t < kThreads; ++t) {
    const auto& mine = got[static_cast<std::size_t>(t)];
    ASSERT_EQ(mine.size(), names.size() * kRounds);
    for (std::size_t i = 0; i < mine.size(); ++i) {
      const QuantizedMatrix& want = expected[i % names.size()];
      EXPECT_EQ(mine[i]->codes, want.codes) << names[i % names.size()];
      EXPECT_EQ(mine[i]->scales, want.scales) << names[i % names.size()];
      // One matrix handed to every caller, not a copy each (the recent loads hold all four).
      EXPECT_EQ(mine[i].get(), got[0][i].get()) << names[i % names.size()];
    }
  }
}

}  // namespace
}  // namespace inflight::model
