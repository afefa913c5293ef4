#include "model/mpi_collectives.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <deque>
#include <string>
#include <thread>
#include <vector>

namespace inflight::model {
namespace {

// Point-to-point tags on the pipeline communicator: activations flow forward, results back.
constexpr int kActivationTag = 1;
constexpr int kResultTag = 2;
// MPI counts are int: larger buffers go in pieces of this many elements (or bytes).
constexpr std::int64_t kMaxPiece = std::int64_t{1} << 30;

std::string MpiErrorText(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(text, static_cast<std::size_t>(length));
}

Status MpiStatus(int rc, const std::string& what) {
  if (rc == MPI_SUCCESS) return Status::Ok();
  return Internal(what + " failed: " + MpiErrorText(rc));
}

const char* ThreadLevelName(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    default:
      return "MPI_THREAD_MULTIPLE";
  }
}

class MpiCollectives final : public Collectives {
 public:
  MpiCollectives(std::int32_t tp_size, std::int32_t pp_size, double timeout_seconds)
      : tp_size_(tp_size), pp_size_(pp_size), timeout_seconds_(timeout_seconds) {}
  ~MpiCollectives() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    // Receives posted for steps that were never completed (the runner went away mid-pipeline).
    for (PostedReceive& p : posted_) {
      for (MPI_Request& r : p.requests) {
        if (r == MPI_REQUEST_NULL) continue;
        MPI_Cancel(&r);
        MPI_Request_free(&r);
      }
    }
    for (MPI_Comm* c : {&pp_comm_, &tp_comm_, &group_comm_}) {
      if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
    }
  }

  Status Init(MPI_Comm comm);

  std::int32_t tp_rank() const override { return tp_rank_; }
  std::int32_t tp_size() const override { return tp_size_; }
  std::int32_t pp_rank() const override { return pp_rank_; }
  std::int32_t pp_size() const override { return pp_size_; }

  Status AllReduceSum(void* buffer, std::int64_t count, DType dtype, void* stream) override;
  Status AllGatherColumns(float* logits, std::int64_t rows, std::int64_t cols,
                          std::int64_t col_begin, std::int64_t col_end, void* stream) override;
  Status SendToNextStage(const void* buffer, std::int64_t count, DType dtype,
                         void* stream) override {
    if (pp_rank_ + 1 >= pp_size_)
      return InvalidArgument("SendToNextStage: the last stage has none");
    return Send("SendToNextStage", buffer, count, dtype, stream, pp_rank_ + 1, kActivationTag);
  }
  Status ReceiveFromPreviousStage(void* buffer, std::int64_t count, DType dtype,
                                  void* stream) override {
    if (pp_rank_ == 0) return InvalidArgument("ReceiveFromPreviousStage: the first stage has none");
    return Receive("ReceiveFromPreviousStage", buffer, count, dtype, stream, pp_rank_ - 1,
                   kActivationTag);
  }
  Status SendToFirstStage(const void* buffer, std::int64_t count, DType dtype,
                          void* stream) override {
    if (pp_size_ == 1 || pp_rank_ != pp_size_ - 1) {
      return InvalidArgument(
          "SendToFirstStage: only the last of several stages sends to the first");
    }
    return Send("SendToFirstStage", buffer, count, dtype, stream, 0, kResultTag);
  }
  Status ReceiveFromLastStage(void* buffer, std::int64_t count, DType dtype,
                              void* stream) override {
    if (pp_size_ == 1 || pp_rank_ != 0) {
      return InvalidArgument(
          "ReceiveFromLastStage: only the first of several stages receives from the last");
    }
    return Receive("ReceiveFromLastStage", buffer, count, dtype, stream, pp_size_ - 1, kResultTag);
  }
  Status StartReceiveFromLastStage(void* buffer, std::int64_t count, DType dtype,
                                   void* stream) override;
  Status FinishReceiveFromLastStage() override;

 private:
  // The pieces of a receive posted by StartReceiveFromLastStage, and the bytes each expects.
  struct PostedReceive {
    std::vector<MPI_Request> requests;
    std::vector<int> bytes;
    std::int64_t count = 0;
    DType dtype = DType::kFloat32;
  };

