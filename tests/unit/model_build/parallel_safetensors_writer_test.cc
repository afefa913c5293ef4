#include "model/parallel_safetensors_writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <set>

#include "model/safetensors.h"
#include "unit/model_io/temp_dir.h"

namespace inflight::model {
namespace {

using ::testing::HasSubstr;
using testing::ReadBytes;
using testing::TempDir;

// Tensor i: its index in every byte, so a tensor written at the wrong offset shows.
Status FillWith(std::size_t i, std::byte* dst, std::size_t n) {
  for (std::size_t k = 0; k < n; ++k) dst[k] = static_cast<std::byte>((i * 131 + k) & 0xff);
  return Status::Ok();
}

struct Spec {
  std::string name;
  DType dtype;
  std::vector<std::int64_t> shape;
};

// Awkward sizes: empty, odd byte counts, one larger than the others, names needing escapes.
std::vector<Spec> Specs() {
  return {{"a", DType::kFloat32, {3, 5}},          {"empty", DType::kFloat16, {0, 7}},
          {"big", DType::kBFloat16, {257, 1031}},  {"odd", DType::kInt8, {13}},
          {"q\"uote", DType::kFloat32, {1}},       {"scalar", DType::kInt32, {}},
          {"layers.0.w", DType::kFloat16, {33, 9}}};
}

TEST(ParallelSafetensorsWriterTest, SameBytesAsSafetensorsWriterForAnyWorkerCount) {
  TempDir dir;
  SafetensorsWriter reference;
  reference.SetMetadata("origin", "test");
  const std::vector<Spec> specs = Specs();
  for (std::size_t i = 0; i < specs.size(); ++i) {
    ASSERT_TRUE(reference
                    .AddLazy(specs[i].name, specs[i].dtype, specs[i].shape,
                             [i](std::byte* d, std::size_t n) { return FillWith(i, d, n); })
                    .ok());
  }
  ASSERT_TRUE(reference.Write(dir / "reference.safetensors").ok());
  const std::string expected = ReadBytes(dir / "reference.safetensors");
  ASSERT_GT(expected.size(), 257u * 1031u * 2u);

  for (unsigned workers : {1u, 2u, 3u, 8u}) {
    ParallelSafetensorsWriter writer(workers);
    writer.SetMetadata("origin", "test");
    for (std::size_t i = 0; i < specs.size(); ++i) {
      ASSERT_TRUE(writer
                      .AddLazy(specs[i].name, specs[i].dtype, specs[i].shape,
                               [i](std::byte* d, std::size_t n) { return FillWith(i, d, n); })
                      .ok());
    }
    std::mutex mu;
    std::set<std::string> reported;
    std::size_t bytes = 0;
    const std::string path = dir / ("parallel" + std::to_string(workers) + ".safetensors");
    ASSERT_TRUE(writer
                    .Write(path,
                           [&](const std::string& name, std::size_t n) {
                             std::lock_guard<std::mutex> lock(mu);
                             reported.insert(name);
                             bytes += n;
                           })
                    .ok());
    EXPECT_EQ(ReadBytes(path), expected) << workers << " workers";
    EXPECT_EQ(reported.size(), specs.size());
    EXPECT_EQ(bytes, writer.total_bytes());
    EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
    auto file = SafetensorsFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    EXPECT_EQ((*file)->num_tensors(), specs.size());
  }
}

TEST(ParallelSafetensorsWriterTest, FailingFillRemovesThePartialFile) {
  TempDir dir;
  ParallelSafetensorsWriter writer(3);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(writer
                    .AddLazy("t" + std::to_string(i), DType::kFloat32, {1000},
                             [i](std::byte* d, std::size_t n) -> Status {
                               if (i == 7) return Internal("fill 7 failed");
                               return FillWith(static_cast<std::size_t>(i), d, n);
                             })
                    .ok());
  }
  const Status st = writer.Write(dir / "x.safetensors");
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("fill 7 failed"));
  EXPECT_FALSE(std::filesystem::exists(dir / "x.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(dir / "x.safetensors.tmp"));
}

TEST(ParallelSafetensorsWriterTest, BadDeclarationsAreNamed) {
  ParallelSafetensorsWriter writer;
  auto fill = [](std::byte*, std::size_t) { return Status::Ok(); };
  EXPECT_TRUE(writer.AddLazy("w", DType::kFloat32, {2}, fill).ok());
  EXPECT_THAT(writer.AddLazy("w", DType::kFloat32, {2}, fill).message(), HasSubstr("twice"));
  EXPECT_THAT(writer.AddLazy("__metadata__", DType::kFloat32, {2}, fill).message(),
              HasSubstr("reserved"));
  EXPECT_THAT(writer.AddLazy("neg", DType::kFloat32, {-1}, fill).message(),
              HasSubstr("invalid shape"));
}

TEST(ParallelSafetensorsWriterTest, MissingFolderIsNamed) {
  ParallelSafetensorsWriter writer;
  ASSERT_TRUE(writer
                  .AddLazy("w", DType::kFloat32, {2},
                           [](std::byte* d, std::size_t n) { return FillWith(0, d, n); })
                  .ok());
  TempDir dir;
  const Status st = writer.Write(dir / "missing/x.safetensors");
  EXPECT_THAT(st.message(), HasSubstr("cannot create"));
  EXPECT_THAT(st.message(), HasSubstr("missing/x.safetensors.tmp"));
}

}  // namespace
}  // namespace inflight::model
