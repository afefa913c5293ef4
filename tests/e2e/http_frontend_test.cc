// The HTTP frontend over real loopback HTTP, against FakeServer instead of the core: wire formats,
// status codes, SSE streaming, cancellation on disconnect, limits and concurrency.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "e2e/fake_server.h"
#include "e2e/http_test_client.h"
#include "server/http/http_service.h"

namespace inflight::server::http {
namespace {

using inflight::server::http::testing::ClientResponse;
using inflight::server::http::testing::TestHttpClient;
using inflight::server::testing::FakeServer;
using nlohmann::json;

class HttpFrontendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::signal(SIGPIPE, SIG_IGN);
    HttpServiceOptions options;
    options.address = "127.0.0.1";
    options.port = 0;
    options.thread_count = 2;  // 64 concurrent streams below share these two threads
    options.max_input_bytes = 64 * 1024;
    service_ = std::make_unique<HttpService>(fake_, options);
    ASSERT_TRUE(service_->Start().ok());
    client_ = std::make_unique<TestHttpClient>(service_->port());
  }
  void TearDown() override {
    service_->Stop();
    fake_.Shutdown();
  }

  std::optional<ClientResponse> Post(const std::string& path, const std::string& body) {
    return client_->Post(path, body);
  }
  json PostJson(const std::string& path, const json& body, int expected_status) {
    auto res = Post(path, body.dump());
    EXPECT_TRUE(res) << path;
    if (!res) return {};
    EXPECT_EQ(res->status, expected_status) << path << ": " << res->body;
    return json::parse(res->body, nullptr, false);
  }
  std::string ErrorOf(const std::string& path, const std::string& body, int expected_status) {
    auto res = Post(path, body);
    EXPECT_TRUE(res);
    if (!res) return {};
    EXPECT_EQ(res->status, expected_status) << body << " -> " << res->body;
    json j = json::parse(res->body, nullptr, false);
    EXPECT_TRUE(j.is_object() && j.contains("error")) << res->body;
    return j.value("error", "");
  }

  // POSTs to generate_stream; returns the parsed "data:" events. `stop_after` > 0 hangs up after
  // that many.
  std::vector<json> Stream(const json& body, int stop_after = 0,
                           std::string* content_type = nullptr,
                           const std::string& model = "stream") {
    TestHttpClient client(service_->port());
    std::string buffer;
    std::vector<json> events;
    auto res = client.Send("POST", "/v2/models/" + model + "/generate_stream", body.dump(),
                           [&](std::string_view data) {
                             buffer.append(data);
                             for (auto end = buffer.find("\n\n"); end != std::string::npos;
                                  end = buffer.find("\n\n")) {
                               std::string event = buffer.substr(0, end);
                               buffer.erase(0, end + 2);
                               EXPECT_EQ(event.rfind("data: ", 0), 0u) << event;
                               events.push_back(json::parse(event.substr(6), nullptr, false));
                             }
                             return stop_after == 0 || static_cast<int>(events.size()) < stop_after;
                           });
    if (content_type != nullptr && res) *content_type = res->Header("content-type");
    return events;
  }

  FakeServer fake_;
  std::unique_ptr<HttpService> service_;
  std::unique_ptr<TestHttpClient> client_;
};

TEST_F(HttpFrontendTest, HealthAndServerMetadata) {
  EXPECT_EQ(client_->Get("/v2/health/live")->status, 200);
  EXPECT_EQ(client_->Get("/v2/health/ready")->status, 200);
  auto res = client_->Get("/v2");
  ASSERT_TRUE(res);
  json meta = json::parse(res->body);
  EXPECT_EQ(meta["name"], "inflight");
  EXPECT_TRUE(meta["version"].is_string());
  EXPECT_NE(std::find(meta["extensions"].begin(), meta["extensions"].end(), "generate"),
            meta["extensions"].end());
}

TEST_F(HttpFrontendTest, ModelMetadataUsesKserveNames) {
  auto res = client_->Get("/v2/models/stream");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  json meta = json::parse(res->body);
  EXPECT_EQ(meta["name"], "stream");
  EXPECT_EQ(meta["versions"], json::array({"1"}));
  EXPECT_EQ(meta["inputs"][0]["name"], "COUNT");
  EXPECT_EQ(meta["inputs"][0]["datatype"], "INT32");
  EXPECT_EQ(meta["inputs"][0]["shape"], json::array({-1, 1}));
  EXPECT_EQ(json::parse(client_->Get("/v2/models/echo/versions/1")->body)["inputs"][1]["datatype"],
            "BYTES");

  auto unknown = client_->Get("/v2/models/nope");
  EXPECT_EQ(unknown->status, 404);
  EXPECT_NE(json::parse(unknown->body)["error"].get<std::string>().find("nope"), std::string::npos);
  EXPECT_EQ(client_->Get("/v2/models/echo/versions/x1")->status, 400);
  EXPECT_EQ(client_->Get("/v2/models/echo/versions/7")->status, 404);
}

