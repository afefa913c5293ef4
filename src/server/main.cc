// inflight-server: a Triton-compatible host. Takes tritonserver's command line (command_line.h),
// loads the model repository through the Server core, serves KServe v2 over HTTP, Triton's
// GRPCInferenceService over gRPC and Prometheus metrics, and shuts down cleanly on SIGINT/SIGTERM.
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/sinks/basic_file_sink.h>

#include "common/logging.h"
#include "common/mpi_launch.h"
#include "common/status.h"
#include "server/command_line.h"
#include "server/http/http_service.h"
#include "server/server_api.h"
#ifdef INFLIGHT_SERVER_GRPC
#include "server/grpc/grpc_service.h"
#endif
#ifdef INFLIGHT_SERVER_OPENAI
#include "server/openai/openai_routes.h"
#endif

namespace {

using inflight::InvalidArgument;
using inflight::Result;
using inflight::Status;
using inflight::server::CommandLine;
namespace fs = std::filesystem;
namespace server = inflight::server;

// Where backends are looked for when --backend-directory is not given: tritonserver's default, then
// <root>/backends for the binary at <root>/bin/inflight-server (an install prefix or the build
// tree). Passed to the core as one ':'-separated search path (only the folders that exist).
std::string DefaultBackendSearchPath(const std::string& default_directory) {
  std::vector<fs::path> candidates = {default_directory};
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) candidates.push_back(exe.parent_path().parent_path() / "backends");
  std::string path;
  for (const fs::path& dir : candidates) {
    if (!fs::is_directory(dir, ec)) continue;
    path += (path.empty() ? "" : ":") + fs::weakly_canonical(dir, ec).string();
  }
  return path.empty() ? default_directory : path;
}

std::string LevelName(spdlog::level::level_enum level) {
  const auto name = spdlog::level::to_string_view(level);
  return std::string(name.data(), name.size());
}

// spdlog filters by one minimum level, so the levels asked for must be everything from some level
// up: --log-info=false with warnings on is fine, --log-warning=false with info on is not.
Result<spdlog::level::level_enum> MinimumLogLevel(const CommandLine& cl) {
  using spdlog::level::level_enum;
  const std::pair<level_enum, bool> levels[] = {
      {level_enum::trace, cl.log_verbose >= 2}, {level_enum::debug, cl.log_verbose >= 1},
      {level_enum::info, cl.log_info},          {level_enum::warn, cl.log_warning},
      {level_enum::err, cl.log_error},
  };
  std::optional<level_enum> lowest;
  for (const auto& [level, on] : levels) {
    if (on && !lowest) lowest = level;
    if (!on && lowest) {
      return InvalidArgument(
          "--log-info, --log-warning, --log-error and --log-verbose must leave every level above "
          "the lowest one logged on (inflight-server logs by minimum level): " +
          LevelName(level) + " is off while " + LevelName(*lowest) + " is on");
    }
  }
  return lowest.value_or(level_enum::off);
}

Status SetUpLogging(const CommandLine& cl) {
  ASSIGN_OR_RETURN(spdlog::level::level_enum level, MinimumLogLevel(cl));
  if (!cl.log_file.empty()) {
    try {
      spdlog::set_default_logger(spdlog::basic_logger_mt("inflight", cl.log_file));
      spdlog::flush_on(spdlog::level::info);
    } catch (const spdlog::spdlog_ex& e) {
      return InvalidArgument("--log-file=" + cl.log_file + ": " + e.what());
    }
  }
  if (cl.log_iso8601) {
    // tritonserver's ISO8601 format: "YYYY-MM-DDThh:mm:ssZ L message", in UTC.
    spdlog::set_pattern("%Y-%m-%dT%H:%M:%SZ %L %v", spdlog::pattern_time_type::utc);
  }
  spdlog::set_level(level);
  return Status::Ok();
}

