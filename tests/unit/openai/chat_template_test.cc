// The embedded Jinja2 renderer against Jinja2 run as a separate Python process
// (render_reference.py) on Llama-3.1, Qwen2.5 and Mistral's chat templates: byte for byte, errors
// included.
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/openai/chat_template.h"

namespace inflight::server::openai {
namespace {

using nlohmann::ordered_json;
namespace fs = std::filesystem;

const fs::path kFixtures = fs::path(INFLIGHT_TEST_OPENAI_DIR) / "chat_templates";

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("chat_template_test_" + std::to_string(::getpid()) + "_" + std::to_string(next_++));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  static inline int next_ = 0;
  fs::path path_;
};

void WriteFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string RunCommand(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[4096];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
  EXPECT_EQ(::pclose(pipe), 0) << command;
  return out;
}

ordered_json Msg(const std::string& role, const std::string& content) {
  return ordered_json{{"role", role}, {"content", content}};
}

// Conversations each template gets, with and without the generation prompt.
std::vector<ordered_json> Conversations() {
  return {
      ordered_json::array({Msg("user", "What is machine learning?")}),
      ordered_json::array({Msg("system", "You are terse."), Msg("user", "Hi!")}),
      ordered_json::array({Msg("system", "  Answer in French.\n"), Msg("user", "Hello"),
                           Msg("assistant", " Bonjour ! "), Msg("user", "How are you?")}),
      ordered_json::array({Msg("user", "Ünïcödé ✓ — 日本語 \"quotes\" {{ not a tag }}\n\n")}),
      // Mistral refuses two user turns in a row with raise_exception; the others render it.
      ordered_json::array({Msg("user", "one"), Msg("user", "two")}),
  };
}

struct Case {
  ordered_json messages;
  bool add_generation_prompt;
};

void CompareWithReference(const std::string& model) {
  TempDir dir;
  fs::copy_file(kFixtures / (model + "_tokenizer_config.json"),
                dir.path() / "tokenizer_config.json");
  auto set = LoadChatTemplates(dir.path().string());
  ASSERT_TRUE(set.ok()) << set.status().message();
  auto chat_template = DefaultChatTemplate(*set);
  ASSERT_TRUE(chat_template.has_value()) << model;

  std::vector<Case> cases;
  ordered_json cases_json = ordered_json::array();
  for (const ordered_json& conversation : Conversations()) {
    for (bool add : {true, false}) {
      cases.push_back({conversation, add});
      cases_json.push_back({{"messages", conversation}, {"add_generation_prompt", add}});
    }
  }
  WriteFile(dir.path() / "cases.json", cases_json.dump());
  const std::string reference_text = RunCommand(
      std::string(INFLIGHT_TEST_PYTHON) + " " +
      (fs::path(INFLIGHT_TEST_OPENAI_DIR) / "render_reference.py").string() + " " +
      (dir.path() / "tokenizer_config.json").string() + " " + (dir.path() / "cases.json").string());
  const auto reference = nlohmann::json::parse(reference_text, nullptr, false);
  ASSERT_TRUE(reference.is_array()) << reference_text;
  ASSERT_EQ(reference.size(), cases.size());

  int num_rendered = 0;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    auto got = RenderChatTemplate(*chat_template, cases[i].messages, cases[i].add_generation_prompt,
                                  set->special_tokens);
    SCOPED_TRACE(model + " case " + std::to_string(i) + ": " + cases[i].messages.dump());
    if (reference[i].contains("error")) {
      ASSERT_FALSE(got.ok()) << "rendered: " << *got;
      EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
      EXPECT_EQ(got.status().message(), reference[i]["error"].get<std::string>());
    } else {
      ASSERT_TRUE(got.ok()) << got.status().message();
      EXPECT_EQ(*got, reference[i]["text"].get<std::string>());
      ++num_rendered;
    }
  }
  EXPECT_GE(num_rendered, 8) << "most cases must render, not fail in both";
}

TEST(ChatTemplateTest, Llama31MatchesJinja2) {
  CompareWithReference("llama31");
}

TEST(ChatTemplateTest, Qwen25MatchesJinja2) {
  CompareWithReference("qwen25");
}

TEST(ChatTemplateTest, MistralMatchesJinja2) {
  CompareWithReference("mistral");
}

// Spot checks of what the comparison relies on, independent of the reference script.
TEST(ChatTemplateTest, KnownRenderings) {
  TempDir dir;
  fs::copy_file(kFixtures / "llama31_tokenizer_config.json", dir.path() / "tokenizer_config.json");
  auto set = LoadChatTemplates(dir.path().string());
  ASSERT_TRUE(set.ok());
  auto text =
      RenderChatTemplate(*DefaultChatTemplate(*set), ordered_json::array({Msg("user", " Hi ")}),
                         true, set->special_tokens);
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_EQ(*text,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
            "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");

  // The Mistral fixture's bos_token is an AddedToken object.
  TempDir mistral;
  fs::copy_file(kFixtures / "mistral_tokenizer_config.json",
                mistral.path() / "tokenizer_config.json");
  auto mistral_set = LoadChatTemplates(mistral.path().string());
  ASSERT_TRUE(mistral_set.ok());
  EXPECT_EQ(mistral_set->special_tokens["bos_token"], "<s>");
  auto refused = RenderChatTemplate(*DefaultChatTemplate(*mistral_set),
                                    ordered_json::array({Msg("assistant", "first")}), true,
                                    mistral_set->special_tokens);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            "After the optional system message, conversation roles must alternate "
            "user/assistant/user/assistant/...");
}