TEST_F(HttpFrontendTest, ModelReadyConfigStatsIndex) {
  EXPECT_EQ(client_->Get("/v2/models/echo/ready")->status, 200);
  EXPECT_EQ(client_->Get("/v2/models/broken/ready")->status, 400);
  EXPECT_EQ(client_->Get("/v2/models/nope/ready")->status, 404);
  EXPECT_EQ(json::parse(client_->Get("/v2/models/stream/config")->body)["max_batch_size"], 4);
  EXPECT_EQ(json::parse(client_->Get("/v2/models/echo/stats")->body)["model_stats"][0]["name"],
            "echo");
  EXPECT_EQ(client_->Get("/v2/models/nope/config")->status, 404);

  json index = PostJson("/v2/repository/index", json::object(), 200);
  ASSERT_EQ(index.size(), 4u);
  EXPECT_EQ(index[3]["name"], "broken");
  EXPECT_EQ(index[3]["state"], "UNAVAILABLE");
  EXPECT_EQ(index[3]["reason"], "load failed on purpose");
  EXPECT_FALSE(index[3].contains("version"));
  EXPECT_EQ(PostJson("/v2/repository/index", {{"ready", true}}, 200).size(), 3u);
}

TEST_F(HttpFrontendTest, InferEchoesTensorsOfEveryKind) {
  json body = {{"id", "req-7"},
               {"parameters", {{"priority", 2}, {"tag", "x"}, {"flag", true}, {"scale", 0.5}}},
               {"inputs",
                {{{"name", "INPUT0"},
                  {"shape", {2, 3}},
                  {"datatype", "INT32"},
                  {"data", {{1, -2, 3}, {4, 5, 2147483647}}}},
                 {{"name", "TEXT"}, {"shape", {2}}, {"datatype", "BYTES"}, {"data", {"héllo", ""}}},
                 {{"name", "F16_IN"}, {"shape", {2}}, {"datatype", "FP16"}, {"data", {1.5, -2}}}}}};
  json out = PostJson("/v2/models/echo/infer", body, 200);
  EXPECT_EQ(out["model_name"], "echo");
  EXPECT_EQ(out["model_version"], "1");
  EXPECT_EQ(out["id"], "req-7");
  EXPECT_EQ(out["parameters"]["priority"], 2);
  EXPECT_EQ(out["parameters"]["flag"], true);
  ASSERT_EQ(out["outputs"].size(), 3u);
  EXPECT_EQ(out["outputs"][0]["name"], "OUTPUT0");
  EXPECT_EQ(out["outputs"][0]["datatype"], "INT32");
  EXPECT_EQ(out["outputs"][0]["shape"], json::array({2, 3}));
  EXPECT_EQ(out["outputs"][0]["data"], json::array({1, -2, 3, 4, 5, 2147483647}));
  EXPECT_EQ(out["outputs"][1]["data"], json::array({"héllo", ""}));
  EXPECT_EQ(out["outputs"][2]["data"], json::array({1.5, -2.0}));

  InferRequest seen = fake_.last_request();
  EXPECT_EQ(std::get<std::int64_t>(seen.parameters.at("priority")), 2);
  EXPECT_EQ(std::get<std::string>(seen.parameters.at("tag")), "x");
  EXPECT_EQ(std::get<double>(seen.parameters.at("scale")), 0.5);
  // BYTES travel as 4-byte little-endian length + bytes.
  ASSERT_EQ(seen.inputs[1].data.size(), 4u + 6u + 4u);
  EXPECT_EQ(seen.inputs[1].data[0], 6);
}

TEST_F(HttpFrontendTest, InferRequestedOutputsAreForwarded) {
  json body = {
      {"inputs", {{{"name", "INPUT0"}, {"shape", {1}}, {"datatype", "INT32"}, {"data", {9}}}}},
      {"outputs", {{{"name", "OUTPUT0"}}}}};
  PostJson("/v2/models/echo/infer", body, 200);
  EXPECT_EQ(fake_.last_request().requested_outputs, std::vector<std::string>{"OUTPUT0"});
}

