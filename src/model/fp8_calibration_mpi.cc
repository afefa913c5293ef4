#include "model/fp8_calibration_mpi.h"

#include <cmath>
#include <string>
#include <vector>

#include "model/mpi_collectives.h"
#ifdef INFLIGHT_HAVE_NCCL
#include "model/cuda_model_runner.h"
#include "model/nccl_collectives.h"
#endif

namespace inflight::model {
namespace {

Status MpiStatus(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return Status::Ok();
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return Unavailable(std::string("calibration group: ") + what + ": " + std::string(text, len));
}

class MpiCalibrationGroup final : public CalibrationGroup {
 public:
  MpiCalibrationGroup(MPI_Comm comm, int rank, std::int32_t tp, std::int32_t pp,
                      int ranks_on_this_host, std::shared_ptr<Collectives> collectives)
      : comm_(comm),
        rank_(rank),
        tp_(tp),
        pp_(pp),
        ranks_on_this_host_(ranks_on_this_host),
        collectives_(std::move(collectives)) {}
  ~MpiCalibrationGroup() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  std::int32_t tp_size() const override { return tp_; }
  std::int32_t pp_size() const override { return pp_; }
  std::shared_ptr<Collectives> collectives() const override { return collectives_; }
  int ranks_on_this_host() const override { return ranks_on_this_host_; }

  Status Barrier() override { return MpiStatus(MPI_Barrier(comm_), "MPI_Barrier"); }

  Status FoldAmax(ActivationAmax& amax) override {
    // The largest finite value and whether any rank saw NaN, each by MPI_MAX: MPI says nothing of
    // how MAX treats NaN, so it never meets one.
    const std::size_t n = amax.layers.size() * kNumAmaxPoints;
    std::vector<float> values(n);
    std::vector<int> nan(n);
    for (std::size_t i = 0; i < n; ++i) {
      const float v = amax.layers[i / kNumAmaxPoints][i % kNumAmaxPoints];
      nan[i] = std::isnan(v) ? 1 : 0;
      values[i] = std::isnan(v) ? 0.0f : v;
    }
    // Every rank learns the fewest and the most layers any rank observed, so all of them refuse
    // a mismatch alike rather than meet in reductions of different sizes.
    const std::int64_t layers = static_cast<std::int64_t>(amax.layers.size());
    std::int64_t bounds[2] = {layers, -layers};  // MAX of both: the most, and minus the fewest
    RETURN_IF_ERROR(MpiStatus(MPI_Allreduce(MPI_IN_PLACE, bounds, 2, MPI_INT64_T, MPI_MAX, comm_),
                              "MPI_Allreduce (layers)"));
    if (bounds[0] != -bounds[1]) {
      return Internal("calibration group: the ranks observed between " +
                      std::to_string(-bounds[1]) + " and " + std::to_string(bounds[0]) + " layers");
    }
    const int count = static_cast<int>(n);
    RETURN_IF_ERROR(
        MpiStatus(MPI_Allreduce(MPI_IN_PLACE, values.data(), count, MPI_FLOAT, MPI_MAX, comm_),
                  "MPI_Allreduce (amax)"));
    RETURN_IF_ERROR(
        MpiStatus(MPI_Allreduce(MPI_IN_PLACE, nan.data(), count, MPI_INT, MPI_MAX, comm_),
                  "MPI_Allreduce (NaN)"));
    for (std::size_t i = 0; i < n; ++i) {
      amax.layers[i / kNumAmaxPoints][i % kNumAmaxPoints] = nan[i] ? std::nanf("") : values[i];
    }
    return Status::Ok();
  }

 private:
  MPI_Comm comm_;
  int rank_;
  std::int32_t tp_, pp_;
  int ranks_on_this_host_;
  std::shared_ptr<Collectives> collectives_;
};

Result<std::shared_ptr<Collectives>> GroupCollectives(MPI_Comm comm, std::int32_t tp,
                                                      std::int32_t pp, CalibrationDevice device,
                                                      int local_rank) {
#ifdef INFLIGHT_HAVE_NCCL
  if (device == CalibrationDevice::kCuda ||
      (device == CalibrationDevice::kAuto && CudaDeviceAvailable())) {
    const int devices = CudaDeviceCount();
    if (devices < 1) return Unavailable("--calib_device cuda: no CUDA device is visible");
    return CreateNcclCollectives(comm, tp, pp, local_rank % devices);
  }
#else
  (void)local_rank;
  if (device == CalibrationDevice::kCuda) {
    return Unsupported(
        "--calib_device cuda over several processes needs NCCL, and this build has none; "
        "accepted here: auto, cpu");
  }
#endif
  return CreateMpiCollectives(comm, tp, pp);
}

}  // namespace

Result<std::shared_ptr<CalibrationGroup>> CreateMpiCalibrationGroup(MPI_Comm comm,
                                                                    std::int32_t tp_size,
                                                                    std::int32_t pp_size,
                                                                    CalibrationDevice device,
                                                                    int local_rank) {
  int size = 0, rank = 0;
  RETURN_IF_ERROR(MpiStatus(MPI_Comm_size(comm, &size), "MPI_Comm_size"));
  RETURN_IF_ERROR(MpiStatus(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank"));
  if (tp_size < 1 || pp_size < 1 || size != tp_size * pp_size) {
    return InvalidArgument("the calibration runs one process a rank: " + std::to_string(size) +
                           " processes for --tp_size " + std::to_string(tp_size) + " x --pp_size " +
                           std::to_string(pp_size) + " (" + std::to_string(tp_size * pp_size) +
                           " ranks)");
  }
  ASSIGN_OR_RETURN(std::shared_ptr<Collectives> collectives,
                   GroupCollectives(comm, tp_size, pp_size, device, local_rank));
  // The group's own communicator: its barriers and folds never meet the caller's messages.
  MPI_Comm own = MPI_COMM_NULL;
  RETURN_IF_ERROR(MpiStatus(MPI_Comm_dup(comm, &own), "MPI_Comm_dup"));
  MPI_Comm host = MPI_COMM_NULL;
  int host_ranks = 1;
  RETURN_IF_ERROR(
      MpiStatus(MPI_Comm_split_type(own, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host),
                "MPI_Comm_split_type"));
  const int rc = MPI_Comm_size(host, &host_ranks);
  MPI_Comm_free(&host);
  RETURN_IF_ERROR(MpiStatus(rc, "MPI_Comm_size (host)"));
  return std::shared_ptr<CalibrationGroup>(std::make_shared<MpiCalibrationGroup>(
      own, rank, tp_size, pp_size, host_ranks, std::move(collectives)));
}

}  // namespace inflight::model
