// ONNX models built with the protobuf classes, imported, and rejected with one clear line where
// unsupported; `tessera run-model` on them.
#include "graph/onnx_import.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "te/error.h"

namespace tessera {
namespace {

void add_input(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& dims,
               const std::string& dynamic = "") {
  onnx::ValueInfoProto* vi = g->add_input();
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
  if (!dynamic.empty()) tt->mutable_shape()->add_dim()->set_dim_param(dynamic);
}

void add_float(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& dims,
               float value) {
  onnx::TensorProto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  int64_t n = 1;
  for (int64_t d : dims) {
    t->add_dims(d);
    n *= d;
  }
  // Raw little-endian bytes, as exporters write them.
  std::string raw(n * sizeof(float), '\0');
  for (int64_t i = 0; i < n; ++i) {
    float v = value * static_cast<float>(i % 7 - 3);
    std::memcpy(&raw[i * sizeof(float)], &v, sizeof(float));
  }
  t->set_raw_data(raw);
}

// A 1-D int64 initializer (a shape operand).
void add_int64s(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& values) {
  onnx::TensorProto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values) t->add_int64_data(v);
}

onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& op, const std::string& name,
                          std::vector<std::string> in, const std::string& out) {
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const std::string& i : in) n->add_input(i);
  n->add_output(out);
  return n;
}

