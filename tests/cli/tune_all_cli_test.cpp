// `tessera tune --transfer` and `tessera tune-all`: bad input, help, and a short JSON run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_util.h"
#include "runtime/isa.h"
#include "tune/shipped_model.h"

namespace {

using tessera::testing::run_cli;

int line_count(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("tessera_cli_" + name + "_" + std::to_string(getpid())))
      .string();
}

TEST(CliTuneAll, BadInputIsOneLineAndExitCode2) {
  std::string list = temp_path("bad.txt");
  std::ofstream(list) << "# ok\nmatmul:M=4,N=4,K=4\nA matmul:M=4,N\n";
  const std::pair<std::string, std::string> cases[] = {
      {"tune-all /nonexistent/tasks.txt", "cannot read task list /nonexistent/tasks.txt"},
      {"tune-all " + list, ":3: malformed workload"},
      {"tune-all --model resnet50", "unknown model 'resnet50'"},
      {"tune-all", "needs a task FILE or --model"},
      {"tune-all " + list + " --model resnet18-convs", "one of them"},
      {"tune-all --model resnet18-convs --transfer maybe", "--transfer"},
      {"tune-all --model resnet18-convs --scheduler fastest", "--scheduler"},
      {"tune-all --model resnet18-convs --transfer on --tuner random", "needs an xgb tuner"},
      {"tune matmul:M=4,N=4,K=4 --transfer on --tuner treegru", "needs an xgb tuner"},
      {"tune matmul:M=4,N=4,K=4 --pretrained x.bin --tuner ga", "needs a model tuner"},
      {"tune matmul:M=4,N=4,K=4 --pretrained /nonexistent/x.bin --tuner treegru", "x.bin"},
      {"tune matmul:M=4,N=4,K=4 --pretrained /nonexistent/x.json", "x.json"},
      {"tune-all --model resnet18-convs --pretrained /nonexistent/x.bin --tuner treegru", "x.bin"},
      {"tune matmul:M=4,N=4,K=4 --transfer sometimes", "--transfer"},
      {"tune matmul:M=4,N=4,K=4 --retime-rounds 0", "--retime-rounds"},
      {"tune-all --model resnet18-convs --retime -1", "--retime: Value -1 not in range 0"},
      {"tune matmul:M=4,N=4,K=4 --trials -3", "--trials: must be positive, not -3"},
      {"tune matmul:M=4,N=4,K=4 --trials many", "--trials: 'many' is not a number"},
      {"tune matmul:M=4,N=4,K=4 --threads -1", "--threads: must be 0 (all cores) or more, not -1"},
      {"tune-all --model resnet18-convs --trials 0", "--trials: must be positive, not 0"},
      {"bench matmul:M=4,N=4,K=4 --threads -2", "--threads: must be 0 (all cores) or more"},
  };
  for (const auto& [args, message] : cases) {
    SCOPED_TRACE(args);
    auto o = run_cli(args + " --db " + temp_path("never.db"));
    EXPECT_EQ(o.exit_code, 2) << o.out;
    EXPECT_EQ(line_count(o.out), 1) << o.out;
    EXPECT_LT(o.out.size(), 200u) << o.out;  // no range up to the largest double
    EXPECT_NE(o.out.find(message), std::string::npos) << o.out;
  }
  EXPECT_FALSE(std::filesystem::exists(temp_path("never.db")));
  std::filesystem::remove(list);
}

TEST(CliTuneAll, HelpNamesTheOptions) {
  auto all = run_cli("tune-all --help");
  EXPECT_EQ(all.exit_code, 0);
  for (const char* option : {"--model", "--trials", "--transfer", "--task-early-stop", "--json"})
    EXPECT_NE(all.out.find(option), std::string::npos) << option;
  auto tune = run_cli("tune --help");
  EXPECT_NE(tune.out.find("--transfer"), std::string::npos);
  EXPECT_NE(tune.out.find("--features"), std::string::npos);
}

// The predicted scheduler (the default) warms up on half the budget over the tasks (4 trials
// each here, not a batch of 8), and later batches follow the models' forecasts.
TEST(CliTuneAll, PredictedSchedulerWarmsUpOnHalfTheBudget) {
  std::string list = temp_path("pred.txt"), db = temp_path("pred.db");
  std::ofstream(list) << "a matmul:M=16,N=16,K=16\nb matmul:M=32,N=16,K=16\n";
  auto o = run_cli("tune-all " + list + " --trials 16 --batch 8 --retime 0 --threads 1 --db " + db +
                   " --json");
  ASSERT_EQ(o.exit_code, 0) << o.out;
  EXPECT_NE(o.out.find("tune-all: 4/16 trials"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("tune-all: 8/16 trials"), std::string::npos) << o.out;
  nlohmann::json j = nlohmann::json::parse(o.out.substr(o.out.find("\n{\n") + 1));
  EXPECT_EQ(j["trials"], 16);
  ASSERT_EQ(j["tasks"].size(), 2u);
  EXPECT_EQ(j["tasks"][0]["trials"].get<int>() + j["tasks"][1]["trials"].get<int>(), 16);
  for (const auto& task : j["tasks"]) {
    EXPECT_GE(task["trials"].get<int>(), 4);
    if (task.contains("forecast")) {
      EXPECT_GE(task["forecast"].get<double>(), 0);
    }
  }
  std::filesystem::remove(list);
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db + suffix);
}

// A time budget that the first batch already spends ends the trials there, short of the trial
// budget, and says so; without one the same run takes every trial.
TEST(CliTuneAll, ATimeBudgetEndsTheTrialsWhenSpent) {
  std::string list = temp_path("budget.txt"), db = temp_path("budget.db");
  std::ofstream(list) << "a matmul:M=16,N=16,K=16\nb matmul:M=32,N=16,K=16\n";
  const std::string run =
      "tune-all " + list +
      " --trials 12 --batch 2 --retime 0 --threads 1 --scheduler gradient --db " + db + " --json";
  auto o = run_cli(run + " --time-budget 0.001");
  ASSERT_EQ(o.exit_code, 0) << o.out;
  // The JSON, then (stderr) the task the budget left out.
  const size_t open = o.out.find("\n{\n") + 1, close = o.out.rfind("\n}\n") + 2;
  nlohmann::json j = nlohmann::json::parse(o.out.substr(open, close - open));
  EXPECT_EQ(j["trials"], 2);
  EXPECT_TRUE(j["out_of_time"].get<bool>());
  EXPECT_NE(o.out.find("the time budget ended the trials before b had one"), std::string::npos)
      << o.out;
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db + suffix);
  auto unlimited = run_cli(run);
  ASSERT_EQ(unlimited.exit_code, 0) << unlimited.out;
  j = nlohmann::json::parse(unlimited.out.substr(unlimited.out.find("\n{\n") + 1));
  EXPECT_EQ(j["trials"], 12);
  EXPECT_FALSE(j["out_of_time"].get<bool>());
  std::filesystem::remove(list);
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db + suffix);
}

