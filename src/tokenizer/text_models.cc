#include "tokenizer/text_models.h"

#include <algorithm>
#include <optional>

#include "tokenizer/embedding_bias.h"
#include "tokenizer/word_list.h"

namespace inflight::tokenizer {
namespace {

using Type = HostTensor::Type;

// Finds inputs by name and checks their type and batch dimension.
class Inputs {
 public:
  Inputs(const std::vector<HostTensor>& inputs, bool batched)
      : inputs_(inputs), batched_(batched) {}

  // Null when absent and not required.
  Result<const HostTensor*> Get(const std::string& name, Type type, bool required) const {
    const HostTensor* t = nullptr;
    for (const HostTensor& in : inputs_)
      if (in.name == name) t = &in;
    if (t == nullptr) {
      if (required) return InvalidArgument("input " + name + " is required but missing");
      return t;
    }
    const size_t held = t->type == Type::kInt32  ? t->i32.size()
                        : t->type == Type::kFp32 ? t->f32.size()
                                                 : t->str.size();
    INFLIGHT_CHECK(static_cast<int64_t>(held) == t->num_elements(),
                   "input " + name + " holds " + std::to_string(held) + " elements for shape " +
                       ShapeString(t->shape));
    if (t->type != type) {
      return InvalidArgument(std::string("input ") + name + " has data type " +
                             HostTensorTypeName(t->type) + "; expected " +
                             HostTensorTypeName(type));
    }
    if (batched_ && (t->shape.empty() || (batch_ >= 0 && t->shape[0] != batch_))) {
      return InvalidArgument("input " + name + " has shape " + ShapeString(t->shape) +
                             "; its first dimension must be the batch size " +
                             std::to_string(std::max<int64_t>(batch_, 1)));
    }
    return t;
  }

  void set_batch(int64_t batch) { batch_ = batch; }
  int64_t batch() const { return batch_; }
  bool batched() const { return batched_; }

  // Elements per batch row of `t`.
  int64_t RowSize(const HostTensor& t) const { return batch_ > 0 ? t.num_elements() / batch_ : 0; }

