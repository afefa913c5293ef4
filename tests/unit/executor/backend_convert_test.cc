// The backend's tensor conversions, without a Triton core: NVIDIA's tensor names, shapes and
// errors.
#include <gtest/gtest.h>

#include "backend/request_converter.h"
#include "backend/response_converter.h"

namespace inflight::backend {
namespace {

template <typename T>
HostTensor T1(const char* name, TRITONSERVER_DataType dt, std::vector<std::int64_t> shape,
              std::vector<T> v) {
  return HostTensor::From<T>(name, dt, std::move(shape), std::span<const T>(v));
}

HostTensor Bool(const char* name, bool v) {
  const bool values[] = {v};
  return HostTensor::From<bool>(name, TRITONSERVER_TYPE_BOOL, {1, 1},
                                std::span<const bool>(values));
}

TensorMap BasicInputs(std::vector<std::int32_t> ids, std::int32_t out_len) {
  TensorMap m;
  const auto n = static_cast<std::int64_t>(ids.size());
  m["input_ids"] = T1<std::int32_t>("input_ids", TRITONSERVER_TYPE_INT32, {1, n}, ids);
  m["input_lengths"] = T1<std::int32_t>("input_lengths", TRITONSERVER_TYPE_INT32, {1, 1},
                                        {static_cast<std::int32_t>(n)});
  m["request_output_len"] =
      T1<std::int32_t>("request_output_len", TRITONSERVER_TYPE_INT32, {1, 1}, {out_len});
  return m;
}

const ModelSettings kBatched{false, 64, false};
const ModelSettings kDecoupled{true, 64, false};

TEST(RequestConverter, ReadsNvidiaTensorNames) {
  TensorMap m = BasicInputs({5, 6, 7}, 9);
  m["runtime_top_k"] = T1<std::int32_t>("runtime_top_k", TRITONSERVER_TYPE_INT32, {1, 1}, {4});
  m["runtime_top_p"] = T1<float>("runtime_top_p", TRITONSERVER_TYPE_FP32, {1, 1}, {0.0f});
  m["temperature"] = T1<float>("temperature", TRITONSERVER_TYPE_FP32, {1, 1}, {0.5f});
  m["seed"] = T1<std::uint64_t>("seed", TRITONSERVER_TYPE_UINT64, {1, 1}, {77});
  m["end_id"] = T1<std::int32_t>("end_id", TRITONSERVER_TYPE_INT32, {1, 1}, {-1});
  m["stop_words_list"] =
      T1<std::int32_t>("stop_words_list", TRITONSERVER_TYPE_INT32, {1, 2, 3}, {8, 9, 10, 2, 3, -1});
  auto r = ConvertRequest(m, kBatched);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->rows.size(), 1u);
  const Request& q = r->rows[0];
  EXPECT_EQ(q.input_token_ids, (VecTokens{5, 6, 7}));
  EXPECT_EQ(q.max_tokens, 9);
  EXPECT_EQ(q.sampling_config.top_k, 4);
  EXPECT_FALSE(q.sampling_config.top_p.has_value()) << "top_p <= 0 means unset";
  EXPECT_EQ(q.sampling_config.temperature, 0.5f);
  EXPECT_EQ(q.sampling_config.seed, 77u);
  EXPECT_FALSE(q.end_id.has_value()) << "end_id -1 means none";
  ASSERT_EQ(q.stop_words.size(), 2u);
  EXPECT_EQ(q.stop_words[0], (VecTokens{8, 9}));
  EXPECT_EQ(q.stop_words[1], (VecTokens{10}));
}

TEST(RequestConverter, NvidiaErrorTexts) {
  TensorMap m = BasicInputs({1, 2}, 3);
  m["streaming"] = Bool("streaming", true);
  EXPECT_EQ(ConvertRequest(m, kBatched).status().message(),
            "Streaming is only supported if model is deployed using decoupled mode.");
  TensorMap two;
  two["input_ids"] = T1<std::int32_t>("input_ids", TRITONSERVER_TYPE_INT32, {2, 2}, {1, 2, 3, 4});
  two["input_lengths"] = T1<std::int32_t>("input_lengths", TRITONSERVER_TYPE_INT32, {2, 1}, {2, 1});
  two["request_output_len"] =
      T1<std::int32_t>("request_output_len", TRITONSERVER_TYPE_INT32, {2, 1}, {3, 4});
  EXPECT_EQ(
      ConvertRequest(two, kBatched).status().message(),
      "Batch size > 1 requires the tensorrt_llm backend to be using decoupled transaction policy");
  auto ok = ConvertRequest(two, kDecoupled);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_EQ(ok->rows.size(), 2u);
  EXPECT_EQ(ok->rows[1].input_token_ids, (VecTokens{3}));
  EXPECT_EQ(ok->rows[1].max_tokens, 4);

  TensorMap wrong = BasicInputs({1}, 3);
  wrong["temperature"] = T1<double>("temperature", TRITONSERVER_TYPE_FP64, {1, 1}, {0.5});
  EXPECT_EQ(ConvertRequest(wrong, kBatched).status().message(),
            "input 'temperature' has datatype FP64; expected FP32");
  TensorMap missing = BasicInputs({1}, 3);
  missing.erase("request_output_len");
  EXPECT_EQ(ConvertRequest(missing, kBatched).status().message(),
            "input 'request_output_len' is required");
  TensorMap bad_words = BasicInputs({1}, 3);
  bad_words["bad_words_list"] =
      T1<std::int32_t>("bad_words_list", TRITONSERVER_TYPE_INT32, {1, 2, 2}, {4, 5, 3, -1});
  EXPECT_FALSE(ConvertRequest(bad_words, kBatched).ok()) << "offset 3 is past the 2 flat ids";
}

TEST(RequestConverter, RefusesInputsOfUnservedFeaturesByName) {
  TensorMap m = BasicInputs({5, 6, 7}, 9);
  m["lora_task_id"] = T1<std::uint64_t>("lora_task_id", TRITONSERVER_TYPE_UINT64, {1, 1}, {3});
  auto r = ConvertRequest(m, kBatched);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "input 'lora_task_id' is not supported: LoRA adapters are not served (send the "
            "request without it)");
  // Empty tensors ask for nothing, and the decoder ids the ensemble always sends are accepted.
  m = BasicInputs({5, 6, 7}, 9);
  m["prompt_embedding_table"] =
      T1<float>("prompt_embedding_table", TRITONSERVER_TYPE_FP32, {1, 0, 4}, {});
  m["decoder_input_ids"] =
      T1<std::int32_t>("decoder_input_ids", TRITONSERVER_TYPE_INT32, {1, 1}, {50256});
  EXPECT_TRUE(ConvertRequest(m, kBatched).ok());
  m["guided_decoding_guide"] =
      T1<std::int32_t>("guided_decoding_guide", TRITONSERVER_TYPE_INT32, {1, 1}, {1});
  r = ConvertRequest(m, kBatched);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("guided decoding is not implemented"), std::string::npos);
}