// The table tritonserver prints once the repository is loaded.
std::string ModelTable(const std::vector<server::ModelIndexEntry>& index) {
  std::vector<std::vector<std::string>> rows = {{"Model", "Version", "Status"}};
  for (const auto& e : index) {
    rows.push_back({e.name, e.version.empty() ? "-" : e.version,
                    e.reason.empty() ? e.state : e.state + ": " + e.reason});
  }
  std::size_t width[3] = {0, 0, 0};
  for (const auto& row : rows) {
    for (int c = 0; c < 3; ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string rule = "+";
  for (std::size_t w : width) rule += std::string(w + 2, '-') + "+";
  std::string out = "\n" + rule + "\n";
  for (std::size_t r = 0; r < rows.size(); ++r) {
    out += "|";
    for (int c = 0; c < 3; ++c)
      out += " " + rows[r][c] + std::string(width[c] - rows[r][c].size(), ' ') + " |";
    out += "\n";
    if (r == 0) out += rule + "\n";
  }
  return out + rule;
}

// How long answers already computed get to reach their clients at shutdown.
constexpr std::chrono::seconds kAnswerFlushTime{5};

// Each HTTP connection is a file descriptor and idle ones cost little else: raise the soft limit to
// the hard one (often 1024 -> 1M) so that the descriptor limit, not the server, bounds clients.
void RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) LOG_WARN("could not raise the open file limit");
}

