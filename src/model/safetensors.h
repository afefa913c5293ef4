// Reading and writing the safetensors format (https://huggingface.co/docs/safetensors):
//
//   [8 bytes: N, little-endian u64][N bytes: JSON header][data section]
//   header = {"<name>": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, ...,
//             "__metadata__": {"format": "pt"}}
//   offsets are relative to the start of the data section.
//
// The reader maps the file and hands out pointers into the mapping; the writer streams tensors to
// disk one at a time, so a multi-GB file never sits in memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/dtype.h"
#include "inflight/status.h"

namespace inflight::model {

struct TensorInfo {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<std::int64_t> shape;
  const std::byte* data =
      nullptr;  // into the file's mapping; valid while the SafetensorsFile lives
  std::size_t nbytes = 0;

  std::int64_t numel() const;
};

// "[2, 3]"
std::string ShapeToString(const std::vector<std::int64_t>& shape);

// What both writers check of a tensor they are given: a name neither empty nor "__metadata__"
// (duplicates are the caller's check), and a shape of non-negative dimensions whose byte size fits
// in size_t. Returns that byte size.
Result<std::size_t> SafetensorsTensorBytes(const std::string& name, DType dtype,
                                           const std::vector<std::int64_t>& shape);

// One tensor of a header that a writer emits.
struct SafetensorsHeaderEntry {
  std::string_view name;
  DType dtype;
  const std::vector<std::int64_t>* shape;
  std::size_t nbytes;
};

// The header both writers emit: "__metadata__" ({"format": "pt"} and `metadata`) first, then the
// tensors in order with consecutive data_offsets; padded with spaces to a multiple of 8 bytes so
// that the data starts aligned, as the reference writer does.
std::string SafetensorsHeaderText(const std::map<std::string, std::string>& metadata,
                                  const std::vector<SafetensorsHeaderEntry>& entries);

class SafetensorsFile {
 public:
  // Maps `path` read-only and validates the header: its length against the file size, every dtype,
  // shape and data_offsets (inside the data section and equal to numel * dtype size). Tensors may
  // overlap or come in any order. Errors name the file and the tensor.
  static Result<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);

  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  std::vector<std::string> names() const;  // in order of data offset
  const TensorInfo* Find(std::string_view name) const;
  // Hints that `tensor`'s bytes are not needed soon: drops its pages from this process's resident
  // set (the data stays readable and is paged in again on access). Keeps a converter's memory flat.
  void Release(const TensorInfo& tensor) const;
  std::size_t num_tensors() const { return tensors_.size(); }
  // The "__metadata__" entries (string to string, as the format requires); empty when absent.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;

  std::string path_;
  void* map_ = nullptr;
  std::size_t map_size_ = 0;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string_view, std::size_t> index_;  // keys view into tensors_[i].name
  std::map<std::string, std::string> metadata_;
};

// Collects tensor declarations, then writes the file in one pass. Tensor bytes come either owned
// (AddBytes) or from a fill function called during Write() with a buffer of exactly the tensor's
// size, so at most one tensor's bytes are held at a time. Write() goes to "<path>.tmp" and renames,
// so a reader never sees a partial file.
class SafetensorsWriter {
 public:
  using FillFn = std::function<Status(std::byte* dst, std::size_t nbytes)>;
  // Called after each tensor is written: (tensor name, bytes of that tensor).
  using ProgressFn = std::function<void(const std::string& name, std::size_t nbytes)>;

  Status AddBytes(std::string name, DType dtype, std::vector<std::int64_t> shape,
                  std::vector<std::byte> bytes);
  Status AddLazy(std::string name, DType dtype, std::vector<std::int64_t> shape, FillFn fill);
  // Extra "__metadata__" entries; "format": "pt" is always written.
  void SetMetadata(const std::string& key, const std::string& value) { metadata_[key] = value; }

  std::size_t num_tensors() const { return entries_.size(); }
  std::size_t total_bytes() const;  // of tensor data

  Status Write(const std::string& path, const ProgressFn& progress = nullptr) const;

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<std::int64_t> shape;
    std::size_t nbytes;
    std::vector<std::byte> bytes;  // when owned
    FillFn fill;                   // otherwise
  };
  Status Declare(const std::string& name, const std::vector<std::int64_t>& shape, DType dtype,
                 std::size_t* nbytes) const;

  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

// The safetensors files of a Hugging Face checkpoint folder: those named by
// model.safetensors.index.json's weight_map when the index exists, else every *.safetensors in the
// folder. Sorted full paths.
Result<std::vector<std::string>> ListCheckpointShards(const std::string& dir);

}  // namespace inflight::model