TEST(ResponseConverter, ShapesAndPadding) {
  ResponseResult r;
  r.is_final = true;
  r.output_token_ids = {{4, 5, 6}};
  r.log_probs = {{-0.5f, -1.0f, -0.25f}};
  r.cum_log_probs = {-1.75f};
  r.vocab_size = 2;
  r.generation_logits = {1, 2, 3, 4, 5, 6};
  RowOutputContext ctx;
  ctx.batch_index = 3;
  ctx.report_batch_index = true;
  const std::set<std::string> want = {"output_ids",    "sequence_length",   "output_log_probs",
                                      "cum_log_probs", "generation_logits", "batch_index"};
  auto out = BuildOutputs(r, ctx, want);
  std::map<std::string, HostTensor> by;
  for (auto& t : out) by[t.name] = t;
  ASSERT_EQ(by.size(), want.size());
  EXPECT_EQ(by["output_ids"].shape, (std::vector<std::int64_t>{1, 1, 3}));
  EXPECT_EQ(by["sequence_length"].As<std::int32_t>()[0], 3);
  EXPECT_EQ(by["output_log_probs"].shape, (std::vector<std::int64_t>{1, 1, 3}));
  EXPECT_EQ(by["generation_logits"].shape, (std::vector<std::int64_t>{1, 1, 3, 2}));
  EXPECT_EQ(by["batch_index"].As<std::int32_t>()[0], 3);
  // Nothing that was not asked for.
  auto ids_only = BuildOutputs(r, ctx, {"output_ids"});
  ASSERT_EQ(ids_only.size(), 1u);
  ctx.logits_dtype = TRITONSERVER_TYPE_FP16;
  auto half = BuildOutputs(r, ctx, {"generation_logits"});
  EXPECT_EQ(half.at(0).dtype, TRITONSERVER_TYPE_FP16);
  EXPECT_EQ(half.at(0).data.size(), 6u * 2);
}

}  // namespace
}  // namespace inflight::backend