  // Errors before any message moves: the caller's mistakes.
  Status CheckHost(const char* what, void* stream) const;
  // Waits for `request` to complete, polling so that the wait can end at the timeout. A timed-out
  // operation is still posted, so the communicators are not usable after it: the collectives
  // refuse every later call with the same error.
  Status Wait(MPI_Request* request, const std::string& what, MPI_Status* status);
  Status FloatAllReduce(float* buffer, std::int64_t count);
  Status Send(const char* what, const void* buffer, std::int64_t count, DType dtype, void* stream,
              int to_stage, int tag);
  Status Receive(const char* what, void* buffer, std::int64_t count, DType dtype, void* stream,
                 int from_stage, int tag);

  const std::int32_t tp_size_, pp_size_;
  const double timeout_seconds_;
  std::int32_t tp_rank_ = 0, pp_rank_ = 0;
  MPI_Comm group_comm_ = MPI_COMM_NULL;  // a duplicate of the caller's communicator
  MPI_Comm tp_comm_ = MPI_COMM_NULL;     // this stage's tensor-parallel ranks, by tp rank
  MPI_Comm pp_comm_ = MPI_COMM_NULL;     // this tp rank's stages, by pp rank
  Status broken_;                        // set by a timeout
  std::deque<PostedReceive> posted_;     // started, not finished: oldest first
  std::vector<float> widened_;           // fp16 / bf16 all-reduce in fp32
  std::vector<float> packed_;            // all-gather: every rank's columns, rank after rank
};

