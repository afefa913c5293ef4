#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace inflight::model {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// The format's own limit on the header (safetensors rejects larger ones as a denial-of-service
// guard).
constexpr std::uint64_t kMaxHeaderBytes = 100ull << 20;

std::string ErrnoText() {
  return std::strerror(errno);
}

// Only the names the safetensors format uses, not the builder's aliases that ParseDType also
// accepts.
std::optional<DType> SafetensorsDType(std::string_view name) {
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kInt32, DType::kInt64,
                  DType::kUInt8, DType::kInt8, DType::kBool, DType::kFloat8E4M3}) {
    if (name == SafetensorsDTypeName(t)) return t;
  }
  return std::nullopt;
}

// numel * elem_size, or nullopt on overflow or a negative dimension.
std::optional<std::size_t> ByteSize(const std::vector<std::int64_t>& shape, std::size_t elem_size) {
  std::size_t n = elem_size;
  for (std::int64_t d : shape) {
    if (d < 0) return std::nullopt;
    const auto ud = static_cast<std::size_t>(d);
    if (ud != 0 && n > std::numeric_limits<std::size_t>::max() / ud) return std::nullopt;
    n *= ud;
  }
  return n;
}

Status ParseTensorEntry(const std::string& path, const std::string& name, const json& entry,
                        const std::byte* data, std::size_t data_size, TensorInfo* out) {
  const std::string where = "tensor \"" + name + "\" in " + path;
  if (!entry.is_object()) return InvalidArgument(where + ": header entry is not a JSON object");
  const auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end() || !dtype_it->is_string()) {
    return InvalidArgument(where + ": missing or non-string \"dtype\"");
  }
  const std::string dtype_name = dtype_it->get<std::string>();
  const std::optional<DType> dtype = SafetensorsDType(dtype_name);
  if (!dtype) {
    return Unsupported(where + ": dtype \"" + dtype_name +
                       "\" is not one of: F32, F16, BF16, I32, I64, U8, I8, BOOL");
  }
  const auto shape_it = entry.find("shape");
  if (shape_it == entry.end() || !shape_it->is_array()) {
    return InvalidArgument(where + ": missing or non-array \"shape\"");
  }
  std::vector<std::int64_t> shape;
  for (const json& d : *shape_it) {
    if (!d.is_number_integer() || d.get<std::int64_t>() < 0) {
      return InvalidArgument(where + ": shape " + shape_it->dump() +
                             " must hold non-negative integers");
    }
    shape.push_back(d.get<std::int64_t>());
  }
  const auto off_it = entry.find("data_offsets");
  if (off_it == entry.end() || !off_it->is_array() || off_it->size() != 2 ||
      !(*off_it)[0].is_number_unsigned() || !(*off_it)[1].is_number_unsigned()) {
    return InvalidArgument(where +
                           ": \"data_offsets\" must be [begin, end] of non-negative integers");
  }
  const auto begin = (*off_it)[0].get<std::uint64_t>();
  const auto end = (*off_it)[1].get<std::uint64_t>();
  if (begin > end || end > data_size) {
    return InvalidArgument(where + ": data_offsets [" + std::to_string(begin) + ", " +
                           std::to_string(end) + "] fall outside the data section of " +
                           std::to_string(data_size) + " bytes");
  }
  const std::optional<std::size_t> expected = ByteSize(shape, DTypeSize(*dtype));
  if (!expected || *expected != end - begin) {
    return InvalidArgument(where + ": data_offsets span " + std::to_string(end - begin) +
                           " bytes but dtype " + dtype_name + " and shape " + ShapeToString(shape) +
                           " need " + (expected ? std::to_string(*expected) : "too many"));
  }
  out->name = name;
  out->dtype = *dtype;
  out->shape = std::move(shape);
  out->nbytes = end - begin;
  out->data = data + begin;
  return Status::Ok();
}

}  // namespace