TEST_F(HttpFrontendTest, MalformedInferBodiesAre400WithAReason) {
  const std::string path = "/v2/models/echo/infer";
  auto input = [](json shape, const char* datatype, json data) {
    return json{{"inputs",
                 {{{"name", "INPUT0"}, {"shape", shape}, {"datatype", datatype}, {"data", data}}}}}
        .dump();
  };
  EXPECT_NE(ErrorOf(path, "{\"inputs\": [", 400).find("malformed JSON"), std::string::npos);
  EXPECT_NE(ErrorOf(path, "[1,2]", 400).find("JSON object"), std::string::npos);
  EXPECT_NE(ErrorOf(path, R"({"inputs": 5})", 400).find("'inputs'"), std::string::npos);
  EXPECT_NE(ErrorOf(path, input({2}, "INT33", {1, 2}), 400).find("\"INT33\""), std::string::npos);
  EXPECT_NE(ErrorOf(path, input({3}, "INT32", {1, 2}), 400).find("needs 3 elements"),
            std::string::npos);
  EXPECT_NE(ErrorOf(path, input({1}, "INT32", {"a"}), 400).find("element 0"), std::string::npos);
  EXPECT_NE(ErrorOf(path, input({1}, "INT32", {4294967296}), 400).find("4294967296"),
            std::string::npos);
  EXPECT_NE(ErrorOf(path, input({1}, "UINT8", {-1}), 400).find("non-negative"), std::string::npos);
  EXPECT_NE(ErrorOf(path, input({1}, "INT32", {1.5}), 400).find("1.5"), std::string::npos);
  EXPECT_NE(ErrorOf(path, input({-1}, "INT32", {1}), 400).find("'shape'"), std::string::npos);
  EXPECT_NE(ErrorOf(path, input({1}, "BOOL", {1}), 400).find("true or false"), std::string::npos);
  EXPECT_NE(
      ErrorOf(
          path,
          R"({"inputs":[{"name":"INPUT0","shape":[1],"datatype":"INT32","parameters":{"binary_data_size":4}}]})",
          400)
          .find("no Inference-Header-Content-Length header"),
      std::string::npos);
  EXPECT_NE(ErrorOf(path, R"({"id": 5, "inputs": []})", 400).find("'id'"), std::string::npos);
  EXPECT_NE(ErrorOf(path, R"({"parameters": {"p": [1]}, "inputs": []})", 400).find("\"p\""),
            std::string::npos);
  std::string deep(200, '[');
  EXPECT_NE(ErrorOf(path, input({1}, "INT32", json::parse(deep + "1" + std::string(200, ']'))), 400)
                .find("nested"),
            std::string::npos);
}

TEST_F(HttpFrontendTest, InferErrorsMapToTritonStatusAndText) {
  json body = {
      {"inputs", {{{"name", "INPUT0"}, {"shape", {1}}, {"datatype", "INT32"}, {"data", {1}}}}}};
  EXPECT_NE(ErrorOf("/v2/models/nope/infer", body.dump(), 404).find("nope"), std::string::npos);
  EXPECT_EQ(ErrorOf("/v2/models/stream/infer", body.dump(), 400),
            "HTTP end point doesn't support models with decoupled transaction policy");
  EXPECT_EQ(ErrorOf("/v2/models/full/infer", body.dump(), 503), "Exceeds maximum queue size");
  EXPECT_EQ(Post("/v2/nothing/here", "{}")->status, 404);
}

TEST_F(HttpFrontendTest, OversizedBodyIs413) {
  std::string big =
      R"({"inputs": [{"name": "TEXT", "shape": [1], "datatype": "BYTES", "data": [")" +
      std::string(100 * 1024, 'x') + "\"]}]}";
  auto res = Post("/v2/models/echo/infer", big);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 413);
  EXPECT_NE(res->body.find("--http-max-input-size"), std::string::npos) << res->body;
  // The server is still fine afterwards.
  EXPECT_EQ(client_->Get("/v2/health/live")->status, 200);
}

