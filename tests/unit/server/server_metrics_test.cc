// Prometheus text: backend-made families of all three kinds and the nv_inference_* counters;
// Triton's per-kind rules of the metrics C API; model statistics JSON.
#include <functional>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_server.h"
#include "triton/core/tritonserver.h"

namespace inflight::server {
namespace {

using testing::Collector;
using testing::Int32Tensor;

bool Contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

// Statistics and backend metrics are reported after the response is sent, so they may trail the
// client's last callback by a moment: poll for them.
bool Eventually(const std::function<bool()>& check) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    if (check()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return check();
}

void RunEcho(Server& server, int n) {
  for (int i = 0; i < n; ++i) {
    InferRequest r;
    r.model_name = "echo";
    r.inputs.push_back(Int32Tensor("IN0", {i}));
    Collector c;
    ASSERT_TRUE(server.Infer(r, c.Callback()).ok());
    ASSERT_TRUE(c.WaitFinal());
  }
}

TEST(ServerMetrics, BackendFamiliesAndInferenceCountersMove) {
  auto server = testing::MakeServer(testing::TestOptions());
  ASSERT_NE(server, nullptr);
  std::string before = server->MetricsText();
  EXPECT_TRUE(Contains(before, "nv_inference_request_success{model=\"echo\",version=\"1\"} 0"))
      << before;
  EXPECT_TRUE(Contains(before, "# TYPE echo_requests_total counter"));
  EXPECT_TRUE(Contains(before, "# TYPE echo_inflight_requests gauge"));
  EXPECT_TRUE(Contains(before, "# TYPE echo_response_count histogram"));

  RunEcho(*server, 3);
  EXPECT_TRUE(Eventually([&] {
    const std::string t = server->MetricsText();
    return Contains(t, "nv_inference_exec_count{model=\"echo\",version=\"1\"} 3") &&
           Contains(t, "echo_inflight_requests{model=\"echo\"} 0") &&
           Contains(t, "echo_response_count_count{model=\"echo\"} 3");
  }));
  std::string after = server->MetricsText();
  for (const char* line : {
           "nv_inference_request_success{model=\"echo\",version=\"1\"} 3",
           "nv_inference_request_failure{model=\"echo\",reason=\"REJECTED\",version=\"1\"} 0",
           "nv_inference_request_failure{model=\"echo\",reason=\"CANCELED\",version=\"1\"} 0",
           "nv_inference_request_failure{model=\"echo\",reason=\"BACKEND\",version=\"1\"} 0",
           "nv_inference_request_failure{model=\"echo\",reason=\"OTHER\",version=\"1\"} 0",
           "nv_inference_count{model=\"echo\",version=\"1\"} 3",
           "nv_inference_exec_count{model=\"echo\",version=\"1\"} 3",
           "echo_requests_total{model=\"echo\"} 3",
           "echo_inflight_requests{model=\"echo\"} 0",
           "echo_response_count_bucket{model=\"echo\",le=\"1\"} 3",
           "echo_response_count_bucket{model=\"echo\",le=\"+Inf\"} 3",
           "echo_response_count_sum{model=\"echo\"} 3",
           "echo_response_count_count{model=\"echo\"} 3",
           "# HELP nv_inference_request_duration_us",
           "# HELP nv_inference_queue_duration_us",
           "# HELP nv_inference_compute_input_duration_us",
           "# HELP nv_inference_compute_infer_duration_us",
           "# HELP nv_inference_compute_output_duration_us",
       }) {
    EXPECT_TRUE(Contains(after, line)) << "missing: " << line << "\n" << after;
  }
  // Another model of the same backend shares the families, with its own label.
  EXPECT_TRUE(Contains(after, "echo_requests_total{model=\"stream\"} 0"));

  auto json = server->ModelStatisticsJson("echo");
  ASSERT_TRUE(json.ok());
  auto stats = nlohmann::json::parse(*json)["model_stats"][0];
  EXPECT_EQ(stats["name"], "echo");
  EXPECT_EQ(stats["version"], "1");
  EXPECT_EQ(stats["inference_count"], 3);
  EXPECT_EQ(stats["execution_count"], 3);
  EXPECT_EQ(stats["inference_stats"]["success"]["count"], 3);
  EXPECT_GT(stats["inference_stats"]["success"]["ns"].get<uint64_t>(), 0u);
  EXPECT_EQ(stats["batch_stats"][0]["batch_size"], 1);
  EXPECT_EQ(server->ModelStatisticsJson("nope").status().code(), StatusCode::kNotFound);

  server->Shutdown();
  EXPECT_FALSE(Contains(server->MetricsText(), "echo_requests_total"))
      << "families are gone once the backend deleted them";
}

// tritonserver 2.68 labels each failure with its reason: a backend's error response is BACKEND, an
// invalid request OTHER.
TEST(ServerMetrics, FailuresCountByReason) {
  auto server = testing::MakeServer(testing::TestOptions());
  ASSERT_NE(server, nullptr);
  InferRequest failing;
  failing.model_name = "echo";
  failing.inputs.push_back(Int32Tensor("IN0", {1}));
  failing.inputs.push_back(testing::BoolTensor("fail", true));
  Collector c;
  ASSERT_TRUE(server->Infer(failing, c.Callback()).ok());
  ASSERT_TRUE(c.WaitFinal());
  InferRequest unknown_input;
  unknown_input.model_name = "echo";
  unknown_input.inputs.push_back(Int32Tensor("NOT_AN_INPUT", {1}));
  Collector c2;
  EXPECT_FALSE(server->Infer(unknown_input, c2.Callback()).ok());
  EXPECT_TRUE(Eventually([&] {
    const std::string t = server->MetricsText();
    return Contains(
               t,
               "nv_inference_request_failure{model=\"echo\",reason=\"BACKEND\",version=\"1\"} 1") &&
           Contains(
               t,
               "nv_inference_request_failure{model=\"echo\",reason=\"OTHER\",version=\"1\"} 1") &&
           Contains(
               t,
               "nv_inference_request_failure{model=\"echo\",reason=\"CANCELED\",version=\"1\"} 0");
  })) << server->MetricsText();
  server->Shutdown();
}

class MetricsApi : public ::testing::Test {
 protected:
  TRITONSERVER_Metric* Make(TRITONSERVER_MetricFamily* family, const char* label_value) {
    TRITONSERVER_Parameter* label =
        TRITONSERVER_ParameterNew("who", TRITONSERVER_PARAMETER_STRING, label_value);
    const TRITONSERVER_Parameter* labels[] = {label};
    TRITONSERVER_Metric* metric = nullptr;
    TRITONSERVER_Error* err = TRITONSERVER_MetricNew(&metric, family, labels, 1);
    TRITONSERVER_ParameterDelete(label);
    EXPECT_EQ(err, nullptr) << (err ? TRITONSERVER_ErrorMessage(err) : "");
    return metric;
  }
  static TRITONSERVER_Error_Code Code(TRITONSERVER_Error* err) {
    if (err == nullptr) return static_cast<TRITONSERVER_Error_Code>(-1);
    auto code = TRITONSERVER_ErrorCode(err);
    TRITONSERVER_ErrorDelete(err);
    return code;
  }
};

TEST_F(MetricsApi, RulesPerKind) {
  TRITONSERVER_MetricFamily *counter_f = nullptr, *gauge_f = nullptr, *hist_f = nullptr;
  ASSERT_EQ(TRITONSERVER_MetricFamilyNew(&counter_f, TRITONSERVER_METRIC_KIND_COUNTER,
                                         "test_api_counter", "a counter"),
            nullptr);
  ASSERT_EQ(TRITONSERVER_MetricFamilyNew(&gauge_f, TRITONSERVER_METRIC_KIND_GAUGE, "test_api_gauge",
                                         "a gauge"),
            nullptr);
  ASSERT_EQ(TRITONSERVER_MetricFamilyNew(&hist_f, TRITONSERVER_METRIC_KIND_HISTOGRAM,
                                         "test_api_hist", "a histogram"),
            nullptr);
  TRITONSERVER_MetricFamily* clash = nullptr;
  EXPECT_EQ(Code(TRITONSERVER_MetricFamilyNew(&clash, TRITONSERVER_METRIC_KIND_GAUGE,
                                              "test_api_counter", "clash")),
            TRITONSERVER_ERROR_INVALID_ARG);

  TRITONSERVER_Metric* counter = Make(counter_f, "a\"b");
  TRITONSERVER_Metric* gauge = Make(gauge_f, "g");
  EXPECT_EQ(TRITONSERVER_MetricIncrement(counter, 2.5), nullptr);
  EXPECT_EQ(Code(TRITONSERVER_MetricIncrement(counter, -1)), TRITONSERVER_ERROR_INVALID_ARG);
  EXPECT_EQ(Code(TRITONSERVER_MetricSet(counter, 7)), TRITONSERVER_ERROR_UNSUPPORTED);
  EXPECT_EQ(Code(TRITONSERVER_MetricObserve(counter, 1)), TRITONSERVER_ERROR_UNSUPPORTED);
  EXPECT_EQ(TRITONSERVER_MetricSet(gauge, 10), nullptr);
  EXPECT_EQ(TRITONSERVER_MetricIncrement(gauge, -4), nullptr);
  double v = 0;
  ASSERT_EQ(TRITONSERVER_MetricValue(counter, &v), nullptr);
  EXPECT_EQ(v, 2.5);
  ASSERT_EQ(TRITONSERVER_MetricValue(gauge, &v), nullptr);
  EXPECT_EQ(v, 6);

  TRITONSERVER_Metric* no_buckets = nullptr;
  EXPECT_EQ(Code(TRITONSERVER_MetricNew(&no_buckets, hist_f, nullptr, 0)),
            TRITONSERVER_ERROR_INVALID_ARG);
  TRITONSERVER_MetricArgs* args = nullptr;
  ASSERT_EQ(TRITONSERVER_MetricArgsNew(&args), nullptr);
  const double buckets[] = {0.5, 2.0};
  ASSERT_EQ(TRITONSERVER_MetricArgsSetHistogram(args, buckets, 2), nullptr);
  TRITONSERVER_Metric* wrong = nullptr;
  EXPECT_EQ(Code(TRITONSERVER_MetricNewWithArgs(&wrong, gauge_f, nullptr, 0, args)),
            TRITONSERVER_ERROR_INVALID_ARG);
  TRITONSERVER_Metric* hist = nullptr;
  ASSERT_EQ(TRITONSERVER_MetricNewWithArgs(&hist, hist_f, nullptr, 0, args), nullptr);
  TRITONSERVER_MetricArgsDelete(args);
  EXPECT_EQ(TRITONSERVER_MetricObserve(hist, 0.1), nullptr);
  EXPECT_EQ(TRITONSERVER_MetricObserve(hist, 1.0), nullptr);
  EXPECT_EQ(TRITONSERVER_MetricObserve(hist, 9.0), nullptr);
  EXPECT_EQ(Code(TRITONSERVER_MetricValue(hist, &v)), TRITONSERVER_ERROR_UNSUPPORTED);
  EXPECT_EQ(Code(TRITONSERVER_MetricIncrement(hist, 1)), TRITONSERVER_ERROR_UNSUPPORTED);
  TRITONSERVER_MetricKind kind;
  ASSERT_EQ(TRITONSERVER_GetMetricKind(hist, &kind), nullptr);
  EXPECT_EQ(kind, TRITONSERVER_METRIC_KIND_HISTOGRAM);

  // Same name, same kind: one family, and the same labels reach the same series.
  TRITONSERVER_MetricFamily* again = nullptr;
  ASSERT_EQ(TRITONSERVER_MetricFamilyNew(&again, TRITONSERVER_METRIC_KIND_COUNTER,
                                         "test_api_counter", "a counter"),
            nullptr);
  TRITONSERVER_Metric* same = Make(again, "a\"b");
  ASSERT_EQ(TRITONSERVER_MetricValue(same, &v), nullptr);
  EXPECT_EQ(v, 2.5);

  auto server = testing::MakeServer(testing::TestOptions());
  ASSERT_NE(server, nullptr);
  const std::string text = server->MetricsText();
  for (const char* line :
       {"# TYPE test_api_counter counter", "test_api_counter{who=\"a\\\"b\"} 2.5",
        "# HELP test_api_gauge a gauge", "test_api_gauge{who=\"g\"} 6",
        "test_api_hist_bucket{le=\"0.5\"} 1", "test_api_hist_bucket{le=\"2\"} 2",
        "test_api_hist_bucket{le=\"+Inf\"} 3", "test_api_hist_sum 10.1", "test_api_hist_count 3"}) {
    EXPECT_TRUE(Contains(text, line)) << "missing: " << line << "\n" << text;
  }

  for (auto* m : {counter, gauge, hist, same}) EXPECT_EQ(TRITONSERVER_MetricDelete(m), nullptr);
  for (auto* f : {counter_f, gauge_f, hist_f, again}) {
    EXPECT_EQ(TRITONSERVER_MetricFamilyDelete(f), nullptr);
  }
  EXPECT_FALSE(Contains(server->MetricsText(), "test_api_counter"));
}

}  // namespace
}  // namespace inflight::server