std::int64_t TensorInfo::numel() const {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

std::string ShapeToString(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NotFound("cannot open safetensors file " + path + ": " + ErrnoText());
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const std::string err = ErrnoText();
    ::close(fd);
    return Internal("cannot stat " + path + ": " + err);
  }
  const auto file_size = static_cast<std::uint64_t>(st.st_size);
  if (file_size < 8) {
    ::close(fd);
    return InvalidArgument("safetensors file " + path + " is " + std::to_string(file_size) +
                           " bytes: too short for the 8-byte header length");
  }
  void* map = ::mmap(nullptr, file_size, PROT_READ, MAP_PRIVATE, fd, 0);
  const std::string map_err = ErrnoText();
  ::close(fd);  // the mapping keeps the file alive
  if (map == MAP_FAILED) return Internal("cannot mmap " + path + ": " + map_err);
  file->map_ = map;
  file->map_size_ = file_size;
  const auto* base = static_cast<const std::byte*>(map);

  std::uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<std::uint8_t>(base[i]);
  if (header_len > kMaxHeaderBytes || header_len > file_size - 8) {
    return InvalidArgument("safetensors file " + path + ": header length " +
                           std::to_string(header_len) + " exceeds the file (" +
                           std::to_string(file_size) + " bytes) or the 100 MiB limit");
  }
  const auto* header_begin = reinterpret_cast<const char*>(base + 8);
  const json header = json::parse(header_begin, header_begin + header_len, nullptr,
                                  /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) {
    return InvalidArgument("safetensors file " + path + ": header is not a JSON object");
  }
  const std::size_t data_size = file_size - 8 - header_len;
  const std::byte* data = base + 8 + header_len;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) {
        return InvalidArgument("safetensors file " + path + ": __metadata__ is not an object");
      }
      for (const auto& [k, v] : entry.items()) {
        file->metadata_[k] = v.is_string() ? v.get<std::string>() : v.dump();
      }
      continue;
    }
    TensorInfo info;
    RETURN_IF_ERROR(ParseTensorEntry(path, name, entry, data, data_size, &info));
    file->tensors_.push_back(std::move(info));
  }
  std::sort(file->tensors_.begin(), file->tensors_.end(),
            [](const TensorInfo& a, const TensorInfo& b) {
              return a.data != b.data ? a.data < b.data : a.name < b.name;
            });
  for (std::size_t i = 0; i < file->tensors_.size(); ++i) {
    file->index_.emplace(file->tensors_[i].name, i);
  }
  return file;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const TensorInfo& t : tensors_) out.push_back(t.name);
  return out;
}

const TensorInfo* SafetensorsFile::Find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

void SafetensorsFile::Release(const TensorInfo& tensor) const {
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(tensor.data);
  const std::uintptr_t first =
      (begin + page - 1) / page * page;  // whole pages inside the tensor only
  const std::uintptr_t last = (begin + tensor.nbytes) / page * page;
  if (last > first) {
    ::madvise(reinterpret_cast<void*>(first),  // NOLINT(performance-no-int-to-ptr): page arithmetic
              last - first, MADV_DONTNEED);
  }
}

// ---- writer ----

Result<std::size_t> SafetensorsTensorBytes(const std::string& name, DType dtype,
                                           const std::vector<std::int64_t>& shape) {
  if (name.empty() || name == "__metadata__") {
    return InvalidArgument("safetensors tensor name \"" + name + "\" is reserved or empty");
  }
  const std::optional<std::size_t> n = ByteSize(shape, DTypeSize(dtype));
  if (!n)
    return InvalidArgument("tensor \"" + name + "\" has invalid shape " + ShapeToString(shape));
  return *n;
}

Status SafetensorsWriter::Declare(const std::string& name, const std::vector<std::int64_t>& shape,
                                  DType dtype, std::size_t* nbytes) const {
  // A reserved or empty name is never added, so checking for a duplicate first changes no answer.
  for (const Entry& e : entries_) {
    if (e.name == name) return AlreadyExists("tensor \"" + name + "\" was added twice");
  }
  ASSIGN_OR_RETURN(*nbytes, SafetensorsTensorBytes(name, dtype, shape));
  return Status::Ok();
}

Status SafetensorsWriter::AddBytes(std::string name, DType dtype, std::vector<std::int64_t> shape,
                                   std::vector<std::byte> bytes) {
  std::size_t nbytes = 0;
  RETURN_IF_ERROR(Declare(name, shape, dtype, &nbytes));
  if (bytes.size() != nbytes) {
    return InvalidArgument("tensor \"" + name + "\" of " + DTypeName(dtype) + " " +
                           ShapeToString(shape) + " needs " + std::to_string(nbytes) +
                           " bytes, got " + std::to_string(bytes.size()));
  }
  entries_.push_back({std::move(name), dtype, std::move(shape), nbytes, std::move(bytes), nullptr});
  return Status::Ok();
}

Status SafetensorsWriter::AddLazy(std::string name, DType dtype, std::vector<std::int64_t> shape,
                                  FillFn fill) {
  std::size_t nbytes = 0;
  RETURN_IF_ERROR(Declare(name, shape, dtype, &nbytes));
  entries_.push_back({std::move(name), dtype, std::move(shape), nbytes, {}, std::move(fill)});
  return Status::Ok();
}

std::size_t SafetensorsWriter::total_bytes() const {
  std::size_t n = 0;
  for (const Entry& e : entries_) n += e.nbytes;
  return n;
}