 private:
  const std::vector<HostTensor>& inputs_;
  bool batched_;
  int64_t batch_ = -1;
};

// Output shape: the batch dimension (when batched) followed by the per-row dims.
std::vector<int64_t> OutShape(const Inputs& in, std::vector<int64_t> row_dims) {
  if (in.batched()) row_dims.insert(row_dims.begin(), in.batch());
  return row_dims;
}

HostTensor Int32Output(const std::string& name, std::vector<int64_t> shape,
                       std::vector<int32_t> v) {
  HostTensor t;
  t.name = name;
  t.type = Type::kInt32;
  t.shape = std::move(shape);
  t.i32 = std::move(v);
  return t;
}

// Status with the tensor name and row in front of a lower layer's message.
Status InRow(const std::string& name, int64_t row, const Status& st) {
  return Status(st.code(), "input " + name + " row " + std::to_string(row) + ": " + st.message());
}

// The text of each row of QUERY or DECODER_QUERY, encoded; *max_len gets the longest.
Result<std::vector<std::vector<int32_t>>> EncodeRows(const Tokenizer& tokenizer, const Inputs& in,
                                                     const HostTensor& query, bool special) {
  const int64_t row_size = in.RowSize(query);
  if (row_size < 1) {
    return InvalidArgument("input " + query.name + " has shape " + ShapeString(query.shape) +
                           "; each row needs one string");
  }
  std::vector<std::vector<int32_t>> rows;
  for (int64_t b = 0; b < in.batch(); ++b) {
    auto ids = tokenizer.Encode(query.str[static_cast<size_t>(b * row_size)], special);
    if (!ids.ok()) return InRow(query.name, b, ids.status());
    rows.push_back(std::move(ids).value());
  }
  return rows;
}

HostTensor PaddedIds(const std::string& name, const Inputs& in,
                     const std::vector<std::vector<int32_t>>& rows, int32_t pad) {
  size_t max_len = 0;
  for (const auto& r : rows) max_len = std::max(max_len, r.size());
  std::vector<int32_t> flat(rows.size() * max_len, pad);
  for (size_t b = 0; b < rows.size(); ++b)
    std::copy(rows[b].begin(), rows[b].end(), flat.begin() + b * max_len);
  return Int32Output(name, OutShape(in, {static_cast<int64_t>(max_len)}), std::move(flat));
}

HostTensor Lengths(const std::string& name, const Inputs& in,
                   const std::vector<std::vector<int32_t>>& rows) {
  std::vector<int32_t> lens;
  lens.reserve(rows.size());
  for (const auto& r : rows) lens.push_back(static_cast<int32_t>(r.size()));
  return Int32Output(name, OutShape(in, {1}), std::move(lens));
}

// One id per row: the input's first element per row, or `fallback` when the input is absent.
Result<HostTensor> IdPerRow(const Inputs& in, const std::string& input, const std::string& output,
                            std::optional<int32_t> fallback, const std::string& fallback_text) {
  ASSIGN_OR_RETURN(const HostTensor* t, in.Get(input, Type::kInt32, false));
  std::vector<int32_t> ids;
  if (t != nullptr) {
    const int64_t row_size = in.RowSize(*t);
    if (row_size < 1) {
      return InvalidArgument("input " + input + " has shape " + ShapeString(t->shape) +
                             "; each row needs one id");
    }
    for (int64_t b = 0; b < in.batch(); ++b)
      ids.push_back(t->i32[static_cast<size_t>(b * row_size)]);
  } else {
    if (!fallback) {
      return InvalidArgument("input " + input + " is not given and " + fallback_text + "; send " +
                             input + " or use a tokenizer that names one");
    }
    ids.assign(static_cast<size_t>(in.batch()), *fallback);
  }
  return Int32Output(output, OutShape(in, {1}), std::move(ids));
}

Result<HostTensor> WordList(const Tokenizer& tokenizer, const Inputs& in, const std::string& input,
                            const std::string& output) {
  ASSIGN_OR_RETURN(const HostTensor* t, in.Get(input, Type::kString, false));
  if (t == nullptr) {
    // As NVIDIA's model: no word list is an empty [batch, 2, 0] tensor.
    return Int32Output(output, OutShape(in, {2, 0}), {});
  }
  const int64_t row_size = in.RowSize(*t);
  std::vector<std::vector<std::vector<int32_t>>> rows;
  for (int64_t b = 0; b < in.batch(); ++b) {
    std::vector<std::string> words;
    for (int64_t i = 0; i < row_size; ++i) {
      for (std::string& w : SplitCsvWords(t->str[static_cast<size_t>(b * row_size + i)]))
        words.push_back(std::move(w));
    }
    auto ids = TokenizeWords(tokenizer, words);
    if (!ids.ok()) return InRow(input, b, ids.status());
    rows.push_back(std::move(ids).value());
  }
  WordListTensor packed = PackWordLists(rows);
  return Int32Output(output, OutShape(in, {2, packed.width}), std::move(packed.data));
}

Result<HostTensor> EmbeddingBias(const Tokenizer& tokenizer, const Inputs& in) {
  ASSIGN_OR_RETURN(const HostTensor* words, in.Get("EMBEDDING_BIAS_WORDS", Type::kString, false));
  ASSIGN_OR_RETURN(const HostTensor* weights, in.Get("EMBEDDING_BIAS_WEIGHTS", Type::kFp32, false));
  HostTensor out;
  out.name = "EMBEDDING_BIAS";
  out.type = Type::kFp32;
  if (words == nullptr && weights == nullptr) {
    out.shape = OutShape(in, {0});
    return out;
  }
  if (words == nullptr || weights == nullptr) {
    return InvalidArgument(std::string("input ") +
                           (words
                                ? "EMBEDDING_BIAS_WORDS is given without EMBEDDING_BIAS_WEIGHTS"
                                : "EMBEDDING_BIAS_WEIGHTS is given without EMBEDDING_BIAS_WORDS") +
                           "; send both (one weight per word) or neither");
  }
  const int64_t words_per_row = in.RowSize(*words), weights_per_row = in.RowSize(*weights);
  const int32_t vocab = tokenizer.vocab_size();
  for (int64_t b = 0; b < in.batch(); ++b) {
    const auto first_word = words->str.begin() + b * words_per_row;
    auto ids =
        TokenizeWords(tokenizer, std::vector<std::string>(first_word, first_word + words_per_row));
    if (!ids.ok()) return InRow("EMBEDDING_BIAS_WORDS", b, ids.status());
    auto bias = BuildEmbeddingBias(
        *ids, std::span<const float>(weights->f32.data() + b * weights_per_row, weights_per_row),
        vocab);
    if (!bias.ok()) {
      return InvalidArgument("inputs EMBEDDING_BIAS_WORDS " + ShapeString(words->shape) +
                             " and EMBEDDING_BIAS_WEIGHTS " + ShapeString(weights->shape) +
                             " row " + std::to_string(b) + ": " + bias.status().message());
    }
    out.f32.insert(out.f32.end(), bias->begin(), bias->end());
  }
  out.shape = OutShape(in, {vocab});
  return out;
}

}  // namespace

const std::vector<std::string>& PreprocessOutputNames() {
  static const std::vector<std::string> kNames = {
      "INPUT_ID",      "DECODER_INPUT_ID", "REQUEST_INPUT_LEN",  "REQUEST_DECODER_INPUT_LEN",
      "BAD_WORDS_IDS", "STOP_WORDS_IDS",   "REQUEST_OUTPUT_LEN", "EMBEDDING_BIAS",
      "OUT_END_ID",    "OUT_PAD_ID"};
  return kNames;
}

Result<std::vector<HostTensor>> Preprocess(const Tokenizer& tokenizer,
                                           const PreprocessOptions& options,
                                           const std::vector<HostTensor>& inputs,
                                           const std::vector<std::string>& requested) {
  Inputs in(inputs, options.batched);
  ASSIGN_OR_RETURN(const HostTensor* query, in.Get("QUERY", Type::kString, true));
  in.set_batch(options.batched ? query->shape[0] : 1);
  ASSIGN_OR_RETURN(const HostTensor* output_len, in.Get("REQUEST_OUTPUT_LEN", Type::kInt32, true));

  const std::optional<int32_t> tokenizer_pad =
      tokenizer.pad_id() ? tokenizer.pad_id() : tokenizer.eos_id();
  std::vector<HostTensor> outputs;
  // Computed once, used by INPUT_ID and REQUEST_INPUT_LEN.
  std::optional<std::vector<std::vector<int32_t>>> query_ids, decoder_ids;
  std::optional<HostTensor> pad_ids;
  auto get_pad_ids = [&]() -> Status {
    if (!pad_ids) {
      ASSIGN_OR_RETURN(pad_ids, IdPerRow(in, "PAD_ID", "OUT_PAD_ID", tokenizer_pad,
                                         "the tokenizer names neither pad_token nor eos_token"));
    }
    return Status::Ok();
  };
  // Without DECODER_QUERY the decoder input is one pad id per row, as in NVIDIA's model.
  auto get_decoder_ids = [&]() -> Status {
    if (decoder_ids) return Status::Ok();
    ASSIGN_OR_RETURN(const HostTensor* dq, in.Get("DECODER_QUERY", Type::kString, false));
    if (dq != nullptr) {
      ASSIGN_OR_RETURN(decoder_ids, EncodeRows(tokenizer, in, *dq, options.add_special_tokens));
      return Status::Ok();
    }
    RETURN_IF_ERROR(get_pad_ids());
    decoder_ids.emplace();
    for (int32_t pad : pad_ids->i32) decoder_ids->push_back({pad});
    return Status::Ok();
  };

  for (const std::string& name : requested) {
    if (name == "INPUT_ID" || name == "REQUEST_INPUT_LEN") {
      if (!query_ids) {
        ASSIGN_OR_RETURN(query_ids, EncodeRows(tokenizer, in, *query, options.add_special_tokens));
      }
      outputs.push_back(name == "INPUT_ID"
                            ? PaddedIds(name, in, *query_ids, tokenizer_pad.value_or(0))
                            : Lengths(name, in, *query_ids));
    } else if (name == "DECODER_INPUT_ID" || name == "REQUEST_DECODER_INPUT_LEN") {
      RETURN_IF_ERROR(get_decoder_ids());
      outputs.push_back(name == "DECODER_INPUT_ID"
                            ? PaddedIds(name, in, *decoder_ids, tokenizer_pad.value_or(0))
                            : Lengths(name, in, *decoder_ids));
    } else if (name == "REQUEST_OUTPUT_LEN") {
      HostTensor copy = *output_len;
      outputs.push_back(std::move(copy));
    } else if (name == "BAD_WORDS_IDS") {
      ASSIGN_OR_RETURN(HostTensor t, WordList(tokenizer, in, "BAD_WORDS_DICT", name));
      outputs.push_back(std::move(t));
    } else if (name == "STOP_WORDS_IDS") {
      ASSIGN_OR_RETURN(HostTensor t, WordList(tokenizer, in, "STOP_WORDS_DICT", name));
      outputs.push_back(std::move(t));
    } else if (name == "EMBEDDING_BIAS") {
      ASSIGN_OR_RETURN(HostTensor t, EmbeddingBias(tokenizer, in));
      outputs.push_back(std::move(t));
    } else if (name == "OUT_END_ID") {
      ASSIGN_OR_RETURN(HostTensor t, IdPerRow(in, "END_ID", name, tokenizer.eos_id(),
                                              "the tokenizer names no eos_token"));
      outputs.push_back(std::move(t));
    } else if (name == "OUT_PAD_ID") {
      RETURN_IF_ERROR(get_pad_ids());
      outputs.push_back(*pad_ids);
    } else if (name == "OUT_PROMPT_TABLE_EXTRA_IDS") {
      // NOTE: only made from PROMPT_TABLE_EXTRA_ID, which serves prompt tables (p-tuning); the LLM
      // model has none yet, so without that input the output is simply absent, as in NVIDIA's
      // model.
      for (const HostTensor& t : inputs) {
        if (t.name == "PROMPT_TABLE_EXTRA_ID") {
          return Unsupported(
              "input PROMPT_TABLE_EXTRA_ID is not supported: prompt tables are not "
              "implemented yet");
        }
      }
    } else {
      std::string known;
      for (const std::string& n : PreprocessOutputNames()) known += (known.empty() ? "" : ", ") + n;
      return InvalidArgument("output " + name +
                             " is not produced by the preprocessing model; it produces: " + known);
    }
  }
  return outputs;
}

Result<std::vector<HostTensor>> Postprocess(const Tokenizer& tokenizer,
                                            const PostprocessOptions& options,
                                            const std::vector<HostTensor>& inputs,
                                            const std::vector<std::string>& requested) {
  for (const std::string& name : requested) {
    if (name != "OUTPUT") {
      return InvalidArgument("output " + name +
                             " is not produced by the postprocessing model; it produces: OUTPUT");
    }
  }
  Inputs in(inputs, options.batched);
  ASSIGN_OR_RETURN(const HostTensor* tokens, in.Get("TOKENS_BATCH", Type::kInt32, true));
  const size_t rank = options.batched ? 3 : 2;
  if (tokens->shape.size() != rank) {
    return InvalidArgument("input TOKENS_BATCH has shape " + ShapeString(tokens->shape) +
                           "; expected " +
                           (options.batched ? "[batch, beams, length]" : "[beams, length]"));
  }
  const int64_t batch = options.batched ? tokens->shape[0] : 1;
  in.set_batch(batch);
  const int64_t beams = tokens->shape[rank - 2], length = tokens->shape[rank - 1];
  ASSIGN_OR_RETURN(const HostTensor* seq_len, in.Get("SEQUENCE_LENGTH", Type::kInt32, false));
  if (seq_len != nullptr && seq_len->num_elements() != batch * beams) {
    return InvalidArgument("input SEQUENCE_LENGTH has shape " + ShapeString(seq_len->shape) +
                           "; expected one length per beam of TOKENS_BATCH " +
                           ShapeString(tokens->shape));
  }
  HostTensor out;
  out.name = "OUTPUT";
  out.type = Type::kString;
  out.shape = OutShape(in, {beams});
  std::vector<int32_t> ids;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t k = 0; k < beams; ++k) {
      const int64_t row = b * beams + k;
      int64_t n = length;
      if (seq_len != nullptr) {
        n = seq_len->i32[static_cast<size_t>(row)];
        if (n < 0 || n > length) {
          return InvalidArgument(
              "input SEQUENCE_LENGTH[" + std::to_string(b) + "][" + std::to_string(k) + "] is " +
              std::to_string(n) + "; accepted: 0.." + std::to_string(length) +
              " (the length of TOKENS_BATCH " + ShapeString(tokens->shape) + ")");
        }
      }
      ids.clear();
      const int32_t* begin = tokens->i32.data() + row * length;
      std::copy_if(begin, begin + n, std::back_inserter(ids), [](int32_t id) { return id >= 0; });
      auto text = tokenizer.Decode(ids, options.skip_special_tokens);
      if (!text.ok()) {
        return InvalidArgument("input TOKENS_BATCH[" + std::to_string(b) + "][" +
                               std::to_string(k) + "]: " + text.status().message());
      }
      out.str.push_back(std::move(text).value());
    }
  }
  std::vector<HostTensor> outputs;
  outputs.push_back(std::move(out));
  return outputs;
}

}  // namespace inflight::tokenizer
