#include "common/status.h"

#include <gtest/gtest.h>

namespace inflight {
namespace {

Result<int> ParsePositive(int v) {
  if (v <= 0) return InvalidArgument("value " + std::to_string(v) + " is not > 0");
  return v;
}

Status UsesMacros(int v, int* out) {
  ASSIGN_OR_RETURN(int x, ParsePositive(v));
  INFLIGHT_CHECK(x < 100, "x=" + std::to_string(x));
  *out = x;
  return Status::Ok();
}

TEST(Status, OkAndErrorCarryCodeAndMessage) {
  EXPECT_TRUE(Status::Ok().ok());
  Status s = InvalidArgument("bad");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.ToString(), "INVALID_ARG: bad");
}

TEST(Status, MacrosPropagateAndNameTheLine) {
  int out = 0;
  EXPECT_TRUE(UsesMacros(5, &out).ok());
  EXPECT_EQ(out, 5);
  Status neg = UsesMacros(-1, &out);
  EXPECT_EQ(neg.message(), "value -1 is not > 0");
  Status big = UsesMacros(500, &out);
  EXPECT_EQ(big.code(), StatusCode::kInternal);
  EXPECT_NE(big.message().find("status_test.cc"), std::string::npos);
  EXPECT_NE(big.message().find("x=500"), std::string::npos);
}

}  // namespace
}  // namespace inflight