Status MpiCollectives::Init(MPI_Comm comm) {
  RETURN_IF_ERROR(MpiStatus(MPI_Comm_dup(comm, &group_comm_), "MPI_Comm_dup of the group"));
  RETURN_IF_ERROR(MpiStatus(MPI_Comm_set_errhandler(group_comm_, MPI_ERRORS_RETURN),
                            "MPI_Comm_set_errhandler"));
  int rank = 0;
  RETURN_IF_ERROR(MpiStatus(MPI_Comm_rank(group_comm_, &rank), "MPI_Comm_rank"));
  tp_rank_ = rank % tp_size_;
  pp_rank_ = rank / tp_size_;
  RETURN_IF_ERROR(MpiStatus(MPI_Comm_split(group_comm_, pp_rank_, tp_rank_, &tp_comm_),
                            "MPI_Comm_split into tensor-parallel groups"));
  RETURN_IF_ERROR(MpiStatus(MPI_Comm_split(group_comm_, tp_rank_, pp_rank_, &pp_comm_),
                            "MPI_Comm_split into pipelines"));
  // A communicator inherits its parent's handler; set anyway, so that no MPI default can abort.
  for (MPI_Comm c : {tp_comm_, pp_comm_}) {
    RETURN_IF_ERROR(
        MpiStatus(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler"));
  }
  return Status::Ok();
}

Status MpiCollectives::CheckHost(const char* what, void* stream) const {
  if (!broken_.ok()) return broken_;
  if (stream != nullptr) {
    return InvalidArgument(std::string(what) +
                           ": MPI collectives move host memory and take no CUDA stream (the CUDA "
                           "runner's collectives are NCCL's, nccl_collectives.h)");
  }
  return Status::Ok();
}

Status MpiCollectives::Wait(MPI_Request* request, const std::string& what, MPI_Status* status) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  for (std::int64_t polls = 0;; ++polls) {
    int done = 0;
    RETURN_IF_ERROR(MpiStatus(MPI_Test(request, &done, status), what));
    if (done) return Status::Ok();
    // NOTE: a short spin keeps latency low when the peers are ready; after it the wait sleeps, so
    // that ranks oversubscribing cores (mpirun --oversubscribe, as in CI) leave them to the peer
    // they wait for.
    if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    if (timeout_seconds_ > 0 && (polls & 255) == 0 &&
        std::chrono::duration<double>(Clock::now() - start).count() > timeout_seconds_) {
      broken_ = Unavailable(what + " waited more than " + std::to_string(timeout_seconds_) +
                            " s for its peers (tp_rank " + std::to_string(tp_rank_) + ", pp_rank " +
                            std::to_string(pp_rank_) +
                            "): a rank died or stopped stepping; the group is not usable any more");
      return broken_;
    }
  }
}

Status MpiCollectives::FloatAllReduce(float* buffer, std::int64_t count) {
  for (std::int64_t done = 0; done < count; done += kMaxPiece) {
    const int n = static_cast<int>(std::min(kMaxPiece, count - done));
    MPI_Request request;
    RETURN_IF_ERROR(MpiStatus(
        MPI_Iallreduce(MPI_IN_PLACE, buffer + done, n, MPI_FLOAT, MPI_SUM, tp_comm_, &request),
        "AllReduceSum (MPI_Iallreduce)"));
    RETURN_IF_ERROR(Wait(&request, "AllReduceSum (MPI_Iallreduce)", MPI_STATUS_IGNORE));
  }
  return Status::Ok();
}

Status MpiCollectives::AllReduceSum(void* buffer, std::int64_t count, DType dtype, void* stream) {
  RETURN_IF_ERROR(CheckHost("AllReduceSum", stream));
  if (count < 0) return InvalidArgument("AllReduceSum: count " + std::to_string(count) + " < 0");
  if (tp_size_ == 1 || count == 0) return Status::Ok();
  if (dtype == DType::kFloat32) return FloatAllReduce(static_cast<float*>(buffer), count);
  if (dtype != DType::kFloat16 && dtype != DType::kBFloat16) {
    return InvalidArgument(std::string("AllReduceSum: dtype ") + DTypeName(dtype) +
                           " is not one of: float32, float16, bfloat16");
  }
  // NOTE: fp16 and bf16 partials are widened and summed in fp32, then rounded once. A user-defined
  // MPI_Op on 16-bit data would round after every pairwise add of the reduction tree, so the sum
  // would depend on the rank count and on Open MPI's choice of algorithm; one rounding of an fp32
  // sum is what the GPU kernels' fp32 accumulators do, and it costs only a host copy here.
  widened_.resize(static_cast<std::size_t>(count));
  ConvertToFloat(dtype, buffer, widened_.data(), widened_.size());
  RETURN_IF_ERROR(FloatAllReduce(widened_.data(), count));
  ConvertFromFloat(dtype, widened_.data(), buffer, widened_.size());
  return Status::Ok();
}

Status MpiCollectives::AllGatherColumns(float* logits, std::int64_t rows, std::int64_t cols,
                                        std::int64_t col_begin, std::int64_t col_end,
                                        void* stream) {
  RETURN_IF_ERROR(CheckHost("AllGatherColumns", stream));
  if (rows < 0 || col_begin < 0 || col_begin > col_end || col_end > cols) {
    return InvalidArgument("AllGatherColumns: columns [" + std::to_string(col_begin) + ", " +
                           std::to_string(col_end) + ") of " + std::to_string(rows) + " x " +
                           std::to_string(cols) + " are not a range of the columns");
  }
  if (tp_size_ == 1) {
    if (col_begin == 0 && col_end == cols) return Status::Ok();
    return InvalidArgument("AllGatherColumns: one rank computed columns [" +
                           std::to_string(col_begin) + ", " + std::to_string(col_end) + ") of " +
                           std::to_string(cols) + "; with tp_size 1 it must compute them all");
  }
  // Every rank's range, so that ranges of uneven widths land where they belong.
  std::vector<std::int64_t> ranges(2 * static_cast<std::size_t>(tp_size_));
  const std::int64_t mine[2] = {col_begin, col_end};
  MPI_Request request;
  RETURN_IF_ERROR(MpiStatus(
      MPI_Iallgather(mine, 2, MPI_INT64_T, ranges.data(), 2, MPI_INT64_T, tp_comm_, &request),
      "AllGatherColumns (MPI_Iallgather of the ranges)"));
  RETURN_IF_ERROR(
      Wait(&request, "AllGatherColumns (MPI_Iallgather of the ranges)", MPI_STATUS_IGNORE));
  std::vector<int> counts(static_cast<std::size_t>(tp_size_)), offsets(counts.size());
  std::int64_t expected_begin = 0, total = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    const std::int64_t b = ranges[2 * r], e = ranges[2 * r + 1];
    if (b != expected_begin || e < b) {
      return InvalidArgument("AllGatherColumns: the ranks' column ranges must partition [0, " +
                             std::to_string(cols) + ") in rank order, but tp_rank " +
                             std::to_string(r) + " has [" + std::to_string(b) + ", " +
                             std::to_string(e) + ") where column " +
                             std::to_string(expected_begin) + " was due");
    }
    expected_begin = e;
    if ((e - b) * rows > INT_MAX || total > INT_MAX) {
      return Unsupported("AllGatherColumns: " + std::to_string(rows) + " rows x " +
                         std::to_string(cols) + " columns exceed MPI's int counts");
    }
    counts[r] = static_cast<int>((e - b) * rows);
    offsets[r] = static_cast<int>(total);
    total += counts[r];
  }
  if (expected_begin != cols) {
    return InvalidArgument("AllGatherColumns: the ranks' column ranges end at " +
                           std::to_string(expected_begin) + ", not at cols " +
                           std::to_string(cols));
  }
  // Each rank's columns, packed row-major into its part of one buffer, then unpacked into place.
  packed_.resize(static_cast<std::size_t>(total));
  const std::int64_t n = col_end - col_begin;
  float* own = packed_.data() + offsets[static_cast<std::size_t>(tp_rank_)];
  for (std::int64_t r = 0; r < rows; ++r) {
    std::copy(logits + r * cols + col_begin, logits + r * cols + col_end, own + r * n);
  }
  RETURN_IF_ERROR(
      MpiStatus(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, packed_.data(), counts.data(),
                                offsets.data(), MPI_FLOAT, tp_comm_, &request),
                "AllGatherColumns (MPI_Iallgatherv)"));
  RETURN_IF_ERROR(Wait(&request, "AllGatherColumns (MPI_Iallgatherv)", MPI_STATUS_IGNORE));
  for (std::size_t rank = 0; rank < counts.size(); ++rank) {
    if (static_cast<std::int32_t>(rank) == tp_rank_) continue;
    const std::int64_t b = ranges[2 * rank], w = ranges[2 * rank + 1] - b;
    const float* theirs = packed_.data() + offsets[rank];
    for (std::int64_t r = 0; r < rows; ++r) {
      std::copy(theirs + r * w, theirs + (r + 1) * w, logits + r * cols + b);
    }
  }
  return Status::Ok();
}