std::string SafetensorsHeaderText(const std::map<std::string, std::string>& metadata,
                                  const std::vector<SafetensorsHeaderEntry>& entries) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  nlohmann::ordered_json meta = nlohmann::ordered_json::object();
  meta["format"] = "pt";
  for (const auto& [k, v] : metadata) meta[k] = v;
  header["__metadata__"] = meta;
  std::uint64_t offset = 0;
  for (const SafetensorsHeaderEntry& e : entries) {
    header[std::string(e.name)] = {{"dtype", SafetensorsDTypeName(e.dtype)},
                                   {"shape", *e.shape},
                                   {"data_offsets", {offset, offset + e.nbytes}}};
    offset += e.nbytes;
  }
  // NOTE: replace, not throw, on a name that is not UTF-8; such a name is the caller's bug, not a
  // crash.
  std::string text = header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

Status SafetensorsWriter::Write(const std::string& path, const ProgressFn& progress) const {
  std::vector<SafetensorsHeaderEntry> infos;
  for (const Entry& e : entries_) infos.push_back({e.name, e.dtype, &e.shape, e.nbytes});
  const std::string header_text = SafetensorsHeaderText(metadata_, infos);

  const std::string tmp_path = path + ".tmp";
  std::FILE* f = std::fopen(tmp_path.c_str(), "wb");
  if (f == nullptr) return Internal("cannot create " + tmp_path + ": " + ErrnoText());
  auto fail = [&](const std::string& what) {
    const std::string err = ErrnoText();
    std::fclose(f);
    std::remove(tmp_path.c_str());
    return Internal(what + " " + tmp_path + ": " + err);
  };
  unsigned char len_bytes[8];
  for (int i = 0; i < 8; ++i)
    len_bytes[i] = static_cast<unsigned char>(header_text.size() >> (8 * i));
  if (std::fwrite(len_bytes, 1, 8, f) != 8 ||
      std::fwrite(header_text.data(), 1, header_text.size(), f) != header_text.size()) {
    return fail("cannot write header of");
  }
  std::vector<std::byte> buffer;
  for (const Entry& e : entries_) {
    const std::byte* src = e.bytes.data();
    if (e.fill) {
      buffer.clear();
      buffer.shrink_to_fit();  // NOTE: sizes vary a lot; don't keep the largest tensor's buffer
                               // around
      buffer.resize(e.nbytes);
      Status st = e.fill(buffer.data(), e.nbytes);
      if (!st.ok()) {
        std::fclose(f);
        std::remove(tmp_path.c_str());
        return st;
      }
      src = buffer.data();
    }
    if (e.nbytes != 0 && std::fwrite(src, 1, e.nbytes, f) != e.nbytes) {
      return fail("cannot write tensor \"" + e.name + "\" to");
    }
    if (progress) progress(e.name, e.nbytes);
  }
  if (std::fflush(f) != 0) return fail("cannot flush");
  if (std::fclose(f) != 0) {
    std::remove(tmp_path.c_str());
    return Internal("cannot close " + tmp_path + ": " + ErrnoText());
  }
  std::error_code ec;
  fs::rename(tmp_path, path, ec);
  if (ec) {
    std::remove(tmp_path.c_str());
    return Internal("cannot rename " + tmp_path + " to " + path + ": " + ec.message());
  }
  return Status::Ok();
}

// ---- checkpoint folders ----

Result<std::vector<std::string>> ListCheckpointShards(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return NotFound("checkpoint folder " + dir + " does not exist");
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  std::vector<std::string> out;
  if (fs::exists(index_path, ec)) {
    std::ifstream in(index_path);
    std::stringstream ss;
    ss << in.rdbuf();
    const json index = json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
    if (index.is_discarded() || !index.is_object() || !index.contains("weight_map") ||
        !index["weight_map"].is_object()) {
      return InvalidArgument(index_path.string() + ": not JSON with a \"weight_map\" object");
    }
    std::set<std::string> files;
    for (const auto& [name, file] : index["weight_map"].items()) {
      if (!file.is_string()) {
        return InvalidArgument(index_path.string() + ": weight_map[\"" + name +
                               "\"] is not a file name");
      }
      files.insert(file.get<std::string>());
    }
    for (const std::string& f : files) {
      const fs::path p = fs::path(dir) / f;
      if (!fs::exists(p, ec)) {
        return NotFound(index_path.string() + " names shard " + f + ", which does not exist");
      }
      out.push_back(p.string());
    }
  } else {
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->is_regular_file(ec) && it->path().extension() == ".safetensors") {
        out.push_back(it->path().string());
      }
    }
    std::sort(out.begin(), out.end());
  }
  if (out.empty()) {
    return NotFound("no *.safetensors files (and no model.safetensors.index.json) in " + dir);
  }
  return out;
}

}  // namespace inflight::model
