// The TRITONSERVER_* basics a backend uses before any request: errors, messages, types, parameters,
// buffer attributes, memory manager and logging.
#include <cstring>

#include <gtest/gtest.h>

#include "triton/core/tritonbackend.h"
#include "triton/core/tritonserver.h"

namespace {

TEST(CApi, ErrorsCarryCodeAndMessage) {
  TRITONSERVER_Error* err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, "busy now");
  EXPECT_EQ(TRITONSERVER_ErrorCode(err), TRITONSERVER_ERROR_UNAVAILABLE);
  EXPECT_STREQ(TRITONSERVER_ErrorMessage(err), "busy now");
  EXPECT_STREQ(TRITONSERVER_ErrorCodeString(err), "Unavailable");
  TRITONSERVER_ErrorDelete(err);
}

TEST(CApi, MessagesRoundTripJsonAndRejectGarbage) {
  const std::string json = R"({"a":[1,2]})";
  TRITONSERVER_Message* msg = nullptr;
  ASSERT_EQ(TRITONSERVER_MessageNewFromSerializedJson(&msg, json.data(), json.size()), nullptr);
  const char* base = nullptr;
  size_t size = 0;
  ASSERT_EQ(TRITONSERVER_MessageSerializeToJson(msg, &base, &size), nullptr);
  EXPECT_EQ(std::string(base, size), json);
  TRITONSERVER_MessageDelete(msg);
  TRITONSERVER_Error* err = TRITONSERVER_MessageNewFromSerializedJson(&msg, "{oops", 5);
  ASSERT_NE(err, nullptr);
  EXPECT_EQ(TRITONSERVER_ErrorCode(err), TRITONSERVER_ERROR_INVALID_ARG);
  TRITONSERVER_ErrorDelete(err);
}

TEST(CApi, DataTypesAndMemoryTypes) {
  EXPECT_STREQ(TRITONSERVER_DataTypeString(TRITONSERVER_TYPE_BF16), "BF16");
  EXPECT_STREQ(TRITONSERVER_DataTypeString(TRITONSERVER_TYPE_BYTES), "BYTES");
  EXPECT_EQ(TRITONSERVER_StringToDataType("FP16"), TRITONSERVER_TYPE_FP16);
  EXPECT_EQ(TRITONSERVER_StringToDataType("TYPE_FP16"), TRITONSERVER_TYPE_INVALID);
  EXPECT_EQ(TRITONSERVER_DataTypeByteSize(TRITONSERVER_TYPE_INT64), 8u);
  EXPECT_EQ(TRITONSERVER_DataTypeByteSize(TRITONSERVER_TYPE_BYTES), 0u);
  EXPECT_STREQ(TRITONSERVER_MemoryTypeString(TRITONSERVER_MEMORY_CPU_PINNED), "CPU_PINNED");
  EXPECT_STREQ(TRITONSERVER_InstanceGroupKindString(TRITONSERVER_INSTANCEGROUPKIND_GPU), "GPU");
  uint32_t major = 0, minor = 0;
  ASSERT_EQ(TRITONBACKEND_ApiVersion(&major, &minor), nullptr);
  EXPECT_EQ(major, 1u);
  EXPECT_EQ(minor, 19u);
  ASSERT_EQ(TRITONSERVER_ApiVersion(&major, &minor), nullptr);
  EXPECT_EQ(minor, 34u);
}

TEST(CApi, ParametersAndBufferAttributes) {
  const int64_t i = 42;
  TRITONSERVER_Parameter* p = TRITONSERVER_ParameterNew("n", TRITONSERVER_PARAMETER_INT, &i);
  ASSERT_NE(p, nullptr);
  TRITONSERVER_ParameterDelete(p);
  EXPECT_EQ(TRITONSERVER_ParameterNew("b", TRITONSERVER_PARAMETER_BYTES, &i), nullptr)
      << "bytes parameters need TRITONSERVER_ParameterBytesNew";
  p = TRITONSERVER_ParameterBytesNew("b", "xyz", 3);
  ASSERT_NE(p, nullptr);
  TRITONSERVER_ParameterDelete(p);

  TRITONSERVER_BufferAttributes* attrs = nullptr;
  ASSERT_EQ(TRITONSERVER_BufferAttributesNew(&attrs), nullptr);
  ASSERT_EQ(TRITONSERVER_BufferAttributesSetMemoryType(attrs, TRITONSERVER_MEMORY_GPU), nullptr);
  ASSERT_EQ(TRITONSERVER_BufferAttributesSetByteSize(attrs, 123), nullptr);
  TRITONSERVER_MemoryType type;
  size_t size = 0;
  ASSERT_EQ(TRITONSERVER_BufferAttributesMemoryType(attrs, &type), nullptr);
  ASSERT_EQ(TRITONSERVER_BufferAttributesByteSize(attrs, &size), nullptr);
  EXPECT_EQ(type, TRITONSERVER_MEMORY_GPU);
  EXPECT_EQ(size, 123u);
  TRITONSERVER_BufferAttributesDelete(attrs);
}

TEST(CApi, LoggingLevels) {
  EXPECT_TRUE(TRITONSERVER_LogIsEnabled(TRITONSERVER_LOG_ERROR));
  EXPECT_EQ(TRITONSERVER_LogMessage(TRITONSERVER_LOG_INFO, "/a/b/file.cc", 12, "hello"), nullptr);
  TRITONSERVER_Error* err =
      TRITONSERVER_LogMessage(static_cast<TRITONSERVER_LogLevel>(99), "f", 1, "x");
  ASSERT_NE(err, nullptr);
  TRITONSERVER_ErrorDelete(err);
}

}  // namespace