Status MpiCollectives::Send(const char* what, const void* buffer, std::int64_t count, DType dtype,
                            void* stream, int to_stage, int tag) {
  RETURN_IF_ERROR(CheckHost(what, stream));
  const std::int64_t bytes = count * static_cast<std::int64_t>(DTypeSize(dtype));
  const auto* p = static_cast<const char*>(buffer);
  for (std::int64_t done = 0; done < bytes; done += kMaxPiece) {
    const int n = static_cast<int>(std::min(kMaxPiece, bytes - done));
    MPI_Request request;
    // NOTE: MPI_Isend takes a non-const buffer in MPI-2 headers only; Open MPI 4's is const.
    RETURN_IF_ERROR(
        MpiStatus(MPI_Isend(p + done, n, MPI_BYTE, to_stage, tag, pp_comm_, &request), what));
    RETURN_IF_ERROR(Wait(&request, what, MPI_STATUS_IGNORE));
  }
  return Status::Ok();
}

Status MpiCollectives::Receive(const char* what, void* buffer, std::int64_t count, DType dtype,
                               void* stream, int from_stage, int tag) {
  RETURN_IF_ERROR(CheckHost(what, stream));
  const std::int64_t bytes = count * static_cast<std::int64_t>(DTypeSize(dtype));
  auto* p = static_cast<char*>(buffer);
  for (std::int64_t done = 0; done < bytes; done += kMaxPiece) {
    const int n = static_cast<int>(std::min(kMaxPiece, bytes - done));
    MPI_Request request;
    MPI_Status status;
    RETURN_IF_ERROR(
        MpiStatus(MPI_Irecv(p + done, n, MPI_BYTE, from_stage, tag, pp_comm_, &request), what));
    // A longer message than expected fails here (MPI_ERR_TRUNCATE); a shorter one below.
    RETURN_IF_ERROR(Wait(&request, what, &status));
    int received = 0;
    RETURN_IF_ERROR(MpiStatus(MPI_Get_count(&status, MPI_BYTE, &received), what));
    if (received != n) {
      return Internal(std::string(what) + ": received " + std::to_string(received) +
                      " bytes from pp_rank " + std::to_string(from_stage) + ", expected " +
                      std::to_string(n) + " (" + std::to_string(count) + " " + DTypeName(dtype) +
                      " elements)");
    }
  }
  return Status::Ok();
}

