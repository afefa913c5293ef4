#include "model/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "unit/model_io/temp_dir.h"

namespace inflight::model {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

std::vector<std::byte> Bytes(const std::vector<float>& v) {
  std::vector<std::byte> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// A file with an 8-byte length, the given header text and `data_bytes` zero bytes of data.
std::string RawFile(const std::string& header, std::size_t data_bytes,
                    std::uint64_t len_override = 0) {
  const std::uint64_t len = len_override ? len_override : header.size();
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((len >> (8 * i)) & 0xff);
  return s + header + std::string(data_bytes, '\0');
}

TEST(SafetensorsTest, RoundTripKeepsNamesShapesDtypesAndBytes) {
  TempDir dir;
  SafetensorsWriter w;
  ASSERT_TRUE(w.AddBytes("a", DType::kFloat32, {2, 3}, Bytes({1, 2, 3, 4, 5, 6})).ok());
  std::vector<std::uint16_t> half = {0x3c00, 0xc000, 0x7bff};
  ASSERT_TRUE(w.AddLazy("b.weight", DType::kBFloat16, {3}, [&](std::byte* dst, std::size_t n) {
                 EXPECT_EQ(n, 6u);
                 std::memcpy(dst, half.data(), n);
                 return Status::Ok();
               }).ok());
  ASSERT_TRUE(w.AddBytes("empty", DType::kInt32, {0, 4}, {}).ok());
  ASSERT_TRUE(
      w.AddBytes("scalar", DType::kInt64, {}, std::vector<std::byte>(8, std::byte{7})).ok());
  w.SetMetadata("producer", "test");
  EXPECT_EQ(w.total_bytes(), 24u + 6u + 0u + 8u);
  std::vector<std::string> progress;
  ASSERT_TRUE(w.Write(dir / "x.safetensors", [&](const std::string& n, std::size_t) {
                 progress.push_back(n);
               }).ok());
  EXPECT_THAT(progress, ::testing::ElementsAre("a", "b.weight", "empty", "scalar"));
  EXPECT_FALSE(std::filesystem::exists(dir / "x.safetensors.tmp"));

  auto f = SafetensorsFile::Open(dir / "x.safetensors");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->num_tensors(), 4u);
  EXPECT_EQ((*f)->metadata().at("format"), "pt");
  EXPECT_EQ((*f)->metadata().at("producer"), "test");
  const TensorInfo* a = (*f)->Find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, DType::kFloat32);
  EXPECT_EQ(a->shape, (std::vector<std::int64_t>{2, 3}));
  ASSERT_EQ(a->nbytes, 24u);
  float got[6];
  std::memcpy(got, a->data, 24);
  EXPECT_EQ(got[0], 1.0f);
  EXPECT_EQ(got[5], 6.0f);
  // The data section starts 8-byte aligned (header padded), so f32 data is aligned too.
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a->data) % 8, 0u);
  const TensorInfo* b = (*f)->Find("b.weight");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, DType::kBFloat16);
  EXPECT_EQ(std::memcmp(b->data, half.data(), 6), 0);
  EXPECT_EQ((*f)->Find("empty")->nbytes, 0u);
  EXPECT_EQ((*f)->Find("scalar")->numel(), 1);
  EXPECT_EQ((*f)->Find("missing"), nullptr);
}

TEST(SafetensorsTest, WriterRejectsDuplicatesAndWrongSizes) {
  SafetensorsWriter w;
  ASSERT_TRUE(w.AddBytes("a", DType::kFloat32, {1}, Bytes({1})).ok());
  EXPECT_EQ(w.AddBytes("a", DType::kFloat32, {1}, Bytes({1})).code(), StatusCode::kAlreadyExists);
  Status st = w.AddBytes("b", DType::kFloat16, {3}, Bytes({1}));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("needs 6 bytes, got 4"));
  EXPECT_FALSE(w.AddBytes("__metadata__", DType::kFloat32, {1}, Bytes({1})).ok());
}

TEST(SafetensorsTest, FailingFillLeavesNoFile) {
  TempDir dir;
  SafetensorsWriter w;
  ASSERT_TRUE(w.AddLazy("a", DType::kFloat32, {4}, [](std::byte*, std::size_t) {
                 return InvalidArgument("source broke");
               }).ok());
  Status st = w.Write(dir / "x.safetensors");
  EXPECT_THAT(st.message(), HasSubstr("source broke"));
  EXPECT_FALSE(std::filesystem::exists(dir / "x.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(dir / "x.safetensors.tmp"));
}

TEST(SafetensorsTest, ReadsTensorsOutOfOrderAndOverlapping) {
  TempDir dir;
  const std::string header = R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},)"
                             R"("a":{"dtype":"U8","shape":[16],"data_offsets":[0,16]}})";
  dir.WriteFile("x.safetensors", RawFile(header, 16));
  auto f = SafetensorsFile::Open(dir / "x.safetensors");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_THAT((*f)->names(), ::testing::ElementsAre("a", "b"));  // by offset
  EXPECT_EQ((*f)->Find("b")->data - (*f)->Find("a")->data, 8);
}

