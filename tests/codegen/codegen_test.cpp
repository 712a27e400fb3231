// End-to-end tests of C code generation: hand-built loop programs are compiled, run on random
// inputs and compared with naive C++ loops; a few tests check the generated text or assembly.

#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <sstream>

#include "codegen/codegen_c.h"
#include "runtime/module.h"
#include "runtime/ndarray.h"
#include "te/error.h"

namespace tessera {
namespace {

constexpr DType kF32 = DType::kFloat32;
constexpr DType kF64 = DType::kFloat64;
constexpr DType kI32 = DType::kInt32;
constexpr ForKind kSerial = ForKind::kSerial;
constexpr ForKind kParallel = ForKind::kParallel;
constexpr ForKind kVectorized = ForKind::kVectorized;

Program make_program(std::string name, std::vector<Buffer> inputs, std::vector<Buffer> outputs,
                     Stmt body) {
  Program p;
  p.name = std::move(name);
  p.inputs = std::move(inputs);
  p.outputs = std::move(outputs);
  p.body = std::move(body);
  return p;
}

// Every generated kernel must compile without warnings.
Module compile_strict(const std::string& code) {
  CompileOptions strict;
  strict.flags.insert(strict.flags.end(), {"-Wall", "-Wextra", "-Werror"});
  return Module::compile(code, strict);
}

NDArray random_array(const Buffer& b, uint64_t seed, double lo = -1, double hi = 1) {
  NDArray a = NDArray::empty(b->shape, b->dtype);
  a.fill_random(seed, lo, hi);
  return a;
}

// C = A * B with an init nest and an update nest, all loops serial.
Program naive_matmul(int64_t m, int64_t n, int64_t k) {
  Buffer a = make_buffer("A", kF32, {m, k});
  Buffer b = make_buffer("B", kF32, {k, n});
  Buffer c = make_buffer("C", kF32, {m, n});
  Var i("i"), j("j"), r("k");
  Stmt init = make_for(i, 0, m, kSerial, make_for(j, 0, n, kSerial, make_store(c, {i, j}, 0.0)));
  Expr update = make_load(c, {i, j}) + make_load(a, {i, r}) * make_load(b, {r, j});
  Stmt loops = make_for(
      i, 0, m, kSerial,
      make_for(j, 0, n, kSerial, make_for(r, 0, k, kSerial, make_store(c, {i, j}, update))));
  return make_program("matmul", {a, b}, {c}, make_seq({init, loops}));
}

// The same with j split into j.outer * 16 + j.inner, i parallel and j.inner of kind `inner`:
//   for i (parallel): for k: for j.outer: for j.inner (inner): C[i, j] += A[i, k] * B[k, j]
Program split_matmul(int64_t m, int64_t n, int64_t k, ForKind inner, ForKind outer = kParallel) {
  Buffer a = make_buffer("A", kF32, {m, k});
  Buffer b = make_buffer("B", kF32, {k, n});
  Buffer c = make_buffer("C", kF32, {m, n});
  Var i("i"), jo("j.outer"), ji("j.inner"), r("k");
  Expr j = jo * 16 + ji;
  Stmt init = make_for(
      i, 0, m, outer,
      make_for(jo, 0, n / 16, kSerial, make_for(ji, 0, 16, inner, make_store(c, {i, j}, 0.0))));
  Expr update = make_load(c, {i, j}) + make_load(a, {i, r}) * make_load(b, {r, j});
  Stmt loops =
      make_for(i, 0, m, outer,
               make_for(r, 0, k, kSerial,
                        make_for(jo, 0, n / 16, kSerial,
                                 make_for(ji, 0, 16, inner, make_store(c, {i, j}, update)))));
  return make_program("matmul_split", {a, b}, {c}, make_seq({init, loops}));
}

NDArray reference_matmul(const NDArray& a, const NDArray& b) {
  const int64_t m = a.shape()[0], k = a.shape()[1], n = b.shape()[1];
  auto av = a.to_doubles(), bv = b.to_doubles();
  std::vector<double> cv(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t r = 0; r < k; ++r) cv[i * n + j] += av[i * k + r] * bv[r * n + j];
  NDArray c = NDArray::empty({m, n}, a.dtype());
  c.from_doubles(cv);
  return c;
}

void expect_close(const NDArray& actual, const NDArray& expected, int64_t reduction_length = 1) {
  CompareResult r =
      compare(actual, expected, default_tolerance(expected.dtype(), reduction_length));
  EXPECT_TRUE(r.ok) << r.message;
}

void check_matmul(const Program& p) {
  Module mod = compile_strict(codegen_c(p));
  NDArray a = random_array(p.inputs[0], 1), b = random_array(p.inputs[1], 2);
  NDArray c = NDArray::empty(p.outputs[0]->shape, kF32);
  c.fill(123);  // the init nest must overwrite it
  mod.run({&a, &b, &c});
  expect_close(c, reference_matmul(a, b), a.shape()[1]);
}

bool has_vector_fma(const std::string& assembly) {
  static const std::regex fma(R"(vfmadd[0-9a-z]*ps\s+.*%(zmm|ymm))");
  std::istringstream lines(assembly);
  for (std::string line; std::getline(lines, line);) {
    if (std::regex_search(line, fma)) return true;
  }
  return false;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

TEST(CodegenC, NaiveMatmulMatchesReference) {
  check_matmul(naive_matmul(33, 17, 19));
}

TEST(CodegenC, SplitVectorizedParallelMatmulMatchesReference) {
  Program p = split_matmul(33, 64, 19, kVectorized);
  std::string code = codegen_c(p);
  EXPECT_NE(code.find("typedef float tsr_f32x16 __attribute__((vector_size(64)));"),
            std::string::npos)
      << code;
  EXPECT_EQ(count(code, "#pragma omp parallel for schedule(static)"), 2u) << code;
  EXPECT_NE(code.find("__builtin_memcpy(&B_vec, &B[k * 64 + j_outer * 16 + j_inner]"),
            std::string::npos)
      << code;
  EXPECT_NE(code.find("C_vec + A[i * 19 + k] * B_vec"), std::string::npos) << code;
  EXPECT_EQ(code.find("omp simd"), std::string::npos) << code;
  check_matmul(p);
}

TEST(CodegenC, VectorizedMatmulAssemblyHasVectorFma) {
  if (!__builtin_cpu_supports("fma") || !__builtin_cpu_supports("avx2")) {
    GTEST_SKIP() << "this machine has no FMA/AVX2";
  }
  std::string vectorized = compile_to_assembly(codegen_c(split_matmul(33, 64, 19, kVectorized)));
  EXPECT_TRUE(has_vector_fma(vectorized));
  // The check can fail: serial loops without the vectorizer only get scalar (ss) FMAs.
  CompileOptions scalar;
  scalar.flags = {"-O3",   "-fno-tree-vectorize", "-march=native", "-fopenmp", "-ffp-contract=fast",
                  "-fPIC", "-std=gnu11"};
  std::string serial = compile_to_assembly(codegen_c(split_matmul(33, 64, 19, kSerial)), scalar);
  EXPECT_FALSE(has_vector_fma(serial));
  EXPECT_NE(serial.find("vfmadd"), std::string::npos);
}

TEST(CodegenC, ElementwiseAdd3D) {
  Buffer a = make_buffer("A", kF32, {3, 5, 8});
  Buffer b = make_buffer("B", kF32, {3, 5, 8});
  Buffer c = make_buffer("C", kF32, {3, 5, 8});
  for (ForKind inner : {kSerial, kVectorized}) {
    Var i("i"), j("j"), k("k");
    Stmt body = make_store(c, {i, j, k}, make_load(a, {i, j, k}) + make_load(b, {i, j, k}));
    Program p = make_program(
        "add3d", {a, b}, {c},
        make_for(i, 0, 3, kParallel, make_for(j, 0, 5, kSerial, make_for(k, 0, 8, inner, body))));
    std::string code = codegen_c(p);
    EXPECT_NE(code.find("A[i * 40 + j * 8 + k]"), std::string::npos) << code;
    Module mod = compile_strict(code);
    NDArray av = random_array(a, 3), bv = random_array(b, 4), cv = NDArray::empty(c->shape, kF32);
    mod.run({&av, &bv, &cv});
    NDArray expected = NDArray::empty(c->shape, kF32);
    for (size_t x = 0; x < 120; ++x) expected.set(x, av.get(x) + bv.get(x));
    CompareResult r = compare(cv, expected, 0, 0);  // one float add: exact
    EXPECT_TRUE(r.ok) << r.message;
  }
}

TEST(CodegenC, VectorizedLoopOutsideTheVectorPathUsesOmpSimd) {
  // Extent 7 is not a power of two; min/max cannot be vector extensions in C.
  Buffer a = make_buffer("A", kF32, {4, 7});
  Buffer b = make_buffer("B", kF32, {4, 7});
  Var i("i"), j("j");
  Expr v = make_load(a, {i, j});
  Program p = make_program(
      "clamp", {a}, {b},
      make_for(i, 0, 4, kSerial,
               make_for(j, 0, 7, kVectorized, make_store(b, {i, j}, min(max(v, -0.5), 0.5)))));
  std::string code = codegen_c(p);
  EXPECT_NE(code.find("#pragma omp simd"), std::string::npos) << code;
  EXPECT_NE(code.find("tsr_min_f32(tsr_max_f32(A[i * 7 + j], -0.5f), 0.5f)"), std::string::npos)
      << code;
  Module mod = compile_strict(code);
  NDArray av = random_array(a, 5), bv = NDArray::empty(b->shape, kF32);
  mod.run({&av, &bv});
  for (size_t x = 0; x < 28; ++x) {
    float e = static_cast<float>(av.get(x));
    e = e > -0.5f ? e : -0.5f;
    e = e < 0.5f ? e : 0.5f;
    EXPECT_EQ(bv.get(x), e) << x;
  }
}

// min and max on whole vectors select as the scalar helpers do (`a < b ? a : b`), so a NaN in
// either operand gives the second; int32 lanes too. A scalar operand is broadcast.
TEST(CodegenC, VectorMinMaxSelectAsTheScalarHelpers) {
  Buffer a = make_buffer("A", kF32, {2, 16});
  Buffer b = make_buffer("B", kF32, {2, 16});
  Buffer c = make_buffer("C", kF32, {2, 16});
  Buffer ia = make_buffer("IA", DType::kInt32, {2, 16});
  Buffer ic = make_buffer("IC", DType::kInt32, {2, 16});
  Var i("i"), j("j");
  Expr x = make_load(a, {i, j}), y = make_load(b, {i, j}), k = make_load(ia, {i, j});
  Program p = make_program(
      "minmax", {a, b, ia}, {c, ic},
      make_for(i, 0, 2, kSerial,
               make_for(j, 0, 16, kVectorized,
                        make_seq({make_store(c, {i, j}, max(min(x, y), 0.25) + min(y, x)),
                                  make_store(ic, {i, j}, max(k, 3) - min(k, j))}))));
  std::string code = codegen_c(p);
  EXPECT_NE(code.find("tsr_f32x16"), std::string::npos) << code;
  EXPECT_EQ(code.find("#pragma omp simd"), std::string::npos) << code;
  Module mod = compile_strict(code);
  NDArray av = random_array(a, 11), bv = random_array(b, 12), iav = random_array(ia, 13, -9, 9);
  av.set(3, std::nan(""));
  bv.set(5, std::nan(""));
  av.set(7, 0.5);
  bv.set(7, 0.5);
  NDArray cv = NDArray::empty(c->shape, kF32), icv = NDArray::empty(ic->shape, DType::kInt32);
  mod.run({&av, &bv, &iav, &cv, &icv});
  auto fmin = [](float p, float q) { return p < q ? p : q; };
  auto fmax = [](float p, float q) { return p > q ? p : q; };
  for (int64_t n = 0; n < 32; ++n) {
    float p = static_cast<float>(av.get(n)), q = static_cast<float>(bv.get(n));
    float want = fmax(fmin(p, q), 0.25f) + fmin(q, p);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(cv.get(n))) << n;
    } else {
      EXPECT_EQ(cv.get(n), want) << n;
    }
    int64_t kv = static_cast<int64_t>(iav.get(n)), jv = n % 16;
    EXPECT_EQ(icv.get(n), std::max<int64_t>(kv, 3) - std::min(kv, jv)) << n;
  }
}

// A select whose condition does not depend on the lane (zero padding inlined into reads along
// channel lanes) stays on the vector path: a scalar branch between two vectors, the load inside
// the branch that needs it, so that row -1 is never read.
TEST(CodegenC, LaneInvariantSelectIsABranchBetweenVectors) {
  Buffer a = make_buffer("A", kF32, {3, 16});
  Buffer b = make_buffer("B", kF32, {4, 16});
  Var i("i"), j("j");
  Expr shifted = make_select(i >= 1 && i < 4, make_load(a, {i - 1, j}), make_float(0.0, kF32));
  Program p =
      make_program("shift_rows", {a}, {b},
                   make_for(i, 0, 4, kSerial,
                            make_for(j, 0, 16, kVectorized, make_store(b, {i, j}, shifted * 2.0))));
  std::string code = codegen_c(p);
  EXPECT_EQ(code.find("#pragma omp simd"), std::string::npos) << code;
  size_t branch = code.find("if (i >= 1");
  ASSERT_NE(branch, std::string::npos) << code;
  EXPECT_GT(code.find("__builtin_memcpy(&A_vec"), branch) << code;
  Module mod = compile_strict(code);
  NDArray av = random_array(a, 21), bv = NDArray::empty(b->shape, kF32);
  mod.run({&av, &bv});
  for (int64_t n = 0; n < 64; ++n) {
    double want = n < 16 ? 0.0 : 2.0 * static_cast<float>(av.get(n - 16));
    EXPECT_EQ(bv.get(n), want) << n;
  }
}

// A select whose condition tests the loaded values (LeakyRelu, with an And and a Not joining the
// comparisons) blends both sides through the condition's lane mask on whole vectors; one whose
// side loads what its condition does not (a bounds guard of the lane's index) stays on the
// `#pragma omp simd` path, so that no lane reads past the guard.
TEST(CodegenC, ValueTestingSelectBlendsWholeVectors) {
  Buffer a = make_buffer("A", kF32, {2, 16});
  Buffer b = make_buffer("B", kF32, {2, 16});
  Var i("i"), j("j");
  Expr x = make_load(a, {i, j});
  Expr cond = x < 0.0 && !(x < -0.75);
  Program p = make_program(
      "leaky", {a}, {b},
      make_for(i, 0, 2, kSerial,
               make_for(j, 0, 16, kVectorized,
                        make_store(b, {i, j}, make_select(cond, x * 0.125, x + 1.0)))));
  std::string code = codegen_c(p);
  EXPECT_EQ(code.find("#pragma omp simd"), std::string::npos) << code;
  EXPECT_NE(code.find("blend_vec"), std::string::npos) << code;
  Module mod = compile_strict(code);
  NDArray av = random_array(a, 31), bv = NDArray::empty(b->shape, kF32);
  mod.run({&av, &bv});
  for (int64_t n = 0; n < 32; ++n) {
    float v = static_cast<float>(av.get(n));
    float want = v < 0.0f && !(v < -0.75f) ? v * 0.125f : v + 1.0f;
    EXPECT_EQ(bv.get(n), want) << n;
  }

  // Row j + 1 exists only below the last lane: the guard must keep the last lane from it.
  Buffer c = make_buffer("C", kF32, {17});
  Buffer d = make_buffer("D", kF32, {16});
  Expr guarded = make_select(j < 15, make_load(c, {j + 1}), make_float(0.0, kF32));
  Program q =
      make_program("next", {c}, {d}, make_for(j, 0, 16, kVectorized, make_store(d, {j}, guarded)));
  std::string guarded_code = codegen_c(q);
  EXPECT_EQ(guarded_code.find("blend_vec"), std::string::npos) << guarded_code;
}

// A split's tail: the guard is tested on the first and last lane, whole vectors run where both
// pass, and the tail runs a masked copy of the vector block: only the lanes that pass load and
// store (AVX-512 masked moves, AVX2 ones in 8-lane halves, or lane by lane), exp still on whole
// vectors. A
// guard that does not hold on an interval of the lanes (`!=`) keeps the lane-by-lane loop. The
// rows are longer than the guard lets through, so a store from a lane past it shows.
TEST(CodegenC, GuardedVectorLoopRunsWholeVectorsAndAMaskedTail) {
  constexpr int kN = 37, kRow = 48;
  Buffer a = make_buffer("A", kF32, {3, kRow});
  Buffer b = make_buffer("B", kF32, {3, kRow});
  Var i("i"), jo("jo"), ji("ji");
  Expr j = jo * 16 + ji;
  auto program = [&](Expr guard) {
    // The lane index as a value too: each of the two blocks declares its own vector of them.
    Stmt store = make_store(b, {i, j}, exp(make_load(a, {i, j})) * 2.0 + cast(kF32, ji));
    return make_program(
        "tail", {a}, {b},
        make_for(
            i, 0, 3, kSerial,
            make_for(jo, 0, 3, kSerial, make_for(ji, 0, 16, kVectorized, make_if(guard, store)))));
  };
  std::string tail = codegen_c(program(j < kN));
  for (const char* piece :
       {"guarded; whole vectors", "masked to the lanes that pass", "_mm512_maskz_loadu_ps",
        "_mm512_mask_storeu_ps", "#elif defined(__AVX2__)", "_mm256_maskload_ps",
        "_mm256_maskstore_ps", "__builtin_convertvector(exp_n", "else"}) {
    EXPECT_NE(tail.find(piece), std::string::npos) << piece << " not in\n" << tail;
  }
  EXPECT_EQ(tail.find("#pragma omp simd"), std::string::npos) << tail;
  std::string not_interval = codegen_c(program(j < kN && ne(ji, 5)));
  EXPECT_EQ(not_interval.find("tsr_f32x16"), std::string::npos) << not_interval;
  // Compiled as the machine allows, held to AVX2 (the 8-lane masked moves), and without AVX2
  // (lane by lane).
  struct Variant {
    const std::string* code;
    const char* isa_flag;
    bool skip_lane_5;
  };
  for (Variant variant : {Variant{&tail, "", false}, Variant{&tail, "-mno-avx512f", false},
                          Variant{&tail, "-mno-avx2", false}, Variant{&not_interval, "", true}}) {
    SCOPED_TRACE(testing::Message()
                 << "flag '" << variant.isa_flag << "' skip " << variant.skip_lane_5);
    CompileOptions options;
    options.flags.insert(options.flags.end(), {"-Wall", "-Wextra", "-Werror"});
    if (*variant.isa_flag) options.flags.push_back(variant.isa_flag);
    Module mod = Module::compile(*variant.code, options);
    NDArray av = random_array(a, 4, -3, 3), bv = NDArray::empty(b->shape, kF32);
    bv.fill_random(5, 7, 8);  // what the guard skips must stay as it was
    NDArray before = bv.copy();
    mod.run({&av, &bv});
    for (int64_t n = 0; n < 3 * kRow; ++n) {
      int64_t col = n % kRow;
      double want = 2 * std::exp(av.get(n)) + col % 16;
      if (col >= kN || (variant.skip_lane_5 && col % 16 == 5)) {
        EXPECT_EQ(bv.get(n), before.get(n)) << n;
      } else {
        EXPECT_NEAR(bv.get(n), want, 1e-5 * want) << n;
      }
    }
  }
}

// The AVX2 masked moves go through a vector temporary: it must not hide a buffer of the
// kernel, whatever its name (it was `h`, and an LSTM's output called h was written to it).
TEST(CodegenC, MaskedTailTemporaryDoesNotHideABufferNamedLikeIt) {
  constexpr int kN = 13;
  Buffer a = make_buffer("half", kF32, {16});
  Buffer b = make_buffer("h", kF32, {16});
  Var jo("jo"), ji("ji");
  Expr j = jo * 8 + ji;
  Stmt store = make_store(b, {j}, make_load(a, {j}) * 3.0);
  Program p = make_program(
      "tail", {a}, {b},
      make_for(jo, 0, 2, kSerial, make_for(ji, 0, 8, kVectorized, make_if(j < kN, store))));
  CompileOptions options;
  options.flags.insert(options.flags.end(), {"-Wall", "-Wextra", "-Werror", "-mno-avx512f"});
  Module mod = Module::compile(codegen_c(p), options);
  NDArray av = random_array(a, 4, -3, 3), bv = NDArray::empty(b->shape, kF32);
  bv.fill_random(5, 7, 8);
  NDArray before = bv.copy();
  mod.run({&av, &bv});
  for (int64_t n = 0; n < 16; ++n)
    EXPECT_NEAR(bv.get(n), n < kN ? 3 * av.get(n) : before.get(n), 1e-6) << n;
}

// The masked tail of an rfactor'ed row sum (each element counts 1 more than its value, so that a
// store from a lane past the row's end shows): those lanes keep their partial sums.
TEST(CodegenC, MaskedTailKeepsPartialSumsOfLanesPastTheEnd) {
  constexpr int kN = 21;
  Buffer a = make_buffer("A", kF32, {2, kN});
  Buffer rf = make_buffer("RF", kF32, {2, 16});
  Var i("i"), ko("ko"), ki("ki"), l("l");
  Expr k = ko * 16 + ki;
  Stmt init = make_for(l, 0, 16, kVectorized, make_store(rf, {i, l}, make_float(0.0, kF32)));
  Stmt update = make_for(
      ko, 0, 2, kSerial,
      make_for(ki, 0, 16, kVectorized,
               make_if(k < kN, make_store(rf, {i, ki},
                                          make_load(rf, {i, ki}) + make_load(a, {i, k}) + 1.0))));
  Program p = make_program("row_partial_sums", {a}, {rf},
                           make_for(i, 0, 2, kSerial, make_seq({init, update})));
  std::string code = codegen_c(p);
  EXPECT_NE(code.find("masked to the lanes that pass"), std::string::npos) << code;
  for (bool avx512 : {true, false}) {
    SCOPED_TRACE(avx512);
    CompileOptions options;
    options.flags.insert(options.flags.end(), {"-Wall", "-Wextra", "-Werror"});
    if (!avx512) options.flags.push_back("-mno-avx512f");
    Module mod = Module::compile(code, options);
    NDArray av = random_array(a, 9), rv = NDArray::empty(rf->shape, kF32);
    mod.run({&av, &rv});
    for (int64_t row = 0; row < 2; ++row) {
      for (int64_t lane = 0; lane < 16; ++lane) {
        double want = 0;
        for (int64_t kk = lane; kk < kN; kk += 16)
          want += static_cast<float>(av.get(row * kN + kk)) + 1;
        EXPECT_NEAR(rv.get(row * 16 + lane), want, 1e-6) << row << " " << lane;
      }
    }
  }
}

// No vector sqrtf and friends without -ffast-math: the argument is one vector, the calls go lane by
// lane, and the rest of the body stays vector code; float exp is computed on the whole vector. A
// call that does not vary with the loop stays scalar.
TEST(CodegenC, VectorizedIntrinsicCallsRunLaneByLane) {
  Buffer a = make_buffer("A", kF32, {4, 16});
  Buffer c = make_buffer("C", kF32, {4});
  Buffer b = make_buffer("B", kF32, {4, 16});
  Var i("i"), j("j");
  Expr x = make_load(a, {i, j});
  Expr value = exp(x) * 2.0 + sqrt(x * x) - exp(make_load(c, {i})) + sigmoid(x);
  Program p = make_program(
      "intrinsics", {a, c}, {b},
      make_for(i, 0, 4, kSerial, make_for(j, 0, 16, kVectorized, make_store(b, {i, j}, value))));
  std::string code = codegen_c(p);
  for (const char* piece : {"tsr_f32x16", "__builtin_convertvector(exp_n", "= sqrtf(sqrt_arg[",
                            "expf(C[i])", "= tsr_sigmoid_f32(sigmoid_arg["}) {
    EXPECT_NE(code.find(piece), std::string::npos) << piece << " not in\n" << code;
  }
  EXPECT_EQ(code.find("#pragma omp simd"), std::string::npos) << code;
  Module mod = compile_strict(code);
  NDArray av = random_array(a, 8, -3, 3), cv = random_array(c, 9, -3, 3);
  NDArray bv = NDArray::empty(b->shape, kF32);
  mod.run({&av, &cv, &bv});
  for (size_t n = 0; n < 64; ++n) {
    double v = av.get(n);
    double e =
        std::exp(v) * 2.0 + std::abs(v) - std::exp(cv.get(n / 16)) + 1.0 / (1.0 + std::exp(-v));
    EXPECT_NEAR(bv.get(n), e, 1e-5 * (1 + std::abs(e))) << n;
  }
}

// The vector exp against libm over its whole range: overflow to inf, results down to the
// denormals and zero, NaN kept.
TEST(CodegenC, VectorExpMatchesLibmOverItsRange) {
  const std::vector<float> inputs = {
      -200.f, -104.5f, -103.9f, -100.f,  -90.f,  -87.5f,  -87.3f,        -50.f, -10.f, -1.f,
      -1e-6f, 0.f,     1e-6f,   0.25f,   0.5f,   0.6931f, 1.f,           3.f,   10.f,  50.f,
      80.f,   88.f,    88.72f,  88.722f, 88.73f, 100.f,   std::nanf(""), -0.f,  2.5f,  -2.5f};
  const int n = static_cast<int>(inputs.size()) + 2;  // 32 values
  Buffer a = make_buffer("A", kF32, {n});
  Buffer b = make_buffer("B", kF32, {n});
  // 32 lanes (the portable path: no AVX-512 instruction is that wide; without AVX-512, chunks of
  // 8), 16 and 8 lanes (vscalefps where the compiler targets AVX-512), and 16 lanes compiled
  // without AVX-512 (chunks of 8).
  for (int lanes : {32, 16, 8, -16}) {
    SCOPED_TRACE(lanes);
    const int width = std::abs(lanes);
    Var o("o"), i("i");
    Expr at = o * width + i;
    Program p = make_program(
        "vexp", {a}, {b},
        make_for(o, 0, n / width, kSerial,
                 make_for(i, 0, width, kVectorized, make_store(b, {at}, exp(make_load(a, {at}))))));
    std::string code = codegen_c(p);
    // Vectors wider than 8 lanes have an AVX-512 form and one of 8-lane chunks for AVX2.
    EXPECT_EQ(code.find("_mm512_scalef_ps") != std::string::npos, width == 16) << code;
    EXPECT_EQ(code.find("i_chunk") != std::string::npos, width > 8) << code;
    CompileOptions options;
    options.flags.insert(options.flags.end(), {"-Wall", "-Wextra", "-Werror"});
    if (lanes < 0) options.flags.push_back("-mno-avx512f");
    Module mod = Module::compile(code, options);
    NDArray av = NDArray::empty(a->shape, kF32), bv = NDArray::empty(b->shape, kF32);
    for (int64_t k = 0; k < n; ++k) av.set(k, k < int64_t(inputs.size()) ? inputs[k] : 0.125 * k);
    mod.run({&av, &bv});
    for (int64_t k = 0; k < n; ++k) {
      float x = static_cast<float>(av.get(k)), got = static_cast<float>(bv.get(k)),
            want = std::exp(x);
      if (std::isnan(x)) {
        EXPECT_TRUE(std::isnan(got)) << got;
      } else if (std::isinf(want)) {
        EXPECT_TRUE(std::isinf(got) && got > 0) << x << " -> " << got;
      } else if (want < 1.2e-38f) {  // denormal results carry fewer bits
        EXPECT_NEAR(got, want, 3e-45f) << x;
      } else {
        EXPECT_NEAR(got, want, 4e-7f * want) << x;
      }
    }
  }
}

TEST(CodegenC, AllocatedIntermediate) {
  Buffer a = make_buffer("A", kF32, {10, 6});
  Buffer t = make_buffer("T", kF32, {10, 6});
  Buffer b = make_buffer("B", kF32, {10});
  Var i("i"), j("j"), i2("i"), r("r");
  Stmt produce =
      make_for(i, 0, 10, kParallel,
               make_for(j, 0, 6, kSerial, make_store(t, {i, j}, make_load(a, {i, j}) * 2.0 + 1.0)));
  Stmt consume = make_for(
      i2, 0, 10, kSerial,
      make_seq({make_store(b, {i2}, 0.0),
                make_for(r, 0, 6, kSerial,
                         make_store(b, {i2}, make_load(b, {i2}) + make_load(t, {i2, r})))}));
  Program p = make_program("alloc", {a}, {b}, make_allocate(t, make_seq({produce, consume})));
  std::string code = codegen_c(p);
  // Small buffers live on the stack, large ones on the heap.
  EXPECT_NE(code.find("float T[60] __attribute__((aligned(64)));"), std::string::npos) << code;
  EXPECT_EQ(code.find("free(T);"), std::string::npos) << code;
  Buffer big = make_buffer("Big", kF32, {100, 100});
  Var x("x");
  Program heap = make_program(
      "heap", {a}, {b},
      make_allocate(
          big,
          make_seq({make_for(x, 0, 10, kSerial, make_store(big, {x, x}, make_load(a, {x, 0}))),
                    make_for(i2, 0, 10, kSerial, make_store(b, {i2}, make_load(big, {i2, i2})))})));
  std::string heap_code = codegen_c(heap);
  EXPECT_NE(heap_code.find("float* restrict Big = (float*)aligned_alloc(64, 40000);"),
            std::string::npos)
      << heap_code;
  EXPECT_NE(heap_code.find("free(Big);"), std::string::npos) << heap_code;
  EXPECT_NE(code.find("for (int32_t i_1 = 0; i_1 < 10; ++i_1)"), std::string::npos)
      << "two variables named i get two C names\n"
      << code;
  Module mod = compile_strict(code);
  NDArray av = random_array(a, 6), bv = NDArray::empty(b->shape, kF32);
  mod.run({&av, &bv});
  NDArray expected = NDArray::empty(b->shape, kF32);
  for (int x = 0; x < 10; ++x) {
    double s = 0;
    for (int y = 0; y < 6; ++y) s += av.get(x * 6 + y) * 2 + 1;
    expected.set(x, s);
  }
  expect_close(bv, expected);
}

int64_t floor_div(int64_t a, int64_t b) {
  return static_cast<int64_t>(std::floor(double(a) / b));
}
int64_t floor_mod(int64_t a, int64_t b) {
  return a - floor_div(a, b) * b;
}

TEST(CodegenC, IntFloorDivAndModWithNegativeOperands) {
  const int64_t n = 64;
  Buffer a = make_buffer("A", kI32, {n});
  Buffer b = make_buffer("B", kI32, {n});
  Buffer out = make_buffer("Out", kI32, {6, n});
  Var i("i");
  Expr av = make_load(a, {i}), bv = make_load(b, {i});
  Stmt body = make_seq({
      make_store(out, {0, i}, av / bv),
      make_store(out, {1, i}, av % bv),
      make_store(out, {2, i}, av / 4),
      make_store(out, {3, i}, av % -3),
      make_store(out, {4, i}, i / 4 + i % 4),  // non-negative: plain C operators
      make_store(out, {5, i}, (i - 32) / 5),
  });
  Program p = make_program("divmod", {a, b}, {out}, make_for(i, 0, n, kSerial, body));
  std::string code = codegen_c(p);
  EXPECT_NE(code.find("tsr_floordiv(A[i], B[i])"), std::string::npos) << code;
  EXPECT_NE(code.find("tsr_floormod(A[i], -3)"), std::string::npos) << code;
  EXPECT_NE(code.find("i / 4 + i % 4"), std::string::npos) << code;
  Module mod = compile_strict(code);
  NDArray an = random_array(a, 7, -20, 20), bn = random_array(b, 8, -5, 5);
  for (size_t x = 0; x < n; ++x) {
    if (bn.get(x) == 0) bn.set(x, 3);
  }
  NDArray on = NDArray::empty(out->shape, kI32);
  mod.run({&an, &bn, &on});
  for (int64_t x = 0; x < n; ++x) {
    int64_t va = an.get(x), vb = bn.get(x);
    EXPECT_EQ(on.get(0 * n + x), floor_div(va, vb)) << va << " / " << vb;
    EXPECT_EQ(on.get(1 * n + x), floor_mod(va, vb)) << va << " % " << vb;
    EXPECT_EQ(on.get(2 * n + x), floor_div(va, 4)) << va;
    EXPECT_EQ(on.get(3 * n + x), floor_mod(va, -3)) << va;
    EXPECT_EQ(on.get(4 * n + x), x / 4 + x % 4);
    EXPECT_EQ(on.get(5 * n + x), floor_div(x - 32, 5));
  }
}

TEST(CodegenC, IfGuardAndSelect) {
  const int64_t n = 16;
  Buffer a = make_buffer("A", kF32, {n});
  Buffer b = make_buffer("B", kF32, {n});
  Buffer c = make_buffer("C", kF32, {n});
  Var i("i"), j("j");
  // if (i < 10) B[i] = A[i] * 2 else B[i] = -1; C[j] = j >= 1 ? A[j - 1] : 0 (a guarded load).
  Stmt guard = make_for(
      i, 0, n, kSerial,
      make_if(i < 10, make_store(b, {i}, make_load(a, {i}) * 2.0), make_store(b, {i}, -1.0)));
  Stmt shift = make_for(j, 0, n, kVectorized,
                        make_store(c, {j}, select(j >= 1, make_load(a, {j - 1}), 0.0)));
  Program p = make_program("guards", {a}, {b, c}, make_seq({guard, shift}));
  std::string code = codegen_c(p);
  EXPECT_NE(code.find("if (i < 10) {"), std::string::npos) << code;
  EXPECT_NE(code.find("} else {"), std::string::npos) << code;
  EXPECT_NE(code.find("C[j] = j >= 1 ? A[j - 1] : 0.0f;"), std::string::npos) << code;
  Module mod = compile_strict(code);
  NDArray av = random_array(a, 9), bv = NDArray::empty({n}, kF32), cv = NDArray::empty({n}, kF32);
  mod.run({&av, &bv, &cv});
  for (int64_t x = 0; x < n; ++x) {
    EXPECT_EQ(bv.get(x), x < 10 ? float(av.get(x) * 2) : -1.0) << x;
    EXPECT_EQ(cv.get(x), x >= 1 ? av.get(x - 1) : 0.0) << x;
  }
}

TEST(CodegenC, Float64VectorizedWithGather) {
  // C[i, j] = A[i, j] * 2.5 + B[j, i], j vectorized: A is contiguous, B is gathered.
  Buffer a = make_buffer("A", kF64, {6, 8});
  Buffer b = make_buffer("B", kF64, {8, 6});
  Buffer c = make_buffer("C", kF64, {6, 8});
  Var i("i"), jo("jo"), ji("ji");
  Expr j = jo * 4 + ji;
  Stmt body = make_store(c, {i, j}, make_load(a, {i, j}) * 2.5 + make_load(b, {j, i}));
  Program p =
      make_program("f64", {a, b}, {c},
                   make_for(i, 0, 6, kSerial,
                            make_for(jo, 0, 2, kSerial, make_for(ji, 0, 4, kVectorized, body))));
  std::string code = codegen_c(p);
  EXPECT_NE(code.find("typedef double tsr_f64x4 __attribute__((vector_size(32)));"),
            std::string::npos)
      << code;
  EXPECT_NE(code.find("B_vec[ji_lane] = B[(jo * 4 + ji + ji_lane) * 6 + i];"), std::string::npos)
      << code;
  Module mod = compile_strict(code);
  NDArray av = random_array(a, 10), bv = random_array(b, 11), cv = NDArray::empty(c->shape, kF64);
  mod.run({&av, &bv, &cv});
  NDArray expected = NDArray::empty(c->shape, kF64);
  for (int x = 0; x < 6; ++x)
    for (int y = 0; y < 8; ++y)
      expected.set(x * 8 + y, av.get(x * 8 + y) * 2.5 + bv.get(y * 6 + x));
  expect_close(cv, expected);
}

TEST(CodegenC, VectorScatterCastAndLaneIds) {
  // B[j, i] = A[i, j] + (float)j with j vectorized: a scattered store and the lane-id vector.
  Buffer a = make_buffer("A", kF32, {3, 16});
  Buffer b = make_buffer("B", kF32, {16, 3});
  Var i("i"), j("j");
  Stmt body = make_store(b, {j, i}, make_load(a, {i, j}) + cast(kF32, j * 2 + i));
  Program p = make_program("scatter", {a}, {b},
                           make_for(i, 0, 3, kSerial, make_for(j, 0, 16, kVectorized, body)));
  std::string code = codegen_c(p);
  EXPECT_NE(code.find("const tsr_i32x16 j_lanes = j + (tsr_i32x16){0, 1, 2,"), std::string::npos)
      << code;
  EXPECT_NE(code.find("__builtin_convertvector(j_lanes * 2 + i, tsr_f32x16)"), std::string::npos)
      << code;
  Module mod = compile_strict(code);
  NDArray av = random_array(a, 12), bv = NDArray::empty(b->shape, kF32);
  mod.run({&av, &bv});
  for (int x = 0; x < 3; ++x)
    for (int y = 0; y < 16; ++y) {
      EXPECT_EQ(bv.get(y * 3 + x), float(float(av.get(x * 16 + y)) + float(y * 2 + x)));
    }
}

TEST(CodegenC, VectorizedReductionStaysScalar) {
  // The store address ignores the vectorized k: not a vector store and not safe for omp simd.
  Buffer a = make_buffer("A", kF32, {5, 32});
  Buffer c = make_buffer("C", kF32, {5});
  Var i("i"), k("k");
  Program p = make_program(
      "rowsum", {a}, {c},
      make_for(i, 0, 5, kSerial,
               make_seq({make_store(c, {i}, 0.0),
                         make_for(k, 0, 32, kVectorized,
                                  make_store(c, {i}, make_load(c, {i}) + make_load(a, {i, k})))})));
  std::string code = codegen_c(p);
  EXPECT_NE(code.find("kept scalar"), std::string::npos) << code;
  EXPECT_EQ(code.find("omp simd"), std::string::npos) << code;
  Module mod = compile_strict(code);
  NDArray av = random_array(a, 13), cv = NDArray::empty(c->shape, kF32);
  mod.run({&av, &cv});
  NDArray expected = NDArray::empty(c->shape, kF32);
  for (int x = 0; x < 5; ++x) {
    double s = 0;
    for (int y = 0; y < 32; ++y) s += av.get(x * 32 + y);
    expected.set(x, s);
  }
  expect_close(cv, expected, 32);
}

TEST(CodegenC, NestedParallelAndUnrolledLoops) {
  Buffer a = make_buffer("A", kF32, {8, 4});
  Buffer b = make_buffer("B", kF32, {8, 4});
  Var i("i"), j("j");
  Program p = make_program(
      "nested", {a}, {b},
      make_for(i, 0, 8, kParallel,
               make_for(j, 0, 4, kParallel, make_store(b, {i, j}, make_load(a, {i, j}) * 3.0))));
  std::string code = codegen_c(p);
  EXPECT_EQ(count(code, "#pragma omp parallel for"), 1u) << code;

  Program q = make_program("unrolled", {a}, {b},
                           make_for(i, 0, 8, kSerial,
                                    make_for(j, 0, 4, ForKind::kUnrolled,
                                             make_store(b, {i, j}, make_load(a, {i, j}) * 3.0))));
  std::string qcode = codegen_c(q);
  EXPECT_NE(qcode.find("#pragma GCC unroll 4\n"), std::string::npos) << qcode;
  for (const std::string& c : {code, qcode}) {
    Module mod = compile_strict(c);
    NDArray av = random_array(a, 14), bv = NDArray::empty(b->shape, kF32);
    mod.run({&av, &bv});
    for (size_t x = 0; x < 32; ++x) EXPECT_EQ(bv.get(x), float(float(av.get(x)) * 3.0f));
  }
}

TEST(CodegenC, LiteralsPrintExactly) {
  Buffer f = make_buffer("F", kF32, {6});
  Buffer d = make_buffer("D", kF64, {3});
  Buffer n = make_buffer("N", kI32, {2});
  const double inf = INFINITY;
  Stmt body = make_seq({
      make_store(f, {0}, make_float(0.1, kF32)),
      make_store(f, {1}, make_float(1.0, kF32)),
      make_store(f, {2}, make_float(inf, kF32)),
      make_store(f, {3}, make_float(-inf, kF32)),
      make_store(f, {4}, make_float(NAN, kF32)),
      make_store(f, {5}, make_float(-2.5e-30, kF32)),
      make_store(d, {0}, make_float(0.1, kF64)),
      make_store(d, {1}, make_float(-inf, kF64)),
      make_store(d, {2}, make_float(1e300, kF64)),
      make_store(n, {0}, make_int(INT32_MIN)),
      make_store(n, {1}, make_int(-7)),
  });
  Program p = make_program("literals", {}, {f, d, n}, body);
  std::string code = codegen_c(p);
  for (const char* text :
       {"F[0] = 0.100000001f;", "F[1] = 1.0f;", "F[2] = INFINITY;", "F[3] = -INFINITY;",
        "F[4] = NAN;", "D[0] = 0.10000000000000001;", "D[1] = -(double)INFINITY;",
        "D[2] = 1.0000000000000001e+300;", "N[0] = INT32_MIN;", "N[1] = -7;"}) {
    EXPECT_NE(code.find(text), std::string::npos) << text << "\n" << code;
  }
  Module mod = compile_strict(code);
  NDArray fv = NDArray::empty({6}, kF32), dv = NDArray::empty({3}, kF64),
          nv = NDArray::empty({2}, kI32);
  mod.run({&fv, &dv, &nv});
  EXPECT_EQ(fv.data_as<float>()[0], 0.1f);
  EXPECT_EQ(fv.get(2), inf);
  EXPECT_EQ(fv.get(3), -inf);
  EXPECT_TRUE(std::isnan(fv.get(4)));
  EXPECT_EQ(fv.data_as<float>()[5], -2.5e-30f);
  EXPECT_EQ(dv.get(0), 0.1);
  EXPECT_EQ(dv.get(2), 1e300);
  EXPECT_EQ(nv.get(0), INT32_MIN);
}

TEST(CodegenC, GeneratedCodeIsWarningFree) {
  CompileOptions strict;
  strict.flags.insert(strict.flags.end(), {"-Wall", "-Wextra", "-Werror"});
  Buffer a = make_buffer("A", kI32, {8});
  Buffer b = make_buffer("B", kI32, {8});
  Var i("i");
  Expr x = make_load(a, {i});
  Program logic =
      make_program("logic", {a}, {b},
                   make_for(i, 0, 8, kSerial,
                            make_store(b, {i},
                                       select((x < 3 && x > -3) || !(eq(x, 5) || ne(x, i)),
                                              min(x, i) / 2, max(x, 1) % 3))));
  for (const Program& p : {split_matmul(33, 64, 19, kVectorized), naive_matmul(4, 4, 4), logic}) {
    EXPECT_NO_THROW(Module::compile(codegen_c(p), strict)) << codegen_c(p);
  }
}

TEST(CodegenC, ErrorsNameTheProblem) {
  Buffer a = make_buffer("A", kF32, {4});
  Buffer stray = make_buffer("Stray", kF32, {4});
  Var i("i"), free_var("q");
  Program unbound =
      make_program("p", {}, {a}, make_for(i, 0, 4, kSerial, make_store(a, {free_var}, 1.0)));
  Program unknown = make_program(
      "p", {}, {a}, make_for(i, 0, 4, kSerial, make_store(a, {i}, make_load(stray, {i}))));
  try {
    codegen_c(unbound);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("variable 'q'"), std::string::npos) << e.what();
  }
  try {
    codegen_c(unknown);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("buffer 'Stray'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera
