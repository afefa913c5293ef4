// inflight-server's command line parsed as tritonserver parses its own: prefixes, aliases, "=" and
// space forms, every option a seed document or launch_triton_server.py passes, and errors that name
// the candidates.
#include "server/command_line.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/long_options.h"

namespace inflight::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

Result<CommandLine> Parse(std::vector<std::string> args) {
  return ParseCommandLine(args);
}

TEST(CommandLineTest, Seed004CommandLineParses) {
  // mpirun -n 2 --allow-run-as-root tritonserver --http-port=18000 --metrics-port=18002
  //     --grpc-port=18001 --model-repo=${MODEL_FOLDER}
  auto cl = Parse({"--http-port=18000", "--metrics-port=18002", "--grpc-port=18001",
                   "--model-repo=/triton_model_repo/Qwen2-14B-Instruct-Int4-2Gpu"});
  ASSERT_TRUE(cl.ok()) << cl.status().message();
  EXPECT_THAT(cl->server.model_repositories,
              ElementsAre("/triton_model_repo/Qwen2-14B-Instruct-Int4-2Gpu"));
  EXPECT_EQ(cl->http_port, 18000);
  EXPECT_EQ(cl->metrics_port, 18002);
  EXPECT_EQ(cl->grpc_port, 18001);
  EXPECT_TRUE(cl->allow_grpc);
  EXPECT_TRUE(cl->notes.empty());
}

TEST(CommandLineTest, LaunchTritonServerCommandLineParses) {
  // One rank of launch_triton_server.py --world_size=2 --log (rank 1 form).
  auto cl = Parse({"--model-repository=/repo", "--grpc-port=8001", "--http-port=8000",
                   "--metrics-port=8002", "--log-verbose=3", "--log-file=triton_log.txt",
                   "--disable-auto-complete-config",
                   "--backend-config=python,shm-region-prefix-name=prefix1_",
                   "--model-control-mode=explicit", "--load-model=tensorrt_llm"});
  ASSERT_TRUE(cl.ok()) << cl.status().message();
  EXPECT_EQ(cl->log_verbose, 3);
  EXPECT_EQ(cl->log_file, "triton_log.txt");
  EXPECT_TRUE(cl->server.explicit_model_control);
  EXPECT_THAT(cl->server.startup_models, ElementsAre("tensorrt_llm"));
  EXPECT_EQ(cl->server.backend_config["python"]["shm-region-prefix-name"], "prefix1_");
}

TEST(CommandLineTest, SlurmAndComposeSeedCommandLinesParse) {
  // Seed 002's tensorrt_llm_triton.sh and seed 003's docker-compose command.
  auto slurm = Parse({"--model-repository=/repo", "--disable-auto-complete-config",
                      "--backend-config=python,shm-region-prefix-name=prefix0_"});
  ASSERT_TRUE(slurm.ok()) << slurm.status().message();
  auto compose =
      Parse({"--model-repository=/models", "--strict-model-config=false", "--log-verbose=1"});
  ASSERT_TRUE(compose.ok()) << compose.status().message();
  EXPECT_EQ(compose->log_verbose, 1);
  ASSERT_EQ(compose->notes.size(), 1u);
  EXPECT_THAT(compose->notes[0], HasSubstr("--strict-model-config=false is not used"));
}

TEST(CommandLineTest, PrefixesAliasesAndBothValueForms) {
  auto cl = Parse({"--model-store", "/a", "--model-repo=/b", "--model-reposit", "/c",
                   "--backend-dir=/backends", "--http-a", "127.0.0.1", "--strict-r", "false",
                   "--exit-on", "--http-thread=4", "--http-busy"});
  ASSERT_TRUE(cl.ok()) << cl.status().message();
  EXPECT_THAT(cl->server.model_repositories, ElementsAre("/a", "/b", "/c"));
  EXPECT_EQ(cl->server.backend_directory, "/backends");
  EXPECT_TRUE(cl->backend_directory_given);
  EXPECT_EQ(cl->http_address, "127.0.0.1");
  EXPECT_FALSE(cl->server.strict_readiness);
  EXPECT_TRUE(cl->exit_on_error);  // a boolean option alone means true
  EXPECT_EQ(cl->http_thread_count, 4);
  EXPECT_TRUE(cl->http_busy_poll);
}

