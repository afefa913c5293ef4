#include "backend/group_collectives.h"

#include <algorithm>
#include <string>

#include "common/logging.h"
#include "model/mpi_collectives.h"
#ifdef INFLIGHT_BACKEND_NCCL
#include "model/cuda_model_runner.h"
#include "model/nccl_collectives.h"
#endif

namespace inflight::backend {

Result<std::shared_ptr<model::Collectives>> CreateGroupCollectives(
    MPI_Comm comm, const model::EngineConfig& engine, const ExecutorConfig& config,
    int local_rank) {
#ifdef INFLIGHT_BACKEND_NCCL
  // The same choice of runner as executor::CreateModelRunner: CUDA when asked for or when a device
  // is visible; its device, which the runner then takes from the collectives: gpu_device_ids'
  // entry for the rank on this host, else that rank modulo the host's devices.
  if (config.device == DeviceKind::kCuda ||
      (config.device == DeviceKind::kAuto && model::CudaDeviceAvailable())) {
    int device = local_rank % std::max(1, model::CudaDeviceCount());
    if (config.gpu_device_ids && !config.gpu_device_ids->empty()) {
      const auto& ids = *config.gpu_device_ids;
      if (local_rank >= static_cast<int>(ids.size())) {
        return InvalidArgument("gpu_device_ids lists " + std::to_string(ids.size()) +
                               " devices, but this process is rank " + std::to_string(local_rank) +
                               " on its host: give one id per rank on a host (on every host)");
      }
      device = ids[static_cast<std::size_t>(local_rank)];
    }
    LOG_INFO("local rank {}: NCCL collectives on device {}", local_rank, device);
    return model::CreateNcclCollectives(comm, engine.tp_size, engine.pp_size, device);
  }
#else
  if (config.device == DeviceKind::kCuda) {
    return Unsupported(
        "device \"cuda\" with an engine of tp_size " + std::to_string(engine.tp_size) +
        " x pp_size " + std::to_string(engine.pp_size) +
        " needs NCCL, and this build has none (the CUDA toolkit's nccl.h and libnccl); "
        "accepted here: device cpu");
  }
#endif
  (void)local_rank;
  return model::CreateMpiCollectives(comm, engine.tp_size, engine.pp_size);
}

}  // namespace inflight::backend
