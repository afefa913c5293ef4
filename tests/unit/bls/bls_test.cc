// tensorrt_llm_bls without a Triton core: where its tokenizer comes from, how a request splits into
// rows and is handed on under tensorrt_llm's names, and text streamed without cutting characters.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "bls/bls_config.h"
#include "bls/bls_inputs.h"
#include "config/model_config_loader.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"
#include "unit/tokenizer/test_data.h"

namespace inflight::bls {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const tokenizer::Tokenizer& Gpt2() {
  static auto t = tokenizer::Tokenizer::Load(tokenizer::testing::Gpt2Dir());
  EXPECT_TRUE(t.ok()) << t.status().message();
  return **t;
}

// A repository folder with a tensorrt_llm_bls model and, optionally, a preprocessing model.
class Repo {
 public:
  Repo()
      : root_(fs::temp_directory_path() /
              ("bls_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++))) {
    fs::create_directories(root_ / "tensorrt_llm_bls");
  }
  ~Repo() { fs::remove_all(root_); }
  void Write(const std::string& model, const std::string& text) {
    fs::create_directories(root_ / model);
    std::ofstream(root_ / model / "config.pbtxt") << text;
  }
  std::string BlsPath() const { return (root_ / "tensorrt_llm_bls").string(); }

 private:
  static inline int counter_ = 0;
  fs::path root_;
};

std::string Param(const std::string& key, const std::string& value) {
  return "parameters { key: \"" + key + "\" value: { string_value: \"" + value + "\" } }\n";
}

inference::ModelConfig BlsConfigText(const std::string& extra, bool decoupled = true) {
  const std::string text =
      "name: \"tensorrt_llm_bls\"\nbackend: \"inflight_bls\"\nmax_batch_size: 8\n"
      "model_transaction_policy { decoupled: " +
      std::string(decoupled ? "true" : "false") +
      " }\n"
      "output [ { name: \"text_output\" data_type: TYPE_STRING dims: [ -1 ] },"
      " { name: \"batch_index\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n" +
      extra;
  auto parsed = config::ParseModelConfigText(text);
  EXPECT_TRUE(parsed.ok()) << parsed.status().message();
  return *parsed;
}

TEST(BlsConfig, TokenizerComesFromThePreprocessingModelBesideIt) {
  Repo repo;
  repo.Write("preprocessing", "name: \"preprocessing\"\n" + Param("tokenizer_dir", "/models/gpt2") +
                                  Param("add_special_tokens", "false"));
  repo.Write("postprocessing",
             "name: \"postprocessing\"\n" + Param("skip_special_tokens", "false"));
  auto config =
      LoadBlsConfig(BlsConfigText(Param("accumulate_tokens", "true") +
                                  Param("tensorrt_llm_model_name", "${tensorrt_llm_model_name}")),
                    repo.BlsPath());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->tokenizer_dir, "/models/gpt2");
  EXPECT_FALSE(config->add_special_tokens);
  EXPECT_FALSE(config->skip_special_tokens);
  EXPECT_TRUE(config->accumulate_tokens);
  EXPECT_EQ(config->llm_model_name, "tensorrt_llm");  // unfilled: the default
  EXPECT_TRUE(config->decoupled);
  EXPECT_THAT(config->outputs, ::testing::ElementsAre("text_output", "batch_index"));
  // Its own tokenizer_dir wins.
  auto own = LoadBlsConfig(BlsConfigText(Param("tokenizer_dir", "/elsewhere")), repo.BlsPath());
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(own->tokenizer_dir, "/elsewhere");
}

TEST(BlsConfig, WhatItCannotDoIsRefusedByName) {
  Repo repo;
  auto none = LoadBlsConfig(BlsConfigText(""), repo.BlsPath());
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(), HasSubstr("no tokenizer"));
  EXPECT_THAT(none.status().message(), HasSubstr("set tokenizer_dir"));
  auto draft = LoadBlsConfig(
      BlsConfigText(Param("tokenizer_dir", "/t") + Param("tensorrt_llm_draft_model_name", "draft")),
      repo.BlsPath());
  ASSERT_FALSE(draft.ok());
  EXPECT_EQ(draft.status().code(), StatusCode::kUnsupported);
  EXPECT_THAT(draft.status().message(), HasSubstr("tensorrt_llm_draft_model_name \"draft\""));
  auto bad = LoadBlsConfig(
      BlsConfigText(Param("tokenizer_dir", "/t") + Param("accumulate_tokens", "maybe")),
      repo.BlsPath());
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("accumulate_tokens"));
}

