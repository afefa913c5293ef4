#include <string>

#include <gtest/gtest.h>

#include "server/http/http_generate_json.h"
#include "server/http/http_infer_json.h"

namespace inflight::server::http {
namespace {

std::string Nested(int depth, const std::string& inner = "1") {
  return std::string(depth, '[') + inner + std::string(depth, ']');
}

// Found by reading the fuzzers' target: copying or dumping a deeply nested value recursed once per
// level, so a generate body with an unknown field of a few MB of '[' overflowed the stack.
TEST(HttpJsonTest, DeepNestingIsRefusedBeforeParsing) {
  const std::string body = "{\"unknown\": " + Nested(1'000'000) + "}";
  auto parsed = ParseJsonBody(body);
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("nested deeper than 100 levels (at byte 111)"),
            std::string::npos)
      << parsed.status().message();
}

TEST(HttpJsonTest, NestingUpToTheLimitParsesAndDecodes) {
  // The object is level 1; the value adds 99.
  auto parsed = ParseJsonBody("{\"unknown\": " + Nested(99) + "}");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  ModelMetadata metadata;
  metadata.name = "m";
  auto request = ParseGenerateRequest(*parsed, metadata, false, 1);
  ASSERT_FALSE(request.ok());  // a list is not a parameter value
  EXPECT_NE(request.status().message().find("\"unknown\""), std::string::npos);
  EXPECT_FALSE(ParseJsonBody("{\"unknown\": " + Nested(100) + "}").ok());
}

// Found by fuzz_infer_json: an exponent too large for a double made nlohmann's parser throw
// out_of_range, which ParseJsonBody did not catch (the request was answered 500, not 400).
TEST(HttpJsonTest, NumberOverflowIsMalformedJson) {
  auto parsed = ParseJsonBody("{\"inputs\": [{\"data\": [1e854775807]}]}");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find("malformed JSON in request body"), std::string::npos);
  EXPECT_NE(parsed.status().message().find("number overflow"), std::string::npos)
      << parsed.status().message();
}

TEST(HttpJsonTest, BracketsInsideStringsDoNotCount) {
  const std::string text = "\"" + std::string(500, '[') + "\\\"" + std::string(500, '{') + "\"";
  auto parsed = ParseJsonBody("{\"text_input\": " + text + "}");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ((*parsed)["text_input"].get<std::string>().size(), 1001u);
}

}  // namespace
}  // namespace inflight::server::http
