// inflight-server: a Triton-compatible host. Takes tritonserver's flags (the ones that make sense
// here), loads the model repository through the Server core, serves KServe v2 over HTTP and
// Prometheus metrics, and shuts down cleanly on SIGINT/SIGTERM.
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <spdlog/sinks/basic_file_sink.h>

#include "common/logging.h"
#include "common/status.h"
#include "server/http_service.h"
#include "server/server_api.h"

namespace {

using inflight::InvalidArgument;
using inflight::Result;
using inflight::Status;
namespace fs = std::filesystem;
namespace server = inflight::server;

struct CommandLine {
  server::ServerOptions server;
  server::http::HttpServiceOptions http;
  bool backend_directory_given = false;
  bool allow_http = true;
  bool allow_metrics = true;
  std::optional<std::string> metrics_address;  // defaults to the HTTP address
  int metrics_port = 8002;
  int log_verbose = 0;
  std::string log_file;
  std::string model_control_mode = "none";
  // NOTE: tritonserver defaults to true; here a model that fails to load leaves the server up with
  // that model UNAVAILABLE (and /v2/health/ready false under --strict-readiness) unless this is
  // asked for.
  bool exit_on_error = false;
  bool help = false;
};

enum class ArgKind { kString, kInt, kBool };

struct Flag {
  std::vector<std::string> names;
  ArgKind kind;
  const char* help;
  std::function<Status(CommandLine&, const std::string&)> apply;
};

Result<bool> ParseBool(const std::string& flag, const std::string& value) {
  if (value == "true" || value == "1" || value == "on" || value == "yes") return true;
  if (value == "false" || value == "0" || value == "off" || value == "no") return false;
  return InvalidArgument("--" + flag + "=" + value + " is not a boolean (true/false, 1/0, on/off)");
}

Result<int> ParseInt(const std::string& flag, const std::string& value, int min, int max) {
  try {
    std::size_t used = 0;
    long long v = std::stoll(value, &used);
    if (used == value.size() && v >= min && v <= max) return static_cast<int>(v);
  } catch (const std::exception&) {
  }
  return InvalidArgument("--" + flag + "=" + value + " is not an integer in " +
                         std::to_string(min) + ".." + std::to_string(max));
}

// --backend-config=<backend>,<key>=<value>; the backend-less form <key>=<value> is a global setting
// and is stored under the backend name "".
Status ApplyBackendConfig(CommandLine& cl, const std::string& value) {
  const auto eq = value.find('=');
  if (eq == std::string::npos || eq == 0) {
    return InvalidArgument("--backend-config=" + value +
                           " is not <backend>,<key>=<value> or <key>=<value>");
  }
  const auto comma = value.find(',');
  std::string backend;
  std::string setting = value;
  if (comma != std::string::npos && comma < eq) {
    backend = value.substr(0, comma);
    setting = value.substr(comma + 1);
  }
  const auto setting_eq = setting.find('=');
  if (backend.empty() && comma != std::string::npos && comma < eq) {
    return InvalidArgument("--backend-config=" + value + " names no backend before the comma");
  }
  if (setting_eq == 0) return InvalidArgument("--backend-config=" + value + " has an empty key");
  cl.server.backend_config[backend][setting.substr(0, setting_eq)] = setting.substr(setting_eq + 1);
  return Status::Ok();
}

std::vector<Flag> Flags() {
  auto int_flag = [](const char* name, int min, int max,
                     const std::function<void(CommandLine&, int)>& set) {
    return [name, min, max, set](CommandLine& cl, const std::string& v) -> Status {
      ASSIGN_OR_RETURN(int value, ParseInt(name, v, min, max));
      set(cl, value);
      return Status::Ok();
    };
  };
  auto bool_flag = [](const char* name, const std::function<void(CommandLine&, bool)>& set) {
    return [name, set](CommandLine& cl, const std::string& v) -> Status {
      ASSIGN_OR_RETURN(bool value, ParseBool(name, v));
      set(cl, value);
      return Status::Ok();
    };
  };
  auto accepted = [](CommandLine&, const std::string&) { return Status::Ok(); };
  return {
      {{"model-repository", "model-store"},
       ArgKind::kString,
       "Model repository path; repeatable.",
       [](CommandLine& cl, const std::string& v) {
         cl.server.model_repositories.push_back(v);
         return Status::Ok();
       }},
      {{"backend-directory"},
       ArgKind::kString,
       "Where backends live as <dir>/<backend>/libtriton_<backend>.so (default "
       "/opt/tritonserver/backends, "
       "then <install prefix>/backends).",
       [](CommandLine& cl, const std::string& v) {
         cl.server.backend_directory = v;
         cl.backend_directory_given = true;
         return Status::Ok();
       }},
      {{"backend-config"},
       ArgKind::kString,
       "<backend>,<key>=<value> handed to the backend; repeatable.",
       ApplyBackendConfig},
      {{"model-control-mode"},
       ArgKind::kString,
       "none (load every model) or explicit (only --load-model).",
       [](CommandLine& cl, const std::string& v) {
         if (v != "none" && v != "explicit") {
           return InvalidArgument("--model-control-mode=" + v + " is not one of: none, explicit");
         }
         cl.model_control_mode = v;
         cl.server.explicit_model_control = v == "explicit";
         return Status::Ok();
       }},
      {{"load-model"},
       ArgKind::kString,
       "Model to load at start-up in explicit mode (\"*\": all); repeatable.",
       [](CommandLine& cl, const std::string& v) {
         cl.server.startup_models.push_back(v);
         return Status::Ok();
       }},
      {{"strict-readiness"},
       ArgKind::kBool,
       "Ready only when every model is ready (default true).",
       bool_flag("strict-readiness",
                 [](CommandLine& cl, bool b) { cl.server.strict_readiness = b; })},
      {{"exit-on-error"},
       ArgKind::kBool,
       "Exit when a model fails to load (default false).",
       bool_flag("exit-on-error", [](CommandLine& cl, bool b) { cl.exit_on_error = b; })},
      {{"disable-auto-complete-config"},
       ArgKind::kBool,
       "Accepted; configs are never auto-completed.",
       accepted},
      {{"allow-http"},
       ArgKind::kBool,
       "Serve HTTP (default true).",
       bool_flag("allow-http", [](CommandLine& cl, bool b) { cl.allow_http = b; })},
      {{"http-address"},
       ArgKind::kString,
       "HTTP bind address (default 0.0.0.0).",
       [](CommandLine& cl, const std::string& v) {
         cl.http.address = v;
         return Status::Ok();
       }},
      {{"http-port"},
       ArgKind::kInt,
       "HTTP port (default 8000; 0 picks a free one).",
       int_flag("http-port", 0, 65535, [](CommandLine& cl, int v) { cl.http.port = v; })},
      {{"http-thread-count"},
       ArgKind::kInt,
       "HTTP workers (default 128); each open connection or SSE stream holds one.",
       int_flag("http-thread-count", 1, 4096,
                [](CommandLine& cl, int v) { cl.http.thread_count = v; })},
      {{"http-max-input-size"},
       ArgKind::kInt,
       "Largest request body in bytes (default 64 MiB); larger is 413.",
       int_flag(
           "http-max-input-size", 1, 2147483647,
           [](CommandLine& cl, int v) { cl.http.max_input_bytes = static_cast<std::size_t>(v); })},
      {{"allow-metrics"},
       ArgKind::kBool,
       "Serve /metrics (default true).",
       bool_flag("allow-metrics", [](CommandLine& cl, bool b) { cl.allow_metrics = b; })},
      {{"metrics-address"},
       ArgKind::kString,
       "Metrics bind address (default: the HTTP address).",
       [](CommandLine& cl, const std::string& v) {
         cl.metrics_address = v;
         return Status::Ok();
       }},
      {{"metrics-port"},
       ArgKind::kInt,
       "Metrics port (default 8002; 0 picks a free one).",
       int_flag("metrics-port", 0, 65535, [](CommandLine& cl, int v) { cl.metrics_port = v; })},
      {{"allow-gpu-metrics", "allow-cpu-metrics"}, ArgKind::kBool, "Accepted.", accepted},
      {{"allow-grpc"}, ArgKind::kBool, "Accepted; gRPC is not served.", accepted},
      {{"grpc-port"},
       ArgKind::kInt,
       "Accepted; gRPC is not served.",
       [](CommandLine&, const std::string& v) -> Status {
         ASSIGN_OR_RETURN(int port, ParseInt("grpc-port", v, 0, 65535));
         LOG_WARN("gRPC is not served by inflight-server; --grpc-port={} is ignored", port);
         return Status::Ok();
       }},
      {{"log-verbose"},
       ArgKind::kInt,
       "Verbose logging level: 0 info, 1 debug, 2 trace.",
       int_flag("log-verbose", 0, 1000, [](CommandLine& cl, int v) { cl.log_verbose = v; })},
      {{"log-file"},
       ArgKind::kString,
       "Write the log to this file instead of the console.",
       [](CommandLine& cl, const std::string& v) {
         cl.log_file = v;
         return Status::Ok();
       }},
      {{"log-info", "log-warning", "log-error"}, ArgKind::kBool, "Accepted.", accepted},
      {{"exit-timeout-secs"}, ArgKind::kInt, "Accepted.", accepted},
      {{"id"}, ArgKind::kString, "Accepted.", accepted},
      {{"help"},
       ArgKind::kBool,
       "Print this help and exit.",
       bool_flag("help", [](CommandLine& cl, bool b) { cl.help = b; })},
  };
}

std::string Usage(const std::vector<Flag>& flags) {
  std::ostringstream out;
  out << "Usage: inflight-server --model-repository=<path> [options]\n"
      << "Flags take --flag=value or --flag value; a boolean flag alone means true.\n\n";
  for (const Flag& flag : flags) {
    std::string names;
    for (const std::string& n : flag.names) names += (names.empty() ? "--" : ", --") + n;
    const char* arg = flag.kind == ArgKind::kBool  ? "[=<bool>]"
                      : flag.kind == ArgKind::kInt ? "=<int>"
                                                   : "=<string>";
    out << "  " << names << arg << "\n      " << flag.help << "\n";
  }
  return out.str();
}

Result<CommandLine> ParseCommandLine(int argc, char** argv, const std::vector<Flag>& flags) {
  CommandLine cl;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) {
      return InvalidArgument("unexpected argument \"" + arg +
                             "\"; flags start with --; see --help");
    }
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const Flag* flag = nullptr;
    for (const Flag& f : flags) {
      for (const std::string& n : f.names) {
        if (n == name) flag = &f;
      }
    }
    if (flag == nullptr)
      return InvalidArgument("unknown flag --" + name + "; see --help for the accepted flags");
    if (!value) {
      const bool has_next = i + 1 < argc;
      if (flag->kind == ArgKind::kBool) {
        // A bare boolean flag means true; a following true/false literal is its value.
        value = "true";
        if (has_next && ParseBool(name, argv[i + 1]).ok()) value = argv[++i];
      } else {
        if (!has_next) return InvalidArgument("flag --" + name + " needs a value");
        value = argv[++i];
      }
    }
    RETURN_IF_ERROR(flag->apply(cl, *value));
  }
  if (cl.help) return cl;
  if (cl.server.model_repositories.empty()) {
    return InvalidArgument("no model repository given: pass --model-repository=<path>");
  }
  if (!cl.server.startup_models.empty() && !cl.server.explicit_model_control) {
    return InvalidArgument("--load-model needs --model-control-mode=explicit");
  }
  return cl;
}