BlsConfig Config(bool decoupled = true) {
  BlsConfig c;
  c.decoupled = decoupled;
  c.outputs = {"text_output"};
  return c;
}

std::vector<RawTensor> Request(const std::vector<std::string>& texts, int32_t max_tokens,
                               std::vector<RawTensor> extra = {}) {
  const int64_t batch = static_cast<int64_t>(texts.size());
  std::vector<RawTensor> out = {
      MakeBytesTensor("text_input", {batch, 1}, texts),
      MakeTensor<int32_t>("max_tokens", TRITONSERVER_TYPE_INT32, {batch, 1},
                          std::vector<int32_t>(batch, max_tokens))};
  for (auto& t : extra) out.push_back(std::move(t));
  return out;
}

const RawTensor* Find(const std::vector<RawTensor>& tensors, const std::string& name) {
  for (const RawTensor& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

TEST(BlsRows, InputsAreHandedOnUnderTensorrtLlmNamesRowByRow) {
  auto rows = BuildRows(
      Request({"Hello there", "Second"}, 5,
              {MakeTensor<int32_t>("top_k", TRITONSERVER_TYPE_INT32, {2, 1}, {1, 4}),
               MakeTensor<float>("length_penalty", TRITONSERVER_TYPE_FP32, {2, 1}, {1.0f, 0.5f}),
               MakeTensor<uint8_t>("stream", TRITONSERVER_TYPE_BOOL, {2, 1}, {1, 1}),
               MakeBytesTensor("stop_words", {2, 2}, {"a", "b", "c", "d"})}),
      Config());
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows->size(), 2u);
  const RowRequest& second = (*rows)[1];
  EXPECT_EQ(second.row, 1);
  EXPECT_EQ(second.text, "Second");
  EXPECT_EQ(second.max_tokens, 5);
  EXPECT_TRUE(second.stream);
  const RawTensor* top_k = Find(second.forwarded, "runtime_top_k");
  ASSERT_NE(top_k, nullptr);
  EXPECT_EQ(top_k->shape, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(*FirstValue<int32_t>(*top_k), 4);
  ASSERT_NE(Find(second.forwarded, "len_penalty"), nullptr);
  EXPECT_EQ(*FirstValue<float>(*Find(second.forwarded, "len_penalty")), 0.5f);
  ASSERT_NE(Find(second.forwarded, "streaming"), nullptr);
  EXPECT_EQ(Find(second.forwarded, "top_k"), nullptr);

  auto inputs = LlmInputs(Gpt2(), true, second);
  ASSERT_TRUE(inputs.ok()) << inputs.status().message();
  const RawTensor* ids = Find(*inputs, "input_ids");
  ASSERT_NE(ids, nullptr);
  auto expected = Gpt2().Encode("Second", true);
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(ids->shape, (std::vector<int64_t>{1, static_cast<int64_t>(expected->size())}));
  std::vector<int32_t> got(expected->size());
  std::memcpy(got.data(), ids->data.data(), got.size() * 4);
  EXPECT_EQ(got, *expected);
  EXPECT_EQ(*FirstValue<int32_t>(*Find(*inputs, "input_lengths")),
            static_cast<int32_t>(expected->size()));
  EXPECT_EQ(*FirstValue<int32_t>(*Find(*inputs, "request_output_len")), 5);
  EXPECT_EQ(*FirstValue<int32_t>(*Find(*inputs, "end_id")), 50256);  // GPT-2's <|endoftext|>
  // Row 1's stop words ("c", "d") in NVIDIA's [1, 2, N] layout: ids, then cumulative ends.
  const RawTensor* stop = Find(*inputs, "stop_words_list");
  ASSERT_NE(stop, nullptr);
  ASSERT_EQ(stop->shape.size(), 3u);
  EXPECT_EQ(stop->shape[1], 2);
  const std::vector<int32_t> c = *Gpt2().Encode("c", false), d = *Gpt2().Encode("d", false);
  std::vector<int32_t> words(stop->data.size() / 4);
  std::memcpy(words.data(), stop->data.data(), stop->data.size());
  EXPECT_EQ(words[0], c[0]);
  EXPECT_EQ(words[c.size()], d[0]);
  EXPECT_EQ(words[stop->shape[2]], static_cast<int32_t>(c.size()));
  EXPECT_EQ(Find(*inputs, "bad_words_list"), nullptr);  // no bad words: the input is left out
}

TEST(BlsRows, BadRequestsNameTheInputAndWhatIsAccepted) {
  struct Case {
    std::vector<RawTensor> inputs;
    bool decoupled;
    StatusCode code;
    std::string text;
  };
  std::vector<Case> cases;
  cases.push_back({{MakeTensor<int32_t>("max_tokens", TRITONSERVER_TYPE_INT32, {1, 1}, {3})},
                   true,
                   StatusCode::kInvalidArgument,
                   "text_input is required"});
  cases.push_back({Request({"x"}, 0), true, StatusCode::kInvalidArgument,
                   "max_tokens must be a single value > 0, got 0"});
  cases.push_back(
      {Request({"x"}, 4, {MakeTensor<uint8_t>("stream", TRITONSERVER_TYPE_BOOL, {1, 1}, {1})}),
       false, StatusCode::kInvalidArgument, "stream true needs a decoupled model"});
  cases.push_back(
      {Request({"x", "y"}, 4), false, StatusCode::kInvalidArgument, "text_input holds 2 rows"});
  cases.push_back(
      {Request({"x"}, 4,
               {MakeTensor<int32_t>("num_draft_tokens", TRITONSERVER_TYPE_INT32, {1, 1}, {3})}),
       true, StatusCode::kUnsupported, "num_draft_tokens 3 asks for speculative"});
  cases.push_back({Request({"x"}, 4, {MakeBytesTensor("decoder_text_input", {1, 1}, {"y"})}), true,
                   StatusCode::kUnsupported, "decoder_text_input is not accepted"});
  cases.push_back(
      {Request({"x"}, 4,
               {MakeTensor<uint8_t>("stream", TRITONSERVER_TYPE_BOOL, {1, 1}, {1}),
                MakeTensor<int32_t>("beam_width", TRITONSERVER_TYPE_INT32, {1, 1}, {2})}),
       true, StatusCode::kUnsupported, "stream true with beam_width 2"});
  cases.push_back(
      {Request({"x"}, 4,
               {MakeTensor<int32_t>("no_such_input", TRITONSERVER_TYPE_INT32, {1, 1}, {1})}),
       true, StatusCode::kInvalidArgument,
       "input 'no_such_input' is not an input of tensorrt_llm_bls"});
  for (size_t i = 0; i < cases.size(); ++i) {
    auto rows = BuildRows(cases[i].inputs, Config(cases[i].decoupled));
    ASSERT_FALSE(rows.ok()) << "case " << i;
    EXPECT_EQ(rows.status().code(), cases[i].code) << "case " << i;
    EXPECT_THAT(rows.status().message(), HasSubstr(cases[i].text)) << "case " << i;
  }
}

TEST(BlsTextStream, ACharacterSplitAcrossTokensIsHeldUntilItIsWhole) {
  // GPT-2 byte-level ids 19526 and 254 are the UTF-8 bytes E4 BD and A0 of "你": alone, the first
  // decodes to U+FFFD.
  tokenizer::StreamDecoder stream(Gpt2(), true);
  const int32_t first[] = {19526};
  const int32_t second[] = {254};
  auto a = stream.Push(first);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, "");
  auto b = stream.Push(second);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, "你");
  EXPECT_EQ(stream.Finish(), "");
  EXPECT_EQ(stream.text(), "你");
}

