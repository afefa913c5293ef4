#include "model/step_codec.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace inflight::model {
namespace {

// NOTE: when a field is added to SequenceStep or DeviceSampling, Encode/Decode below must carry it
// (a follower that misses one computes another step than the leader). These sizes are LP64
// libstdc++'s; a change here means a changed struct, and this file is the place to change with it.
static_assert(sizeof(void*) != 8 || sizeof(DeviceSampling) == 144,
              "DeviceSampling changed: update step_codec.cc to send the new field");
static_assert(sizeof(void*) != 8 || sizeof(SequenceStep) == 232,
              "SequenceStep changed: update step_codec.cc to send the new field");
static_assert(sizeof(void*) != 8 || sizeof(StepOutput) == 120,
              "StepOutput changed: update step_codec.cc to send the new field");

class Writer {
 public:
  template <typename T>
  void Put(T value) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const char*>(&value);
    out_.append(p, sizeof(T));
  }
  template <typename T>
  void PutVector(const std::vector<T>& values) {
    static_assert(std::is_trivially_copyable_v<T>);
    Put(static_cast<std::uint32_t>(values.size()));
    out_.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  template <typename T>
  Status Get(T* value, const char* what) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (bytes_.size() - pos_ < sizeof(T)) return Truncated(what);
    std::memcpy(value, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::Ok();
  }
  template <typename T>
  Status GetVector(std::vector<T>* values, const char* what) {
    std::uint32_t count = 0;
    RETURN_IF_ERROR(Get(&count, what));
    if ((bytes_.size() - pos_) / sizeof(T) < count) return Truncated(what);
    values->resize(count);
    // An empty vector's data() may be null, which memcpy must not get even for 0 bytes (UBSan).
    if (count > 0) std::memcpy(values->data(), bytes_.data() + pos_, count * sizeof(T));
    pos_ += count * sizeof(T);
    return Status::Ok();
  }
  bool at_end() const { return pos_ == bytes_.size(); }
  std::size_t remaining() const { return bytes_.size() - pos_; }

 private:
  Status Truncated(const char* what) const {
    return Internal("leader message of " + std::to_string(bytes_.size()) + " bytes ends inside " +
                    what + " (at byte " + std::to_string(pos_) + ")");
  }
  std::string_view bytes_;
  std::size_t pos_ = 0;
};

enum class BiasField : std::uint8_t { kNone = 0, kKnown = 1, kNew = 2 };

void EncodeDeviceSampling(const DeviceSampling& d, EmbeddingBiasSender& biases, Writer& w) {
  w.Put<std::uint8_t>(d.greedy ? 1 : 0);
  w.Put(d.temperature);
  w.Put(d.top_k);
  w.Put(d.top_p);
  w.Put(d.seed);
  w.Put(d.draw_index);
  w.Put(d.repetition_penalty);
  w.Put(d.presence_penalty);
  w.Put(d.frequency_penalty);
  w.PutVector(d.penalty_tokens);
  w.PutVector(d.penalty_counts);
  w.PutVector(d.banned_tokens);
  if (d.embedding_bias == nullptr) {
    w.Put(BiasField::kNone);
  } else {
    auto [id, is_new] = biases.IdOf(d.embedding_bias);
    w.Put(is_new ? BiasField::kNew : BiasField::kKnown);
    w.Put(id);
    if (is_new) w.PutVector(*d.embedding_bias);
  }
  w.Put<std::uint8_t>(d.normalize_log_probs ? 1 : 0);
}

Status DecodeDeviceSampling(Reader& r, EmbeddingBiasReceiver& biases, DeviceSampling* d) {
  std::uint8_t flag = 0;
  RETURN_IF_ERROR(r.Get(&flag, "greedy"));
  d->greedy = flag != 0;
  RETURN_IF_ERROR(r.Get(&d->temperature, "temperature"));
  RETURN_IF_ERROR(r.Get(&d->top_k, "top_k"));
  RETURN_IF_ERROR(r.Get(&d->top_p, "top_p"));
  RETURN_IF_ERROR(r.Get(&d->seed, "seed"));
  RETURN_IF_ERROR(r.Get(&d->draw_index, "draw_index"));
  RETURN_IF_ERROR(r.Get(&d->repetition_penalty, "repetition_penalty"));
  RETURN_IF_ERROR(r.Get(&d->presence_penalty, "presence_penalty"));
  RETURN_IF_ERROR(r.Get(&d->frequency_penalty, "frequency_penalty"));
  RETURN_IF_ERROR(r.GetVector(&d->penalty_tokens, "penalty_tokens"));
  RETURN_IF_ERROR(r.GetVector(&d->penalty_counts, "penalty_counts"));
  RETURN_IF_ERROR(r.GetVector(&d->banned_tokens, "banned_tokens"));
  BiasField bias = BiasField::kNone;
  RETURN_IF_ERROR(r.Get(&bias, "embedding_bias"));
  if (bias == BiasField::kKnown || bias == BiasField::kNew) {
    std::uint64_t id = 0;
    RETURN_IF_ERROR(r.Get(&id, "embedding_bias id"));
    if (bias == BiasField::kNew) {
      auto values = std::make_shared<std::vector<float>>();
      RETURN_IF_ERROR(r.GetVector(values.get(), "embedding_bias values"));
      biases.objects[id] = std::move(values);
    }
    auto it = biases.objects.find(id);
    if (it == biases.objects.end()) {
      return Internal("leader message names embedding bias #" + std::to_string(id) +
                      ", which it never sent");
    }
    d->embedding_bias = it->second;
  } else if (bias != BiasField::kNone) {
    return Internal("leader message has embedding-bias field " +
                    std::to_string(static_cast<int>(bias)) + "; expected 0, 1 or 2");
  }
  RETURN_IF_ERROR(r.Get(&flag, "normalize_log_probs"));
  d->normalize_log_probs = flag != 0;
  return Status::Ok();
}

}  // namespace