// Where backends are looked for when --backend-directory is not given: tritonserver's default, then
// <prefix>/backends for a binary installed as <prefix>/bin/inflight-server, then the build tree's
// folder. Passed to the core as one ':'-separated search path (only the folders that exist).
std::string DefaultBackendSearchPath(const std::string& default_directory) {
  std::vector<fs::path> candidates = {default_directory};
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) candidates.push_back(exe.parent_path().parent_path() / "backends");
#ifdef INFLIGHT_BUILD_BACKEND_DIR
  candidates.emplace_back(INFLIGHT_BUILD_BACKEND_DIR);
#endif
  std::string path;
  for (const fs::path& dir : candidates) {
    if (!fs::is_directory(dir, ec)) continue;
    path += (path.empty() ? "" : ":") + fs::weakly_canonical(dir, ec).string();
  }
  return path.empty() ? default_directory : path;
}

Status SetUpLogging(const CommandLine& cl) {
  if (!cl.log_file.empty()) {
    try {
      spdlog::set_default_logger(spdlog::basic_logger_mt("inflight", cl.log_file));
      spdlog::flush_on(spdlog::level::info);
    } catch (const spdlog::spdlog_ex& e) {
      return InvalidArgument("--log-file=" + cl.log_file + ": " + e.what());
    }
  }
  inflight::SetLogVerbosity(cl.log_verbose);
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

int Run(int argc, char** argv) {
  const std::vector<Flag> flags = Flags();
  auto parsed = ParseCommandLine(argc, argv, flags);
  if (!parsed.ok()) {
    std::cerr << "error: " << parsed.status().message() << "\n";
    return 1;
  }
  CommandLine& cl = *parsed;
  if (cl.help) {
    std::cout << Usage(flags);
    return 0;
  }
  if (Status st = SetUpLogging(cl); !st.ok()) {
    std::cerr << "error: " << st.message() << "\n";
    return 1;
  }
  if (!cl.backend_directory_given)
    cl.server.backend_directory = DefaultBackendSearchPath(cl.server.backend_directory);
  LOG_INFO("backend directory: {}", cl.server.backend_directory);

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
  if (cl.exit_on_error) {
    for (const auto& entry : index) {
      if (entry.state != "READY") {
        LOG_ERROR("error: creating server: Internal - failed to load all models");
        core->Shutdown();
        return 1;
      }
    }
  }

  std::unique_ptr<server::http::HttpService> http;
  std::unique_ptr<server::http::MetricsService> metrics;
  auto fail = [&](const std::string& what, const Status& st) {
    LOG_ERROR("failed to start {}: {}", what, st.message());
    if (http) http->Stop();
    if (metrics) metrics->Stop();
    core->Shutdown();
    return 1;
  };
  if (cl.allow_http) {
    http = std::make_unique<server::http::HttpService>(*core, cl.http);
    if (Status st = http->Start(); !st.ok()) return fail("HTTP service", st);
  }
  if (cl.allow_metrics) {
    metrics = std::make_unique<server::http::MetricsService>(
        *core, cl.metrics_address.value_or(cl.http.address), cl.metrics_port);
    if (Status st = metrics->Start(); !st.ok()) return fail("Metrics service", st);
  }
  // Scripts and tests wait for these lines (tritonserver's words); both sockets already accept.
  if (http) LOG_INFO("Started HTTPService at {}:{}", cl.http.address, http->port());
  if (metrics) {
    LOG_INFO("Started Metrics Service at {}:{}", cl.metrics_address.value_or(cl.http.address),
             metrics->port());
  }
  spdlog::default_logger()->flush();

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  LOG_INFO("Signal ({}) received.", signal_number);
  if (http) http->Stop();
  if (metrics) metrics->Stop();
  core->Shutdown();
  LOG_INFO("inflight-server stopped");
  spdlog::default_logger()->flush();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return Run(argc, argv);
}
