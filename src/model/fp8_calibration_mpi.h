// A calibration split over the processes of an MPI job (mpirun -n tp_size*pp_size inflight-build
// --tp_size ... --calib_dataset ...): a float model larger than one GPU (a 70B in bf16) calibrates
// on several, each process running its rank of the float engine (fp8_calibration.h's
// CalibrationGroup).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>

#include "model/fp8_calibration.h"

namespace inflight::model {

// The group of this process in `comm` (size tp_size * pp_size; MPI initialised with at least
// MPI_THREAD_SERIALIZED). `device` picks the collectives, as for one process: kCuda, or kAuto with
// a device visible, takes NCCL on device local_rank % devices (where NCCL is built), else MPI's
// host collectives for the CPU runner. Collective over `comm`: every rank calls it.
Result<std::shared_ptr<CalibrationGroup>> CreateMpiCalibrationGroup(MPI_Comm comm,
                                                                    std::int32_t tp_size,
                                                                    std::int32_t pp_size,
                                                                    CalibrationDevice device,
                                                                    int local_rank);

}  // namespace inflight::model
