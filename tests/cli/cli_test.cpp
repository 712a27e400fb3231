// Runs the real `tessera` binary: messages, exit codes and the JSON result.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli_util.h"

namespace {

using Outcome = tessera::testing::CliOutcome;
using tessera::testing::run_cli;

int line_count(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

TEST(Cli, BadInputIsOneLineAndExitCode2) {
  const std::pair<const char*, const char*> cases[] = {
      {"run 'matmul:M=5,N'", "malformed workload"},
      {"run 'matmul'", "missing ':'"},
      {"run 'matmul:M=5,N=x,K=3'", "value of N is not an integer"},
      {"run 'nosuchop:M=4'", "unknown op 'nosuchop'"},
      {"run 'matmul:M=0,N=4,K=4'", "M must be positive"},
      {"run 'matmul:M=4,N=-4,K=4'", "N must be positive"},
      {"run 'matmul:M=4,N=4'", "matmul needs key K"},
      {"run 'conv2d:N=1,C=3,H=4,W=4,O=2,K=7,S=1,P=0'", "kernel 7 is larger than the padded input"},
      {"run 'matmul:M=4,N=4,K=4' --strategy 'split(q, 2)'", "split(q, 2): no loop named q"},
      {"run 'matmul:M=4,N=4,K=4' --strategy 'vectorize(k)'", "loop-carried dependence"},
      {"run 'matmul:M=4,N=4,K=4' --strategy 'split(i 2)'", "column 9"},
      {"run 'matmul:M=4,N=4,K=4' --strategy-file /nonexistent/strategy.txt",
       "cannot read strategy file"},
      {"run 'matmul:M=4,N=4,K=4' --strategy-file /tmp", "(not a file)"},
      {"run", "workload is required"},
      {"run 'matmul:M=4,N=4,K=4' --threads 99999", "must be at most 1024"},
      {"run-model /nonexistent.onnx --threads 99999", "must be at most 1024"},
      {"frobnicate", "frobnicate"},
  };
  for (const auto& [args, message] : cases) {
    SCOPED_TRACE(args);
    Outcome o = run_cli(args);
    EXPECT_EQ(o.exit_code, 2) << o.out;
    EXPECT_EQ(line_count(o.out), 1) << o.out;
    EXPECT_NE(o.out.find(message), std::string::npos) << o.out;
  }
}

TEST(Cli, HelpOnEveryCommand) {
  for (const char* args : {"--help", "run --help", "ops --help"}) {
    Outcome o = run_cli(args);
    EXPECT_EQ(o.exit_code, 0) << args;
    EXPECT_NE(o.out.find("Usage"), std::string::npos) << o.out;
  }
  EXPECT_NE(run_cli("run --help").out.find("--strategy"), std::string::npos);
}

TEST(Cli, RunReportsProgramsCorrectnessAndSpeed) {
  Outcome o = run_cli(
      "run 'matmul:M=33,N=32,K=7' --threads 1 --repeat 1 --show-code --strategy "
      "'split(j, 16) ; reorder(i, j.outer, k, j.inner) ; vectorize(j.inner) ; parallel(i)'");
  ASSERT_EQ(o.exit_code, 0) << o.out;
  EXPECT_NE(o.out.find("-- loop program before the strategy --"), std::string::npos);
  EXPECT_NE(o.out.find("vectorized for j.inner in 0..16"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("void tsr_main"), std::string::npos);
  EXPECT_NE(o.out.find("correct   yes"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("GFLOP/s"), std::string::npos);
}

TEST(Cli, JsonResult) {
  Outcome o = run_cli(
      "run 'conv2d:N=1,C=3,H=9,W=9,O=4,K=3,S=2,P=1' --json --repeat 1 --strategy 'parallel(o)'");
  ASSERT_EQ(o.exit_code, 0) << o.out;
  nlohmann::json j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j["workload"], "conv2d:N=1,C=3,H=9,W=9,O=4,K=3,S=2,P=1");
  EXPECT_EQ(j["strategy"], "parallel(o)");
  EXPECT_TRUE(j["correct"].get<bool>());
  EXPECT_GT(j["gflops"].get<double>(), 0);
  EXPECT_NE(j["program_after"].get<std::string>().find("parallel for o in 0..4"),
            std::string::npos);
}

TEST(Cli, OpsGraphListsTheOperatorTable) {
  Outcome o = run_cli("ops --graph");
  ASSERT_EQ(o.exit_code, 0);
  for (const char* s : {"Conv ", "Sigmoid ", "LayerNormalization ", "Shape ", "folded at import",
                        "elementwise (runs in channel blocks)", "view (no kernel)"}) {
    EXPECT_NE(o.out.find(s), std::string::npos) << s;
  }
}

TEST(Cli, OpsListsEveryOperatorWithItsKeys) {
  Outcome o = run_cli("ops");
  ASSERT_EQ(o.exit_code, 0);
  for (const char* s : {"matmul:M=,N=,K=", "conv2d:N=,C=,H=,W=,O=,K=,S=,P=", "conv2d_bias_relu:",
                        "add:M=,N=", "relu:M=,N="}) {
    EXPECT_NE(o.out.find(s), std::string::npos) << s;
  }
}

}  // namespace