Status MpiCollectives::StartReceiveFromLastStage(void* buffer, std::int64_t count, DType dtype,
                                                 void* stream) {
  const char* what = "StartReceiveFromLastStage";
  RETURN_IF_ERROR(CheckHost(what, stream));
  if (pp_size_ == 1 || pp_rank_ != 0) {
    return InvalidArgument(
        "StartReceiveFromLastStage: only the first of several stages receives from the last");
  }
  PostedReceive posted;
  posted.count = count;
  posted.dtype = dtype;
  const std::int64_t bytes = count * static_cast<std::int64_t>(DTypeSize(dtype));
  auto* p = static_cast<char*>(buffer);
  // NOTE: MPI matches receives of one source and tag in the order they were posted, and the last
  // stage sends its results in step order: each posted receive gets its own step's result.
  for (std::int64_t done = 0; done < bytes; done += kMaxPiece) {
    const int n = static_cast<int>(std::min(kMaxPiece, bytes - done));
    MPI_Request request = MPI_REQUEST_NULL;
    RETURN_IF_ERROR(MpiStatus(
        MPI_Irecv(p + done, n, MPI_BYTE, pp_size_ - 1, kResultTag, pp_comm_, &request), what));
    posted.requests.push_back(request);
    posted.bytes.push_back(n);
  }
  posted_.push_back(std::move(posted));
  return Status::Ok();
}

Status MpiCollectives::FinishReceiveFromLastStage() {
  const char* what = "FinishReceiveFromLastStage";
  if (posted_.empty()) return Internal("FinishReceiveFromLastStage without a started receive");
  PostedReceive posted = std::move(posted_.front());
  posted_.pop_front();
  for (std::size_t i = 0; i < posted.requests.size(); ++i) {
    MPI_Status status;
    RETURN_IF_ERROR(Wait(&posted.requests[i], what, &status));
    int received = 0;
    RETURN_IF_ERROR(MpiStatus(MPI_Get_count(&status, MPI_BYTE, &received), what));
    if (received != posted.bytes[i]) {
      return Internal(std::string(what) + ": received " + std::to_string(received) +
                      " bytes from pp_rank " + std::to_string(pp_size_ - 1) + ", expected " +
                      std::to_string(posted.bytes[i]) + " (" + std::to_string(posted.count) + " " +
                      DTypeName(posted.dtype) + " elements)");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::shared_ptr<Collectives>> CreateMpiCollectives(MPI_Comm comm, std::int32_t tp_size,
                                                          std::int32_t pp_size,
                                                          const MpiCollectivesOptions& options) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) {
    return InvalidArgument("CreateMpiCollectives: MPI is not initialised (MPI_Init_thread first)");
  }
  int thread_level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&thread_level);
  if (thread_level < MPI_THREAD_SERIALIZED) {
    return InvalidArgument(std::string("CreateMpiCollectives: MPI was initialised at ") +
                           ThreadLevelName(thread_level) +
                           "; the runner steps on a thread of its own, which needs "
                           "MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE (MPI_Init_thread)");
  }
  if (tp_size < 1 || pp_size < 1) {
    return InvalidArgument("CreateMpiCollectives: tp_size " + std::to_string(tp_size) +
                           " and pp_size " + std::to_string(pp_size) + " must be >= 1");
  }
  if (comm == MPI_COMM_NULL) return InvalidArgument("CreateMpiCollectives: comm is MPI_COMM_NULL");
  if (!(options.timeout_seconds >= 0)) {
    return InvalidArgument("CreateMpiCollectives: timeout_seconds " +
                           std::to_string(options.timeout_seconds) + " must be >= 0");
  }
  int size = 0;
  RETURN_IF_ERROR(MpiStatus(MPI_Comm_size(comm, &size), "MPI_Comm_size"));
  if (static_cast<std::int64_t>(size) != static_cast<std::int64_t>(tp_size) * pp_size) {
    return InvalidArgument("CreateMpiCollectives: the MPI communicator has " +
                           std::to_string(size) + " ranks, but tp_size " + std::to_string(tp_size) +
                           " x pp_size " + std::to_string(pp_size) + " needs " +
                           std::to_string(std::int64_t{tp_size} * pp_size));
  }
  auto c = std::make_shared<MpiCollectives>(tp_size, pp_size, options.timeout_seconds);
  RETURN_IF_ERROR(c->Init(comm));
  return std::shared_ptr<Collectives>(std::move(c));
}

}  // namespace inflight::model
