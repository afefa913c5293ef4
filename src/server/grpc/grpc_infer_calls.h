// The two inference RPCs on gRPC's callback API: no thread waits on a call. A request goes to the
// server core with a callback; the core's threads hand each response to the call, which writes it.
//
//   ModelInfer        one request, one response. A client that cancels or disconnects cancels the
//                     request in the core (the backend sees
//                     TRITONBACKEND_ResponseFactoryIsCancelled).
//   ModelStreamInfer  requests read one after another while earlier ones run; every response is
//                     written in arrival order, one write at a time. An error answers its request
//                     in error_message and the stream goes on. A decoupled model's last response
//                     carries triton_final_response = true; with triton_enable_empty_final_response
//                     the flag-only end of a request is sent as an empty response too. The stream
//                     ends once the client has half-closed and every request has ended; a client
//                     that cancels or disconnects cancels every request still running.
#pragma once

#include <grpcpp/grpcpp.h>

#include "grpc_service.grpc.pb.h"
#include "server/server_api.h"

namespace inflight::server::grpc_frontend {

// Starts a unary ModelInfer; the returned reactor deletes itself when gRPC is done with it.
::grpc::ServerUnaryReactor* StartModelInfer(Server& server, ::grpc::CallbackServerContext* context,
                                            const inference::ModelInferRequest* request,
                                            inference::ModelInferResponse* response);

// Starts a ModelStreamInfer; the returned reactor deletes itself when gRPC is done with it.
::grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>*
StartModelStreamInfer(Server& server, ::grpc::CallbackServerContext* context);

}  // namespace inflight::server::grpc_frontend