TEST(CommandLineTest, ExactNameWinsOverLongerNames) {
  // --grpc-keepalive-time is also a prefix of --grpc-keepalive-timeout: typed whole, it is itself.
  auto cl = Parse({"--model-store=/a", "--grpc-keepalive-time=5", "--grpc-use-ssl=false",
                   "--grpc-addr=127.0.0.1", "--allow-grpc=false"});
  ASSERT_TRUE(cl.ok()) << cl.status().message();
  ASSERT_EQ(cl->notes.size(), 1u);
  EXPECT_THAT(cl->notes[0], HasSubstr("--grpc-keepalive-time=5 is not used"));
  EXPECT_EQ(cl->grpc_address, "127.0.0.1");
  EXPECT_FALSE(cl->allow_grpc);
  auto tls = Parse({"--model-store=/a", "--grpc-use-ssl=true"});
  ASSERT_FALSE(tls.ok());
  EXPECT_EQ(tls.status().code(), StatusCode::kUnsupported);
  EXPECT_THAT(tls.status().message(), HasSubstr("--grpc-use-ssl=true is not supported: TLS"));
  auto shorter = Parse({"--model-store=/a", "--grpc-keepalive-ti=5"});
  ASSERT_FALSE(shorter.ok());
  EXPECT_THAT(shorter.status().message(), HasSubstr("is ambiguous"));
}

TEST(CommandLineTest, AmbiguousPrefixNamesEveryCandidate) {
  auto cl = Parse({"--model=/a"});
  ASSERT_FALSE(cl.ok());
  EXPECT_THAT(cl.status().message(), HasSubstr("option --model is ambiguous; possibilities:"));
  for (const char* name : {"--model-repository", "--model-store", "--model-control-mode",
                           "--model-load-thread-count", "--model-namespacing"}) {
    EXPECT_THAT(cl.status().message(), HasSubstr(name));
  }
  auto http = Parse({"--model-store=/a", "--http=1"});
  ASSERT_FALSE(http.ok());
  EXPECT_THAT(http.status().message(), HasSubstr("--http-port"));
  EXPECT_THAT(http.status().message(), HasSubstr("--http-address"));
}

TEST(CommandLineTest, UnknownOptionNamesTheLikelyOnes) {
  auto underscore = Parse({"--model_repo=/a"});
  ASSERT_FALSE(underscore.ok());
  EXPECT_THAT(underscore.status().message(),
              HasSubstr("unknown option --model_repo; did you mean --model-repository?"));
  auto typo = Parse({"--model-store=/a", "--metrcs-port=1"});
  ASSERT_FALSE(typo.ok());
  EXPECT_THAT(typo.status().message(), HasSubstr("did you mean --metrics-port?"));
  auto nothing_near = Parse({"--model-store=/a", "--zzzzzzzzzzzz"});
  ASSERT_FALSE(nothing_near.ok());
  EXPECT_THAT(nothing_near.status().message(), HasSubstr("unknown option --zzzzzzzzzzzz"));
  EXPECT_THAT(nothing_near.status().message(), Not(HasSubstr("did you mean")));
}

TEST(CommandLineTest, BadValuesNameOptionValueAndWhatIsAccepted) {
  auto port = Parse({"--model-store=/a", "--http-p=eighty"});
  ASSERT_FALSE(port.ok());
  // The canonical name, not the prefix typed.
  EXPECT_THAT(port.status().message(),
              HasSubstr("--http-port=eighty is not an integer in 0..65535"));
  auto mode = Parse({"--model-store=/a", "--model-control-mode=poll"});
  ASSERT_FALSE(mode.ok());
  EXPECT_EQ(mode.status().code(), StatusCode::kUnsupported);
  EXPECT_THAT(mode.status().message(), HasSubstr("accepted: none, explicit"));
  auto missing = Parse({"--model-repository"});
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("--model-repository needs a value"));
  auto grpc = Parse({"--model-store=/a", "--grpc-port=x"});
  ASSERT_FALSE(grpc.ok());
  EXPECT_THAT(grpc.status().message(), HasSubstr("--grpc-port=x is not an integer in 0..65535"));
}

