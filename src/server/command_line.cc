#include "server/command_line.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "server/long_options.h"

namespace inflight::server {
namespace {

using Apply = std::function<Status(const std::string& name, const std::string& value)>;

constexpr long long kIntMax = std::numeric_limits<int>::max();
constexpr long long kInt64Max = std::numeric_limits<long long>::max();

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

Result<double> ParseFloatOption(const std::string& name, const std::string& value) {
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if (value.empty() || end != value.c_str() + value.size() || !std::isfinite(v)) {
    return InvalidArgument("--" + name + "=" + value + " is not a number");
  }
  return v;
}

// What a value must look like even where the option is not used, as tritonserver would check it.
enum class Kind { kString, kInt, kBool, kFloat };

Status CheckKind(Kind kind, const std::string& name, const std::string& value) {
  switch (kind) {
    case Kind::kInt:
      return ParseIntOption(name, value, std::numeric_limits<long long>::min(), kInt64Max).status();
    case Kind::kBool:
      return ParseBoolOption(name, value).status();
    case Kind::kFloat:
      return ParseFloatOption(name, value).status();
    case Kind::kString:
      return Status::Ok();
  }
  return Status::Ok();
}

OptionArg ArgOf(Kind kind) {
  return kind == Kind::kBool ? OptionArg::kBool : OptionArg::kValue;
}

std::string HintOf(Kind kind) {
  switch (kind) {
    case Kind::kInt:
      return "<integer>";
    case Kind::kFloat:
      return "<number>";
    default:
      return "<string>";
  }
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

// Builds the table; every `apply` writes into `cl`.
class Table {
 public:
  explicit Table(CommandLine& cl) : cl_(cl) {}

  // An option that takes effect.
  void Add(std::vector<std::string> names, Kind kind, std::string help, Apply apply,
           std::string hint = {}) {
    if (hint.empty()) hint = HintOf(kind);
    options_.push_back(
        {std::move(names), ArgOf(kind), std::move(hint), std::move(help), std::move(apply)});
  }
  void String(std::vector<std::string> names, std::string help, std::string* out) {
    Add(std::move(names), Kind::kString, std::move(help), [out](const auto&, const auto& v) {
      *out = v;
      return Status::Ok();
    });
  }
  void Bool(std::vector<std::string> names, std::string help, bool* out) {
    Add(std::move(names), Kind::kBool, std::move(help), [out](const auto& name, const auto& v) {
      ASSIGN_OR_RETURN(*out, ParseBoolOption(name, v));
      return Status::Ok();
    });
  }
  template <typename T>
  void Int(const std::vector<std::string>& names, const std::string& help, long long lo,
           long long hi, T* out) {
    Add(names, Kind::kInt, help, [out, lo, hi](const auto& name, const auto& v) -> Status {
      ASSIGN_OR_RETURN(long long parsed, ParseIntOption(name, v, lo, hi));
      *out = static_cast<T>(parsed);
      return Status::Ok();
    });
  }
  // Accepted, checked as tritonserver checks it, and not used: leaves a note saying why.
  void NotUsed(std::vector<std::string> names, Kind kind, const std::string& why) {
    Add(std::move(names), kind, "Accepted, not used: " + why,
        [notes = &cl_.notes, kind, why](const std::string& name, const std::string& v) {
          RETURN_IF_ERROR(CheckKind(kind, name, v));
          notes->push_back("--" + name + "=" + v + " is not used: " + why);
          return Status::Ok();
        });
  }
  // Accepted with the one value that asks for nothing inflight-server lacks (a boolean's false, a
  // mode's "off"); any other value is refused, naming why.
  void OnlyValue(std::vector<std::string> names, Kind kind, const std::string& accepted,
                 const std::string& why) {
    Add(std::move(names), kind, "Only " + accepted + " is accepted: " + why,
        [kind, accepted, why](const std::string& name, const std::string& v) -> Status {
          RETURN_IF_ERROR(CheckKind(kind, name, v));
          const bool same = kind == Kind::kBool
                                ? *ParseBoolOption(name, v) == *ParseBoolOption(name, accepted)
                                : Lower(v) == Lower(accepted);
          if (same) return Status::Ok();
          return Unsupported("--" + name + "=" + v + " is not supported: " + why +
                             " (accepted: " + accepted + ")");
        });
  }
  void Refused(std::vector<std::string> names, Kind kind, const std::string& why) {
    Add(std::move(names), kind, "Refused: " + why,
        [why](const std::string& name, const std::string& v) -> Status {
          return Unsupported("--" + name + "=" + v + " is not supported: " + why);
        });
  }

  std::vector<LongOption> Take() { return std::move(options_); }

 private:
  CommandLine& cl_;
  std::vector<LongOption> options_;
};

void AddRepositoryOptions(Table& t, CommandLine& cl) {
  t.Add({"model-repository", "model-store"}, Kind::kString, "Model repository path; repeatable.",
        [&cl](const auto&, const std::string& v) {
          cl.server.model_repositories.push_back(v);
          return Status::Ok();
        });
  t.Bool({"exit-on-error"}, "Exit when a model asked for fails to load (default true).",
         &cl.exit_on_error);
  t.Add({"disable-auto-complete-config"}, Kind::kBool,
        "Accepted: inflight-server never completes a model configuration, so every model needs a "
        "complete config.pbtxt.",
        [](const std::string& name, const std::string& v) {
          return ParseBoolOption(name, v).status();
        });
  t.NotUsed({"strict-model-config"}, Kind::kBool,
            "inflight-server never completes a model configuration (as "
            "--disable-auto-complete-config): every model needs a complete config.pbtxt");
  t.Bool({"strict-readiness"}, "Ready only when every model is ready (default true).",
         &cl.server.strict_readiness);
  t.Add(
      {"model-control-mode"}, Kind::kString,
      "none (load every model) or explicit (only --load-model).",
      [&cl](const std::string& name, const std::string& v) -> Status {
        const std::string mode = Lower(v);
        if (mode == "none" || mode == "explicit") {
          cl.server.explicit_model_control = mode == "explicit";
          return Status::Ok();
        }
        if (mode == "poll") {
          return Unsupported("--" + name + "=" + v +
                             " is not supported: inflight-server reads the repository at "
                             "start-up and does not watch it; accepted: none, explicit");
        }
        return InvalidArgument("--" + name + "=" + v + " is not one of: none, explicit");
      },
      "none|explicit");
  t.NotUsed({"repository-poll-secs"}, Kind::kInt,
            "it only applies to --model-control-mode=poll, which inflight-server does not have");
  t.Add({"load-model"}, Kind::kString,
        "Model to load at start-up in explicit mode (\"*\": all); repeatable.",
        [&cl](const auto&, const std::string& v) {
          cl.server.startup_models.push_back(v);
          return Status::Ok();
        });
  t.NotUsed({"model-load-thread-count"}, Kind::kInt,
            "inflight-server has no model-loading thread pool to size");
  t.OnlyValue({"model-load-retry-count"}, Kind::kInt, "0",
              "inflight-server does not retry a model that failed to load");
  t.OnlyValue({"model-namespacing"}, Kind::kBool, "false",
              "every model name must be unique across the repositories");
}

void AddHttpOptions(Table& t, CommandLine& cl) {
  t.Bool({"allow-http"}, "Serve HTTP (default true).", &cl.allow_http);
  t.Add({"http-address"}, Kind::kString, "HTTP bind address (default 0.0.0.0).",
        [&cl](const auto&, const std::string& v) {
          cl.http_address = v;
          return Status::Ok();
        });
  t.Int({"http-port"}, "HTTP port (default 8000; 0 picks a free one).", 0, 65535, &cl.http_port);
  t.OnlyValue({"reuse-http-port"}, Kind::kBool, "false",
              "inflight-server does not share its HTTP port with other servers");
  t.Refused({"http-header-forward-pattern"}, Kind::kString,
            "HTTP headers are not forwarded as request parameters");
  t.Int({"http-thread-count"},
        "HTTP io threads (default 8): they serve every connection and SSE stream between them; "
        "no connection holds a thread.",
        1, 4096, &cl.http_thread_count);
  t.Refused({"http-restricted-api"}, Kind::kString, "HTTP APIs cannot be restricted by header");
  t.Int({"http-max-input-size"}, "Largest request body in bytes (default 64 MiB); larger is 413.",
        1, kIntMax, &cl.http_max_input_bytes);
  t.Int({"http-read-timeout-secs"},
        "Seconds a client has to send a request's head, and again its body (default 60); "
        "slower is 408.",
        1, 86400, &cl.http_read_timeout_secs);
  t.Bool({"http-busy-poll"},
         "An io thread polls its sockets while one of its requests is in flight and for 5 ms after "
         "its last event, instead of sleeping (default false): a reply or a keep-alive client's "
         "next request then needs no wake-up (about 0.1 ms a request on a virtual GPU host), at a "
         "core for each such thread.",
         &cl.http_busy_poll);
}

void AddGrpcOptions(Table& t, CommandLine& cl) {
  t.Bool({"allow-grpc"}, "Serve gRPC, Triton's GRPCInferenceService (default true).",
         &cl.allow_grpc);
  t.Add({"grpc-address"}, Kind::kString, "gRPC bind address (default 0.0.0.0).",
        [&cl](const auto&, const std::string& v) {
          cl.grpc_address = v;
          return Status::Ok();
        });
  t.Int({"grpc-port"}, "gRPC port (default 8001; 0 picks a free one).", 0, 65535, &cl.grpc_port);
  t.OnlyValue({"reuse-grpc-port"}, Kind::kBool, "false",
              "inflight-server does not share its gRPC port with other servers");
  t.Refused({"grpc-header-forward-pattern"}, Kind::kString,
            "gRPC headers are not forwarded as request parameters");
  t.NotUsed({"grpc-infer-allocation-pool-size"}, Kind::kInt,
            "gRPC calls hold no pooled allocations in inflight-server");
  const std::string ssl = "TLS on the gRPC endpoint is not implemented; serve it behind a proxy";
  t.OnlyValue({"grpc-use-ssl"}, Kind::kBool, "false", ssl);
  t.OnlyValue({"grpc-use-ssl-mutual"}, Kind::kBool, "false", ssl);
  t.Refused({"grpc-server-cert"}, Kind::kString, ssl);
  t.Refused({"grpc-server-key"}, Kind::kString, ssl);
  t.Refused({"grpc-root-cert"}, Kind::kString, ssl);
  t.OnlyValue({"grpc-infer-response-compression-level"}, Kind::kString, "none",
              "responses are sent uncompressed (clients may still compress requests)");
  const std::string keepalive =
      "inflight-server keeps gRPC's own keepalive and connection-age defaults";
  t.NotUsed({"grpc-keepalive-time"}, Kind::kInt, keepalive);
  t.NotUsed({"grpc-keepalive-timeout"}, Kind::kInt, keepalive);
  t.NotUsed({"grpc-keepalive-permit-without-calls"}, Kind::kBool, keepalive);
  t.NotUsed({"grpc-http2-max-pings-without-data"}, Kind::kInt, keepalive);
  t.NotUsed({"grpc-http2-min-recv-ping-interval-without-data"}, Kind::kInt, keepalive);
  t.NotUsed({"grpc-http2-max-ping-strikes"}, Kind::kInt, keepalive);
  t.NotUsed({"grpc-max-connection-age"}, Kind::kInt, keepalive);
  t.NotUsed({"grpc-max-connection-age-grace"}, Kind::kInt, keepalive);
  t.Refused({"grpc-restricted-protocol"}, Kind::kString,
            "gRPC methods cannot be restricted by header");
}

void AddOtherEndpointOptions(Table& t) {
  const std::string sagemaker = "the SageMaker endpoint is not served by inflight-server";
  t.OnlyValue({"allow-sagemaker"}, Kind::kBool, "false", sagemaker);
  t.NotUsed({"sagemaker-port"}, Kind::kInt, sagemaker);
  t.NotUsed({"sagemaker-safe-port-range"}, Kind::kString, sagemaker);
  t.NotUsed({"sagemaker-thread-count"}, Kind::kInt, sagemaker);
  const std::string vertex = "the Vertex AI endpoint is not served by inflight-server";
  t.OnlyValue({"allow-vertex-ai"}, Kind::kBool, "false", vertex);
  t.NotUsed({"vertex-ai-port"}, Kind::kInt, vertex);
  t.NotUsed({"vertex-ai-thread-count"}, Kind::kInt, vertex);
  t.NotUsed({"vertex-ai-default-model"}, Kind::kString, vertex);
}

void AddLoggingOptions(Table& t, CommandLine& cl) {
  t.Add({"log-verbose"}, Kind::kInt, "Verbose logging: 0 info, 1 debug, 2 and more trace.",
        [&cl](const std::string& name, const std::string& v) -> Status {
          // As tritonserver: true/false mean 1/0.
          const std::string lower = Lower(v);
          if (lower == "true" || lower == "false") {
            cl.log_verbose = lower == "true" ? 1 : 0;
            return Status::Ok();
          }
          ASSIGN_OR_RETURN(long long level, ParseIntOption(name, v, 0, 1000));
          cl.log_verbose = static_cast<int>(level);
          return Status::Ok();
        });
  t.Bool({"log-info"}, "Log info messages (default true).", &cl.log_info);
  t.Bool({"log-warning"}, "Log warnings (default true).", &cl.log_warning);
  t.Bool({"log-error"}, "Log errors (default true).", &cl.log_error);
  t.Add(
      {"log-format"}, Kind::kString,
      "default, or ISO8601 (each line starts with the UTC time YYYY-MM-DDThh:mm:ssZ).",
      [&cl](const std::string& name, const std::string& v) -> Status {
        if (v != "default" && v != "ISO8601") {
          return InvalidArgument("--" + name + "=" + v + " is not one of: default, ISO8601");
        }
        cl.log_iso8601 = v == "ISO8601";
        return Status::Ok();
      },
      "default|ISO8601");
  t.String({"log-file"}, "Write the log to this file instead of the console.", &cl.log_file);
}

void AddMetricsOptions(Table& t, CommandLine& cl) {
  t.Bool({"allow-metrics"}, "Serve /metrics (default true).", &cl.allow_metrics);
  t.NotUsed({"allow-gpu-metrics"}, Kind::kBool,
            "inflight-server exports no nv_gpu_* device metrics; the model metrics are served");
  t.NotUsed({"allow-cpu-metrics"}, Kind::kBool,
            "inflight-server exports no nv_cpu_* host metrics; the model metrics are served");
  t.Add({"metrics-address"}, Kind::kString, "Metrics bind address (default: the HTTP address).",
        [&cl](const auto&, const std::string& v) {
          cl.metrics_address = v;
          return Status::Ok();
        });
  t.Int({"metrics-port"}, "Metrics port (default 8002; 0 picks a free one).", 0, 65535,
        &cl.metrics_port);
  t.NotUsed({"metrics-interval-ms"}, Kind::kFloat,
            "inflight-server reads its metrics when /metrics is asked, not on an interval");
  t.Refused({"metrics-config"}, Kind::kString,
            "the metric families and their latency summaries are fixed");
}

void AddUnsupportedFeatureOptions(Table& t) {
  const std::string tracing = "request tracing is not implemented by inflight-server";
  t.Refused({"trace-config"}, Kind::kString, tracing);
  t.Refused({"trace-file"}, Kind::kString, tracing);
  t.OnlyValue({"trace-level"}, Kind::kString, "OFF", tracing);
  t.Refused({"trace-rate"}, Kind::kInt, tracing);
  t.Refused({"trace-count"}, Kind::kInt, tracing);
  t.Refused({"trace-log-frequency"}, Kind::kInt, tracing);
  const std::string cache = "inflight-server has no response cache";
  t.Refused({"cache-config"}, Kind::kString, cache);
  t.NotUsed({"cache-directory"}, Kind::kString, cache);
  t.OnlyValue({"response-cache-byte-size"}, Kind::kInt, "0", cache);
  t.OnlyValue({"rate-limit"}, Kind::kString, "off",
              "inflight-server has no rate limiter: every instance runs as soon as it is free");
  t.Refused({"rate-limit-resource"}, Kind::kString, "inflight-server has no rate limiter");
}

void AddMemoryOptions(Table& t) {
  const std::string pools =
      "inflight-server keeps no pinned or CUDA memory pool of its own; backends allocate what "
      "they use";
  t.NotUsed({"pinned-memory-pool-byte-size"}, Kind::kInt, pools);
  t.NotUsed({"cuda-memory-pool-byte-size"}, Kind::kString, pools);
  t.NotUsed({"cuda-virtual-address-size"}, Kind::kString, pools);
  t.NotUsed({"min-supported-compute-capability"}, Kind::kFloat,
            "the backends choose their devices (gpu_device_ids in the model configuration)");
  t.NotUsed({"buffer-manager-thread-count"}, Kind::kInt,
            "inflight-server has no buffer-manager threads");
  t.Refused({"host-policy"}, Kind::kString, "NUMA and CPU-core host policies are not implemented");
  t.Refused({"model-load-gpu-limit"}, Kind::kString,
            "inflight-server does not limit GPU memory at model load");
}

void AddServerOptions(Table& t, CommandLine& cl) {
  t.Add({"backend-directory"}, Kind::kString,
        "Where backends live as <dir>/<backend>/libtriton_<backend>.so (default "
        "/opt/tritonserver/backends, then <install prefix>/backends).",
        [&cl](const auto&, const std::string& v) {
          cl.server.backend_directory = v;
          cl.backend_directory_given = true;
          return Status::Ok();
        });
  t.Add(
      {"backend-config"}, Kind::kString,
      "<backend>,<key>=<value> handed to the backend; repeatable.",
      [&cl](const auto&, const std::string& v) { return ApplyBackendConfig(cl, v); },
      "<backend>,<key>=<value>");
  t.NotUsed({"repoagent-directory"}, Kind::kString, "inflight-server runs no repository agents");
  t.NotUsed({"id"}, Kind::kString, "inflight-server reports its name as \"inflight\" (GET /v2)");
  t.Add({"exit-timeout-secs"}, Kind::kInt,
        "Seconds requests in flight get to finish after SIGTERM/SIGINT before the rest are "
        "cancelled (default 30); new connections are refused meanwhile.",
        [&cl](const std::string& name, const std::string& v) -> Status {
          ASSIGN_OR_RETURN(long long secs, ParseIntOption(name, v, -kIntMax, kIntMax));
          cl.server.exit_timeout_secs = static_cast<double>(std::max(0LL, secs));  // as Triton
          return Status::Ok();
        });
  t.Bool({"help"}, "Print this help and exit.", &cl.help);
}

std::vector<LongOption> Options(CommandLine& cl) {
  Table t(cl);
  AddServerOptions(t, cl);
  AddRepositoryOptions(t, cl);
  AddLoggingOptions(t, cl);
  AddHttpOptions(t, cl);
  AddGrpcOptions(t, cl);
  AddOtherEndpointOptions(t);
  AddMetricsOptions(t, cl);
  AddUnsupportedFeatureOptions(t);
  AddMemoryOptions(t);
  return t.Take();
}

}  // namespace

Result<CommandLine> ParseCommandLine(const std::vector<std::string>& args) {
  CommandLine cl;
  const std::vector<LongOption> options = Options(cl);
  RETURN_IF_ERROR(ParseLongOptions(options, args));
  if (cl.help) return cl;
  if (cl.server.model_repositories.empty()) {
    return InvalidArgument("no model repository given: pass --model-repository=<path>");
  }
  if (!cl.server.startup_models.empty() && !cl.server.explicit_model_control) {
    return InvalidArgument("--load-model needs --model-control-mode=explicit");
  }
  return cl;
}

std::string CommandLineUsage() {
  CommandLine unused;
  std::ostringstream out;
  out << "Usage: inflight-server --model-repository=<path> [options]\n"
      << "Options are tritonserver's: --name=value or --name value, any unambiguous prefix of a\n"
      << "name (--model-repo), and a boolean option alone means true.\n\n"
      << LongOptionsUsage(Options(unused));
  return out.str();
}

}  // namespace inflight::server
