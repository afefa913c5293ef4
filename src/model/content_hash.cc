#include "model/content_hash.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

namespace inflight::model {
namespace {

// The primes and round of XXH64 (Yann Collet's public algorithm).
constexpr std::uint64_t kP1 = 11400714785074694791ULL, kP2 = 14029467366897019727ULL,
                        kP3 = 1609587929392839161ULL, kP4 = 9650029242287828579ULL,
                        kP5 = 2870177450012600261ULL;

std::uint64_t Round(std::uint64_t acc, std::uint64_t input) {
  return std::rotl(acc + input * kP2, 31) * kP1;
}

std::uint64_t Avalanche(std::uint64_t h) {
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  return h ^ (h >> 32);
}

std::uint64_t Load64(const unsigned char* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

std::uint64_t Hash64(const unsigned char* p, std::size_t n, std::uint64_t seed) {
  std::uint64_t v[4] = {seed + kP1 + kP2, seed + kP2, seed, seed - kP1};
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (std::size_t lane = 0; lane < 4; ++lane) v[lane] = Round(v[lane], Load64(p + i + 8 * lane));
  }
  std::uint64_t h = std::rotl(v[0], 1) + std::rotl(v[1], 7) + std::rotl(v[2], 12) +
                    std::rotl(v[3], 18) + static_cast<std::uint64_t>(n);
  for (; i + 8 <= n; i += 8) h = std::rotl(h ^ Round(0, Load64(p + i)), 27) * kP1 + kP4;
  for (; i < n; ++i) h = std::rotl(h ^ (p[i] * kP5), 11) * kP1;
  return Avalanche(h);
}

// Folds one 64-bit value into a running digest.
std::uint64_t Mix(std::uint64_t h, std::uint64_t v) {
  return Avalanche(Round(h, v) + kP4);
}

struct Digest {
  std::uint64_t a = 0x243f6a8885a308d3ULL, b = 0x13198a2e03707344ULL;
  void Add(const unsigned char* p, std::size_t n) {
    a = Mix(a, Hash64(p, n, 1));
    b = Mix(b, Hash64(p, n, 2));
  }
  void Add(const std::string& s) {
    Add(reinterpret_cast<const unsigned char*>(s.data()), s.size());
  }
};

// A file's bytes, hashed in 64 MiB chunks on up to 8 threads; the chunk digests fold in order.
Status AddFile(const std::string& path, Digest* d) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NotFound("cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return Internal("cannot stat " + path);
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  d->Add(std::filesystem::path(path).filename().string() + ":" + std::to_string(size));
  if (size == 0) {
    ::close(fd);
    return Status::Ok();
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return Internal("cannot mmap " + path + ": " + std::strerror(errno));
  const auto* bytes = static_cast<const unsigned char*>(map);
  constexpr std::size_t kChunk = std::size_t{64} << 20;
  const std::size_t num_chunks = (size + kChunk - 1) / kChunk;
  std::vector<std::uint64_t> chunk_a(num_chunks), chunk_b(num_chunks);
  const std::size_t num_threads =
      std::min<std::size_t>({num_chunks, 8, std::max(1u, std::thread::hardware_concurrency())});
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < num_threads; ++t) {
    threads.emplace_back([&, t] {
      for (std::size_t c = t; c < num_chunks; c += num_threads) {
        const std::size_t n = std::min(kChunk, size - c * kChunk);
        chunk_a[c] = Hash64(bytes + c * kChunk, n, 1);
        chunk_b[c] = Hash64(bytes + c * kChunk, n, 2);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  ::munmap(map, size);
  for (std::size_t c = 0; c < num_chunks; ++c) {
    d->a = Mix(d->a, chunk_a[c]);
    d->b = Mix(d->b, chunk_b[c]);
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> HashFiles(const std::vector<std::string>& paths, const std::string& extra) {
  Digest d;
  for (const std::string& p : paths) RETURN_IF_ERROR(AddFile(p, &d));
  d.Add(extra);
  char hex[33];
  std::snprintf(hex, sizeof(hex), "%016llx%016llx", static_cast<unsigned long long>(d.a),
                static_cast<unsigned long long>(d.b));
  return std::string(hex);
}

}  // namespace inflight::model