TEST_F(HttpFrontendTest, GenerateBuildsTensorsFromModelMetadata) {
  json out = PostJson("/v2/models/echo/generate",
                      {{"INPUT0", {5, 6, 7}}, {"TEXT", "hi"}, {"temperature", 0.25}}, 200);
  EXPECT_EQ(out["model_name"], "echo");
  EXPECT_EQ(out["OUTPUT0"], json::array({5, 6, 7}));
  EXPECT_EQ(out["TEXT_OUT"], "hi");  // one element: a scalar
  InferRequest seen = fake_.last_request();
  ASSERT_EQ(seen.inputs.size(), 2u);
  for (const Tensor& t : seen.inputs) {
    if (t.name == "INPUT0") {
      EXPECT_EQ(t.shape, std::vector<std::int64_t>{3});
    }
    if (t.name == "TEXT") {
      EXPECT_EQ(t.shape, std::vector<std::int64_t>{1});
      EXPECT_EQ(t.datatype, TRITONSERVER_TYPE_BYTES);
    }
  }
  EXPECT_EQ(std::get<double>(seen.parameters.at("temperature")), 0.25);

  // A batching model gets the batch dim; a decoupled model answering once is fine.
  out = PostJson("/v2/models/stream/generate", {{"COUNT", 1}, {"parameters", {{"stream", false}}}},
                 200);
  EXPECT_EQ(out["INDEX"], 0);
  seen = fake_.last_request();
  EXPECT_EQ(seen.inputs[0].shape, (std::vector<std::int64_t>{1, 1}));
  EXPECT_EQ(std::get<bool>(seen.parameters.at("stream")), false);
}

TEST_F(HttpFrontendTest, GenerateRefusesWhatTritonRefuses) {
  EXPECT_EQ(ErrorOf("/v2/models/stream/generate", R"({"COUNT": 3})", 400),
            "generate expects model to produce exactly 1 response, use generate stream for model "
            "that generates "
            "various number of responses");
  EXPECT_NE(ErrorOf("/v2/models/echo/generate", R"({"INPUT0": [1], "stop": [1, 2]})", 400)
                .find("\"stop\""),
            std::string::npos);
  EXPECT_NE(ErrorOf("/v2/models/echo/generate", R"({"INPUT0": "seven"})", 400).find("INT32"),
            std::string::npos);
  EXPECT_NE(
      ErrorOf("/v2/models/echo/generate", R"({"INPUT0": [[1, 2], [3]]})", 400).find("rectangular"),
      std::string::npos);
  EXPECT_EQ(ErrorOf("/v2/models/nope/generate", R"({"x": 1})", 404).empty(), false);
  EXPECT_NE(ErrorOf("/v2/models/echo/generate", "not json", 400).find("malformed JSON"),
            std::string::npos);
}

TEST_F(HttpFrontendTest, GenerateStreamSendsEveryResponseInOrder) {
  std::string content_type;
  std::vector<json> events = Stream({{"COUNT", 5}, {"DELAY_MS", 5}}, 0, &content_type);
  EXPECT_EQ(content_type.rfind("text/event-stream", 0), 0u) << content_type;
  ASSERT_EQ(events.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(events[i]["INDEX"], i);
    EXPECT_EQ(events[i]["model_name"], "stream");
  }
  // A non-decoupled model streams its single response.
  events = Stream({{"INPUT0", {1, 2}}}, 0, nullptr, "echo");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["OUTPUT0"], json::array({1, 2}));
}

TEST_F(HttpFrontendTest, GenerateStreamErrorBecomesTheLastEvent) {
  std::vector<json> events = Stream({{"COUNT", 5}, {"FAIL_AT", 2}});
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[1]["INDEX"], 1);
  EXPECT_EQ(events[2]["error"], "failing at index 2 as asked");
  // Errors before inference starts are plain JSON errors.
  EXPECT_EQ(ErrorOf("/v2/models/full/generate_stream", R"({"INPUT0": [1]})", 503),
            "Exceeds maximum queue size");
}

