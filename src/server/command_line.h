// inflight-server's command line: tritonserver's options, parsed as tritonserver parses them
// (long_options.h: unambiguous prefixes, aliases, "=" and space forms). Every option of
// tritonserver's (server src/command_line_parser.cc) is known by name: the ones inflight-server
// implements take effect; the ones that configure something it does not have (SageMaker,
// memory pools) are accepted and leave a note saying they are not used; the ones whose request
// cannot be met (tracing, response cache, --model-control-mode=poll) are refused by name.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "server/server_api.h"

namespace inflight::server {

struct CommandLine {
  ServerOptions server;
  bool backend_directory_given = false;

  bool allow_http = true;
  // Unset: the HTTP service's own defaults (0.0.0.0, 8000, its worker count and body limit).
  std::optional<std::string> http_address;
  std::optional<int> http_port;
  std::optional<int> http_thread_count;
  std::optional<std::size_t> http_max_input_bytes;
  std::optional<int> http_read_timeout_secs;
  bool http_busy_poll = false;

  bool allow_grpc = true;
  // Unset: the gRPC service's defaults (0.0.0.0, 8001).
  std::optional<std::string> grpc_address;
  std::optional<int> grpc_port;

  bool allow_metrics = true;
  std::optional<std::string> metrics_address;  // unset: the HTTP address
  int metrics_port = 8002;

  int log_verbose = 0;  // 0 info, >= 1 debug, >= 2 trace
  bool log_info = true;
  bool log_warning = true;
  bool log_error = true;
  bool log_iso8601 = false;  // --log-format=ISO8601
  std::string log_file;

  // As tritonserver: a model asked for that fails to load stops the server at startup (exit 1).
  // With false the server stays up with that model UNAVAILABLE (and /v2/health/ready false under
  // --strict-readiness).
  bool exit_on_error = true;
  bool help = false;

  // One line per accepted option that has no effect in inflight-server, saying so; the caller
  // logs them once logging is set up.
  std::vector<std::string> notes;
};

// Parses `args` (argv without the program name). Errors name the option, the value and what is
// accepted.
Result<CommandLine> ParseCommandLine(const std::vector<std::string>& args);

// --help: every option with its value and what it does here.
std::string CommandLineUsage();

}  // namespace inflight::server
