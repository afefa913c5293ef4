// Collectives (model/collectives.h) for CUDA runners that share one GPU in one process, a thread
// per rank: each operation waits for the rank's stream, moves the device buffer through host
// memory and hands it to a ThreadGroup member (unit/model_cpu/thread_group_collectives.h), whose
// sums, gathers and hand-overs are real; the result goes back to the device before it returns.
// fp16 / bf16 sums are taken in fp32 and rounded once, as the NCCL group's are.
//
// Synchronous, so a runner using it needs its decode graphs off (INFLIGHT_CUDA_GRAPHS=0: a capture
// cannot wait on the host). It lets a machine with one GPU check what a split runner does with its
// collectives (sharded weights, stage files, where it calls them, its pipeline bookkeeping); the
// transport of a real group is NCCL's, checked by gpu_nccl_collectives_test on several GPUs.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "model/collectives.h"
#include "model/cuda_status.h"
#include "unit/model_cpu/thread_group_collectives.h"

namespace inflight::model::testing {

class StagedThreadCollectives final : public Collectives {
 public:
  StagedThreadCollectives(ThreadGroup& group, std::int32_t tp_rank, std::int32_t pp_rank)
      : member_(group, tp_rank, pp_rank) {}

  std::int32_t tp_rank() const override { return member_.tp_rank(); }
  std::int32_t tp_size() const override { return member_.tp_size(); }
  std::int32_t pp_rank() const override { return member_.pp_rank(); }
  std::int32_t pp_size() const override { return member_.pp_size(); }

  Status AllReduceSum(void* buffer, std::int64_t count, DType dtype, void* stream) override {
    if (dtype != DType::kFloat32 && dtype != DType::kBFloat16 && dtype != DType::kFloat16) {
      return InvalidArgument(std::string("staged all-reduce: float dtypes only, got ") +
                             DTypeName(dtype));
    }
    const auto bytes = static_cast<std::size_t>(count) * DTypeSize(dtype);
    std::vector<char> raw(bytes);
    RETURN_IF_ERROR(Download(buffer, raw, stream));
    std::vector<float> sum(static_cast<std::size_t>(count));
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = Widen(raw.data(), i, dtype);
    RETURN_IF_ERROR(member_.AllReduceSum(sum.data(), count, DType::kFloat32, nullptr));
    for (std::size_t i = 0; i < sum.size(); ++i) Narrow(sum[i], raw.data(), i, dtype);
    return Upload(raw, buffer, stream);
  }

  Status AllGatherColumns(float* logits, std::int64_t rows, std::int64_t cols,
                          std::int64_t col_begin, std::int64_t col_end, void* stream) override {
    std::vector<char> raw(static_cast<std::size_t>(rows * cols) * sizeof(float));
    RETURN_IF_ERROR(Download(logits, raw, stream));
    RETURN_IF_ERROR(member_.AllGatherColumns(reinterpret_cast<float*>(raw.data()), rows, cols,
                                             col_begin, col_end, nullptr));
    return Upload(raw, logits, stream);
  }

  Status SendToNextStage(const void* buffer, std::int64_t count, DType dtype,
                         void* stream) override {
    return SendThrough(&Collectives::SendToNextStage, buffer, count, dtype, stream);
  }
  Status ReceiveFromPreviousStage(void* buffer, std::int64_t count, DType dtype,
                                  void* stream) override {
    return ReceiveThrough(&Collectives::ReceiveFromPreviousStage, buffer, count, dtype, stream);
  }
  Status SendToFirstStage(const void* buffer, std::int64_t count, DType dtype,
                          void* stream) override {
    return SendThrough(&Collectives::SendToFirstStage, buffer, count, dtype, stream);
  }
  // Waits on the host for the last stage's send: the first stage's thread blocks, the other
  // stages' threads go on, so a pipeline's steps still complete in order.
  Status ReceiveFromLastStage(void* buffer, std::int64_t count, DType dtype,
                              void* stream) override {
    return ReceiveThrough(&Collectives::ReceiveFromLastStage, buffer, count, dtype, stream);
  }

 private:
  using SendFn = Status (Collectives::*)(const void*, std::int64_t, DType, void*);
  using ReceiveFn = Status (Collectives::*)(void*, std::int64_t, DType, void*);
  // `send` or `receive` of the member, on host memory in place of the device's `buffer`.
  Status SendThrough(SendFn send, const void* buffer, std::int64_t count, DType dtype,
                     void* stream) {
    std::vector<char> raw(static_cast<std::size_t>(count) * DTypeSize(dtype));
    RETURN_IF_ERROR(Download(buffer, raw, stream));
    return (member_.*send)(raw.data(), count, dtype, nullptr);
  }
  Status ReceiveThrough(ReceiveFn receive, void* buffer, std::int64_t count, DType dtype,
                        void* stream) {
    std::vector<char> raw(static_cast<std::size_t>(count) * DTypeSize(dtype));
    RETURN_IF_ERROR((member_.*receive)(raw.data(), count, dtype, nullptr));
    return Upload(raw, buffer, stream);
  }
  // After the work queued on `stream` so far (which wrote `device`).
  static Status Download(const void* device, std::vector<char>& host, void* stream) {
    const auto s = static_cast<cudaStream_t>(stream);
    CUDA_RETURN(cudaMemcpyAsync(host.data(), device, host.size(), cudaMemcpyDeviceToHost, s));
    CUDA_RETURN(cudaStreamSynchronize(s));
    return Status::Ok();
  }
  // Before the work queued on `stream` later (which reads `device`); `host` may go on return.
  static Status Upload(const std::vector<char>& host, void* device, void* stream) {
    const auto s = static_cast<cudaStream_t>(stream);
    CUDA_RETURN(cudaMemcpyAsync(device, host.data(), host.size(), cudaMemcpyHostToDevice, s));
    CUDA_RETURN(cudaStreamSynchronize(s));
    return Status::Ok();
  }
  static float Widen(const char* raw, std::size_t i, DType dtype) {
    std::uint16_t h = 0;
    float f = 0;
    switch (dtype) {
      case DType::kFloat32:
        std::memcpy(&f, raw + i * 4, 4);
        return f;
      case DType::kBFloat16:
        std::memcpy(&h, raw + i * 2, 2);
        return Bf16ToFloat(h);
      default:
        std::memcpy(&h, raw + i * 2, 2);
        return Fp16ToFloat(h);
    }
  }
  static void Narrow(float f, char* raw, std::size_t i, DType dtype) {
    std::uint16_t h = 0;
    switch (dtype) {
      case DType::kFloat32:
        std::memcpy(raw + i * 4, &f, 4);
        return;
      case DType::kBFloat16:
        h = FloatToBf16(f);
        break;
      default:
        h = FloatToFp16(f);
        break;
    }
    std::memcpy(raw + i * 2, &h, 2);
  }

  ThreadGroup::Member member_;
};

}  // namespace inflight::model::testing
