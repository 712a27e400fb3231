// Math intrinsics end to end (interpreter, features, compiled code) and the softmax operator:
// its reference, its lowered program, and random configurations of its search space checked with
// the interpreter and compiled.
#include "ops/softmax.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "codegen/codegen_c.h"
#include "feature/loop_stats.h"
#include "lower/lower.h"
#include "ops/evaluate.h"
#include "ops/templates.h"
#include "runtime/module.h"
#include "runtime/ndarray.h"
#include "schedule/rules.h"
#include "schedule/strategy_parser.h"
#include "te/error.h"
#include "test_util.h"
#include "tir/parser.h"
#include "tir/printer.h"

namespace tessera {
namespace {

using Arrays = std::vector<std::vector<double>>;

// B[i] = f(A[i]) for every intrinsic, in float32 and float64.
const char* const kIntrinsics =
    R"(program intrinsics(A: float32[5], D: float64[5]) -> (B: float32[5, 5], E: float64[5, 5]) {
  for i in 0..5 {
    B[0, i] = exp(A[i])
    B[1, i] = log(A[i])
    B[2, i] = sqrt(A[i])
    B[3, i] = tanh(A[i])
    B[4, i] = sigmoid(A[i])
    E[0, i] = exp(D[i])
    E[1, i] = log(D[i])
    E[2, i] = sqrt(D[i])
    E[3, i] = tanh(D[i])
    E[4, i] = sigmoid(D[i])
  }
}
)";

const double kInputs[5] = {0.25, 1.0, 2.5, 7.0, 42.0};

double expected_intrinsic(int f, double x) {
  switch (f) {
    case 0:
      return std::exp(x);
    case 1:
      return std::log(x);
    case 2:
      return std::sqrt(x);
    case 3:
      return std::tanh(x);
    default:
      return 1.0 / (1.0 + std::exp(-x));
  }
}

TEST(Intrinsics, InterpreterComputesEachFunctionInItsType) {
  Program p = parse_program(kIntrinsics);
  EXPECT_EQ(print_program(p), kIntrinsics);
  Arrays args{std::vector<double>(kInputs, kInputs + 5), std::vector<double>(kInputs, kInputs + 5),
              std::vector<double>(25, 0.0), std::vector<double>(25, 0.0)};
  interpret(p, args);
  for (int f = 0; f < 5; ++f) {
    for (int i = 0; i < 5; ++i) {
      double x = kInputs[i];
      EXPECT_EQ(args[3][f * 5 + i], expected_intrinsic(f, x)) << f << " " << x;
      EXPECT_EQ(args[2][f * 5 + i], static_cast<float>(expected_intrinsic(f, x))) << f << " " << x;
    }
  }
  // exp(100) overflows float32 but not float64.
  Arrays big{
      {100, 1, 1, 1, 1}, {100, 1, 1, 1, 1}, std::vector<double>(25), std::vector<double>(25)};
  interpret(p, big);
  EXPECT_TRUE(std::isinf(big[2][0]));
  EXPECT_NEAR(big[3][0], 2.6881171418161356e43, 1e30);
}

TEST(Intrinsics, CompiledKernelMatchesTheInterpreter) {
  Program p = parse_program(kIntrinsics);
  std::string code = codegen_c(p);
  for (const char* piece :
       {"expf(A[i])", "logf(A[i])", "sqrtf(A[i])", "tanhf(A[i])", "tsr_sigmoid_f32(A[i])",
        "exp(D[i])", "log(D[i])", "sqrt(D[i])", "tanh(D[i])", "tsr_sigmoid_f64(D[i])"}) {
    EXPECT_NE(code.find(piece), std::string::npos) << piece << " not in\n" << code;
  }
  CompileOptions strict;
  strict.flags.insert(strict.flags.end(), {"-Wall", "-Wextra", "-Werror"});
  Module mod = Module::compile(code, strict);
  NDArray a = NDArray::empty({5}, DType::kFloat32), d = NDArray::empty({5}, DType::kFloat64);
  a.from_doubles(std::vector<double>(kInputs, kInputs + 5));
  d.from_doubles(std::vector<double>(kInputs, kInputs + 5));
  NDArray b = NDArray::empty({5, 5}, DType::kFloat32), e = NDArray::empty({5, 5}, DType::kFloat64);
  mod.run({&a, &d, &b, &e});
  Arrays args{a.to_doubles(), d.to_doubles(), std::vector<double>(25), std::vector<double>(25)};
  interpret(p, args);
  for (size_t x = 0; x < 25; ++x) {
    // libm's float functions are within a few ulp of the correctly rounded value.
    EXPECT_NEAR(b.get(x), args[2][x], 4e-7 * std::abs(args[2][x])) << x;
    EXPECT_NEAR(e.get(x), args[3][x], 1e-15 * std::abs(args[3][x])) << x;
  }
}