TEST(CommandLineTest, UnsupportedRequestsAreRefusedByName) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--trace-config=level=TIMESTAMPS"},
                                             {"--allow-sagemaker=true"},
                                             {"--rate-limit=execution_count"},
                                             {"--model-namespacing=true"},
                                             {"--reuse-http-port"},
                                             {"--cache-config=local,size=1048576"}}) {
    std::vector<std::string> full = args;
    full.push_back("--model-store=/a");
    auto cl = Parse(full);
    ASSERT_FALSE(cl.ok()) << args[0];
    EXPECT_EQ(cl.status().code(), StatusCode::kUnsupported) << args[0];
    EXPECT_THAT(cl.status().message(), HasSubstr("is not supported")) << args[0];
  }
  // Their "nothing asked" values are fine.
  auto off = Parse({"--model-store=/a", "--allow-sagemaker=false", "--rate-limit=OFF",
                    "--trace-level=OFF", "--reuse-grpc-port=false"});
  ASSERT_TRUE(off.ok()) << off.status().message();
}

TEST(CommandLineTest, LogOptions) {
  auto cl = Parse({"--model-store=/a", "--log-verbose=true", "--log-info=off", "--log-format",
                   "ISO8601", "--exit-timeout-secs=-5"});
  ASSERT_TRUE(cl.ok()) << cl.status().message();
  EXPECT_EQ(cl->log_verbose, 1);
  EXPECT_FALSE(cl->log_info);
  EXPECT_TRUE(cl->log_iso8601);
  EXPECT_EQ(cl->server.exit_timeout_secs, 0.0);  // tritonserver clamps at 0
  auto format = Parse({"--model-store=/a", "--log-format=json"});
  ASSERT_FALSE(format.ok());
  EXPECT_THAT(format.status().message(), HasSubstr("default, ISO8601"));
}

TEST(CommandLineTest, ArgumentsThatAreNotOptions) {
  auto stray = Parse({"--model-store=/a", "extra"});
  ASSERT_FALSE(stray.ok());
  EXPECT_THAT(stray.status().message(), HasSubstr("unexpected argument \"extra\""));
  auto after_dashes = Parse({"--model-store=/a", "--", "--http-port=1"});
  ASSERT_FALSE(after_dashes.ok());
  EXPECT_THAT(after_dashes.status().message(), HasSubstr("after \"--\""));
  EXPECT_TRUE(Parse({"--model-store=/a", "--"}).ok());
  auto no_repo = Parse({"--http-port=1"});
  ASSERT_FALSE(no_repo.ok());
  EXPECT_THAT(no_repo.status().message(), HasSubstr("--model-repository"));
  auto help = Parse({"--he"});
  ASSERT_TRUE(help.ok());
  EXPECT_TRUE(help->help);
}

TEST(CommandLineTest, UsageNamesEveryOptionOnce) {
  const std::string usage = CommandLineUsage();
  for (const char* name :
       {"--model-repository, --model-store", "--grpc-port", "--http-port", "--metrics-port",
        "--backend-config", "--trace-config", "--cuda-memory-pool-byte-size", "--log-format"}) {
    EXPECT_THAT(usage, HasSubstr(name));
  }
}

TEST(LongOptionsTest, AliasesOfOneOptionAreNotAmbiguous) {
  std::vector<LongOption> options = {
      {{"model-repository", "model-store"}, OptionArg::kValue, "<path>", "", nullptr},
      {{"model-control-mode"}, OptionArg::kValue, "<mode>", "", nullptr},
  };
  auto match = MatchLongOption(options, "model-re");
  ASSERT_TRUE(match.ok());
  EXPECT_EQ((*match)->names.front(), "model-repository");
  // "model-" prefixes both names of the first option and the second option: ambiguous.
  EXPECT_FALSE(MatchLongOption(options, "model-").ok());
  options.pop_back();
  // Only the first option's two names: one option, not ambiguous.
  ASSERT_TRUE(MatchLongOption(options, "model-").ok());
}

}  // namespace
}  // namespace inflight::server
