// The server side of Triton's BLS C API (TRITONSERVER_InferenceRequest*, _InferenceResponse*,
// _ResponseAllocator*, ServerInferAsync) against the core with the echo test backend, called as a
// backend calls it: ownership, allocator calls, FINAL flags, release, errors and cancellation.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/server_core.h"
#include "test_server.h"
#include "triton/core/tritonserver.h"

namespace inflight::server::testing {
namespace {

using ::testing::HasSubstr;

// What the callbacks saw, for one request.
struct Calls {
  std::mutex mu;
  std::condition_variable cv;
  int allocs = 0;
  int releases = 0;
  int starts = 0;
  bool fail_alloc = false;
  int request_releases = 0;
  std::vector<uint32_t> flags;
  std::vector<std::vector<std::pair<std::string, std::vector<char>>>> outputs;
  std::vector<std::string> errors;
  std::vector<std::string> ids;

  bool WaitReleased(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, timeout, [this] { return request_releases > 0; });
  }
};

TRITONSERVER_Error* Alloc(TRITONSERVER_ResponseAllocator*, const char*, size_t byte_size,
                          TRITONSERVER_MemoryType, int64_t, void* userp, void** buffer,
                          void** buffer_userp, TRITONSERVER_MemoryType* type, int64_t* id) {
  auto* calls = static_cast<Calls*>(userp);
  std::lock_guard lock(calls->mu);
  if (calls->fail_alloc)
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "no memory left");
  ++calls->allocs;
  *buffer = std::malloc(byte_size + 1);
  *buffer_userp = calls;
  *type = TRITONSERVER_MEMORY_CPU;
  *id = 0;
  return nullptr;
}

TRITONSERVER_Error* Release(TRITONSERVER_ResponseAllocator*, void* buffer, void* buffer_userp,
                            size_t, TRITONSERVER_MemoryType, int64_t) {
  auto* calls = static_cast<Calls*>(buffer_userp);
  std::lock_guard lock(calls->mu);
  ++calls->releases;
  std::free(buffer);
  return nullptr;
}

TRITONSERVER_Error* Start(TRITONSERVER_ResponseAllocator*, void* userp) {
  auto* calls = static_cast<Calls*>(userp);
  std::lock_guard lock(calls->mu);
  ++calls->starts;
  return nullptr;
}

void OnResponse(TRITONSERVER_InferenceResponse* response, uint32_t flags, void* userp) {
  auto* calls = static_cast<Calls*>(userp);
  std::vector<std::pair<std::string, std::vector<char>>> outputs;
  std::string error, id;
  if (response != nullptr) {
    if (TRITONSERVER_Error* err = TRITONSERVER_InferenceResponseError(response)) {
      error = TRITONSERVER_ErrorMessage(err);  // owned by the response: not deleted here
    }
    const char* rid = nullptr;
    EXPECT_EQ(TRITONSERVER_InferenceResponseId(response, &rid), nullptr);
    id = rid;
    uint32_t count = 0;
    EXPECT_EQ(TRITONSERVER_InferenceResponseOutputCount(response, &count), nullptr);
    for (uint32_t i = 0; i < count; ++i) {
      const char* name = nullptr;
      TRITONSERVER_DataType datatype;
      const int64_t* shape = nullptr;
      uint64_t dims = 0;
      const void* base = nullptr;
      size_t size = 0;
      TRITONSERVER_MemoryType memory_type;
      int64_t memory_id = 0;
      void* buffer_userp = nullptr;
      EXPECT_EQ(
          TRITONSERVER_InferenceResponseOutput(response, i, &name, &datatype, &shape, &dims, &base,
                                               &size, &memory_type, &memory_id, &buffer_userp),
          nullptr);
      EXPECT_EQ(buffer_userp, calls);  // the allocator's buffer, not a copy
      const char* bytes = static_cast<const char*>(base);
      outputs.emplace_back(name, std::vector<char>(bytes, bytes + size));
    }
    EXPECT_EQ(TRITONSERVER_InferenceResponseDelete(response), nullptr);
  }
  std::lock_guard lock(calls->mu);
  calls->flags.push_back(flags);
  calls->outputs.push_back(std::move(outputs));
  calls->errors.push_back(error);
  calls->ids.push_back(id);
}

void OnRelease(TRITONSERVER_InferenceRequest* request, uint32_t flags, void* userp) {
  auto* calls = static_cast<Calls*>(userp);
  EXPECT_EQ(flags, TRITONSERVER_REQUEST_RELEASE_ALL);
  EXPECT_EQ(TRITONSERVER_InferenceRequestDelete(request), nullptr);
  {
    std::lock_guard lock(calls->mu);
    ++calls->request_releases;
  }
  calls->cv.notify_all();
}

std::string Message(TRITONSERVER_Error* err) {
  if (err == nullptr) return "";
  std::string out = TRITONSERVER_ErrorMessage(err);
  TRITONSERVER_ErrorDelete(err);
  return out;
}

class BlsApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    core_ = MakeServer(TestOptions());
    ASSERT_NE(core_, nullptr);
    server_ = reinterpret_cast<TRITONSERVER_Server*>(dynamic_cast<ServerCore*>(core_.get()));
    ASSERT_EQ(TRITONSERVER_ResponseAllocatorNew(&allocator_, Alloc, Release, Start), nullptr);
  }
  void TearDown() override {
    TRITONSERVER_ResponseAllocatorDelete(allocator_);
    core_->Shutdown();
  }

  TRITONSERVER_InferenceRequest* NewRequest(const char* model, Calls& calls) {
    TRITONSERVER_InferenceRequest* r = nullptr;
    EXPECT_EQ(TRITONSERVER_InferenceRequestNew(&r, server_, model, -1), nullptr);
    EXPECT_EQ(TRITONSERVER_InferenceRequestSetReleaseCallback(r, OnRelease, &calls), nullptr);
    EXPECT_EQ(
        TRITONSERVER_InferenceRequestSetResponseCallback(r, allocator_, &calls, OnResponse, &calls),
        nullptr);
    return r;
  }
  static void AddInt32(TRITONSERVER_InferenceRequest* r, const char* name,
                       const std::vector<int32_t>& values) {
    const int64_t shape[] = {static_cast<int64_t>(values.size())};
    ASSERT_EQ(TRITONSERVER_InferenceRequestAddInput(r, name, TRITONSERVER_TYPE_INT32, shape, 1),
              nullptr);
    ASSERT_EQ(TRITONSERVER_InferenceRequestAppendInputData(
                  r, name, values.data(), values.size() * 4, TRITONSERVER_MEMORY_CPU, 0),
              nullptr);
  }

  std::unique_ptr<Server> core_;
  TRITONSERVER_Server* server_ = nullptr;
  TRITONSERVER_ResponseAllocator* allocator_ = nullptr;
};

TEST_F(BlsApiTest, EchoThroughTheCApiUsesTheAllocatorAndReleasesAfterTheLastResponse) {
  Calls calls;
  TRITONSERVER_InferenceRequest* r = NewRequest("echo", calls);
  ASSERT_EQ(TRITONSERVER_InferenceRequestSetId(r, "bls-1"), nullptr);
  const int64_t shape[] = {3};
  ASSERT_EQ(TRITONSERVER_InferenceRequestAddInput(r, "IN0", TRITONSERVER_TYPE_INT32, shape, 1),
            nullptr);
  // Appended in two pieces; the caller's buffer is overwritten right after: data is read at once.
  std::vector<int32_t> first = {7, -8}, second = {9};
  ASSERT_EQ(TRITONSERVER_InferenceRequestAppendInputData(r, "IN0", first.data(), 8,
                                                         TRITONSERVER_MEMORY_CPU, 0),
            nullptr);
  ASSERT_EQ(TRITONSERVER_InferenceRequestAppendInputData(r, "IN0", second.data(), 4,
                                                         TRITONSERVER_MEMORY_CPU_PINNED, 0),
            nullptr);
  first = {0, 0};
  ASSERT_EQ(TRITONSERVER_InferenceRequestAddRequestedOutput(r, "OUT_IN0"), nullptr);
  ASSERT_EQ(TRITONSERVER_ServerInferAsync(server_, r, nullptr), nullptr);
  ASSERT_TRUE(calls.WaitReleased());
  std::lock_guard lock(calls.mu);
  ASSERT_EQ(calls.flags, (std::vector<uint32_t>{TRITONSERVER_RESPONSE_COMPLETE_FINAL}));
  EXPECT_EQ(calls.errors[0], "");
  EXPECT_EQ(calls.ids[0], "bls-1");
  ASSERT_EQ(calls.outputs[0].size(), 1u);  // only what was asked for
  EXPECT_EQ(calls.outputs[0][0].first, "OUT_IN0");
  std::vector<int32_t> got(3);
  std::memcpy(got.data(), calls.outputs[0][0].second.data(), 12);
  EXPECT_EQ(got, (std::vector<int32_t>{7, -8, 9}));
  EXPECT_EQ(calls.starts, 1);
  EXPECT_EQ(calls.allocs, 1);
  EXPECT_EQ(calls.releases, 1);  // freed with the response
}

TEST_F(BlsApiTest, DecoupledModelEndsWithANullFinalResponse) {
  Calls calls;
  TRITONSERVER_InferenceRequest* r = NewRequest("stream", calls);
  AddInt32(r, "IN0", {4});
  AddInt32(r, "count", {3});
  ASSERT_EQ(TRITONSERVER_ServerInferAsync(server_, r, nullptr), nullptr);
  ASSERT_TRUE(calls.WaitReleased());
  std::lock_guard lock(calls.mu);
  ASSERT_EQ(calls.flags, (std::vector<uint32_t>{0, 0, 0, TRITONSERVER_RESPONSE_COMPLETE_FINAL}));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(calls.outputs[i].size(), 2u) << i;
  EXPECT_TRUE(calls.outputs[3].empty());  // (nullptr, FINAL)
  EXPECT_EQ(calls.allocs, 6);
  EXPECT_EQ(calls.releases, 6);
}