TEST(Intrinsics, FeaturesCountCallsAsOtherFloatOps) {
  Program p = parse_program(
      "program f(A: float32[8]) -> (B: float32[8]) {\n"
      "  for i in 0..8 {\n    B[i] = exp(A[i])*2.0f\n  }\n}\n");
  ProgramStats s = analyze_loops(p);
  EXPECT_EQ(s.total_ops.float_other, 8);
  EXPECT_EQ(s.total_ops.float_mul, 8);
  EXPECT_EQ(s.total_ops.float_add, 0);
}

OpInstance softmax_op(int64_t m, int64_t n) {
  return build_softmax(parse_workload(fmt::format("softmax:M={},N={}", m, n)));
}

TEST(Softmax, ReferenceOnAHandCase) {
  OpInstance op = softmax_op(2, 3);
  Arrays a{{1, 2, 3, 0, 0, 0}, std::vector<double>(6)};
  op.reference(a);
  double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  for (int j = 0; j < 3; ++j) {
    EXPECT_NEAR(a[1][j], std::exp(j + 1.0) / z, 1e-15);
    EXPECT_NEAR(a[1][3 + j], 1.0 / 3.0, 1e-15);
  }
  // Shifting a row does not change its softmax, even where exp(x) overflows a float.
  Arrays shifted{{101, 102, 103, 1000, 1000, 1000}, std::vector<double>(6)};
  op.reference(shifted);
  for (int j = 0; j < 6; ++j) EXPECT_NEAR(shifted[1][j], a[1][j], 1e-15);
  EXPECT_EQ(op.args.size(), 2u);
  EXPECT_EQ(op.flops, 5.0 * 6);
  EXPECT_EQ(op.reduction_length, 3);
}

TEST(Softmax, RowsSumToOne) {
  OpInstance op = softmax_op(7, 19);
  Arrays a = testing::random_args(op.program, 3);
  op.reference(a);
  for (int i = 0; i < 7; ++i) {
    double total = 0;
    for (int j = 0; j < 19; ++j) {
      EXPECT_GT(a[1][i * 19 + j], 0);
      total += a[1][i * 19 + j];
    }
    EXPECT_NEAR(total, 1.0, 1e-12);
  }
  EXPECT_THROW(softmax_op(0, 4), Error);
  EXPECT_THROW(build_softmax(parse_workload("softmax:M=4")), Error);
  Tensor ints = placeholder({4, 4}, DType::kInt32, "x");
  EXPECT_THROW(softmax_rows(ints), Error);
}

TEST(Softmax, PlainProgramHasFourStagesAndMatches) {
  OpInstance op = softmax_op(5, 12);
  std::string text = print_program(op.program);
  for (const char* piece :
       {"alloc row_max: float32[5]", "alloc row_exp: float32[5, 12]", "alloc exp_sum: float32[5]",
        "max(row_max[row_max.i], x[row_max.i, row_max.k])",
        "exp(x[row_exp.i, row_exp.j] - row_max[row_exp.i])", "row_exp[exp_sum.i, exp_sum.k]",
        "row_exp[softmax.i, softmax.j]*(1.0f/exp_sum[softmax.i])"}) {
    EXPECT_NE(text.find(piece), std::string::npos) << piece << " not in\n" << text;
  }
  EXPECT_TRUE(testing::interpreter_matches_reference(op, op.program, 5)) << text;
  EvaluateParams check_only;
  check_only.time = false;
  Evaluation ev = evaluate(op, op.program, check_only);
  EXPECT_TRUE(ev.correct) << ev.mismatch << "\n" << ev.code;
}

