// libFuzzer target: a generate extension body (POST /v2/models/<m>/generate) through the HTTP
// frontend's decoder (ParseJsonBody, ParseGenerateRequest) against the inputs of the ensemble
// model of all_models/inflight_batcher_llm, with and without a batch dimension, and the decoded
// tensors back through the response encoder (GenerateResponseToJson).
//
// Input: byte 0 bit 0 chooses batching (max_batch_size > 0); the rest is the body.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/http/http_generate_json.h"
#include "server/http/http_infer_json.h"
#include "server/http/http_tensor_json.h"

namespace {

using namespace inflight::server::http;
using inflight::server::InferResponse;
using inflight::server::ModelMetadata;
using inflight::server::Tensor;
using inflight::server::TensorMetadata;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_generate_json: %s\n", what.c_str());
  std::abort();
}

// A selection of the ensemble's inputs (all_models/inflight_batcher_llm/ensemble/config.pbtxt),
// one of each datatype and rank it uses; `batching` prepends the batch dim as Triton's metadata
// does.
ModelMetadata EnsembleMetadata(bool batching) {
  struct Input {
    const char* name;
    TRITONSERVER_DataType datatype;
    std::vector<std::int64_t> dims;
  };
  const Input inputs[] = {
      {"text_input", TRITONSERVER_TYPE_BYTES, {1}},
      {"max_tokens", TRITONSERVER_TYPE_INT32, {1}},
      {"bad_words", TRITONSERVER_TYPE_BYTES, {-1}},
      {"stop_words", TRITONSERVER_TYPE_BYTES, {-1}},
      {"end_id", TRITONSERVER_TYPE_INT32, {1}},
      {"top_k", TRITONSERVER_TYPE_INT32, {1}},
      {"top_p", TRITONSERVER_TYPE_FP32, {1}},
      {"temperature", TRITONSERVER_TYPE_FP32, {1}},
      {"random_seed", TRITONSERVER_TYPE_UINT64, {1}},
      {"return_log_probs", TRITONSERVER_TYPE_BOOL, {1}},
      {"stream", TRITONSERVER_TYPE_BOOL, {1}},
      {"embedding_bias_words", TRITONSERVER_TYPE_BYTES, {-1}},
      {"embedding_bias_weights", TRITONSERVER_TYPE_FP32, {-1}},
      {"input_ids", TRITONSERVER_TYPE_INT32, {-1}},
      {"prompt_table", TRITONSERVER_TYPE_FP16, {-1, -1}},
  };
  ModelMetadata metadata;
  metadata.name = "ensemble";
  metadata.platform = "ensemble";
  for (const Input& input : inputs) {
    TensorMetadata t{input.name, input.datatype, input.dims, true};
    if (batching) t.shape.insert(t.shape.begin(), -1);
    metadata.inputs.push_back(std::move(t));
  }
  return metadata;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const ModelMetadata kBatched = EnsembleMetadata(true);
  static const ModelMetadata kUnbatched = EnsembleMetadata(false);
  const bool batching = data[0] & 1;
  auto body = ParseJsonBody(std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));
  if (!body.ok()) return 0;
  auto request = ParseGenerateRequest(*body, batching ? kBatched : kUnbatched, batching, 1);
  if (!request.ok()) {
    if (request.status().message().empty()) Fail("error without a message");
    return 0;
  }
  for (const Tensor& tensor : request->inputs) {
    auto expected = ElementCount(tensor.shape, tensor.name);
    auto found = EncodedElementCount(tensor);
    if (!expected.ok() || !found.ok() || *expected != *found) {
      Fail("input \"" + tensor.name + "\" was accepted with data not filling its shape");
    }
    if (batching && (tensor.shape.empty() || tensor.shape.size() < 2)) {
      Fail("batched input \"" + tensor.name + "\" has no batch dimension");
    }
  }
  InferResponse response;
  response.model_name = "ensemble";
  response.id = request->id;
  response.outputs = request->inputs;
  auto encoded = GenerateResponseToJson(response);
  if (!encoded.ok()) Fail("accepted inputs do not encode: " + encoded.status().message());
  (void)DumpJson(*encoded);
  return 0;
}
