// libFuzzer target: a KServe v2 infer request body (POST /v2/models/<m>/infer) through the HTTP
// frontend's decoder: ParseJsonBody, ParseInferRequest. A request that decodes is checked and then
// sent back through the response encoder (InferResponseToJson) and decoded again: the tensors must
// come back with the same datatype, shape and bytes.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/http/http_infer_json.h"
#include "server/http/http_tensor_json.h"

namespace {

using namespace inflight::server::http;
using inflight::server::InferRequest;
using inflight::server::InferResponse;
using inflight::server::Tensor;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_infer_json: %s\n", what.c_str());
  std::abort();
}

void CheckTensor(const Tensor& tensor) {
  auto expected = ElementCount(tensor.shape, tensor.name);
  auto found = EncodedElementCount(tensor);
  if (!expected.ok() || !found.ok() || *expected != *found) {
    Fail("input \"" + tensor.name + "\" was accepted with data not filling its shape");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text_in(reinterpret_cast<const char*>(data), size);
  auto body = ParseJsonBody(text_in);
  if (!body.ok()) return 0;
  // A body without Inference-Header-Content-Length: all JSON, no binary part.
  InferBody parts;
  parts.json = text_in;
  auto parsed = ParseInferRequest(*body, parts, "fuzz", 1);
  if (!parsed.ok()) {
    if (parsed.status().message().empty()) Fail("error without a message");
    return 0;
  }
  const InferRequest& request = parsed->request;
  for (const Tensor& tensor : request.inputs) CheckTensor(tensor);

  InferResponse response;
  response.model_name = "fuzz";
  response.model_version = 1;
  response.id = request.id;
  response.parameters = request.parameters;
  response.outputs = request.inputs;
  std::string binary;
  auto encoded = InferResponseToJson(response, BinaryOutputChoice(), binary);
  if (!binary.empty()) Fail("outputs asked for as JSON were written as binary");
  if (!encoded.ok()) Fail("accepted inputs do not encode: " + encoded.status().message());
  const std::string text = DumpJson(*encoded);

  // The response's outputs, sent back as inputs, decode to the same tensors.
  auto reparsed = ParseJsonBody(text);
  if (!reparsed.ok()) Fail("response is not JSON: " + text);
  nlohmann::json again = {{"inputs", (*reparsed)["outputs"]}};
  auto round_trip = ParseInferRequest(again, InferBody(), "fuzz", 1);
  if (!round_trip.ok()) Fail("response outputs do not decode: " + round_trip.status().message());
  if (round_trip->request.inputs.size() != request.inputs.size()) Fail("round trip lost inputs");
  for (std::size_t i = 0; i < request.inputs.size(); ++i) {
    const Tensor& a = request.inputs[i];
    const Tensor& b = round_trip->request.inputs[i];
    if (a.name != b.name || a.datatype != b.datatype || a.shape != b.shape || a.data != b.data) {
      Fail("input \"" + a.name + "\" changed in the round trip: " + text);
    }
  }
  return 0;
}