void add_ints(onnx::NodeProto* n, const std::string& name, std::vector<int64_t> v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

// x [1, 2, 8, 8] -> Conv 3x3 stride 2 pad 1 -> Relu -> Flatten -> Gemm (transB) -> y [1, 3]
onnx::ModelProto small_model(const std::string& extra_op = "", const std::string& dynamic = "") {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  add_input(g, "x",
            dynamic.empty() ? std::vector<int64_t>{1, 2, 8, 8} : std::vector<int64_t>{2, 8, 8},
            dynamic);
  add_float(g, "w", {4, 2, 3, 3}, 0.1f);
  add_float(g, "fc", {3, 64}, 0.01f);
  onnx::NodeProto* conv = add_node(g, "Conv", "conv1", {"x", "w"}, "c");
  add_ints(conv, "strides", {2, 2});
  add_ints(conv, "pads", {1, 1, 1, 1});
  add_node(g, "Relu", "relu1", {"c"}, "r");
  std::string last = "r";
  if (!extra_op.empty()) {
    add_node(g, extra_op, "odd1", {"r"}, "o");
    last = "o";
  }
  add_node(g, "Flatten", "flat", {last}, "f");
  onnx::NodeProto* gemm = add_node(g, "Gemm", "fc1", {"f", "fc"}, "y");
  onnx::AttributeProto* t = gemm->add_attribute();
  t->set_name("transB");
  t->set_type(onnx::AttributeProto::INT);
  t->set_i(1);
  g->add_output()->set_name("y");
  return m;
}

std::string error_of(const onnx::ModelProto& m) {
  try {
    graph::import_onnx_bytes(m.SerializeAsString());
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(GraphOnnxImport, ReadsNodesAttributesInitializersAndShapes) {
  graph::Graph g = graph::import_onnx_bytes(small_model().SerializeAsString());
  ASSERT_EQ(g.nodes.size(), 4u);
  EXPECT_EQ(g.nodes[0].op, "Conv");
  EXPECT_EQ(g.nodes[0].attr_ints("strides", {}), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(g.nodes[3].attr_int("transB", 0), 1);
  EXPECT_EQ(g.shape("c"), (std::vector<int64_t>{1, 4, 4, 4}));
  EXPECT_EQ(g.shape("f"), (std::vector<int64_t>{1, 64}));
  EXPECT_EQ(g.shape("y"), (std::vector<int64_t>{1, 3}));
  ASSERT_TRUE(g.is_constant("w"));
  EXPECT_FLOAT_EQ(g.constants.at("w").data[1], 0.1f * -2);
  EXPECT_EQ(g.opset, 13);
}

TEST(GraphOnnxImport, UnsupportedOpNamesTheNodeAndItsType) {
  std::string e = error_of(small_model("LpNormalization"));
  EXPECT_NE(e.find("1 unsupported node: LpNormalization (node 'odd1')"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << "one line";
}

// Every unsupported node and attribute in one message, so a user meets them all at once.
TEST(GraphOnnxImport, EveryUnsupportedNodeAndAttributeIsReportedAtOnce) {
  onnx::ModelProto m = small_model("LpNormalization");
  onnx::GraphProto* g = m.mutable_graph();
  add_node(g, "LpNormalization", "odd2", {"o"}, "o2");
  add_node(g, "Col2Im", "odd3", {"o2"}, "o3");
  add_ints(g->mutable_node(0), "weird_knob", {1});
  std::string e = error_of(m);
  EXPECT_NE(e.find("3 unsupported nodes: Col2Im (node 'odd3'), LpNormalization x2 (nodes 'odd1', "
                   "'odd2')"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("unsupported attributes: Conv attribute 'weird_knob' (node 'conv1')"),
            std::string::npos)
      << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << "one line";
}

TEST(GraphOnnxImport, DynamicDimensionNamesTheReadingNode) {
  std::string e = error_of(small_model("", "batch"));
  EXPECT_NE(e.find("dynamic dimension 'batch'"), std::string::npos) << e;
  EXPECT_NE(e.find("node 'conv1' (Conv)"), std::string::npos) << e;
}

// Found by fuzz/onnx_fuzzer.cpp under UBSan: shape arithmetic on a file's numbers overflowed
// int64 (signed overflow, then a wrong size). Each is now a refusal naming the node or tensor.
TEST(GraphOnnxImport, NumbersPastWhatShapesCanHoldAreRefused) {
  // Initializer dims whose product passes 2^63.
  onnx::ModelProto m = small_model();
  onnx::TensorProto* w = m.mutable_graph()->mutable_initializer(0);
  w->clear_dims();
  for (int64_t d : {int64_t{1} << 40, int64_t{1} << 40}) w->add_dims(d);
  std::string e = error_of(m);
  EXPECT_NE(e.find("tensor 'w': shape [1099511627776, 1099511627776] has no valid number"),
            std::string::npos)
      << e;
  // An attribute past the largest dimension a value may have.
  m = small_model();
  add_ints(m.mutable_graph()->mutable_node(0), "dilations", {int64_t{1} << 62, 1});
  e = error_of(m);
  EXPECT_NE(
      e.find("node 'conv1' (Conv): attribute dilations = 4611686018427387904 is out of range"),
      std::string::npos)
      << e;
  // A Reshape target whose product passes 2^63.
  m = small_model();
  onnx::GraphProto* g = m.mutable_graph();
  add_int64s(g, "target", {int64_t{1} << 40, int64_t{1} << 40, -1});
  add_node(g, "Reshape", "reshape1", {"y", "target"}, "z");
  g->mutable_output(0)->set_name("z");
  e = error_of(m);
  EXPECT_NE(e.find("node 'reshape1' (Reshape): the shape [3] has too many elements"),
            std::string::npos)
      << e;
  // Pads of 2^62 and more (as an int64 tensor) overflowed Pad's shape arithmetic.
  m = small_model();
  g = m.mutable_graph();
  add_int64s(g, "pads", {0, int64_t{1} << 62, 0, int64_t{1} << 62});
  add_node(g, "Pad", "pad1", {"y", "pads"}, "padded");
  g->mutable_output(0)->set_name("padded");
  e = error_of(m);
  EXPECT_NE(e.find("node 'pad1' (Pad): pads value 4611686018427387904 is out of range"),
            std::string::npos)
      << e;
  // A kernel_shape of one number was compared with the weights' two (a heap read past it).
  m = small_model();
  add_ints(m.mutable_graph()->mutable_node(0), "kernel_shape", {3});
  EXPECT_NE(error_of(m).find("node 'conv1' (Conv): kernel_shape disagrees with the weights"),
            std::string::npos)
      << error_of(m);
  // tessera's internal ops and attributes cannot be smuggled in by a file.
  m = small_model("tessera.PixelShuffle");
  EXPECT_NE(error_of(m).find("'tessera.PixelShuffle' is not an ONNX operator"), std::string::npos);
  m = small_model();
  add_ints(m.mutable_graph()->mutable_node(0), "tessera.split", {0, 2});
  EXPECT_NE(error_of(m).find("attribute 'tessera.split' is not an ONNX attribute"),
            std::string::npos);
}

TEST(GraphOnnxImport, GarbageIsNotAModel) {
  EXPECT_THROW(graph::import_onnx_bytes("\x08\x01garbage\xff\xff"), Error);
  EXPECT_THROW(graph::import_onnx("/nonexistent/model.onnx"), Error);
}

std::string write_model(const onnx::ModelProto& m, const std::string& name) {
  std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream out(path, std::ios::binary);
  out << m.SerializeAsString();
  return path;
}

TEST(GraphRunModelCli, RunsAModelAndChecksItAgainstTheReference) {
  std::string path = write_model(small_model(), "run_model_small.onnx");
  testing::CliOutcome r = testing::run_cli("run-model " + path + " --check --threads 1 --repeat 1");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("output    y [1, 3]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("template's default configuration (no --db)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("check     max relative error"), std::string::npos) << r.out;
}

// --conv-algorithm direct leaves the algorithm pass out; an unknown algorithm is exit 2.
TEST(GraphRunModelCli, ConvAlgorithmDirectSkipsTheWinogradChoice) {
  std::string path = write_model(small_model(), "run_model_direct.onnx");
  testing::CliOutcome a = testing::run_cli("run-model " + path + " --threads 1 --repeat 1");
  EXPECT_EQ(a.exit_code, 0) << a.out;
  EXPECT_NE(a.out.find("choose_conv_algorithms 0"), std::string::npos) << a.out;
  testing::CliOutcome d =
      testing::run_cli("run-model " + path + " --conv-algorithm direct --threads 1 --repeat 1");
  EXPECT_EQ(d.exit_code, 0) << d.out;
  EXPECT_EQ(d.out.find("choose_conv_algorithms"), std::string::npos) << d.out;
  testing::CliOutcome bad = testing::run_cli("run-model " + path + " --conv-algorithm fast");
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_NE(bad.out.find("--conv-algorithm"), std::string::npos) << bad.out;
}

// A recorded configuration of one of the model's workloads is used for that kernel, as `tessera
// bench` uses it; the others stay at their default configuration.
TEST(GraphRunModelCli, UsesTheBestRecordedConfigurationFromTheDb) {
  std::string db = ::testing::TempDir() + "/run_model_records.db";
  std::remove(db.c_str());
  testing::CliOutcome m =
      testing::run_cli("measure dense:B=1,I=64,O=3 -s 'parallel(@outermost)' --db " + db);
  ASSERT_EQ(m.exit_code, 0) << m.out;
  std::string path = write_model(small_model(), "run_model_db.onnx");
  testing::CliOutcome r =
      testing::run_cli("run-model " + path + " --db " + db + " --threads 1 --repeat 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out);
  int from_db = 0, defaults = 0;
  for (const auto& k : j["kernels"]) {
    if (k["schedule"] == "db") {
      ++from_db;
      EXPECT_EQ(k["workload"], "dense:B=1,I=64,O=3");
      EXPECT_EQ(k["strategy"], "parallel(@outermost)");
    }
    defaults += k["schedule"] == "default";
  }
  EXPECT_EQ(from_db, 1) << r.out;
  EXPECT_EQ(defaults, 1) << r.out;  // the conv
}

TEST(GraphRunModelCli, BadInputExitsTwoWithOneLine) {
  std::string path = write_model(small_model("LpNormalization"), "run_model_bad.onnx");
  testing::CliOutcome r = testing::run_cli("run-model " + path);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_EQ(r.out.rfind("tessera: error: ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("LpNormalization (node 'odd1')"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << r.out;

  testing::CliOutcome missing = testing::run_cli("run-model /nonexistent.onnx");
  EXPECT_EQ(missing.exit_code, 2) << missing.out;
  std::string good = write_model(small_model(), "run_model_good.onnx");
  testing::CliOutcome bad_npy = testing::run_cli("run-model " + good + " --input " + good);
  EXPECT_EQ(bad_npy.exit_code, 2) << bad_npy.out;
  EXPECT_NE(bad_npy.out.find("not a .npy file"), std::string::npos) << bad_npy.out;
}

// x -> Conv+Relu -> Conv+Relu (the same workload) -> Flatten -> Gemm: two tuning tasks, the
// convolution's of weight 2.
onnx::ModelProto repeated_conv_model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  add_input(g, "x", {1, 4, 6, 6});
  add_float(g, "w1", {4, 4, 3, 3}, 0.1f);
  add_float(g, "w2", {4, 4, 3, 3}, 0.05f);
  add_float(g, "fc", {3, 144}, 0.01f);
  std::string last = "x";
  for (int i = 1; i <= 2; ++i) {
    std::string c = "c" + std::to_string(i), r = "r" + std::to_string(i);
    add_ints(add_node(g, "Conv", "conv" + std::to_string(i), {last, "w" + std::to_string(i)}, c),
             "pads", {1, 1, 1, 1});
    add_node(g, "Relu", "relu" + std::to_string(i), {c}, r);
    last = r;
  }
  add_node(g, "Flatten", "flat", {last}, "f");
  onnx::NodeProto* gemm = add_node(g, "Gemm", "fc1", {"f", "fc"}, "y");
  onnx::AttributeProto* t = gemm->add_attribute();
  t->set_name("transB");
  t->set_type(onnx::AttributeProto::INT);
  t->set_i(1);
  g->add_output()->set_name("y");
  return m;
}

TEST(GraphCompileCli, ListsTheDistinctWorkloadsWithHowOftenTheyRun) {
  std::string path = write_model(repeated_conv_model(), "compile_list.onnx");
  testing::CliOutcome r = testing::run_cli("compile " + path + " --list-tasks");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out,
            "conv1 conv2d_bias_relu:N=1,C=4,H=6,W=6,O=4,K=3,S=1,P=1  # x2\n"
            "fc1 dense:B=1,I=144,O=3  # x1\n");
}

// compile tunes every distinct workload into the DB; run-model then runs each kernel under its
// best record and says so.
TEST(GraphCompileCli, TunesTheModelsWorkloadsAndRunModelUsesTheRecords) {
  std::string db = ::testing::TempDir() + "/compile_records.db";
  std::remove(db.c_str());
  std::string path = write_model(repeated_conv_model(), "compile_tune.onnx");
  testing::CliOutcome c = testing::run_cli(
      "compile " + path + " --trials 6 --batch 3 --retime 0 --threads 1 --db " + db + " --json");
  ASSERT_EQ(c.exit_code, 0) << c.out;
  EXPECT_NE(c.out.find("3 library operator steps, 2 distinct workloads"), std::string::npos)
      << c.out;
  EXPECT_NE(c.out.find("tune-all: 6/6 trials"), std::string::npos) << c.out;
  size_t json_start = c.out.find("\n{\n");
  ASSERT_NE(json_start, std::string::npos) << c.out;
  nlohmann::json j =
      nlohmann::json::parse(c.out.substr(json_start + 1, c.out.rfind('}') - json_start));
  ASSERT_EQ(j["tasks"].size(), 2u) << j.dump();
  EXPECT_EQ(j["tasks"][0]["workload"], "conv2d_bias_relu:N=1,C=4,H=6,W=6,O=4,K=3,S=1,P=1");
  EXPECT_EQ(j["tasks"][0]["weight"], 2);
  EXPECT_EQ(j["tasks"][0]["names"], nlohmann::json::array({"conv1"}));
  EXPECT_EQ(j["tasks"][1]["workload"], "dense:B=1,I=144,O=3");
  EXPECT_EQ(j["tasks"][1]["weight"], 1);

  testing::CliOutcome r =
      testing::run_cli("run-model " + path + " --db " + db + " --threads 1 --repeat 1 --check");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("2 tuned (records DB), 0 at the template's default"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("db       x2 conv2d_bias_relu:"), std::string::npos) << r.out;

  // The library from those records: with the in-model check each tuned kernel is profiled in
  // the model against its default, then a model with any tuned kernel left runs whole against
  // the untuned one (which wins is timing, so only the outcome is checked: a model that keeps
  // every default has no tuned kernel); without it, every workload with records runs them.
  std::string lib = ::testing::TempDir() + "/compile_tuned.so";
  testing::CliOutcome checked =
      testing::run_cli("compile " + path + " --trials 0 --threads 1 -o " + lib + " --db " + db);
  ASSERT_EQ(checked.exit_code, 0) << checked.out;
  EXPECT_NE(checked.out.find("compile: wrote " + lib), std::string::npos) << checked.out;
  const bool none_tuned = checked.out.find(" 0 tuned, ") != std::string::npos;
  EXPECT_TRUE(none_tuned || checked.out.find("of its untuned time") != std::string::npos)
      << checked.out;
  if (checked.out.find("keeps every default configuration") != std::string::npos) {
    EXPECT_TRUE(none_tuned) << checked.out;
  }
  testing::CliOutcome unchecked = testing::run_cli(
      "compile " + path + " --trials 0 --threads 1 --no-model-check -o " + lib + " --db " + db);
  ASSERT_EQ(unchecked.exit_code, 0) << unchecked.out;
  EXPECT_NE(unchecked.out.find("2 tuned, 0 at the default configuration, "), std::string::npos)
      << unchecked.out;
  EXPECT_EQ(unchecked.out.find("keeps the default"), std::string::npos) << unchecked.out;
  testing::CliOutcome ran = testing::run_cli("run-model " + lib + " --threads 1 --repeat 1");
  EXPECT_EQ(ran.exit_code, 0) << ran.out;
  std::remove(lib.c_str());
  std::remove(db.c_str());
}

TEST(GraphCompileCli, BadInputExitsTwoWithOneLine) {
  std::string db = ::testing::TempDir() + "/compile_never.db";
  std::string bad = write_model(small_model("LpNormalization"), "compile_bad.onnx");
  std::string good = write_model(small_model(), "compile_good.onnx");
  const std::pair<std::string, std::string> cases[] = {
      {"compile " + bad, "unsupported node: LpNormalization (node 'odd1')"},
      {"compile /nonexistent/model.onnx", "/nonexistent/model.onnx"},
      {"compile " + good + " --trials 0", "--trials 0 without -o does nothing"},
      {"compile " + good + " --trials 0 -o /nonexistent/dir/model.so",
       "cannot write /nonexistent/dir/model.so"},
      {"compile " + good + " --trials -1", "--trials: must be zero or more"},
      {"compile " + good + " --threads -1", "--threads: must be 0 (all cores) or more"},
      {"compile", "model is required"},
  };
  for (const auto& [args, message] : cases) {
    SCOPED_TRACE(args);
    testing::CliOutcome r = testing::run_cli(args + " --db " + db);
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_EQ(r.out.rfind("tessera: error: ", 0), 0u) << r.out;
    EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << r.out;
  }
  std::ifstream never(db);
  EXPECT_FALSE(never.good()) << "no DB is created on bad input";
}

// compile -o without tuning, then run-model on the library: default configurations, said so.
TEST(GraphCompileCli, TrialsZeroWritesALibraryThatRunModelRuns) {
  std::string good = write_model(small_model(), "compile_lib.onnx");
  std::string lib = ::testing::TempDir() + "/compile_lib.so";
  std::string db = ::testing::TempDir() + "/compile_lib_never.db";
  testing::CliOutcome c =
      testing::run_cli("compile " + good + " --trials 0 -o " + lib + " --db " + db);
  ASSERT_EQ(c.exit_code, 0) << c.out;
  EXPECT_NE(c.out.find("(no records DB)"), std::string::npos) << c.out;
  testing::CliOutcome r = testing::run_cli("run-model " + lib + " --threads 1 --repeat 1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("compiled without tuning records"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("compiled from " + good), std::string::npos) << r.out;
  testing::CliOutcome check = testing::run_cli("run-model " + lib + " --check");
  EXPECT_EQ(check.exit_code, 2) << check.out;
  EXPECT_NE(check.out.find("--check needs model.onnx"), std::string::npos) << check.out;
  testing::CliOutcome missing = testing::run_cli("run-model " + lib + ".missing.so");
  EXPECT_EQ(missing.exit_code, 2) << missing.out;
  EXPECT_NE(missing.out.find("cannot load"), std::string::npos) << missing.out;
  std::ifstream never(db);
  EXPECT_FALSE(never.good()) << "--trials 0 creates no DB";
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// No output lands on one of the command's inputs, a device, or a file of another kind; each
// refusal is one line with exit 2 and the file is as it was.
TEST(GraphCli, OutputsNeverReplaceInputsDevicesOrOtherKindsOfFile) {
  std::string model = write_model(small_model(), "outputs_model.onnx");
  const std::string before = file_bytes(model);
  std::string db = ::testing::TempDir() + "/outputs_records.db";
  std::remove(db.c_str());
  ASSERT_EQ(testing::run_cli("measure matmul:M=8,N=8,K=8 --repeat 1 --db " + db).exit_code, 0);
  const std::string db_before = file_bytes(db);
  const std::pair<std::string, std::string> cases[] = {
      {"compile " + model + " --trials 0 -o " + model, "over an input"},
      {"run-model " + model + " --repeat 1 --output " + model, "over an input"},
      {"run-model " + model + " --repeat 1 --input " + model + " --output " + model,
       "over an input"},
      {"run-model " + model + " --repeat 1 --output " + db, "holds a records database"},
      {"compile " + model + " --trials 0 -o " + db, "holds a records database"},
      {"compile " + model + " --trials 0 -o /dev/null", "not a regular file"},
      {"db export " + db + " --db " + db, "over an input"},
      {"db export " + model + " --db " + db, "refusing to overwrite"},
      {"tune matmul:M=8,N=8,K=8 --trials 1 --db :memory:", "names no file"},
      {"tune matmul:M=8,N=8,K=8 --trials 1 --db ''", "names no file"},
  };
  for (const auto& [args, message] : cases) {
    SCOPED_TRACE(args);
    testing::CliOutcome r = testing::run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_EQ(r.out.rfind("tessera: error: ", 0), 0u) << r.out;
    EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << r.out;
  }
  EXPECT_EQ(file_bytes(model), before);
  EXPECT_EQ(file_bytes(db), db_before);

  // A bare file name runs as written (dlopen would search the loader's path for it).
  std::string out = ::testing::TempDir() + "/outputs_y.npy";
  testing::CliOutcome ok = testing::run_cli("run-model " + model + " --repeat 1 --output " + out);
  ASSERT_EQ(ok.exit_code, 0) << ok.out;
  testing::CliOutcome again =
      testing::run_cli("run-model " + model + " --repeat 1 --output " + out);
  EXPECT_EQ(again.exit_code, 0) << "an earlier .npy output may be replaced: " << again.out;
  std::remove(out.c_str());
  std::remove(db.c_str());
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// torch's default exporter keeps the weights in `model.onnx.data` beside the model.
TEST(GraphOnnxImport, ReadsWeightsKeptInAnExternalDataFile) {
  onnx::ModelProto m = small_model();
  onnx::TensorProto* w = m.mutable_graph()->mutable_initializer(0);
  ASSERT_EQ(w->name(), "w");
  const std::string raw = w->raw_data();
  const std::string dir = ::testing::TempDir() + "/external_data";
  std::filesystem::create_directories(dir);
  {
    std::ofstream data(dir + "/weights.bin", std::ios::binary);
    data << std::string(16, 'x') << raw;
  }
  w->clear_raw_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto entry = [&](const std::string& key, const std::string& value) {
    onnx::StringStringEntryProto* e = w->add_external_data();
    e->set_key(key);
    e->set_value(value);
  };
  entry("location", "weights.bin");
  entry("offset", "16");
  entry("length", std::to_string(raw.size()));
  const std::string path = dir + "/model.onnx";
  {
    std::ofstream out(path, std::ios::binary);
    m.SerializeToOstream(&out);
  }
  graph::Graph g = graph::import_onnx(path);
  EXPECT_FLOAT_EQ(g.constants.at("w").data[1], 0.1f * -2);

  // A location outside the model's folder, or bytes past the file's end, are one-line errors.
  w->mutable_external_data(0)->set_value("../weights.bin");
  EXPECT_NE(error_of(m).find("leaves the model's folder"), std::string::npos) << error_of(m);
  {
    std::ofstream out(path, std::ios::binary);
    w->mutable_external_data(0)->set_value("weights.bin");
    w->mutable_external_data(2)->set_value("999999");
    m.SerializeToOstream(&out);
  }
  try {
    graph::import_onnx(path);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lie outside"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera
