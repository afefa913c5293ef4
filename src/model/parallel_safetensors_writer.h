// A safetensors writer for multi-GB files (random checkpoints, engines): several workers each take
// the next tensor, fill it into a buffer of their own (reused, so pages are touched once) and
// pwrite() it at its offset, so generating or gathering weights overlaps writing, and large writes
// reach the file from several threads at once. The file is byte-for-byte what SafetensorsWriter
// writes for the same tensors; like it, it goes to "<path>.tmp" and is renamed when complete.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "inflight/status.h"

namespace inflight::model {

class ParallelSafetensorsWriter {
 public:
  // Called on a worker thread, while other workers fill other tensors: fill exactly `nbytes` at
  // `dst`.
  using FillFn = std::function<Status(std::byte* dst, std::size_t nbytes)>;
  // Called after each tensor is written, one call at a time, in completion order (not file order).
  using ProgressFn = std::function<void(const std::string& name, std::size_t nbytes)>;

  // num_workers 0: min(4, hardware threads). More workers hold more buffers (each up to the
  // largest tensor it filled); four keep a disk or tmpfs busy while the others fill.
  explicit ParallelSafetensorsWriter(unsigned num_workers = 0);

  Status AddLazy(std::string name, DType dtype, std::vector<std::int64_t> shape, FillFn fill);
  // Extra "__metadata__" entries; "format": "pt" is always written.
  void SetMetadata(const std::string& key, const std::string& value) { metadata_[key] = value; }

  std::size_t num_tensors() const { return entries_.size(); }
  std::size_t total_bytes() const;  // of tensor data
  unsigned num_workers() const { return num_workers_; }

  // The first failing fill or write stops the others; the partial file is removed.
  Status Write(const std::string& path, const ProgressFn& progress = nullptr) const;

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<std::int64_t> shape;
    std::size_t nbytes;
    FillFn fill;
  };
  std::string HeaderText() const;

  unsigned num_workers_;
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace inflight::model