// Runs the compiled program on inputs in [lo, hi] and compares with the reference.
::testing::AssertionResult compiled_matches(const OpInstance& op, const Program& p, double lo,
                                            double hi, uint64_t seed) {
  Module mod = Module::compile(codegen_c(p));
  NDArray x = NDArray::empty(p.inputs[0]->shape, DType::kFloat32);
  x.fill_random(seed, lo, hi);
  NDArray y = NDArray::empty(p.outputs[0]->shape, DType::kFloat32);
  mod.run({&x, &y});
  Arrays ref{x.to_doubles(), std::vector<double>(y.num_elements())};
  op.reference(ref);
  NDArray expected = NDArray::empty(y.shape(), DType::kFloat32);
  expected.from_doubles(ref[1]);
  CompareResult r = compare(y, expected, default_tolerance(DType::kFloat32, op.reduction_length));
  if (r.ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << r.message;
}

TEST(Softmax, MaxSubtractionKeepsLargeInputsFinite) {
  OpInstance op = softmax_op(6, 40);
  EXPECT_TRUE(compiled_matches(op, op.program, 90, 110, 7));
  // The same without the subtraction overflows: exp(100) is inf in float32, inf/inf is NaN.
  Tensor x = placeholder({6, 40}, DType::kFloat32, "x");
  IterVar k = reduce_axis(40, "k");
  Tensor total = compute({6}, [&](Var i) { return sum(exp(x(i, k.var)), {k}); }, "total", {"i"});
  Tensor naive =
      compute({6, 40}, [&](Var i, Var j) { return exp(x(i, j)) / total(i); }, "naive", {"i", "j"});
  EXPECT_FALSE(compiled_matches(op, lower("naive", {x, naive}), 90, 110, 7));
  EXPECT_TRUE(compiled_matches(op, lower("naive", {x, naive}), -1, 1, 7));
}

// Scores far below a row's maximum (a mask's -100) give probabilities of exactly 0, never
// denormals (which slow every product with them by two orders of magnitude), in the plain program
// and in the default configuration's vector code.
TEST(Softmax, ProbabilitiesBelowTheNormalFloatsAreZero) {
  Workload w = parse_workload("softmax:M=4,N=48");
  OpInstance op = build_softmax(w);
  ConfigSpace space = softmax_space(w);
  RewriteResult<Program> tuned = space.instantiate(default_config(space, w, 2))(op.program);
  ASSERT_TRUE(tuned);
  for (const Program* p : {static_cast<const Program*>(&op.program), &tuned.program()}) {
    Module mod = Module::compile(codegen_c(*p));
    NDArray x = NDArray::empty({4, 48}, DType::kFloat32);
    x.fill_random(3, -120, -86);
    for (int64_t i = 0; i < 4; ++i) x.set(i * 48 + 5, 0.0);  // the row's maximum
    NDArray y = NDArray::empty({4, 48}, DType::kFloat32);
    mod.run({&x, &y});
    int zeros = 0;
    for (size_t i = 0; i < y.num_elements(); ++i) {
      const double v = y.get(i), shifted = x.get(i);
      EXPECT_TRUE(v == 0.0 || std::fpclassify(static_cast<float>(v)) == FP_NORMAL)
          << i << ": " << v;
      if (shifted < -87.34) {
        EXPECT_EQ(v, 0.0) << i;
        ++zeros;
      } else {
        EXPECT_NEAR(v, std::exp(shifted) / std::exp(0.0), 1e-6 * std::exp(shifted) + 1e-44) << i;
      }
    }
    EXPECT_GT(zeros, 100);
  }
}

TEST(Softmax, EveryKnobOnApplies) {
  Workload w = parse_workload("softmax:M=12,N=48");
  OpInstance op = build_softmax(w);
  ConfigSpace space = softmax_space(w);
  // The last value of every knob: 8-row tiles, vector_j=16, row stages vectorized across rows,
  // unrolled column loops, parallel rows, row_exp stored; the stages in nests of their own.
  Config all_on;
  for (const Knob& k : space.knobs())
    all_on.choice.push_back(k.name == "row_stages" ? 1
                            : k.name == "fuse"     ? 0
                                                   : static_cast<int>(k.values.size()) - 1);
  ProgramStrategy s = space.instantiate(all_on);
  RewriteResult<Program> r = s(op.program);
  ASSERT_TRUE(r) << r.message() << "\n" << s.text();
  std::string text = print_program(r.program());
  for (const char* piece :
       {"parallel for softmax.i.outer in 0..2", "vectorized for softmax.j.inner in 0..16",
        "parallel for row_exp.i in 0..12", "vectorized for row_exp.j.inner in 0..16",
        "parallel for row_max.i.outer in 0..2", "parallel for exp_sum.i.outer in 0..2",
        "parallel for row_max.i.init", "parallel for exp_sum.i.init",
        "unrolled for row_max.k.inner in 0..4", "unrolled for exp_sum.k.inner in 0..4",
        "vectorized for row_max.i.inner in 0..8", "vectorized for exp_sum.i.inner in 0..8"}) {
    EXPECT_NE(text.find(piece), std::string::npos) << piece << " not in\n" << text;
  }
  EXPECT_TRUE(testing::interpreter_matches_reference(op, r.program(), 2)) << text;
  std::string code = codegen_c(r.program());
  // exp on whole vectors, not lane by lane through libm
  EXPECT_NE(code.find("__builtin_convertvector(exp_n"), std::string::npos) << code;
  EXPECT_EQ(code.find("expf(exp_arg"), std::string::npos) << code;
  EXPECT_NE(code.find("tsr_f32x16"), std::string::npos) << code;
  EXPECT_TRUE(compiled_matches(op, r.program(), 90, 110, 3)) << code;
  EXPECT_TRUE(compiled_matches(op, r.program(), -5, 5, 4)) << code;
  // The row stages vectorized along the row instead, through rfactor.
  Config rfactored = all_on;
  for (size_t i = 0; i < space.knobs().size(); ++i) {
    if (space.knobs()[i].name == "row_stages") rfactored.choice[i] = 2;
  }
  RewriteResult<Program> rf = space.instantiate(rfactored)(op.program);
  ASSERT_TRUE(rf) << rf.message();
  std::string rf_text = print_program(rf.program());
  for (const char* piece :
       {"vectorized for row_max.k.inner in 0..16", "vectorized for exp_sum.k.inner in 0..16",
        "parallel for exp_sum.rf.0", "parallel for row_max.i in"}) {
    EXPECT_NE(rf_text.find(piece), std::string::npos) << piece << " not in\n" << rf_text;
  }
  EXPECT_TRUE(compiled_matches(op, rf.program(), -5, 5, 5)) << rf_text;
  // row_exp inlined: exp is computed in both readers and no M x N buffer is left.
  Config inlined = rfactored;
  for (size_t i = 0; i < space.knobs().size(); ++i) {
    if (space.knobs()[i].name == "exp") inlined.choice[i] = 0;
  }
  RewriteResult<Program> in = space.instantiate(inlined)(op.program);
  ASSERT_TRUE(in) << in.message();
  std::string in_text = print_program(in.program());
  EXPECT_EQ(in_text.find("row_exp"), std::string::npos) << in_text;
  EXPECT_NE(in_text.find("exp(x[exp_sum.i, exp_sum.k.outer*16 + exp_sum.k.inner]"),
            std::string::npos)
      << in_text;
  EXPECT_TRUE(compiled_matches(op, in.program(), 95, 105, 6)) << in_text;
  // Fused: every stage computed at the row tile, in producer order, one parallel loop.
  Config fused = rfactored;
  for (size_t i = 0; i < space.knobs().size(); ++i) {
    if (space.knobs()[i].name == "fuse") fused.choice[i] = 1;
    if (space.knobs()[i].name == "tile_row") fused.choice[i] = 1;  // 2 rows per tile
  }
  RewriteResult<Program> fu = space.instantiate(fused)(op.program);
  ASSERT_TRUE(fu) << fu.message();
  std::string fu_text = print_program(fu.program());
  size_t at = fu_text.find("parallel for softmax.i.outer in 0..6 {");
  ASSERT_NE(at, std::string::npos) << fu_text;
  size_t last = at;
  for (const char* piece : {"alloc row_max: float32[2]", "alloc row_exp: float32[2, 48]",
                            "alloc exp_sum: float32[2]", "vectorized for softmax.j.inner"}) {
    size_t where = fu_text.find(piece);
    ASSERT_NE(where, std::string::npos) << piece << " not in\n" << fu_text;
    EXPECT_GT(where, last) << piece << " not after the previous piece in\n" << fu_text;
    last = where;
  }
  EXPECT_EQ(fu_text.find("parallel", at + 1), std::string::npos) << fu_text;
  EXPECT_TRUE(compiled_matches(op, fu.program(), -5, 5, 7)) << fu_text;
  EXPECT_TRUE(compiled_matches(op, fu.program(), 95, 105, 8)) << fu_text;
}

TEST(Softmax, RandomConfigurationsPrintParseAndCompute) {
  for (const char* text : {"softmax:M=12,N=48", "softmax:M=7,N=30"}) {
    SCOPED_TRACE(text);
    Workload w = parse_workload(text);
    OpInstance op = build_softmax(w);
    ConfigSpace space = softmax_space(w);
    EXPECT_EQ(space.name(), text);
    std::mt19937_64 rng(17);
    int applied = 0, compiled = 0;
    for (int i = 0; i < 40; ++i) {
      Config c = space.sample(rng);
      ProgramStrategy s = space.instantiate(c);
      EXPECT_EQ(parse_strategy(s.text()).text(), s.text());
      RewriteResult<Program> r = s(op.program);
      if (!r) {
        ADD_FAILURE() << "does not apply: " << space.describe(c) << "\n" << r.message();
        continue;
      }
      ++applied;
      EXPECT_TRUE(testing::interpreter_matches_reference(op, r.program(), i))
          << space.describe(c) << "\n"
          << s.text();
      if (i % 5 == 0) {  // compiling is slow; every fifth configuration, large inputs included
        ++compiled;
        EXPECT_TRUE(compiled_matches(op, r.program(), -3, 3, i)) << space.describe(c);
        EXPECT_TRUE(compiled_matches(op, r.program(), 95, 105, i)) << space.describe(c);
      }
    }
    EXPECT_EQ(applied, 40);
    EXPECT_GE(compiled, 8);
  }
}

}  // namespace
}  // namespace tessera