int Run(int argc, char** argv) {
  auto parsed = server::ParseCommandLine(std::vector<std::string>(argv + 1, argv + argc));
  if (!parsed.ok()) {
    std::cerr << "error: " << parsed.status().message() << "\n";
    return 1;
  }
  CommandLine& cl = *parsed;
  if (cl.help) {
    std::cout << server::CommandLineUsage();
    return 0;
  }
  if (Status st = SetUpLogging(cl); !st.ok()) {
    std::cerr << "error: " << st.message() << "\n";
    return 1;
  }
  for (const std::string& note : cl.notes) LOG_WARN("{}", note);
  if (!cl.backend_directory_given)
    cl.server.backend_directory = DefaultBackendSearchPath(cl.server.backend_directory);
  LOG_INFO("backend directory: {}", cl.server.backend_directory);

  RaiseOpenFileLimit();

  // Every thread the core and the HTTP servers start inherits this mask, so SIGINT/SIGTERM reach
  // only the sigwait below. Broken client sockets must be an error from send(), never a
  // process-killing SIGPIPE.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  auto created = server::Server::Create(cl.server);
  if (!created.ok()) {
    LOG_ERROR("error: creating server: {}", created.status().ToString());
    return 1;
  }
  std::unique_ptr<server::Server> core = std::move(*created);
  const auto index = core->ModelIndex();
  LOG_INFO("{}", ModelTable(index));
  // Under mpirun, ranks > 0 belong to a split engine's group: its backend holds them inside model
  // loading until rank 0 ends, and they exit from there (backend/leader_mode.h). One that got here
  // has no such model (it failed to load, or there is none) and must not bind rank 0's ports; it
  // ends the job, since rank 0 may be waiting for it.
  if (Result<inflight::MpiLaunch> mpi = inflight::MpiLaunchFromEnvironment();
      mpi.ok() && mpi->rank > 0) {
    LOG_ERROR(
        "error: MPI rank {} of {}: no model of a split engine held this rank (see the errors "
        "above); ranks > 0 never serve, so this one exits",
        mpi->rank, mpi->size);
    core->Shutdown();
    spdlog::default_logger()->flush();
    return 1;
  }
  // IsReady(): every model asked for (all of the repository, or the --load-model list) is READY.
  if (cl.exit_on_error && !core->IsReady()) {
    LOG_ERROR("error: creating server: Internal - failed to load all models");
    core->Shutdown();
    return 1;
  }

#ifdef INFLIGHT_SERVER_OPENAI
  // Declared before `http`, which holds its routes, so that it is destroyed after it.
  std::unique_ptr<server::openai::OpenAiRoutes> openai;
#endif
  std::unique_ptr<server::http::HttpService> http;
  std::unique_ptr<server::http::MetricsService> metrics;
#ifdef INFLIGHT_SERVER_GRPC
  std::unique_ptr<server::grpc_frontend::GrpcService> grpc;
#endif
  auto fail = [&](const std::string& what, const Status& st) {
    LOG_ERROR("failed to start {}: {}", what, st.message());
#ifdef INFLIGHT_SERVER_GRPC
    if (grpc) grpc->Stop(std::chrono::milliseconds(0));
#endif
    if (http) http->Stop();
    if (metrics) metrics->Stop();
    core->Shutdown();
    return 1;
  };
  server::http::HttpServiceOptions http_options;
  if (cl.http_address) http_options.address = *cl.http_address;
  if (cl.http_port) http_options.port = *cl.http_port;
  if (cl.http_thread_count) http_options.thread_count = *cl.http_thread_count;
  if (cl.http_max_input_bytes) http_options.max_input_bytes = *cl.http_max_input_bytes;
  http_options.busy_poll = cl.http_busy_poll;
  if (cl.http_read_timeout_secs)
    http_options.read_timeout = std::chrono::seconds(*cl.http_read_timeout_secs);
  if (cl.allow_http) {
    http = std::make_unique<server::http::HttpService>(*core, http_options);
#ifdef INFLIGHT_SERVER_OPENAI
    // /v1/models, /v1/completions, /v1/chat/completions on the same port.
    openai = std::make_unique<server::openai::OpenAiRoutes>(*core);
    openai->Register(http->router());
#endif
    if (Status st = http->Start(); !st.ok()) return fail("HTTP service", st);
  }
#ifdef INFLIGHT_SERVER_GRPC
  server::grpc_frontend::GrpcServiceOptions grpc_options;
  if (cl.grpc_address) grpc_options.address = *cl.grpc_address;
  if (cl.grpc_port) grpc_options.port = *cl.grpc_port;
  grpc_options.explicit_model_control = cl.server.explicit_model_control;
  if (cl.allow_grpc) {
    grpc = std::make_unique<server::grpc_frontend::GrpcService>(*core, grpc_options);
    if (Status st = grpc->Start(); !st.ok()) return fail("GRPC service", st);
  }
#else
  if (cl.allow_grpc) {
    LOG_WARN(
        "this inflight-server was built without gRPC C++ (libgrpc++-dev): no gRPC endpoint "
        "is served; pass --allow-grpc=false to silence this");
  }
#endif
  if (cl.allow_metrics) {
    metrics = std::make_unique<server::http::MetricsService>(
        *core, cl.metrics_address.value_or(http_options.address), cl.metrics_port);
    if (Status st = metrics->Start(); !st.ok()) return fail("Metrics service", st);
  }
  // Scripts and tests wait for these lines (tritonserver's words); both sockets already accept.
#ifdef INFLIGHT_SERVER_GRPC
  if (grpc) LOG_INFO("Started GRPCInferenceService at {}:{}", grpc_options.address, grpc->port());
#endif
  if (http) LOG_INFO("Started HTTPService at {}:{}", http_options.address, http->port());
  if (metrics) {
    LOG_INFO("Started Metrics Service at {}:{}", cl.metrics_address.value_or(http_options.address),
             metrics->port());
  }
  spdlog::default_logger()->flush();

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  LOG_INFO("Signal ({}) received.", signal_number);
  // As tritonserver: stop accepting, let requests in flight finish for up to --exit-timeout-secs,
  // then cancel the rest (the core's Shutdown does both) and exit 0. HTTP clients of requests in
  // flight keep their connections and get their answers (streams run to their end); new
  // connections are refused and /v2/health/ready says 400 meanwhile.
  if (http) http->Drain();
  // gRPC calls keep receiving their responses while the core drains (it fails what it cancels),
  // then whatever is still open is cancelled.
  core->Shutdown();
  // The core answered every request by now; what is left is writing the last answers out.
  if (http) http->Stop(kAnswerFlushTime);
  if (metrics) metrics->Stop();
#ifdef INFLIGHT_SERVER_GRPC
  if (grpc) grpc->Stop(std::chrono::seconds(5));
#endif
  LOG_INFO("inflight-server stopped");
  spdlog::default_logger()->flush();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return Run(argc, argv);
}