std::pair<std::uint64_t, bool> EmbeddingBiasSender::IdOf(
    const std::shared_ptr<const std::vector<float>>& bias) {
  // NOTE: an entry whose object still lives is that object (an address is reused only after the
  // object it held is gone, and TakeRetired drops those first).
  for (const Entry& e : entries_) {
    if (e.address == bias.get() && !e.object.expired()) return {e.id, false};
  }
  entries_.push_back(Entry{bias, bias.get(), next_id_++});
  return {entries_.back().id, true};
}

std::vector<std::uint64_t> EmbeddingBiasSender::TakeRetired() {
  std::vector<std::uint64_t> retired;
  for (const Entry& e : entries_) {
    if (e.object.expired()) retired.push_back(e.id);
  }
  std::erase_if(entries_, [](const Entry& e) { return e.object.expired(); });
  return retired;
}

std::string EncodeStep(const StepInput& input, EmbeddingBiasSender& biases) {
  Writer w;
  w.Put(LeaderMessageKind::kStep);
  w.PutVector(biases.TakeRetired());
  w.Put(static_cast<std::uint32_t>(input.sequences.size()));
  for (const SequenceStep& s : input.sequences) {
    w.Put(s.seq_id);
    w.Put(s.num_cached);
    w.Put(s.logits);
    w.Put(s.previous_step_row);
    w.PutVector(s.tokens);
    w.PutVector(s.block_table);
    w.Put<std::uint8_t>(s.device_sampling ? 1 : 0);
    if (s.device_sampling) EncodeDeviceSampling(*s.device_sampling, biases, w);
  }
  return w.Take();
}

std::string EncodeStop() {
  Writer w;
  w.Put(LeaderMessageKind::kStop);
  return w.Take();
}

