#include "executor/sampling/decoding_validation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace inflight::sampling {
namespace {

constexpr std::int64_t kVocab = 5;

Request ValidRequest() {
  Request r;
  r.input_token_ids = {1, 2};
  r.max_tokens = 4;
  r.end_id = 4;
  r.pad_id = 0;
  r.stop_words = {{1, 2}};
  r.bad_words = {{3}};
  r.embedding_bias = std::vector<float>(kVocab, 0.0f);
  r.embedding_bias->at(2) = -std::numeric_limits<float>::infinity();
  r.sampling_config.top_k = static_cast<SizeType>(kVocab);
  r.sampling_config.top_p = 1.0f;
  r.sampling_config.temperature = 0.0f;
  r.sampling_config.repetition_penalty = 1.2f;
  r.sampling_config.presence_penalty = -0.5f;
  r.sampling_config.frequency_penalty = 0.5f;
  r.sampling_config.min_tokens = 0;
  return r;
}

void ExpectError(const Request& r, StatusCode code, const std::string& message) {
  const Status st = ValidateDecodingInputs(r, kVocab);
  EXPECT_EQ(st.code(), code) << st.ToString();
  EXPECT_EQ(st.message(), message);
}

template <typename Mutate>
void ExpectInvalid(Mutate mutate, const std::string& message) {
  Request r = ValidRequest();
  mutate(r);
  ExpectError(r, StatusCode::kInvalidArgument, message);
}

TEST(ValidateDecodingInputs, AcceptsValidRequest) {
  const Status st = ValidateDecodingInputs(ValidRequest(), kVocab);
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(ValidateDecodingInputs(Request{}, kVocab).ok());
}

TEST(ValidateDecodingInputs, BeamSearchAndReturnSequences) {
  Request r = ValidRequest();
  r.sampling_config.beam_width = 4;
  ExpectError(
      r, StatusCode::kUnsupported,
      "beam_width 4 is not supported: beam search is not implemented yet (only beam_width 1)");
  r.sampling_config.beam_width = 0;
  ExpectError(r, StatusCode::kInvalidArgument,
              "beam_width 0 is out of range: accepted 1 (beam search is not implemented yet)");
  r = ValidRequest();
  r.num_return_sequences = 2;
  ExpectError(
      r, StatusCode::kUnsupported,
      "num_return_sequences 2 is not supported: only num_return_sequences 1 is implemented");
  r.num_return_sequences = 0;
  ExpectError(r, StatusCode::kInvalidArgument,
              "num_return_sequences 0 is out of range: accepted 1");
}

TEST(ValidateDecodingInputs, SamplingRanges) {
  ExpectInvalid([](Request& r) { r.sampling_config.top_k = -1; },
                "top_k -1 is out of range: accepted [0, vocab_size] (0: no limit)");
  ExpectInvalid([](Request& r) { r.sampling_config.top_k = 6; },
                "top_k 6 is out of range: accepted [0, 5] (vocab_size 5; 0: no limit)");
  ExpectInvalid([](Request& r) { r.sampling_config.top_p = 1.5f; },
                "top_p 1.5 is out of range: accepted (0, 1], or <= 0 for off");
  ExpectInvalid([](Request& r) { r.sampling_config.top_p = std::nanf(""); },
                "top_p nan is out of range: accepted (0, 1], or <= 0 for off");
  ExpectInvalid([](Request& r) { r.sampling_config.temperature = -0.5f; },
                "temperature -0.5 is out of range: accepted [0, inf) (0: greedy)");
  ExpectInvalid([](Request& r) { r.sampling_config.temperature = INFINITY; },
                "temperature inf is out of range: accepted [0, inf) (0: greedy)");
  ExpectInvalid([](Request& r) { r.sampling_config.repetition_penalty = 0.0f; },
                "repetition_penalty 0 is out of range: accepted (0, inf) (1: off)");
  ExpectInvalid([](Request& r) { r.sampling_config.presence_penalty = std::nanf(""); },
                "presence_penalty nan is out of range: accepted finite values (0: off)");
  ExpectInvalid([](Request& r) { r.sampling_config.frequency_penalty = -INFINITY; },
                "frequency_penalty -inf is out of range: accepted finite values (0: off)");
  ExpectInvalid([](Request& r) { r.sampling_config.min_tokens = -1; },
                "min_tokens -1 is out of range: accepted >= 0");
}

TEST(ValidateDecodingInputs, OffValuesAreAccepted) {
  Request r = ValidRequest();
  r.sampling_config.top_k = 0;
  r.sampling_config.top_p = -1.0f;  // <= 0 means off, as NVIDIA's runtime_top_p
  EXPECT_TRUE(ValidateDecodingInputs(r, kVocab).ok());
}

TEST(ValidateDecodingInputs, TokenIds) {
  ExpectInvalid([](Request& r) { r.end_id = 5; },
                "end_id 5 is out of range: accepted [0, 5) (vocab_size 5)");
  ExpectInvalid([](Request& r) { r.pad_id = -1; },
                "pad_id -1 is out of range: accepted [0, 5) (vocab_size 5)");
  ExpectInvalid(
      [](Request& r) {
        r.stop_words = {{1}, {2, 9}};
      },
      "stop_words[1][1] 9 is out of range: accepted [0, 5) (vocab_size 5)");
  ExpectInvalid([](Request& r) { r.bad_words = {{-3}}; },
                "bad_words[0][0] -3 is out of range: accepted [0, 5) (vocab_size 5)");
  ExpectInvalid(
      [](Request& r) {
        r.stop_words = {{1}, {}};
      },
      "stop_words[1] is empty: accepted sequences of 1 or more token ids");
}

TEST(ValidateDecodingInputs, EmbeddingBias) {
  ExpectInvalid([](Request& r) { r.embedding_bias = std::vector<float>(3, 0.0f); },
                "embedding_bias has 3 values: expected vocab_size 5");
  ExpectInvalid([](Request& r) { r.embedding_bias->at(1) = std::nanf(""); },
                "embedding_bias[1] nan is invalid: accepted finite values or -inf");
  ExpectInvalid([](Request& r) { r.embedding_bias->at(4) = INFINITY; },
                "embedding_bias[4] inf is invalid: accepted finite values or -inf");
}

TEST(SamplingConfig, IsGreedy) {
  SamplingConfig c;
  EXPECT_TRUE(c.IsGreedy());  // nothing set
  c.top_k = 0;
  c.top_p = 0.0f;
  EXPECT_TRUE(c.IsGreedy());  // set, but off
  c.temperature = 0.7f;
  // Temperature alone is greedy, as in TensorRT-LLM: neither top_k nor top_p asks for a sample.
  EXPECT_TRUE(c.IsGreedy());
  c.top_p = 1.0f;
  EXPECT_FALSE(c.IsGreedy());  // top_p 1 samples from the whole (tempered) distribution
  c.top_p = 0.0f;
  c.temperature = 0.0f;
  c.top_k = 50;
  EXPECT_TRUE(c.IsGreedy());
  c.temperature.reset();
  EXPECT_FALSE(c.IsGreedy());
  c.top_k = 1;
  c.top_p = 0.9f;
  EXPECT_TRUE(c.IsGreedy());
  c.top_k.reset();
  EXPECT_FALSE(c.IsGreedy());
}

}  // namespace
}  // namespace inflight::sampling
