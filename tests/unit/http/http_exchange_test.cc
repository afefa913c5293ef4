#include <memory>

#include <gtest/gtest.h>

#include "server/http/http_exchange.h"

namespace inflight::server::http {
namespace {

// The connection's side of an exchange, without a connection.
class TestExchange : public HttpExchange {
 public:
  void Reply(HttpReply) override {}
  void StartStream(HttpReply) override {}
  void Send(std::string) override {}
  void End() override {}
  void Dispatch(std::function<void()> fn) override { fn(); }
  void Answered() { NotifyAnswered(); }
  void Gone() { NotifyClientGone(); }
};

// Found by LeakSanitizer in the sanitized build (http_frontend_test): a non-streaming request's
// handler state registered a client-gone callback holding itself, and it held the exchange; the
// callback lived as long as the exchange, so every answered request leaked both.
TEST(HttpExchangeTest, AnsweringLetsTheClientGoneCallbackGo) {
  auto exchange = std::make_shared<TestExchange>();
  std::weak_ptr<TestExchange> weak = exchange;
  bool ran = false;
  exchange->OnClientGone([exchange, &ran] { ran = true; });  // the cycle a handler makes
  exchange->Answered();
  exchange.reset();
  EXPECT_TRUE(weak.expired());
  EXPECT_FALSE(ran);
}

TEST(HttpExchangeTest, CallbackRegisteredAfterTheAnswerIsDropped) {
  auto exchange = std::make_shared<TestExchange>();
  std::weak_ptr<TestExchange> weak = exchange;
  exchange->Answered();
  bool ran = false;
  exchange->OnClientGone([exchange, &ran] { ran = true; });
  exchange->Gone();
  exchange.reset();
  EXPECT_TRUE(weak.expired());
  EXPECT_FALSE(ran);
}

TEST(HttpExchangeTest, ClientLeavingBeforeTheAnswerRunsTheCallbackOnce) {
  auto exchange = std::make_shared<TestExchange>();
  int runs = 0;
  exchange->OnClientGone([&runs] { ++runs; });
  exchange->Gone();
  exchange->Gone();
  exchange->Answered();
  EXPECT_EQ(runs, 1);
  exchange->OnClientGone([&runs] { ++runs; });  // answered: dropped even though the client left
  EXPECT_EQ(runs, 1);
}

}  // namespace
}  // namespace inflight::server::http