TEST_F(HttpFrontendTest, ClientDisconnectCancelsTheRequest) {
  std::vector<json> events = Stream({{"COUNT", 1000}, {"DELAY_MS", 10}}, 2);
  EXPECT_EQ(events.size(), 2u);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (fake_.cancelled_requests() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(fake_.cancelled_requests(), 1);
  EXPECT_EQ(fake_.finished_requests(), 0);
}

TEST_F(HttpFrontendTest, StopEndsOpenStreamsAndCancelsThem) {
  std::thread client([this] { Stream({{"COUNT", 1000}, {"DELAY_MS", 10}}); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto start = std::chrono::steady_clock::now();
  service_->Stop();
  client.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  fake_.Shutdown();
  EXPECT_EQ(fake_.cancelled_requests(), 1);
}

TEST_F(HttpFrontendTest, SixtyFourConcurrentStreamsAllGetTheirAnswers) {
  constexpr int kClients = 64;
  std::vector<std::thread> clients;
  std::vector<int> correct(kClients, 0);
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([this, c, &correct] {
      const int count = 2 + c % 5;
      std::vector<json> events = Stream({{"COUNT", count}, {"DELAY_MS", 20}});
      bool ok = static_cast<int>(events.size()) == count;
      for (int i = 0; ok && i < count; ++i) ok = events[i]["INDEX"] == i;
      correct[c] = ok ? 1 : 0;
    });
  }
  for (auto& t : clients) t.join();
  for (int c = 0; c < kClients; ++c) EXPECT_EQ(correct[c], 1) << "client " << c;
}

// Found by the official `openai` npm client in CI: a keep-alive client that sends its next request
// the moment the last byte of an answer reaches it. The connection's watch read could take that
// request before the answer's write had finished on the server's side; the request was then dropped
// and the connection closed ("socket hang up"). Many clients on two io threads make that window.
TEST_F(HttpFrontendTest, KeepAliveClientsSendingAtOnceGetEveryAnswer) {
  namespace bhttp = boost::beast::http;
  namespace net = boost::asio;
  constexpr int kClients = 8;
  constexpr int kRequests = 150;
  std::vector<std::thread> clients;
  std::vector<int> answered(kClients, 0);
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([this, c, &answered] {
      net::io_context ioc;
      net::ip::tcp::socket socket(ioc);
      boost::system::error_code ec;
      socket.connect(
          {net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(service_->port())}, ec);
      if (ec) return;
      boost::beast::flat_buffer buffer;
      for (int i = 0; i < kRequests; ++i) {
        // Streamed (chunked) and plain answers in turn, as the openai client's calls were.
        const bool streamed = (i + c) % 2 == 0;
        bhttp::request<bhttp::string_body> req(
            bhttp::verb::post,
            streamed ? "/v2/models/stream/generate_stream" : "/v2/models/echo/generate", 11);
        req.set(bhttp::field::host, "127.0.0.1");
        req.set(bhttp::field::content_type, "application/json");
        req.body() = streamed ? R"({"COUNT": 2})" : R"({"INPUT0": [7]})";
        req.prepare_payload();
        bhttp::write(socket, req, ec);
        if (ec) return;
        bhttp::response<bhttp::string_body> res;
        bhttp::read(socket, buffer, res, ec);
        if (ec || res.result_int() != 200 || !res.keep_alive()) return;
        answered[c] += 1;
      }
    });
  }
  for (auto& t : clients) t.join();
  for (int c = 0; c < kClients; ++c) EXPECT_EQ(answered[c], kRequests) << "client " << c;
}

// A raw loopback connection, for what a well-behaved client library will not do.
int RawConnect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void SendAll(int fd, const std::string& data) {
  ASSERT_EQ(::send(fd, data.data(), data.size(), MSG_NOSIGNAL), static_cast<ssize_t>(data.size()));
}

std::string ReadToEnd(int fd) {
  std::string out;
  char buffer[4096];
  for (ssize_t n; (n = ::recv(fd, buffer, sizeof(buffer), 0)) > 0;) out.append(buffer, n);
  return out;
}

std::string PostText(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n" +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

bool WaitFor(const std::function<bool()>& done, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

TEST_F(HttpFrontendTest, ClientThatLeavesANonStreamedRequestCancelsIt) {
  // /infer: the answer is held back 5 s; the client leaves after 300 ms.
  json infer = {
      {"inputs",
       {{{"name", "INPUT0"}, {"shape", {1}}, {"datatype", "INT32"}, {"data", {1}}},
        {{"name", "DELAY_MS"}, {"shape", {1}}, {"datatype", "INT32"}, {"data", {5000}}}}}};
  int fd = RawConnect(service_->port());
  ASSERT_GE(fd, 0);
  SendAll(fd, PostText("/v2/models/echo/infer", infer.dump()));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ::close(fd);
  EXPECT_TRUE(WaitFor([this] { return fake_.cancelled_requests() == 1; }, std::chrono::seconds(3)));
  // /generate on a decoupled model answering once, 1.5 s from now.
  fd = RawConnect(service_->port());
  ASSERT_GE(fd, 0);
  SendAll(fd, PostText("/v2/models/stream/generate", R"({"COUNT": 1, "DELAY_MS": 1500})"));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ::close(fd);
  EXPECT_TRUE(WaitFor([this] { return fake_.cancelled_requests() == 2; }, std::chrono::seconds(5)));
  EXPECT_EQ(fake_.finished_requests(), 0);
}

TEST_F(HttpFrontendTest, HalfClosedClientGetsItsAnswer) {
  json infer = {{"inputs",
                 {{{"name", "INPUT0"}, {"shape", {1}}, {"datatype", "INT32"}, {"data", {3}}},
                  {{"name", "DELAY_MS"}, {"shape", {1}}, {"datatype", "INT32"}, {"data", {300}}}}}};
  int fd = RawConnect(service_->port());
  ASSERT_GE(fd, 0);
  SendAll(fd, PostText("/v2/models/echo/infer", infer.dump()));
  ::shutdown(fd, SHUT_WR);
  const std::string response = ReadToEnd(fd);
  ::close(fd);
  EXPECT_EQ(response.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << response;
  EXPECT_NE(response.find("\"OUTPUT0\""), std::string::npos) << response;
  EXPECT_EQ(fake_.cancelled_requests(), 0);
}

TEST_F(HttpFrontendTest, DrainRefusesNewClientsAndFinishesOpenStreams) {
  std::vector<json> events;
  std::thread client([&] { events = Stream({{"COUNT", 20}, {"DELAY_MS", 20}}); });
  ASSERT_TRUE(WaitFor([this] { return fake_.last_request().model_name == "stream"; },
                      std::chrono::seconds(5)));
  service_->Drain();
  EXPECT_EQ(RawConnect(service_->port()), -1);  // refused: the listening socket is closed
  client.join();
  ASSERT_EQ(events.size(), 20u);
  EXPECT_EQ(events[19]["INDEX"], 19);
  EXPECT_EQ(fake_.cancelled_requests(), 0);
}

TEST_F(HttpFrontendTest, ProtocolErrorsHaveTheirStatusAndAReason) {
  auto exchange = [this](const std::string& raw) {
    int fd = RawConnect(service_->port());
    EXPECT_GE(fd, 0);
    SendAll(fd, raw);
    std::string response = ReadToEnd(fd);
    ::close(fd);
    return response;
  };
  const std::string conflicting = exchange(
      "POST /v2/models/echo/infer HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n"
      "Content-Length: 3\r\n\r\n{}");
  EXPECT_EQ(conflicting.rfind("HTTP/1.1 400 ", 0), 0u) << conflicting;
  EXPECT_NE(conflicting.find("conflicting Content-Length"), std::string::npos) << conflicting;
  // A refused route keeps the connection (the request itself was well formed): ask to close it.
  const std::string not_allowed =
      exchange("DELETE /v2/health/live HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(not_allowed.rfind("HTTP/1.1 405 ", 0), 0u) << not_allowed;
  EXPECT_NE(not_allowed.find("Allow: GET\r\n"), std::string::npos) << not_allowed;
  const std::string version = exchange("GET /v2/health/live HTTP/2.0\r\nHost: t\r\n\r\n");
  EXPECT_EQ(version.rfind("HTTP/1.1 505 ", 0), 0u) << version;
  const std::string coding =
      exchange("POST /v2/models/echo/infer HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: br\r\n\r\n");
  EXPECT_EQ(coding.rfind("HTTP/1.1 501 ", 0), 0u) << coding;
  EXPECT_NE(coding.find("{\"error\":"), std::string::npos) << coding;
}

TEST(MetricsServiceTest, ServesPrometheusText) {
  FakeServer fake;
  MetricsService metrics(fake, "127.0.0.1", 0);
  ASSERT_TRUE(metrics.Start().ok());
  TestHttpClient client(metrics.port());
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->Header("content-type").rfind("text/plain; version=0.0.4", 0), 0u);
  EXPECT_NE(res->body.find("nv_inference_request_success{model=\"echo\""), std::string::npos);
}

TEST(HttpStatusTest, CodesFollowTheIssue) {
  EXPECT_EQ(HttpStatusFor(StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusFor(StatusCode::kNotFound), 404);
  EXPECT_EQ(HttpStatusFor(StatusCode::kUnavailable), 503);
  EXPECT_EQ(HttpStatusFor(StatusCode::kUnsupported), 400);
  EXPECT_EQ(HttpStatusFor(StatusCode::kInternal), 500);
}

}  // namespace
}  // namespace inflight::server::http