struct BadFileCase {
  const char* label;
  std::string bytes;
  StatusCode code;
  std::vector<std::string> substrings;
};

TEST(SafetensorsTest, RejectsBrokenFilesNamingFileAndTensor) {
  const std::string ok_entry = R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::vector<BadFileCase> cases = {
      {"truncated below the length",
       std::string(5, '\0'),
       StatusCode::kInvalidArgument,
       {"too short"}},
      {"header longer than the file",
       RawFile("{" + ok_entry + "}", 8, 1000),
       StatusCode::kInvalidArgument,
       {"header length 1000 exceeds the file"}},
      {"absurd header length",
       RawFile("{}", 0, std::uint64_t{1} << 40),
       StatusCode::kInvalidArgument,
       {"header length 1099511627776"}},
      {"not JSON", RawFile("{not json", 0), StatusCode::kInvalidArgument, {"not a JSON object"}},
      {"unknown dtype",
       RawFile(R"({"w":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", 8),
       StatusCode::kUnsupported,
       {"tensor \"w\"", "dtype \"F64\""}},
      {"end past the data",
       RawFile("{" + ok_entry + "}", 4),
       StatusCode::kInvalidArgument,
       {"tensor \"w\"", "data_offsets [0, 8] fall outside the data section of 4 bytes"}},
      {"begin after end",
       RawFile(R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[8,0]}})", 8),
       StatusCode::kInvalidArgument,
       {"tensor \"w\"", "[8, 0]"}},
      {"size does not match shape",
       RawFile(R"({"w":{"dtype":"F16","shape":[3],"data_offsets":[0,8]}})", 8),
       StatusCode::kInvalidArgument,
       {"tensor \"w\"", "span 8 bytes", "need 6"}},
      {"negative dimension",
       RawFile(R"({"w":{"dtype":"F16","shape":[-1],"data_offsets":[0,0]}})", 0),
       StatusCode::kInvalidArgument,
       {"tensor \"w\"", "non-negative"}},
      {"missing offsets",
       RawFile(R"({"w":{"dtype":"F16","shape":[1]}})", 2),
       StatusCode::kInvalidArgument,
       {"tensor \"w\"", "data_offsets"}},
  };
  for (const BadFileCase& c : cases) {
    TempDir dir;
    dir.WriteFile("bad.safetensors", c.bytes);
    auto f = SafetensorsFile::Open(dir / "bad.safetensors");
    ASSERT_FALSE(f.ok()) << c.label;
    EXPECT_EQ(f.status().code(), c.code) << c.label << ": " << f.status().message();
    EXPECT_THAT(f.status().message(), HasSubstr(dir / "bad.safetensors")) << c.label;
    for (const std::string& s : c.substrings) {
      EXPECT_THAT(f.status().message(), HasSubstr(s)) << c.label;
    }
  }
}

TEST(SafetensorsTest, MissingFileIsNotFound) {
  auto f = SafetensorsFile::Open("/nonexistent/dir/x.safetensors");
  EXPECT_EQ(f.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(f.status().message(), HasSubstr("/nonexistent/dir/x.safetensors"));
}

TEST(CheckpointShardsTest, UsesTheIndexWhenPresentElseEverySafetensorsFile) {
  TempDir dir;
  dir.WriteFile("b.safetensors", "");
  dir.WriteFile("a.safetensors", "");
  dir.WriteFile("notes.txt", "");
  auto all = ListCheckpointShards(dir.path());
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_THAT(*all, ::testing::ElementsAre(dir / "a.safetensors", dir / "b.safetensors"));

  dir.WriteFile("model.safetensors.index.json",
                R"({"metadata":{},"weight_map":{"x":"b.safetensors","y":"b.safetensors"}})");
  auto indexed = ListCheckpointShards(dir.path());
  ASSERT_TRUE(indexed.ok()) << indexed.status().ToString();
  EXPECT_THAT(*indexed, ::testing::ElementsAre(dir / "b.safetensors"));

  dir.WriteFile("model.safetensors.index.json", R"({"weight_map":{"x":"gone.safetensors"}})");
  auto missing = ListCheckpointShards(dir.path());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("gone.safetensors"));

  TempDir empty;
  EXPECT_EQ(ListCheckpointShards(empty.path()).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace inflight::model
