#include "model/parallel_safetensors_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>

#include "model/safetensors.h"

namespace inflight::model {
namespace {

std::string ErrnoMessage(int err) {
  return std::strerror(err);
}

// All of [data, data + n) at `offset`, through short writes and signals.
Status WriteAt(int fd, const std::byte* data, std::size_t n, std::uint64_t offset,
               const std::string& what) {
  // Linux writes at most about 2 GiB per call; smaller steps also let other workers interleave.
  constexpr std::size_t kStep = std::size_t{256} << 20;
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, data, std::min(n, kStep), static_cast<off_t>(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      return Internal("cannot write " + what + ": " + ErrnoMessage(errno));
    }
    data += w;
    offset += static_cast<std::uint64_t>(w);
    n -= static_cast<std::size_t>(w);
  }
  return Status::Ok();
}

}  // namespace

ParallelSafetensorsWriter::ParallelSafetensorsWriter(unsigned num_workers)
    : num_workers_(num_workers != 0 ? num_workers
                                    : std::clamp(std::thread::hardware_concurrency(), 1u, 4u)) {}

Status ParallelSafetensorsWriter::AddLazy(std::string name, DType dtype,
                                          std::vector<std::int64_t> shape, FillFn fill) {
  for (const Entry& e : entries_) {
    if (e.name == name) return AlreadyExists("tensor \"" + name + "\" was added twice");
  }
  ASSIGN_OR_RETURN(const std::size_t nbytes, SafetensorsTensorBytes(name, dtype, shape));
  entries_.push_back({std::move(name), dtype, std::move(shape), nbytes, std::move(fill)});
  return Status::Ok();
}

std::size_t ParallelSafetensorsWriter::total_bytes() const {
  std::size_t n = 0;
  for (const Entry& e : entries_) n += e.nbytes;
  return n;
}

std::string ParallelSafetensorsWriter::HeaderText() const {
  std::vector<SafetensorsHeaderEntry> infos;
  for (const Entry& e : entries_) infos.push_back({e.name, e.dtype, &e.shape, e.nbytes});
  return SafetensorsHeaderText(metadata_, infos);
}

Status ParallelSafetensorsWriter::Write(const std::string& path, const ProgressFn& progress) const {
  const std::string header = HeaderText();
  const std::string tmp_path = path + ".tmp";
  const int fd = ::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Internal("cannot create " + tmp_path + ": " + ErrnoMessage(errno));
  auto fail = [&](Status st) {
    ::close(fd);
    std::remove(tmp_path.c_str());
    return st;
  };

  std::byte prefix[8];
  for (int i = 0; i < 8; ++i)
    prefix[i] = static_cast<std::byte>(static_cast<std::uint64_t>(header.size()) >> (8 * i));
  Status st = WriteAt(fd, prefix, 8, 0, tmp_path);
  if (st.ok()) {
    st = WriteAt(fd, reinterpret_cast<const std::byte*>(header.data()), header.size(), 8, tmp_path);
  }
  if (!st.ok()) return fail(st);

  std::vector<std::uint64_t> offsets(entries_.size());
  std::uint64_t offset = 8 + header.size();
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    offsets[i] = offset;
    offset += entries_[i].nbytes;
  }

  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;  // guards first_error and serialises the progress reports
  Status first_error = Status::Ok();
  auto work = [&] {
    // Grown, never shrunk: a fresh buffer per tensor would fault in every page again.
    std::unique_ptr<std::byte[]> buffer;
    std::size_t capacity = 0;
    for (std::size_t i = next++; i < entries_.size() && !failed; i = next++) {
      const Entry& e = entries_[i];
      if (e.nbytes > capacity) {
        buffer.reset();
        buffer = std::make_unique_for_overwrite<std::byte[]>(e.nbytes);
        capacity = e.nbytes;
      }
      Status s = e.fill(buffer.get(), e.nbytes);
      if (s.ok()) {
        s = WriteAt(fd, buffer.get(), e.nbytes, offsets[i],
                    "tensor \"" + e.name + "\" to " + tmp_path);
      }
      std::lock_guard<std::mutex> lock(mu);
      if (!s.ok()) {
        if (!failed.exchange(true)) first_error = s;
        return;
      }
      if (progress) progress(e.name, e.nbytes);
    }
  };
  const auto workers = static_cast<unsigned>(
      std::min<std::size_t>(num_workers_, std::max<std::size_t>(1, entries_.size())));
  std::vector<std::thread> threads;
  for (unsigned t = 1; t < workers; ++t) threads.emplace_back(work);
  work();
  for (auto& th : threads) th.join();
  if (failed) return fail(first_error);

  if (::close(fd) != 0) {
    const std::string err = ErrnoMessage(errno);
    std::remove(tmp_path.c_str());
    return Internal("cannot close " + tmp_path + ": " + err);
  }
  std::error_code ec;
  std::filesystem::rename(tmp_path, path, ec);
  if (ec) {
    std::remove(tmp_path.c_str());
    return Internal("cannot rename " + tmp_path + " to " + path + ": " + ec.message());
  }
  return Status::Ok();
}

}  // namespace inflight::model