TEST_F(BlsApiTest, CancelStopsADecoupledRequest) {
  Calls calls;
  TRITONSERVER_InferenceRequest* r = NewRequest("stream", calls);
  AddInt32(r, "IN0", {1});
  AddInt32(r, "count", {100000});
  ASSERT_EQ(TRITONSERVER_ServerInferAsync(server_, r, nullptr), nullptr);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    std::lock_guard lock(calls.mu);
    if (calls.flags.size() >= 2) break;
  }
  bool cancelled = false;
  ASSERT_EQ(TRITONSERVER_InferenceRequestIsCancelled(r, &cancelled), nullptr);
  EXPECT_FALSE(cancelled);
  ASSERT_EQ(TRITONSERVER_InferenceRequestCancel(r), nullptr);
  ASSERT_TRUE(calls.WaitReleased(std::chrono::seconds(5)));  // 100000 x 20 ms would take 33 min
  std::lock_guard lock(calls.mu);
  EXPECT_EQ(calls.flags.back() & TRITONSERVER_RESPONSE_COMPLETE_FINAL,
            TRITONSERVER_RESPONSE_COMPLETE_FINAL);
  EXPECT_LT(calls.flags.size(), 1000u);
}

TEST_F(BlsApiTest, ErrorsNameWhatIsWrong) {
  Calls calls;
  TRITONSERVER_InferenceRequest* unknown = NewRequest("nope", calls);
  TRITONSERVER_Error* err = TRITONSERVER_ServerInferAsync(server_, unknown, nullptr);
  ASSERT_NE(err, nullptr);
  EXPECT_EQ(TRITONSERVER_ErrorCode(err), TRITONSERVER_ERROR_NOT_FOUND);
  EXPECT_THAT(Message(err), HasSubstr("'nope'"));
  EXPECT_EQ(calls.request_releases, 0);  // refused: still the caller's
  TRITONSERVER_InferenceRequestDelete(unknown);

  TRITONSERVER_InferenceRequest* r = NewRequest("echo", calls);
  AddInt32(r, "IN0", {1});
  const int64_t shape[] = {1};
  EXPECT_THAT(
      Message(TRITONSERVER_InferenceRequestAddInput(r, "IN0", TRITONSERVER_TYPE_INT32, shape, 1)),
      HasSubstr("input 'IN0' was already added"));
  int32_t value = 1;
  EXPECT_THAT(Message(TRITONSERVER_InferenceRequestAppendInputData(r, "IN0", &value, 4,
                                                                   TRITONSERVER_MEMORY_GPU, 0)),
              HasSubstr("GPU memory is not accepted"));
  EXPECT_THAT(Message(TRITONSERVER_InferenceRequestAppendInputData(r, "IN9", &value, 4,
                                                                   TRITONSERVER_MEMORY_CPU, 0)),
              HasSubstr("input 'IN9' does not exist"));
  EXPECT_THAT(Message(TRITONSERVER_InferenceRequestCancel(r)), HasSubstr("was not sent"));
  // The backend's error reaches the response, with FINAL.
  const bool yes = true;
  const int64_t one[] = {1};
  ASSERT_EQ(TRITONSERVER_InferenceRequestAddInput(r, "fail", TRITONSERVER_TYPE_BOOL, one, 1),
            nullptr);
  ASSERT_EQ(
      TRITONSERVER_InferenceRequestAppendInputData(r, "fail", &yes, 1, TRITONSERVER_MEMORY_CPU, 0),
      nullptr);
  ASSERT_EQ(TRITONSERVER_ServerInferAsync(server_, r, nullptr), nullptr);
  ASSERT_TRUE(calls.WaitReleased());
  std::lock_guard lock(calls.mu);
  ASSERT_EQ(calls.flags, (std::vector<uint32_t>{TRITONSERVER_RESPONSE_COMPLETE_FINAL}));
  EXPECT_NE(calls.errors[0], "");
}

TEST_F(BlsApiTest, AnAllocatorThatFailsTurnsTheResponseIntoItsError) {
  Calls calls;
  calls.fail_alloc = true;
  TRITONSERVER_InferenceRequest* r = NewRequest("echo", calls);
  AddInt32(r, "IN0", {5, 6});
  ASSERT_EQ(TRITONSERVER_ServerInferAsync(server_, r, nullptr), nullptr);
  ASSERT_TRUE(calls.WaitReleased());
  std::lock_guard lock(calls.mu);
  ASSERT_EQ(calls.errors.size(), 1u);
  EXPECT_THAT(calls.errors[0], HasSubstr("allocating output 'OUT_IN0' (8 bytes): no memory left"));
  EXPECT_TRUE(calls.outputs[0].empty());
}

}  // namespace
}  // namespace inflight::server::testing