TEST(CliTuneAll, ShortRunPrintsEveryTaskAndTheTransfer) {
  std::string list = temp_path("two.txt"), db = temp_path("two.db");
  std::ofstream(list) << "small matmul:M=16,N=16,K=16\nother matmul:M=32,N=16,K=16\n";
  auto o = run_cli("tune-all " + list +
                   " --trials 4 --batch 2 --threads 1 --scheduler gradient --db " + db + " --json");
  ASSERT_EQ(o.exit_code, 0) << o.out;
  // Progress (stderr) shows every task and the total; the JSON (stdout) comes last.
  EXPECT_NE(o.out.find("tune-all: 2/4 trials"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("tune-all: 4/4 trials"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("small"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("other"), std::string::npos) << o.out;
  size_t json_start = o.out.find("\n{\n");
  ASSERT_NE(json_start, std::string::npos) << o.out;
  nlohmann::json j = nlohmann::json::parse(o.out.substr(json_start + 1));
  EXPECT_EQ(j["trials"], 4);
  ASSERT_EQ(j["tasks"].size(), 2u);
  EXPECT_EQ(j["tasks"][0]["names"][0], "small");
  EXPECT_EQ(j["tasks"][0]["trials"], 2);
  EXPECT_EQ(j["tasks"][1]["trials"], 2);
  EXPECT_GT(j["tasks"][1]["best_gflops"].get<double>(), 0);
  EXPECT_TRUE(j["transfer"]["used"].get<bool>());
  EXPECT_GT(j["transfer"]["records"].get<int>(), 0);
  // After the trials each task's fastest configurations (two here) were re-timed together.
  EXPECT_NE(o.out.find("tune-all: re-timed small (1/2)"), std::string::npos) << o.out;
  for (const auto& task : j["tasks"]) {
    const auto& retime = task["retime"];
    ASSERT_TRUE(retime.is_object()) << task.dump();
    EXPECT_EQ(retime["rounds"], 3);
    EXPECT_LE(retime["candidates"].size(), 2u);
    EXPECT_EQ(retime["candidates"][0]["gflops_rounds"].size(), 3u);
    EXPECT_EQ(task["best_strategy"], retime["picked"]);
    int picked = 0;
    for (const auto& c : retime["candidates"]) {
      if (c["strategy"] != retime["picked"]) continue;
      ++picked;
      EXPECT_DOUBLE_EQ(c["gflops"].get<double>(), task["best_gflops"].get<double>());
    }
    EXPECT_EQ(picked, 1) << retime.dump();
  }
  // db best answers with the pick and says so; db stats counts the picks.
  auto best = run_cli("db best matmul:M=16,N=16,K=16 --db " + db);
  EXPECT_EQ(best.exit_code, 0) << best.out;
  EXPECT_NE(best.out.find("strategy  " + j["tasks"][0]["best_strategy"].get<std::string>()),
            std::string::npos)
      << best.out;
  EXPECT_NE(best.out.find("median of 3 rounds timing the"), std::string::npos) << best.out;
  auto best_json = run_cli("db best matmul:M=16,N=16,K=16 --json --db " + db);
  nlohmann::json bj = nlohmann::json::parse(best_json.out);
  EXPECT_EQ(bj["pick"]["rounds"], 3);
  EXPECT_DOUBLE_EQ(bj["pick"]["gflops"].get<double>(), j["tasks"][0]["best_gflops"].get<double>());
  EXPECT_NE(run_cli("db stats --db " + db).out.find("picks           2"), std::string::npos);

  // tune on this DB transfers from both workloads by default and says so in its progress.
  auto t = run_cli("tune matmul:M=16,N=32,K=16 --trials 2 --batch 2 --threads 1 --db " + db);
  EXPECT_EQ(t.exit_code, 0) << t.out;
  EXPECT_NE(t.out.find("transfer on (global model: 4 records, 2 workloads)"), std::string::npos)
      << t.out;
  // Without re-timing the result is the standing pick (the tune above re-timed) until this
  // run measures something faster than its median; which of the two wins is the machine's call.
  auto standing_json = run_cli("db best matmul:M=16,N=32,K=16 --json --db " + db);
  ASSERT_EQ(standing_json.exit_code, 0) << standing_json.out;
  nlohmann::json standing = nlohmann::json::parse(standing_json.out);
  ASSERT_TRUE(standing.contains("pick")) << standing.dump();
  const double standing_gflops = standing["pick"]["gflops"].get<double>();
  auto plain = run_cli(
      "tune matmul:M=16,N=32,K=16 --trials 2 --batch 2 --threads 1 --retime 0 "
      "--json --db " +
      db);
  ASSERT_EQ(plain.exit_code, 0) << plain.out;
  nlohmann::json pj = nlohmann::json::parse(plain.out.substr(plain.out.find("\n{\n") + 1));
  EXPECT_TRUE(pj["retime"].is_null());
  const double plain_best = pj["best_gflops"].get<double>();
  EXPECT_GE(plain_best, standing_gflops);
  EXPECT_LE(plain_best, std::max(standing_gflops, pj["best_tuned_gflops"].get<double>()));
  // db best answers what the run reported: the same configuration, and the pick's figure while
  // the pick stands.
  auto after_json = run_cli("db best matmul:M=16,N=32,K=16 --json --db " + db);
  ASSERT_EQ(after_json.exit_code, 0) << after_json.out;
  nlohmann::json after = nlohmann::json::parse(after_json.out);
  EXPECT_EQ(after["strategy"], pj["best_strategy"]) << after.dump();
  if (after.contains("pick")) {
    EXPECT_DOUBLE_EQ(after["pick"]["gflops"].get<double>(), plain_best);
  } else {
    EXPECT_GT(plain_best, standing_gflops);
  }
  EXPECT_EQ(plain.out.find("re-timing"), std::string::npos) << plain.out;
  std::filesystem::remove(list);
  for (const auto& entry :
       std::filesystem::directory_iterator(std::filesystem::temp_directory_path())) {
    std::string name = entry.path().string();
    if (name.rfind(db, 0) == 0) std::filesystem::remove(entry.path());
  }
}

}  // namespace

namespace {

// tessera pretrain learns from the records of two DBs; tune (no DB of its own) and tune-all start
// from the file and say so; what cannot be used is refused in one line.
TEST(CliPretrain, TrainsOnSeveralDbsAndTuningStartsFromIt) {
  const std::string a = temp_path("pre_a.db"), b = temp_path("pre_b.db");
  const std::string model = temp_path("pre_model.json"), list = temp_path("pre_list.txt");
  ASSERT_EQ(
      run_cli("tune matmul:M=16,N=16,K=16 --trials 4 --batch 2 --threads 1 --db " + a).exit_code,
      0);
  ASSERT_EQ(
      run_cli("tune matmul:M=32,N=16,K=16 --trials 4 --batch 2 --threads 1 --db " + b).exit_code,
      0);
  auto p = run_cli("pretrain --db " + a + " --db " + b + " -o " + model);
  ASSERT_EQ(p.exit_code, 0) << p.out;
  EXPECT_NE(p.out.find("8 records of 2 workloads"), std::string::npos) << p.out;

  const std::string c = temp_path("pre_c.db");  // a DB of its own: nothing to transfer from
  auto t = run_cli("tune matmul:M=16,N=32,K=16 --trials 2 --batch 2 --threads 1 --pretrained " +
                   model + " --db " + c);
  EXPECT_EQ(t.exit_code, 0) << t.out;
  EXPECT_NE(t.out.find("transfer on (pretrained model: 8 records, 2 workloads)"), std::string::npos)
      << t.out;
  std::ofstream(list) << "one matmul:M=16,N=32,K=16\n";
  auto all = run_cli("tune-all " + list + " --trials 2 --batch 2 --threads 1 --db " + a +
                     " --pretrained " + model + " --json");
  ASSERT_EQ(all.exit_code, 0) << all.out;
  nlohmann::json j = nlohmann::json::parse(all.out.substr(all.out.find("\n{\n") + 1));
  EXPECT_TRUE(j["transfer"]["pretrained"].get<bool>()) << j["transfer"].dump();
  EXPECT_EQ(j["transfer"]["records"], 8);

  const std::pair<std::string, std::string> cases[] = {
      {"pretrain --db " + a + " -o " + a, "over an input of this command"},
      {"pretrain -o " + model, "--db is required"},
      {"pretrain --db /nonexistent/x.db -o " + model + ".2", "no such records database"},
      {"tune matmul:M=4,N=4,K=4 --trials 1 --pretrained " + a, "is not a tessera cost model"},
      {"tune matmul:M=4,N=4,K=4 --trials 1 --pretrained " + model + " --features context",
       "trained on relation features"},
      {"tune matmul:M=4,N=4,K=4 --trials 1 --pretrained " + model + " --tuner xgb-reg",
       "trained for the xgb tuner"},
      {"tune matmul:M=4,N=4,K=4 --trials 1 --pretrained " + model + " --transfer off",
       "contradict"},
  };
  for (const auto& [args, message] : cases) {
    SCOPED_TRACE(args);
    auto o = run_cli(args);
    EXPECT_EQ(o.exit_code, 2) << o.out;
    EXPECT_EQ(line_count(o.out), 1) << o.out;
    EXPECT_NE(o.out.find(message), std::string::npos) << o.out;
  }
  for (const std::string& f : {a, b, c, model, list}) std::filesystem::remove(f);
}

}  // namespace

namespace {

TEST(CliTune, TheTreeGruTunerTunesAndSaysItTransfersNothing) {
  std::string db = temp_path("treegru.db");
  auto o = run_cli(
      "tune matmul:M=16,N=32,K=16 --tuner treegru --trials 12 --batch 4 --threads 1 "
      "--retime 0 --json --db " +
      db);
  ASSERT_EQ(o.exit_code, 0) << o.out;
  size_t json_start = o.out.find("\n{\n");
  ASSERT_NE(json_start, std::string::npos) << o.out;
  nlohmann::json j = nlohmann::json::parse(o.out.substr(json_start + 1));
  EXPECT_EQ(j["trials"], 12) << j.dump();
  EXPECT_GT(j["best_gflops"].get<double>(), 0);
  EXPECT_FALSE(j["transfer"]["used"].get<bool>());
  EXPECT_NE(j["transfer"]["reason"].get<std::string>().find("TreeGRU"), std::string::npos);
  std::filesystem::remove(db);
}

// Records timed in-model (compile's kind) are filed apart, and db best and bench still find them
// where a workload has no record timed alone.
TEST(CliTune, RecordsTimedInModelAreFoundByBestAndBench) {
  std::string db = temp_path("in_model.db");
  std::filesystem::remove(db);
  const std::string w = "matmul:M=16,N=32,K=16";
  auto o = run_cli("tune " + w +
                   " --timing in-model --trials 4 --batch 4 --threads 1 --retime 0 --db " + db);
  ASSERT_EQ(o.exit_code, 0) << o.out;
  auto listed = run_cli("db list --db " + db);
  EXPECT_EQ(listed.exit_code, 0) << listed.out;
  auto best = run_cli("db best " + w + " --strategy-only --db " + db);
  ASSERT_EQ(best.exit_code, 0) << best.out;
  EXPECT_FALSE(best.out.empty());
  auto bench = run_cli("bench " + w + " --rounds 1 --threads 1 --db " + db);
  EXPECT_EQ(bench.exit_code, 0) << bench.out;
  EXPECT_NE(bench.out.find("correct: yes"), std::string::npos) << bench.out;
  auto bad = run_cli("tune " + w + " --timing warm --trials 1 --db " + db);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find("--timing"), std::string::npos) << bad.out;
  std::filesystem::remove(db);
}

}  // namespace

namespace {

// With no records of this machine, tune starts from the model shipped for its ISA and says so;
// --transfer off starts from nothing.
TEST(CliTune, AFirstRunStartsFromTheShippedModel) {
  std::optional<std::string> shipped = tessera::shipped_cost_model(tessera::target_isa().name);
  if (!shipped) GTEST_SKIP() << "no model ships for " << tessera::target_isa().name;
  const std::string db = temp_path("shipped.db");
  auto o = run_cli("tune matmul:M=16,N=16,K=16 --trials 2 --batch 2 --threads 1 --json --db " + db);
  ASSERT_EQ(o.exit_code, 0) << o.out;
  EXPECT_NE(o.out.find("transfer on (shipped model: "), std::string::npos) << o.out;
  nlohmann::json j = nlohmann::json::parse(o.out.substr(o.out.find("\n{\n") + 1));
  EXPECT_TRUE(j["transfer"]["shipped"].get<bool>()) << j["transfer"].dump();
  EXPECT_EQ(j["transfer"]["model"], *shipped);
  EXPECT_EQ(o.out.find("warning"), std::string::npos) << o.out;  // another machine, same ISA

  std::filesystem::remove(db);
  auto off = run_cli(
      "tune matmul:M=16,N=16,K=16 --trials 2 --batch 2 --threads 1 --transfer off "
      "--db " +
      db);
  ASSERT_EQ(off.exit_code, 0) << off.out;
  EXPECT_EQ(off.out.find("shipped model"), std::string::npos) << off.out;
  EXPECT_NE(off.out.find("transfer off"), std::string::npos) << off.out;
  std::filesystem::remove(db);
}

}  // namespace

namespace {

// pretrain --tuner treegru trains the TreeGRU on a DB's records; a treegru run goes on from it
// and says so; a model for another tuner is refused in one line.
TEST(CliPretrain, ATreeGruPretrainedOnRecordsIsWhereTheTreeGruTunerStarts) {
  const std::string a = temp_path("gru_a.db"), c = temp_path("gru_c.db");
  const std::string model = temp_path("gru_model.bin");
  for (const char* w : {"matmul:M=16,N=16,K=16", "matmul:M=32,N=16,K=16"}) {
    auto t = run_cli(std::string("tune ") + w +
                     " --trials 6 --batch 3 --threads 1 --retime 0 --transfer off --db " + a);
    ASSERT_EQ(t.exit_code, 0) << t.out;
  }
  auto p = run_cli("pretrain --db " + a + " --tuner treegru --steps 20 -o " + model);
  ASSERT_EQ(p.exit_code, 0) << p.out;
  EXPECT_NE(p.out.find("12 records of 2 workloads, 20 steps"), std::string::npos) << p.out;

  auto t = run_cli("tune matmul:M=16,N=32,K=16 --tuner treegru --pretrained " + model +
                   " --trials 4 --batch 2 --threads 1 --retime 0 --json --db " + c);
  ASSERT_EQ(t.exit_code, 0) << t.out;
  EXPECT_NE(t.out.find("transfer on (pretrained " + model + ")"), std::string::npos) << t.out;
  nlohmann::json j = nlohmann::json::parse(t.out.substr(t.out.find("\n{\n") + 1));
  EXPECT_TRUE(j["transfer"]["pretrained"].get<bool>()) << j["transfer"].dump();
  EXPECT_EQ(j["trials"], 4);

  const std::pair<std::string, std::string> cases[] = {
      {"tune matmul:M=4,N=4,K=4 --trials 1 --tuner treegru-reg --pretrained " + model,
       "for the treegru tuner, not treegru-reg"},
      {"tune matmul:M=4,N=4,K=4 --trials 1 --tuner xgb --pretrained " + model,
       "is not a tessera cost model"},
      {"tune matmul:M=4,N=4,K=4 --trials 1 --tuner treegru --transfer off --pretrained " + model,
       "contradict"},
      {"tune matmul:M=4,N=4,K=4 --trials 1 --tuner ga --pretrained " + model,
       "needs a model tuner"},
      {"pretrain --db " + a + " --tuner treegru -o " + a, "over an input of this command"},
  };
  for (const auto& [args, message] : cases) {
    SCOPED_TRACE(args);
    auto o = run_cli(args + " --db " + c);
    EXPECT_EQ(o.exit_code, 2) << o.out;
    EXPECT_EQ(line_count(o.out), 1) << o.out;
    EXPECT_NE(o.out.find(message), std::string::npos) << o.out;
  }
  for (const std::string& f : {a, c, model}) std::filesystem::remove(f);
}

}  // namespace
