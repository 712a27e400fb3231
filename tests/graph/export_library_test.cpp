// A model exported as one shared object and loaded through graph/compiled_model.h runs the same
// kernels as the in-process executor, in an arena whose reuse of buffers must not change results.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "graph/compiled_model.h"
#include "graph/executor.h"
#include "graph/passes.h"
#include "graph/reference.h"
#include "graph_builder.h"

namespace tessera {
namespace {

using graph::Graph;
using graph::HostTensor;
using testing::GraphBuilder;

// Residual blocks: the skip connection keeps a value alive across several steps, which the
// arena must not hand to the steps in between.
Graph residual_net(GraphBuilder& b) {
  std::string x = b.input({1, 3, 16, 16});
  std::string h = b.node("Relu", {b.batch_norm(b.conv(x, 3, 8, 3, 1, 1), 8)});
  for (int i = 0; i < 3; ++i) {
    std::string r = b.node("Relu", {b.conv(h, 8, 8, 3, 1, 1)});
    r = b.batch_norm(b.conv(r, 8, 8, 3, 1, 1, 1, false), 8);
    h = b.node("Relu", {b.node("Add", {r, h})});
  }
  h = b.node("Flatten", {b.node("GlobalAveragePool", {h})});
  return b.finish(b.node("Gemm", {h, b.random({10, 8}), b.random({10})}, {{"transB", int64_t{1}}}));
}

std::string library_path(const std::string& name) {
  return ::testing::TempDir() + "/" + name;
}

std::vector<float> as_floats(const HostTensor& t) {
  return {t.data.begin(), t.data.end()};
}

double max_relative_error(const std::vector<float>& got, const HostTensor& expected) {
  return testing::max_relative_error({expected.shape, {got.begin(), got.end()}, false}, expected);
}

TEST(ExportLibrary, CompiledModelMatchesTheReferenceAndTheExecutor) {
  GraphBuilder b(31);
  Graph g = residual_net(b);
  graph::run_default_passes(g);
  graph::Executor ex = graph::Executor::compile(g);
  std::string path = library_path("residual_net.so");
  graph::ExportOptions options;
  options.model = "residual_net.onnx";
  ex.export_library(path, options);

  CompiledModel model = CompiledModel::load(path);
  ASSERT_EQ(model.num_inputs(), 1u);
  ASSERT_EQ(model.num_outputs(), 1u);
  EXPECT_EQ(model.input_name(0), g.inputs[0]);
  EXPECT_EQ(model.input_shape(0), (std::vector<int64_t>{1, 3, 16, 16}));
  EXPECT_EQ(model.output_shape(0), (std::vector<int64_t>{1, 10}));

  for (int run = 0; run < 2; ++run) {  // a second input through the same buffers
    HostTensor x = b.random_tensor({1, 3, 16, 16});
    model.set_input(0, as_floats(x));
    model.run();
    HostTensor expected = graph::run_reference(g, {{g.inputs[0], x}}).at(0);
    std::vector<float> got = model.get_output(0);
    EXPECT_LT(max_relative_error(got, expected), 1e-4);

    ex.input(0).from_doubles(x.data);
    ex.run();
    EXPECT_LT(max_relative_error(got, ex.output(0)), 1e-6) << "same kernels, same results";
  }

  nlohmann::json d = nlohmann::json::parse(model.description());
  EXPECT_EQ(d["model"], "residual_net.onnx");
  EXPECT_EQ(d["kernels"].size(), ex.kernels().size());
  std::vector<std::string> schedules;
  for (const auto& k : d["kernels"]) schedules.push_back(k["schedule"]);
  EXPECT_NE(std::find(schedules.begin(), schedules.end(), "fixed"), schedules.end())
      << "the input's conversion to blocks";
  EXPECT_NE(std::find(schedules.begin(), schedules.end(), "default"), schedules.end());
  EXPECT_EQ(d["steps"], ex.steps());
}

TEST(ExportLibrary, TheArenaReusesMemoryOfDeadValues) {
  GraphBuilder b(32);
  Graph g = residual_net(b);
  graph::run_default_passes(g);
  graph::Executor ex = graph::Executor::compile(g);
  graph::Executor::MemoryPlan plan = ex.plan_memory();
  // Seven convolution outputs of 8 KB each, but only three are alive at once.
  EXPECT_GT(plan.separate_bytes, 0u);
  EXPECT_LT(plan.arena_bytes * 2, plan.separate_bytes);
  for (size_t offset : plan.offsets) EXPECT_EQ(offset % 64, 0u);
}

TEST(ExportLibrary, InstancesOfOneLibraryHaveTheirOwnBuffers) {
  GraphBuilder b(33);
  std::string x = b.input({2, 6});
  Graph g =
      b.finish(b.node("Relu", {b.node("Gemm", {x, b.random({4, 6})}, {{"transB", int64_t{1}}})}));
  graph::run_default_passes(g);
  std::string path = library_path("dense_relu.so");
  graph::Executor::compile(g).export_library(path);
  CompiledModel first = CompiledModel::load(path);
  CompiledModel second = CompiledModel::load(path);
  HostTensor a = b.random_tensor({2, 6}), c = b.random_tensor({2, 6});
  first.set_input(0, as_floats(a));
  second.set_input(0, as_floats(c));
  first.run();
  second.run();
  EXPECT_LT(max_relative_error(first.get_output(0), graph::run_reference(g, {{x, a}}).at(0)), 1e-5);
  EXPECT_LT(max_relative_error(second.get_output(0), graph::run_reference(g, {{x, c}}).at(0)),
            1e-5);
  EXPECT_THROW(first.set_input(0, std::vector<float>(11)), CompiledModelError);
  EXPECT_THROW(first.set_input("no_such_input", std::vector<float>(12)), CompiledModelError);
  EXPECT_THROW(first.get_output(1), CompiledModelError);
}

TEST(ExportLibrary, WhatIsNotAModelLibraryIsAClearError) {
  std::string text = library_path("not_a_library.so");
  std::ofstream(text) << "not an ELF file\n";
  EXPECT_THROW(CompiledModel::load(text), CompiledModelError);
  EXPECT_THROW(CompiledModel::load(library_path("missing.so")), CompiledModelError);
  try {
    // A real shared object without the model interface: libm.
    CompiledModel::load("libm.so.6");
    FAIL() << "expected an error";
  } catch (const CompiledModelError& e) {
    EXPECT_NE(std::string(e.what()).find("not a tessera model library"), std::string::npos)
        << e.what();
  }
}

// dlopen of a truncated library crashed the process (SIGBUS) and of a damaged one failed an
// assertion inside ld.so: the seal is checked first.
TEST(ExportLibrary, TruncatedOrDamagedLibrariesAreRefusedBeforeLoading) {
  GraphBuilder b(35);
  std::string x = b.input({1, 4});
  Graph g = b.finish(b.node("Relu", {x}));
  graph::run_default_passes(g);
  graph::Executor ex = graph::Executor::compile(g);
  std::string path = library_path("sealed.so");
  ex.export_library(path);
  EXPECT_NO_THROW(CompiledModel::load(path));
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto refused = [&](const std::string& name, const std::string& content, const char* why) {
    std::string copy = library_path(name);
    std::ofstream(copy, std::ios::binary) << content;
    try {
      CompiledModel::load(copy);
      ADD_FAILURE() << name << " loaded";
    } catch (const CompiledModelError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refused("truncated.so", bytes.substr(0, bytes.size() / 2), "has no seal");
  refused("short.so", bytes.substr(0, 10), "too short");
  std::string flipped = bytes;
  flipped[flipped.size() / 3] ^= 0x5a;
  refused("flipped.so", flipped, "checksum");
  refused("extended.so", bytes.substr(0, 100) + bytes.substr(bytes.size() - 24), "as long as");
}

TEST(ExportLibrary, RebuildingReplacesTheFileWhileALoadedCopyKeepsRunning) {
  GraphBuilder b(34);
  std::string x = b.input({1, 4});
  Graph g = b.finish(b.node("Relu", {x}));
  graph::run_default_passes(g);
  graph::Executor ex = graph::Executor::compile(g);
  std::string path = library_path("relu.so");
  ex.export_library(path);
  CompiledModel loaded = CompiledModel::load(path);
  ex.export_library(path);
  loaded.set_input(0, {-1, 2, -3, 4});
  loaded.run();
  EXPECT_EQ(loaded.get_output(0), (std::vector<float>{0, 2, 0, 4}));
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));

  std::string dir = library_path("no_such_dir");
  std::filesystem::remove_all(dir);
  try {
    ex.export_library(dir + "/model.so");
    FAIL() << "expected an error";
  } catch (const graph::KernelBuildError& e) {
    FAIL() << "a missing directory is bad input, not a compiler failure: " << e.what();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no_such_dir"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera
