// CUDA runtime and cuBLASLt results as Status values, for the CUDA model runner's files.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "inflight/status.h"

namespace inflight::model {

inline Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::Ok();
  return Internal(std::string(what) + ": " + cudaGetErrorString(err));
}

#define CUDA_RETURN(expr) RETURN_IF_ERROR(::inflight::model::CudaStatus((expr), #expr))

inline Status CublasStatus(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return Internal(std::string(what) + ": cuBLASLt status " + std::to_string(static_cast<int>(st)));
}

// Sizes in the runner's logs and errors.
inline std::string MiB(std::int64_t bytes) {
  return std::to_string(bytes >> 20) + " MiB";
}

}  // namespace inflight::model