Result<LeaderMessage> DecodeLeaderMessage(std::string_view bytes, EmbeddingBiasReceiver& biases) {
  Reader r(bytes);
  LeaderMessage message;
  RETURN_IF_ERROR(r.Get(&message.kind, "the message kind"));
  if (message.kind == LeaderMessageKind::kStop) {
    if (!r.at_end()) {
      return Internal("leader stop message carries " + std::to_string(r.remaining()) +
                      " bytes more than its kind");
    }
    return message;
  }
  if (message.kind != LeaderMessageKind::kStep) {
    return Internal("leader message kind " + std::to_string(static_cast<int>(message.kind)) +
                    " is not one of: 1 (step), 2 (stop)");
  }
  std::vector<std::uint64_t> retired;
  RETURN_IF_ERROR(r.GetVector(&retired, "the retired embedding biases"));
  for (std::uint64_t id : retired) biases.objects.erase(id);
  std::uint32_t num_sequences = 0;
  RETURN_IF_ERROR(r.Get(&num_sequences, "the sequence count"));
  message.step.sequences.resize(num_sequences);
  for (SequenceStep& s : message.step.sequences) {
    RETURN_IF_ERROR(r.Get(&s.seq_id, "seq_id"));
    RETURN_IF_ERROR(r.Get(&s.num_cached, "num_cached"));
    RETURN_IF_ERROR(r.Get(&s.logits, "the logits mode"));
    RETURN_IF_ERROR(r.Get(&s.previous_step_row, "previous_step_row"));
    if (s.logits != SequenceStep::Logits::kNone && s.logits != SequenceStep::Logits::kLast &&
        s.logits != SequenceStep::Logits::kAll) {
      return Internal("leader message has logits mode " +
                      std::to_string(static_cast<int>(s.logits)) + " for sequence " +
                      std::to_string(s.seq_id) + "; expected 0, 1 or 2");
    }
    RETURN_IF_ERROR(r.GetVector(&s.tokens, "tokens"));
    RETURN_IF_ERROR(r.GetVector(&s.block_table, "block_table"));
    std::uint8_t has_device_sampling = 0;
    RETURN_IF_ERROR(r.Get(&has_device_sampling, "the device-sampling flag"));
    if (has_device_sampling != 0) {
      RETURN_IF_ERROR(DecodeDeviceSampling(r, biases, &s.device_sampling.emplace()));
    }
  }
  if (!r.at_end()) {
    return Internal("leader step message has " + std::to_string(r.remaining()) +
                    " bytes after its last sequence");
  }
  return message;
}

std::string EncodeStepOutput(const StepOutput& output) {
  Writer w;
  w.PutVector(output.logits);
  w.PutVector(output.row_begin);
  w.Put(output.vocab_size);
  w.PutVector(output.sampled_tokens);
  w.PutVector(output.sampled_log_probs);
  w.Put(output.device_wait_ms);
  w.Put(output.device_ms);
  return w.Take();
}

Result<StepOutput> DecodeStepOutput(std::string_view bytes) {
  Reader r(bytes);
  StepOutput out;
  RETURN_IF_ERROR(r.GetVector(&out.logits, "logits"));
  RETURN_IF_ERROR(r.GetVector(&out.row_begin, "row_begin"));
  RETURN_IF_ERROR(r.Get(&out.vocab_size, "vocab_size"));
  RETURN_IF_ERROR(r.GetVector(&out.sampled_tokens, "sampled_tokens"));
  RETURN_IF_ERROR(r.GetVector(&out.sampled_log_probs, "sampled_log_probs"));
  RETURN_IF_ERROR(r.Get(&out.device_wait_ms, "device_wait_ms"));
  RETURN_IF_ERROR(r.Get(&out.device_ms, "device_ms"));
  if (!r.at_end()) {
    return Internal("step output message has " + std::to_string(r.remaining()) +
                    " bytes after its last field");
  }
  return out;
}

}  // namespace inflight::model