TEST(ChatTemplateTest, TransformersEnvironment) {
  const ordered_json none = ordered_json::array();
  const ordered_json tokens = {{"eos_token", "</s>"}};
  // trim_blocks and lstrip_blocks: a block tag's line leaves no whitespace behind.
  auto trimmed = RenderChatTemplate("  {% if true %}\nA\n  {% endif %}\nB", none, false, tokens);
  ASSERT_TRUE(trimmed.ok()) << trimmed.status().message();
  EXPECT_EQ(*trimmed, "A\nB");
  // loopcontrols, tojson without HTML escaping and with key order kept, undefined bos_token.
  auto loop = RenderChatTemplate(
      "{% for m in messages %}{% if loop.index > 1 %}{% break %}{% endif %}{{ m | tojson }}"
      "{% endfor %}[{{ bos_token }}]{{ eos_token }}",
      ordered_json::array({ordered_json{{"z", "<&>"}, {"a", 1}}, Msg("user", "x")}), false, tokens);
  ASSERT_TRUE(loop.ok()) << loop.status().message();
  EXPECT_EQ(*loop, "{\"z\": \"<&>\", \"a\": 1}[]</s>");
  // strftime_now is the server's clock.
  auto year = RenderChatTemplate("{{ strftime_now('%Y') }}", none, false, tokens);
  ASSERT_TRUE(year.ok()) << year.status().message();
  std::time_t now = std::time(nullptr);
  std::tm local{};
  ::localtime_r(&now, &local);
  EXPECT_EQ(*year, std::to_string(1900 + local.tm_year));
  // The {% generation %} tag renders its body.
  auto generation = RenderChatTemplate("a{% generation %}b{% endgeneration %}c", none, false, {});
  ASSERT_TRUE(generation.ok()) << generation.status().message();
  EXPECT_EQ(*generation, "abc");
  // The sandbox refuses what transformers' refuses, as a Jinja2 error.
  auto unsafe = RenderChatTemplate("{{ ''.__class__.__mro__ }}", none, false, {});
  ASSERT_FALSE(unsafe.ok());
  EXPECT_EQ(unsafe.status().code(), StatusCode::kInvalidArgument);
  auto syntax = RenderChatTemplate("{% if %}", none, false, {});
  ASSERT_FALSE(syntax.ok());
  EXPECT_EQ(syntax.status().code(), StatusCode::kInvalidArgument);
}

TEST(ChatTemplateTest, ConcurrentRendersAreIndependent) {
  std::vector<std::thread> threads;
  std::vector<std::string> out(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([t, &out] {
      for (int i = 0; i < 50; ++i) {
        auto text = RenderChatTemplate("{{ messages[0].content }}-{{ n }}",
                                       ordered_json::array({Msg("user", std::to_string(t))}), false,
                                       ordered_json{{"n", i}});
        out[t] = text.ok() ? *text : text.status().message();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(out[t], std::to_string(t) + "-49");
}

TEST(ChatTemplateTest, NamedTemplatesAndMissingOnes) {
  TempDir dir;
  WriteFile(dir.path() / "tokenizer_config.json",
            R"({"chat_template": [{"name": "tool_use", "template": "T"},
                                  {"name": "default", "template": "D"}],
                "bos_token": null, "eos_token": {"content": "<e>", "special": true}})");
  auto set = LoadChatTemplates(dir.path().string());
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_EQ(set->templates.size(), 2u);
  EXPECT_EQ(DefaultChatTemplate(*set), "D");
  EXPECT_FALSE(set->special_tokens.contains("bos_token"));
  EXPECT_EQ(set->special_tokens["eos_token"], "<e>");

  TempDir only_named;
  WriteFile(only_named.path() / "tokenizer_config.json",
            R"({"chat_template": [{"name": "tool_use", "template": "T"}]})");
  auto named = LoadChatTemplates(only_named.path().string());
  ASSERT_TRUE(named.ok());
  EXPECT_FALSE(DefaultChatTemplate(*named).has_value());

  TempDir without;
  WriteFile(without.path() / "tokenizer_config.json", R"({"eos_token": "<e>"})");
  auto none = LoadChatTemplates(without.path().string());
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->templates.empty());

  TempDir jinja_file;
  WriteFile(jinja_file.path() / "tokenizer_config.json", R"({"chat_template": "old"})");
  WriteFile(jinja_file.path() / "chat_template.jinja", "new");
  auto from_file = LoadChatTemplates(jinja_file.path().string());
  ASSERT_TRUE(from_file.ok());
  EXPECT_EQ(DefaultChatTemplate(*from_file), "new");

  TempDir bad;
  WriteFile(bad.path() / "tokenizer_config.json", R"({"chat_template": 5})");
  auto refused = LoadChatTemplates(bad.path().string());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("chat_template must be a string"), std::string::npos);
}

}  // namespace
}  // namespace inflight::server::openai
