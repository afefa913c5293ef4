// The binary tensor data extension's codec (src/server/http/http_binary_tensors.h) and its use by
// the KServe v2 request parser and response writer (http_infer_json.h): every good layout and
// every malformed one, with the error naming the input, the value and what was expected.
#include "server/http/http_binary_tensors.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "server/http/http_infer_json.h"
#include "server/http/http_wire.h"

namespace inflight::server::http {
namespace {

using nlohmann::json;

template <typename T>
std::string Raw(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// Triton's BYTES serialization: a 4-byte little-endian length before each element.
std::string BytesElements(const std::vector<std::string>& elements) {
  std::string out;
  for (const std::string& e : elements) {
    const auto length = static_cast<std::uint32_t>(e.size());
    out.append(reinterpret_cast<const char*>(&length), 4);
    out += e;
  }
  return out;
}

Tensor MakeTensor(const std::string& name, TRITONSERVER_DataType type,
                  std::vector<std::int64_t> shape) {
  Tensor t;
  t.name = name;
  t.datatype = type;
  t.shape = std::move(shape);
  return t;
}

const Status& StatusOf(const Status& status) {
  return status;
}
template <typename T>
Status StatusOf(const Result<T>& result) {
  return result.status();
}

// Expects `result` to fail with a message holding every one of `parts`.
template <typename R>
void ExpectError(const R& result, std::initializer_list<std::string> parts) {
  ASSERT_FALSE(result.ok()) << "expected an error holding \"" << *parts.begin() << "\"";
  const std::string message = StatusOf(result).message();
  for (const std::string& part : parts) {
    EXPECT_NE(message.find(part), std::string::npos) << "\"" << part << "\" is not in: " << message;
  }
}

TEST(SplitInferBody, NoHeaderMeansTheWholeBodyIsJson) {
  auto parts = SplitInferBody("{\"inputs\":[]}", {});
  ASSERT_TRUE(parts.ok());
  EXPECT_EQ(parts->json, "{\"inputs\":[]}");
  EXPECT_TRUE(parts->binary.empty());
  EXPECT_FALSE(parts->has_header_length);
}

TEST(SplitInferBody, HeaderLengthCutsJsonFromBinary) {
  const std::string body = std::string("{\"a\":1}") + std::string("\x01\x00\x02", 3);
  auto parts = SplitInferBody(body, {"7"});
  ASSERT_TRUE(parts.ok());
  EXPECT_EQ(parts->json, "{\"a\":1}");
  EXPECT_EQ(parts->binary, std::string("\x01\x00\x02", 3));
  EXPECT_TRUE(parts->has_header_length);
  // The whole body as JSON, said explicitly: no binary part.
  auto whole = SplitInferBody(body, {"10"});
  ASSERT_TRUE(whole.ok());
  EXPECT_TRUE(whole->binary.empty());
  // The same value twice is one value.
  EXPECT_TRUE(SplitInferBody(body, {"7", "7"}).ok());
}

TEST(SplitInferBody, BadHeaderValuesAreRefusedByValue) {
  const std::string body = "{\"inputs\":[]}xxxx";
  for (const char* bad : {"abc", "-1", "+5", "12x", "", "1.5", "99999999999999999999999"}) {
    SCOPED_TRACE(bad);
    ExpectError(SplitInferBody(body, {bad}),
                {"Inference-Header-Content-Length \"" + std::string(bad) + "\"",
                 "non-negative decimal integer"});
  }
  ExpectError(SplitInferBody(body, {"18"}), {"18", "more than the 17-byte request body"});
  ExpectError(SplitInferBody(body, {"0"}), {"0", "raw binary request", "not supported"});
  ExpectError(SplitInferBody(body, {"13", "14"}), {"2 times", "\"13\"", "\"14\""});
}

TEST(BinaryInputCursor, HandsOutBytesInOrderAndWantsThemAllUsed) {
  const std::string body = "{}" + std::string("AAAABBCCC");
  auto parts = SplitInferBody(body, {"2"});
  ASSERT_TRUE(parts.ok());
  BinaryInputCursor cursor(*parts);
  auto a = cursor.Take("a", 4);
  auto b = cursor.Take("b", 2);
  auto empty = cursor.Take("empty", 0);
  ASSERT_TRUE(a.ok() && b.ok() && empty.ok());
  EXPECT_EQ(*a, "AAAA");
  EXPECT_EQ(*b, "BB");
  EXPECT_TRUE(empty->empty());
  ExpectError(cursor.CheckAllUsed(),
              {"3 bytes of binary data follow the last binary input", "add up to 6 but 9"});
  ExpectError(cursor.Take("c", 4), {"input \"c\"", "binary_data_size 4", "3 bytes", "took 6"});
  auto c = cursor.Take("c", 3);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, "CCC");
  EXPECT_TRUE(cursor.CheckAllUsed().ok());
}

TEST(BinaryInputCursor, BinaryDataWithoutTheHeaderIsNamed) {
  auto parts = SplitInferBody("{}", {});
  ASSERT_TRUE(parts.ok());
  BinaryInputCursor cursor(*parts);
  ExpectError(cursor.Take("IN0", 8),
              {"input \"IN0\"", "binary_data_size is 8", "no Inference-Header-Content-Length"});
  EXPECT_TRUE(cursor.Take("IN0", 0).ok());  // an empty tensor needs no binary part
  EXPECT_TRUE(cursor.CheckAllUsed().ok());
}

TEST(ParseBinaryDataSize, OnlyNonNegativeIntegers) {
  EXPECT_EQ(*ParseBinaryDataSize(json(16), "x"), 16);
  EXPECT_EQ(*ParseBinaryDataSize(json(0), "x"), 0);
  for (const json& bad : {json(-1), json("16"), json(1.5), json(true), json::array({4}),
                          json(18446744073709551615ull)}) {
    SCOPED_TRACE(bad.dump());
    ExpectError(ParseBinaryDataSize(bad, "x"), {"input \"x\"", "non-negative integer", bad.dump()});
  }
}

TEST(SetBinaryTensorData, FixedSizeTypesMustFillTheShapeExactly) {
  Tensor t = MakeTensor("IN0", TRITONSERVER_TYPE_INT32, {2, 3});
  const std::string bytes = Raw<std::int32_t>({1, -2, 3, 4, 5, 2147483647});
  ASSERT_TRUE(SetBinaryTensorData(bytes, t).ok());
  EXPECT_EQ(std::string(t.data.begin(), t.data.end()), bytes);

  Tensor short_one = MakeTensor("IN0", TRITONSERVER_TYPE_INT32, {2, 3});
  ExpectError(SetBinaryTensorData(bytes.substr(0, 20), short_one),
              {"input \"IN0\"", "binary_data_size 20", "shape [2,3]", "INT32", "6 elements of 4"});
  Tensor fp16 = MakeTensor("h", TRITONSERVER_TYPE_FP16, {3});
  EXPECT_TRUE(SetBinaryTensorData(std::string(6, '\0'), fp16).ok());
  Tensor fp64 = MakeTensor("d", TRITONSERVER_TYPE_FP64, {1});
  ExpectError(SetBinaryTensorData(std::string(4, '\0'), fp64), {"FP64", "1 elements of 8"});
  Tensor empty = MakeTensor("e", TRITONSERVER_TYPE_FP32, {0, 4});
  EXPECT_TRUE(SetBinaryTensorData("", empty).ok());
  Tensor negative = MakeTensor("n", TRITONSERVER_TYPE_FP32, {-1});
  ExpectError(SetBinaryTensorData("", negative), {"input \"n\"", "-1"});
}

TEST(SetBinaryTensorData, BoolIsOneByteZeroOrOne) {
  Tensor t = MakeTensor("flag", TRITONSERVER_TYPE_BOOL, {3});
  ASSERT_TRUE(SetBinaryTensorData(std::string("\x01\x00\x01", 3), t).ok());
  Tensor bad = MakeTensor("flag", TRITONSERVER_TYPE_BOOL, {3});
  ExpectError(SetBinaryTensorData(std::string("\x01\x02\x01", 3), bad),
              {"input \"flag\"", "BOOL element 1 is byte 2", "0 (false) or 1 (true)"});
}

TEST(SetBinaryTensorData, BytesAreLengthPrefixedAndCounted) {
  const std::string two = BytesElements({"hello", ""});
  Tensor t = MakeTensor("text", TRITONSERVER_TYPE_BYTES, {1, 2});
  ASSERT_TRUE(SetBinaryTensorData(two, t).ok());
  EXPECT_EQ(std::string(t.data.begin(), t.data.end()), two);

  Tensor wrong_count = MakeTensor("text", TRITONSERVER_TYPE_BYTES, {1, 1});
  ExpectError(SetBinaryTensorData(two, wrong_count),
              {"input \"text\"", "holds 2 BYTES elements", "shape [1,1] needs 1"});
  // A length prefix cut short: 2 of its 4 bytes.
  Tensor cut_prefix = MakeTensor("text", TRITONSERVER_TYPE_BYTES, {2});
  ExpectError(SetBinaryTensorData(BytesElements({"ab"}) + std::string(2, '\0'), cut_prefix),
              {"BYTES element 1 at byte 6", "only 2 of the 4 bytes"});
  // A length longer than what is left.
  Tensor overrun = MakeTensor("text", TRITONSERVER_TYPE_BYTES, {1});
  std::string claims_100 = BytesElements({"abc"});
  claims_100[0] = 100;
  ExpectError(SetBinaryTensorData(claims_100, overrun),
              {"BYTES element 0 at byte 0", "gives length 100", "only 3 bytes"});
  Tensor none = MakeTensor("text", TRITONSERVER_TYPE_BYTES, {0});
  EXPECT_TRUE(SetBinaryTensorData("", none).ok());
  Tensor missing = MakeTensor("text", TRITONSERVER_TYPE_BYTES, {1});
  ExpectError(SetBinaryTensorData("", missing), {"holds 0 BYTES elements", "needs 1"});
}

// The request tritonclient.http builds for two binary inputs, a JSON one between them and a binary
// and a JSON output.
TEST(ParseInferRequest, BinaryAndJsonInputsTakeTheirBytesInOrder) {
  const std::string ints = Raw<std::int32_t>({7, 8, 9});
  const std::string text = BytesElements({"a b", "c"});
  const json header = {
      {"id", "42"},
      {"inputs",
       {{{"name", "IN0"},
         {"shape", {3}},
         {"datatype", "INT32"},
         {"parameters", {{"binary_data_size", ints.size()}}}},
        {{"name", "F"}, {"shape", {2}}, {"datatype", "FP32"}, {"data", {0.5, 1.5}}},
        {{"name", "TEXT"},
         {"shape", {1, 2}},
         {"datatype", "BYTES"},
         {"parameters", {{"binary_data_size", text.size()}}}}}},
      {"outputs",
       {{{"name", "OUT0"}, {"parameters", {{"binary_data", true}}}},
        {{"name", "OUT1"}, {"parameters", {{"binary_data", false}}}}}},
      {"parameters", {{"binary_data_output", true}, {"temperature", 0.5}}}};
  const std::string json_text = header.dump();
  const std::string body = json_text + ints + text;
  auto parts = SplitInferBody(body, {std::to_string(json_text.size())});
  ASSERT_TRUE(parts.ok());
  auto parsed = ParseInferRequest(header, *parts, "m", -1);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  const InferRequest& r = parsed->request;
  ASSERT_EQ(r.inputs.size(), 3u);
  EXPECT_EQ(std::string(r.inputs[0].data.begin(), r.inputs[0].data.end()), ints);
  EXPECT_EQ(r.inputs[1].data.size(), 8u);
  EXPECT_EQ(std::string(r.inputs[2].data.begin(), r.inputs[2].data.end()), text);
  EXPECT_EQ(r.requested_outputs, (std::vector<std::string>{"OUT0", "OUT1"}));
  // binary_data_output is the frontend's; the model sees only its own parameters.
  EXPECT_EQ(r.parameters.count("binary_data_output"), 0u);
  EXPECT_EQ(r.parameters.count("temperature"), 1u);
  EXPECT_TRUE(parsed->binary_outputs.IsBinary("OUT0"));
  EXPECT_FALSE(parsed->binary_outputs.IsBinary("OUT1"));  // its own flag wins
  EXPECT_TRUE(parsed->binary_outputs.IsBinary("OTHER"));  // the request's default
}

TEST(ParseInferRequest, BadBinaryRequestsNameTheInput) {
  auto parse = [](const json& header, const std::string& binary) {
    const std::string json_text = header.dump();
    const std::string body = json_text + binary;  // the parts point into it
    auto parts = SplitInferBody(body, {std::to_string(json_text.size())});
    EXPECT_TRUE(parts.ok());
    return ParseInferRequest(header, *parts, "m", -1);
  };
  auto input = [](json parameters, bool with_data) {
    json in = {{"name", "IN0"}, {"shape", {2}}, {"datatype", "INT32"}};
    if (!parameters.is_null()) in["parameters"] = parameters;
    if (with_data) in["data"] = {1, 2};
    return json{{"inputs", {in}}};
  };
  ExpectError(parse(input({{"binary_data_size", 8}}, true), Raw<std::int32_t>({1, 2})),
              {"input \"IN0\"", "both 'data' and parameters.binary_data_size"});
  ExpectError(parse(input({{"binary_data_size", 4}}, false), Raw<std::int32_t>({1})),
              {"input \"IN0\"", "binary_data_size 4", "shape [2]", "2 elements of 4"});
  ExpectError(parse(input({{"binary_data_size", 12}}, false), Raw<std::int32_t>({1, 2})),
              {"input \"IN0\"", "binary_data_size 12", "8 bytes"});
  ExpectError(parse(input({{"binary_data_size", 8}}, false), Raw<std::int32_t>({1, 2, 3})),
              {"4 bytes of binary data follow the last binary input"});
  ExpectError(parse(input({{"binary_data_size", "8"}}, false), Raw<std::int32_t>({1, 2})),
              {"input \"IN0\"", "non-negative integer", "\"8\""});
  ExpectError(parse(input(nullptr, false), ""), {"input \"IN0\"", "'data' is missing"});
  json bad_output = input(nullptr, true);
  bad_output["outputs"] = {{{"name", "O"}, {"parameters", {{"binary_data", 1}}}}};
  ExpectError(parse(bad_output, ""), {"output \"O\"", "binary_data", "true or false", "1"});
  json classification = input(nullptr, true);
  classification["outputs"] = {{{"name", "O"}, {"parameters", {{"classification", 3}}}}};
  ExpectError(parse(classification, ""), {"output \"O\"", "classification"});
  json bad_default = input(nullptr, true);
  bad_default["parameters"] = {{"binary_data_output", "yes"}};
  ExpectError(parse(bad_default, ""), {"binary_data_output", "true or false", "\"yes\""});
}

TEST(InferResponseToJson, BinaryOutputsFollowTheHeaderInOrder) {
  InferResponse response;
  response.model_name = "m";
  response.model_version = 1;
  Tensor a = MakeTensor("A", TRITONSERVER_TYPE_INT32, {2});
  const std::string a_bytes = Raw<std::int32_t>({5, 6});
  a.data.assign(a_bytes.begin(), a_bytes.end());
  Tensor j = MakeTensor("J", TRITONSERVER_TYPE_INT32, {1});
  const std::string j_bytes = Raw<std::int32_t>({3});
  j.data.assign(j_bytes.begin(), j_bytes.end());
  Tensor t = MakeTensor("T", TRITONSERVER_TYPE_BYTES, {1});
  const std::string t_bytes = BytesElements({"out"});
  t.data.assign(t_bytes.begin(), t_bytes.end());
  response.outputs = {a, j, t};

  BinaryOutputChoice choice;
  choice.SetDefault(true);
  choice.Set("J", false);
  std::string binary;
  auto header = InferResponseToJson(response, choice, binary);
  ASSERT_TRUE(header.ok()) << header.status().message();
  EXPECT_EQ(binary, a_bytes + t_bytes);
  const json& outputs = (*header)["outputs"];
  EXPECT_EQ(outputs[0]["parameters"]["binary_data_size"], 8);
  EXPECT_FALSE(outputs[0].contains("data"));
  EXPECT_EQ(outputs[1]["data"], json::array({3}));
  EXPECT_FALSE(outputs[1].contains("parameters"));
  EXPECT_EQ(outputs[2]["parameters"]["binary_data_size"], t_bytes.size());
  EXPECT_EQ(outputs[2]["datatype"], "BYTES");

  // A model's malformed BYTES output is refused in binary as it is in JSON.
  Tensor broken = MakeTensor("T", TRITONSERVER_TYPE_BYTES, {1});
  broken.data = {9, 0, 0, 0, 'x'};
  response.outputs = {broken};
  std::string ignored;
  EXPECT_FALSE(InferResponseToJson(response, choice, ignored).ok());
}

TEST(InferReply, BinaryBodiesCarryTheHeaderLength) {
  HttpReply binary = InferReply("{\"x\":1}", std::string("\x00\x01", 2));
  EXPECT_EQ(binary.content_type, "application/octet-stream");
  EXPECT_EQ(binary.body, std::string("{\"x\":1}\x00\x01", 9));
  ASSERT_EQ(binary.headers.size(), 1u);
  EXPECT_EQ(binary.headers[0].first, "Inference-Header-Content-Length");
  EXPECT_EQ(binary.headers[0].second, "7");
  HttpReply json_only = InferReply("{\"x\":1}", "");
  EXPECT_EQ(json_only.content_type, "application/json");
  EXPECT_TRUE(json_only.headers.empty());
}

TEST(CheckContentEncoding, CompressedBodiesAre415) {
  HttpRequest req;
  EXPECT_FALSE(CheckContentEncoding(req).has_value());
  req.headers = {{"content-encoding", "identity"}};
  EXPECT_FALSE(CheckContentEncoding(req).has_value());
  req.headers = {{"Content-Encoding", "gzip"}};
  auto refused = CheckContentEncoding(req);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->status, 415);
  EXPECT_NE(refused->body.find("\\\"gzip\\\""), std::string::npos) << refused->body;
  ASSERT_EQ(refused->headers.size(), 1u);
  EXPECT_EQ(refused->headers[0].first, "Accept-Encoding");
}

TEST(HeaderValues, NamesCompareCaseInsensitively) {
  HttpRequest req;
  req.headers = {{"inference-header-content-length", "5"},
                 {"Host", "h"},
                 {"INFERENCE-HEADER-CONTENT-LENGTH", "6"}};
  EXPECT_EQ(HeaderValues(req, kInferHeaderContentLength),
            (std::vector<std::string_view>{"5", "6"}));
}

}  // namespace
}  // namespace inflight::server::http
