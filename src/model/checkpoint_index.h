// All safetensors shards of a Hugging Face checkpoint folder, mapped, behind one name → tensor
// index (the converter's and the quantized-checkpoint readers' view of the weights).
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "inflight/status.h"
#include "model/safetensors.h"

namespace inflight::model {

class CheckpointIndex {
 public:
  // gpt2: names are looked up with and without the "transformer." prefix.
  static Result<std::unique_ptr<CheckpointIndex>> Open(const std::string& dir, bool gpt2);

  const std::vector<std::string>& paths() const { return paths_; }

  // GPT-2 checkpoints come with ("transformer.h.0...", from GPT2LMHeadModel) or without ("h.0...",
  // from GPT2Model) the prefix. nullptr when absent.
  const TensorInfo* Find(const std::string& name) const;
  std::string FileOf(const TensorInfo* t) const;
  void Release(const TensorInfo* t) const;
  std::string Describe() const;  // the shard paths, comma-separated

 private:
  CheckpointIndex() = default;
  const SafetensorsFile* FileHolding(const TensorInfo* t) const;

  bool gpt2_ = false;
  std::vector<std::string> paths_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::unordered_map<std::string, const TensorInfo*> index_;
};

}  // namespace inflight::model
