// inflight::Status -> grpc::Status, with the codes tritonserver's gRPC endpoint uses for each
// Triton error code (UNSUPPORTED is UNIMPLEMENTED; the rest keep their name).
#pragma once

#include <grpcpp/support/status.h>

#include "common/status.h"

namespace inflight::server::grpc_frontend {

inline ::grpc::StatusCode ToGrpcCode(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return ::grpc::StatusCode::OK;
    case StatusCode::kUnknown:
      return ::grpc::StatusCode::UNKNOWN;
    case StatusCode::kInternal:
      return ::grpc::StatusCode::INTERNAL;
    case StatusCode::kNotFound:
      return ::grpc::StatusCode::NOT_FOUND;
    case StatusCode::kInvalidArgument:
      return ::grpc::StatusCode::INVALID_ARGUMENT;
    case StatusCode::kUnavailable:
      return ::grpc::StatusCode::UNAVAILABLE;
    case StatusCode::kUnsupported:
      return ::grpc::StatusCode::UNIMPLEMENTED;
    case StatusCode::kAlreadyExists:
      return ::grpc::StatusCode::ALREADY_EXISTS;
    case StatusCode::kCancelled:
      return ::grpc::StatusCode::CANCELLED;
  }
  return ::grpc::StatusCode::UNKNOWN;
}

inline ::grpc::Status ToGrpcStatus(const Status& status) {
  if (status.ok()) return ::grpc::Status::OK;
  return ::grpc::Status(ToGrpcCode(status.code()), status.message());
}

}  // namespace inflight::server::grpc_frontend
