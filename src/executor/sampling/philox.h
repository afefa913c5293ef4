// Philox4x32-10, the counter-based generator of Salmon et al., "Parallel random numbers: as easy as
// 1, 2, 3" (SC'11); constants from that paper. Header-only and dependency-free so a CUDA kernel can
// compute the very same draw from (seed, counter) without any state carried between steps.
#pragma once

#include <array>
#include <cstdint>

namespace inflight::sampling {

using Philox4x32Block = std::array<std::uint32_t, 4>;

// One 10-round Philox4x32 block: counter `ctr` under key `key`.
constexpr Philox4x32Block Philox4x32_10(Philox4x32Block ctr, std::array<std::uint32_t, 2> key) {
  constexpr std::uint32_t kMul0 = 0xD2511F53u;
  constexpr std::uint32_t kMul1 = 0xCD9E8D57u;
  constexpr std::uint32_t kWeyl0 = 0x9E3779B9u;
  constexpr std::uint32_t kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kWeyl0;
      key[1] += kWeyl1;
    }
    const std::uint64_t p0 = static_cast<std::uint64_t>(kMul0) * ctr[0];
    const std::uint64_t p1 = static_cast<std::uint64_t>(kMul1) * ctr[2];
    const auto hi0 = static_cast<std::uint32_t>(p0 >> 32);
    const auto lo0 = static_cast<std::uint32_t>(p0);
    const auto hi1 = static_cast<std::uint32_t>(p1 >> 32);
    const auto lo1 = static_cast<std::uint32_t>(p1);
    ctr = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
  }
  return ctr;
}

// The uniform double in [0, 1) for draw number `counter` of the stream `seed`: the top 53 bits of
// the first two output words.
constexpr double PhiloxUniform(std::uint64_t seed, std::uint64_t counter) {
  const Philox4x32Block out = Philox4x32_10(
      {static_cast<std::uint32_t>(counter), static_cast<std::uint32_t>(counter >> 32), 0u, 0u},
      {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
  const std::uint64_t bits = (static_cast<std::uint64_t>(out[0]) << 32) | out[1];
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

}  // namespace inflight::sampling