TEST(BlsTextStream, PiecesAddUpToTheDecodingOfAllIdsOnRandomStreams) {
  std::mt19937 rng(20261126);
  // Byte tokens (most of GPT-2's first 256 ids are single bytes, many of them UTF-8 fragments),
  // ordinary words and the end-of-text id.
  std::uniform_int_distribution<int32_t> byte_id(0, 255), any_id(0, 50256);
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<int32_t> ids;
    const int n = 1 + static_cast<int>(rng() % 40);
    ids.reserve(n);
    for (int i = 0; i < n; ++i) ids.push_back(rng() % 3 == 0 ? any_id(rng) : byte_id(rng));
    for (bool skip : {true, false}) {
      tokenizer::StreamDecoder stream(Gpt2(), skip);
      std::string pieces;
      for (size_t i = 0; i < ids.size();) {
        const size_t k = std::min(ids.size() - i, size_t{1} + rng() % 3);
        auto piece = stream.Push(std::span<const int32_t>(ids.data() + i, k));
        ASSERT_TRUE(piece.ok()) << piece.status().message();
        pieces += *piece;
        EXPECT_EQ(stream.text(), pieces);
        i += k;
      }
      pieces += stream.Finish();
      EXPECT_EQ(pieces, *Gpt2().Decode(ids, skip)) << "trial " << trial << " seed 20261126";
    }
  }
}

}  // namespace
}  // namespace inflight::bls
