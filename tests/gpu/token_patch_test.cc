// Lookahead's token patch (kernels/cuda/token_patch.h) against a CPU loop on random inputs: the
// words hold ids, SampleRows' error codes and ids past the vocabulary; tokens not patched keep
// their values (poisoned), and the launcher's refusals.
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "kernels/cuda/sampling.h"
#include "kernels/cuda/token_patch.h"

namespace inflight::gpu_test {
namespace {

namespace kc = kernels::cuda;

void CheckPatch(int num_tokens, int num_patches, int num_words, int vocab) {
  const std::string what = "token patch tokens=" + std::to_string(num_tokens) +
                           " patches=" + std::to_string(num_patches) +
                           " words=" + std::to_string(num_words) +
                           " vocab=" + std::to_string(vocab);
  std::uniform_int_distribution<int> id(0, vocab - 1), kind(0, 9), word(0, num_words - 1);
  // Tokens not patched: a poison value the patch must leave alone.
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(num_tokens), -77777);
  std::vector<std::int32_t> words(static_cast<std::size_t>(num_words));
  for (std::int32_t& w : words) {
    const int k = kind(Rng());
    w = k == 0   ? kc::kSampledNotFinite
        : k == 1 ? kc::kSampledAllBanned
        : k == 2 ? vocab + id(Rng())  // past the vocabulary
        : k == 3 ? vocab - 1
                 : id(Rng());
  }
  // Distinct destinations, in a random order.
  std::vector<std::int32_t> dst(static_cast<std::size_t>(num_tokens));
  std::iota(dst.begin(), dst.end(), 0);
  std::shuffle(dst.begin(), dst.end(), Rng());
  std::vector<std::int32_t> patches;
  for (int p = 0; p < num_patches; ++p) {
    patches.push_back(dst[static_cast<std::size_t>(p)]);
    patches.push_back(word(Rng()));
  }
  std::vector<std::int32_t> want = tokens;
  for (int p = 0; p < num_patches; ++p) {
    const std::int32_t w = words[static_cast<std::size_t>(patches[2 * p + 1])];
    want[static_cast<std::size_t>(patches[2 * p])] = w >= 0 && w < vocab ? w : 0;
  }
  DeviceArray<std::int32_t> d_tokens(tokens), d_patches(patches), d_words(words);
  CUDA_OK(kc::PatchTokenIds(d_tokens.get(), d_patches.get(), num_patches, d_words.get(), vocab,
                            nullptr));
  const std::vector<std::int32_t> got = d_tokens.Download();
  int mismatches = 0;
  for (std::size_t t = 0; t < got.size(); ++t) {
    if (got[t] == want[t]) continue;
    if (++mismatches <= 5) {
      Fail(what + ": token " + std::to_string(t) + " is " + std::to_string(got[t]) + ", expected " +
           std::to_string(want[t]) + " (seed " + std::to_string(Seed()) + ")");
    }
  }
  if (mismatches > 5) Fail(what + ": " + std::to_string(mismatches) + " mismatches in all");
}

GPU_TEST(TokenPatchMatchesCpu) {
  for (const int vocab : {1, 111, 32003})
    for (const int patches : {1, 19, 99, 989}) {
      CheckPatch(patches, patches, 7, vocab);                // every token patched
      CheckPatch(2 * patches + 3, patches, patches, vocab);  // some patched
    }
  CheckPatch(70000, 66000, 4096, 152064);  // several blocks
}

GPU_TEST(TokenPatchRefusesBadArguments) {
  DeviceArray<std::int32_t> tokens(std::vector<std::int32_t>{5, 6}), words(2), patches(2);
  GPU_CHECK(kc::PatchTokenIds(tokens.get(), patches.get(), -1, words.get(), 10, nullptr) ==
                cudaErrorInvalidValue,
            "num_patches -1 accepted");
  GPU_CHECK(kc::PatchTokenIds(tokens.get(), patches.get(), 1, words.get(), 0, nullptr) ==
                cudaErrorInvalidValue,
            "vocab_size 0 accepted");
  GPU_CHECK(kc::PatchTokenIds(tokens.get(), nullptr, 1, words.get(), 10, nullptr) ==
                cudaErrorInvalidValue,
            "null patches accepted");
  // Nothing to patch: no launch, the pointers unread.
  CUDA_OK(kc::PatchTokenIds(nullptr, nullptr, 0, nullptr, 10, nullptr));
  GPU_CHECK(tokens.Download() == (std::vector<std::int32_t>{5, 6}), "tokens changed");
}

}  // namespace
}  // namespace inflight::gpu_test
