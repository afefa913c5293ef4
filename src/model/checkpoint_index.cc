#include "model/checkpoint_index.h"

namespace inflight::model {

Result<std::unique_ptr<CheckpointIndex>> CheckpointIndex::Open(const std::string& dir, bool gpt2) {
  auto ckpt = std::unique_ptr<CheckpointIndex>(new CheckpointIndex());
  ckpt->gpt2_ = gpt2;
  ASSIGN_OR_RETURN(ckpt->paths_, ListCheckpointShards(dir));
  for (const std::string& path : ckpt->paths_) {
    ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(path));
    for (const std::string& name : file->names()) {
      ckpt->index_.emplace(name, file->Find(name));  // first shard wins on duplicates
    }
    ckpt->files_.push_back(std::move(file));
  }
  return ckpt;
}

const TensorInfo* CheckpointIndex::Find(const std::string& name) const {
  if (gpt2_) {
    auto it = index_.find("transformer." + name);
    if (it != index_.end()) return it->second;
  }
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

std::string CheckpointIndex::FileOf(const TensorInfo* t) const {
  const SafetensorsFile* f = FileHolding(t);
  return f ? f->path() : "?";
}

void CheckpointIndex::Release(const TensorInfo* t) const {
  if (const SafetensorsFile* f = FileHolding(t)) f->Release(*t);
}

std::string CheckpointIndex::Describe() const {
  std::string s;
  for (const std::string& p : paths_) s += (s.empty() ? "" : ", ") + p;
  return s;
}

const SafetensorsFile* CheckpointIndex::FileHolding(const TensorInfo* t) const {
  for (const auto& f : files_) {
    if (f->Find(t->name) == t) return f.get();
  }
  return nullptr;
}

}  // namespace inflight::model
