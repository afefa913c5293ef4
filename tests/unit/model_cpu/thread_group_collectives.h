// Collectives (model/collectives.h) over threads of one process: tp_size x pp_size ranks, each a
// thread that runs its own runner or transformer on host memory. The sums, gathers and hand-overs
// are real (shared memory behind barriers), so a sharded forward pass can be checked against the
// whole engine's on CPU. fp32 only, as the CPU forward pass.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "model/collectives.h"

namespace inflight::model::testing {

class ThreadGroup {
 public:
  ThreadGroup(std::int32_t tp_size, std::int32_t pp_size)
      : tp_size_(tp_size), pp_size_(pp_size), stages_(static_cast<std::size_t>(pp_size)) {
    for (Stage& s : stages_) s.slots.resize(static_cast<std::size_t>(tp_size));
  }
  std::int32_t tp_size() const { return tp_size_; }
  std::int32_t pp_size() const { return pp_size_; }

  // A mailbox: activations for the next stage and results for the first are kept apart.
  enum Channel : std::int32_t { kActivations, kResults };
  using Address = std::tuple<std::int32_t, std::int32_t, std::int32_t>;  // (channel, pp, tp)

  // One rank's view of the group.
  class Member final : public Collectives {
   public:
    Member(ThreadGroup& group, std::int32_t tp_rank, std::int32_t pp_rank)
        : group_(group), tp_rank_(tp_rank), pp_rank_(pp_rank) {}
    std::int32_t tp_rank() const override { return tp_rank_; }
    std::int32_t tp_size() const override { return group_.tp_size_; }
    std::int32_t pp_rank() const override { return pp_rank_; }
    std::int32_t pp_size() const override { return group_.pp_size_; }

    Status AllReduceSum(void* buffer, std::int64_t count, DType dtype, void* stream) override {
      if (dtype != DType::kFloat32 || stream != nullptr) {
        return InvalidArgument(std::string("thread group: fp32 host buffers only, got ") +
                               DTypeName(dtype));
      }
      Stage& s = group_.stages_[static_cast<std::size_t>(pp_rank_)];
      auto* mine = static_cast<float*>(buffer);
      s.slots[static_cast<std::size_t>(tp_rank_)] = {mine, 0, count};
      group_.Wait(s);  // every rank's partial is in place
      std::vector<float> sum(static_cast<std::size_t>(count), 0.0f);
      for (const Slot& slot : s.slots) {
        for (std::int64_t i = 0; i < count; ++i) sum[static_cast<std::size_t>(i)] += slot.data[i];
      }
      group_.Wait(s);  // every rank has read every partial
      std::memcpy(mine, sum.data(), sum.size() * sizeof(float));
      return Status::Ok();
    }

    Status AllGatherColumns(float* logits, std::int64_t rows, std::int64_t cols,
                            std::int64_t col_begin, std::int64_t col_end, void* stream) override {
      if (stream != nullptr) return InvalidArgument("thread group: host buffers only");
      Stage& s = group_.stages_[static_cast<std::size_t>(pp_rank_)];
      s.slots[static_cast<std::size_t>(tp_rank_)] = {logits, col_begin, col_end};
      group_.Wait(s);
      // Each rank writes only the columns it did not compute, and reads only the ones it did.
      for (const Slot& slot : s.slots) {
        if (slot.data == logits) continue;
        for (std::int64_t r = 0; r < rows; ++r) {
          std::memcpy(logits + r * cols + slot.begin, slot.data + r * cols + slot.begin,
                      static_cast<std::size_t>(slot.end - slot.begin) * sizeof(float));
        }
      }
      group_.Wait(s);
      return Status::Ok();
    }

    Status SendToNextStage(const void* buffer, std::int64_t count, DType dtype,
                           void* /*stream*/) override {
      if (pp_rank_ + 1 >= group_.pp_size_) return InvalidArgument("the last stage has no next");
      return Send({kActivations, pp_rank_ + 1, tp_rank_}, buffer, count, dtype);
    }
    Status ReceiveFromPreviousStage(void* buffer, std::int64_t count, DType dtype,
                                    void* /*stream*/) override {
      if (pp_rank_ == 0) return InvalidArgument("the first stage has no previous");
      return Receive({kActivations, pp_rank_, tp_rank_}, buffer, count, dtype);
    }
    Status SendToFirstStage(const void* buffer, std::int64_t count, DType dtype,
                            void* /*stream*/) override {
      if (pp_rank_ != group_.pp_size_ - 1 || pp_rank_ == 0) {
        return InvalidArgument("only the last of several stages sends to the first");
      }
      return Send({kResults, 0, tp_rank_}, buffer, count, dtype);
    }
    Status ReceiveFromLastStage(void* buffer, std::int64_t count, DType dtype,
                                void* /*stream*/) override {
      if (pp_rank_ != 0 || group_.pp_size_ == 1) {
        return InvalidArgument("only the first of several stages receives from the last");
      }
      return Receive({kResults, 0, tp_rank_}, buffer, count, dtype);
    }

   private:
    Status Send(Address to, const void* buffer, std::int64_t count, DType dtype) {
      const auto* p = static_cast<const char*>(buffer);
      group_.Post(to,
                  std::vector<char>(p, p + count * static_cast<std::int64_t>(DTypeSize(dtype))));
      return Status::Ok();
    }
    Status Receive(Address at, void* buffer, std::int64_t count, DType dtype) {
      const std::vector<char> message = group_.Take(at);
      if (static_cast<std::int64_t>(message.size()) !=
          count * static_cast<std::int64_t>(DTypeSize(dtype))) {
        return InvalidArgument("received " + std::to_string(message.size()) + " bytes, expected " +
                               std::to_string(count) + " elements");
      }
      std::memcpy(buffer, message.data(), message.size());
      return Status::Ok();
    }

    ThreadGroup& group_;
    const std::int32_t tp_rank_, pp_rank_;
  };

 private:
  struct Slot {
    const float* data = nullptr;
    std::int64_t begin = 0, end = 0;
  };
  struct Stage {
    std::mutex mutex;
    std::condition_variable cv;
    std::int32_t arrived = 0;
    std::uint64_t generation = 0;
    std::vector<Slot> slots;  // by tp rank
  };
  // A barrier over the stage's tensor-parallel ranks.
  void Wait(Stage& s) {
    std::unique_lock<std::mutex> lock(s.mutex);
    const std::uint64_t generation = s.generation;
    if (++s.arrived == tp_size_) {
      s.arrived = 0;
      ++s.generation;
      s.cv.notify_all();
    } else {
      s.cv.wait(lock, [&] { return s.generation != generation; });
    }
  }
  void Post(Address to, std::vector<char> message) {
    std::lock_guard<std::mutex> lock(mail_mutex_);
    mail_[to].push_back(std::move(message));
    mail_cv_.notify_all();
  }
  std::vector<char> Take(Address at) {
    std::unique_lock<std::mutex> lock(mail_mutex_);
    mail_cv_.wait(lock, [&] { return !mail_[at].empty(); });
    std::vector<char> message = std::move(mail_[at].front());
    mail_[at].pop_front();
    return message;
  }

  const std::int32_t tp_size_, pp_size_;
  std::vector<Stage> stages_;
  std::mutex mail_mutex_;
  std::condition_variable mail_cv_;
  std::map<Address, std::deque<std::vector<char>>> mail_;
};

}  // namespace inflight::model::testing
