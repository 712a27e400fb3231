// Code generation of vectorized loops (codegen_c_vector.cpp): GCC vector extensions, selects and
// min/max through lane masks, masked tails, the vector exp, and what stays on the `#pragma omp
// simd` path.

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "codegen/codegen_c.h"
#include "codegen_test_util.h"
#include "runtime/module.h"
#include "runtime/ndarray.h"
#include "te/error.h"

namespace tessera {
namespace {

using namespace codegen_test;

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
// comparisons) blends both sides through the condition's lane mask on whole vectors.
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
}

// Zero padding read along a row (an image's one-channel input): the condition tests the lane's
// index, so the side that loads runs as a masked block of the lanes that take it and no lane
// reads before the row or past its end; within a split's masked tail the two masks combine. A
// side whose load is the same on every lane has nothing to mask and keeps the scalar path.
TEST(CodegenC, IndexGuardedSelectLoadsUnderTheLaneMask) {
  constexpr int kIn = 37, kOut = 39, kRow = 48;
  Buffer c = make_buffer("C", kF32, {2, kIn});
  Buffer d = make_buffer("D", kF32, {2, kRow});
  Var i("i"), jo("jo"), ji("ji");
  Expr j = jo * 16 + ji;
  Expr inside = j >= 1 && j < kIn + 1;
  Expr padded = make_select(inside, make_load(c, {i, j - 1}) * 3.0, make_float(-2.0, kF32));
  Program p =
      make_program("pad_row", {c}, {d},
                   make_for(i, 0, 2, kSerial,
                            make_for(jo, 0, 3, kSerial,
                                     make_for(ji, 0, 16, kVectorized,
                                              make_if(j < kOut, make_store(d, {i, j}, padded))))));
  std::string code = codegen_c(p);
  for (const char* piece : {"blend_vec", "side_mask", "_mm512_maskz_loadu_ps", "_mm256_maskload_ps",
                            "masked to the lanes that pass"}) {
    EXPECT_NE(code.find(piece), std::string::npos) << piece << " not in\n" << code;
  }
  EXPECT_EQ(code.find("#pragma omp simd"), std::string::npos) << code;
  for (const char* isa_flag : {"", "-mno-avx512f", "-mno-avx2"}) {
    SCOPED_TRACE(isa_flag);
    CompileOptions options;
    options.flags.insert(options.flags.end(), {"-Wall", "-Wextra", "-Werror"});
    if (*isa_flag) options.flags.push_back(isa_flag);
    Module mod = Module::compile(code, options);
    NDArray cv = random_array(c, 41), dv = NDArray::empty(d->shape, kF32);
    dv.fill_random(42, 7, 8);
    NDArray before = dv.copy();
    mod.run({&cv, &dv});
    for (int64_t row = 0; row < 2; ++row) {
      for (int64_t col = 0; col < kRow; ++col) {
        const int64_t n = row * kRow + col;
        if (col >= kOut) {
          EXPECT_EQ(dv.get(n), before.get(n)) << n;
        } else {
          bool in = col >= 1 && col < kIn + 1;
          double want = in ? static_cast<float>(cv.get(row * kIn + col - 1)) * 3.0f : -2.0;
          EXPECT_EQ(dv.get(n), want) << n;
        }
      }
    }
  }

  // The row above the first one does not exist: a load the same on every lane, behind a test of
  // the outer index, must not be made on the lanes' behalf.
  Buffer e = make_buffer("E", kF32, {2, 16});
  Buffer f = make_buffer("F", kF32, {2, 16});
  Expr above = make_select(i >= 1 && ji < 15, make_load(e, {i - 1, 0}), make_float(0.0, kF32));
  Program q = make_program(
      "above", {e}, {f},
      make_for(i, 0, 2, kSerial, make_for(ji, 0, 16, kVectorized, make_store(f, {i, ji}, above))));
  std::string uniform_code = codegen_c(q);
  EXPECT_EQ(uniform_code.find("blend_vec"), std::string::npos) << uniform_code;
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

// A masked tail accumulating into a buffer of the kernel's own moves whole vectors there (a masked
// store would keep a product's accumulator tile out of registers), the lanes past the end keeping
// what they held: here those lanes of row 0 are row 1's first columns, so a lane that wrote
// shows in row 1.
// A buffer the lanes could run past, or one the threads of a parallel loop share, stays masked.
TEST(CodegenC, MaskedTailMovesWholeVectorsOfItsOwnBuffers) {
  constexpr int kN = 21, kK = 5;
  Buffer a = make_buffer("A", kF32, {2, kK});
  Buffer b = make_buffer("B", kF32, {kK, 32});
  Buffer c = make_buffer("C", kF32, {2, kN});
  Buffer d = make_buffer("D", kF32, {2, kN});
  auto program = [&](int64_t elements, ForKind row_kind) {
    Buffer acc = make_buffer("acc", kF32, {elements});
    Buffer sum = make_buffer("sum", kF32, {elements});
    Var r("r"), k("k"), jo("jo"), ji("ji"), wo("wo"), wi("wi");
    Expr j = jo * 16 + ji, w = wo * 16 + wi;
    auto lanes = [&](Var& outer, Var& inner, Expr col, Stmt body) {
      return make_for(outer, 0, 2, kSerial,
                      make_for(inner, 0, 16, kVectorized, make_if(col < kN, std::move(body))));
    };
    Expr at = r * kN + j;
    Stmt init = lanes(jo, ji, j,
                      make_seq({make_store(acc, {at}, make_float(0.0, kF32)),
                                make_store(sum, {at}, make_float(0.0, kF32))}));
    Stmt update = make_for(
        k, 0, kK, kSerial,
        lanes(jo, ji, j,
              make_seq(
                  {make_store(acc, {at},
                              make_load(acc, {at}) + make_load(a, {r, k}) * make_load(b, {k, j})),
                   make_store(sum, {at}, make_load(sum, {at}) + make_load(b, {k, j}) + 1.0)})));
    Expr out = r * kN + w;
    Stmt write_back = lanes(wo, wi, w,
                            make_seq({make_store(c, {r, w}, make_load(acc, {out})),
                                      make_store(d, {r, w}, make_load(sum, {out}))}));
    // Every row is set up before any is updated, so that row 0's lanes past the end meet row 1.
    Stmt rows = make_seq({make_for(r, 0, 2, row_kind, init), make_for(r, 0, 2, row_kind, update),
                          make_for(r, 0, 2, row_kind, write_back)});
    return make_program("own_tail", {a, b}, {c, d}, make_allocate(acc, make_allocate(sum, rows)));
  };
  std::string own = codegen_c(program(64, kSerial));
  for (const char* piece :
       {"_mm512_mask3_fmadd_ps", "_mm512_mask_mov_ps", "_mm512_mask_storeu_ps(&C"})
    EXPECT_NE(own.find(piece), std::string::npos) << piece << " not in\n" << own;
  // The first writes (zeros) stay masked stores; the accumulations are not.
  EXPECT_EQ(count(own, "_mm512_mask_storeu_ps(&acc"), 1u) << own;
  EXPECT_EQ(count(own, "_mm512_mask_storeu_ps(&sum"), 1u) << own;
  for (size_t at = own.find("_mm512_maskz_loadu_ps("); at != std::string::npos;
       at = own.find("_mm512_maskz_loadu_ps(", at + 1)) {
    std::string line = own.substr(at, own.find('\n', at) - at);
    EXPECT_EQ(line.find("&acc["), std::string::npos) << line;
  }
  std::string past_the_end = codegen_c(program(2 * kN, kSerial));
  EXPECT_EQ(count(past_the_end, "_mm512_mask_storeu_ps(&acc"), 2u) << past_the_end;
  std::string shared = codegen_c(program(64, kParallel));
  EXPECT_EQ(count(shared, "_mm512_mask_storeu_ps(&acc"), 2u) << shared;
  for (const char* flag : {"", "-mno-avx512f", "-mno-avx2"}) {
    SCOPED_TRACE(flag);
    CompileOptions options;
    options.flags.insert(options.flags.end(), {"-Wall", "-Wextra", "-Werror"});
    if (*flag) options.flags.push_back(flag);
    Module mod = Module::compile(own, options);
    // An infinity in row 0: times the zero a lane past the end loads, NaN, were it stored.
    NDArray av = random_array(a, 3), bv = random_array(b, 4);
    av.set(0, std::numeric_limits<double>::infinity());
    NDArray cv = NDArray::empty(c->shape, kF32), dv = NDArray::empty(d->shape, kF32);
    mod.run({&av, &bv, &cv, &dv});
    for (int64_t row = 0; row < 2; ++row) {
      for (int64_t col = 0; col < kN; ++col) {
        double product = 0, plus_one = 0;
        for (int64_t kk = 0; kk < kK; ++kk) {
          product += av.get(row * kK + kk) * bv.get(kk * 32 + col);
          plus_one += bv.get(kk * 32 + col) + 1;
        }
        if (std::isinf(product)) {
          EXPECT_EQ(cv.get(row * kN + col), product) << row << " " << col;
        } else {
          EXPECT_NEAR(cv.get(row * kN + col), product, 1e-5) << row << " " << col;
        }
        EXPECT_NEAR(dv.get(row * kN + col), plus_one, 1e-5) << row << " " << col;
      }
    }
  }
}

// No vector sqrtf and friends without -ffast-math: the argument is one vector, the calls go lane by
// lane, and the rest of the body stays vector code; float exp and sigmoid are computed on the
// whole vector. A call that does not vary with the loop stays scalar.
TEST(CodegenC, VectorizedIntrinsicCallsRunLaneByLane) {
  Buffer a = make_buffer("A", kF32, {4, 16});
  Buffer c = make_buffer("C", kF32, {4});
  Buffer b = make_buffer("B", kF32, {4, 16});
  Var i("i"), j("j");
  Expr x = make_load(a, {i, j});
  Expr value = exp(x) * 2.0 + sqrt(x * x) - exp(make_load(c, {i})) + sigmoid(x) + tanh(x);
  Program p = make_program(
      "intrinsics", {a, c}, {b},
      make_for(i, 0, 4, kSerial, make_for(j, 0, 16, kVectorized, make_store(b, {i, j}, value))));
  std::string code = codegen_c(p);
  for (const char* piece : {"tsr_f32x16", "__builtin_convertvector(exp_n", "= sqrtf(sqrt_arg[",
                            "expf(C[i])", "= tanhf(tanh_arg[", "sigmoid_vec"}) {
    EXPECT_NE(code.find(piece), std::string::npos) << piece << " not in\n" << code;
  }
  EXPECT_EQ(code.find("tsr_sigmoid_f32"), std::string::npos) << code;
  EXPECT_EQ(code.find("#pragma omp simd"), std::string::npos) << code;
  Module mod = compile_strict(code);
  NDArray av = random_array(a, 8, -3, 3), cv = random_array(c, 9, -3, 3);
  NDArray bv = NDArray::empty(b->shape, kF32);
  mod.run({&av, &cv, &bv});
  for (size_t n = 0; n < 64; ++n) {
    double v = av.get(n);
    double e = std::exp(v) * 2.0 + std::abs(v) - std::exp(cv.get(n / 16)) +
               1.0 / (1.0 + std::exp(-v)) + std::tanh(v);
    EXPECT_NEAR(bv.get(n), e, 1e-5 * (1 + std::abs(e))) << n;
  }
}

// The lanes the vector intrinsic tests run: 32 (the portable path: no AVX-512 instruction is
// that wide; without AVX-512, chunks of 8), 16 and 8 (vscalefps where the compiler targets
// AVX-512), and 16 compiled without AVX-512 (chunks of 8), written as -16.
constexpr int kIntrinsicLanes[] = {32, 16, 8, -16};

struct UnaryRun {
  std::string code;
  std::vector<double> out;
};

// out[k] = f(inputs[k]) in a loop vectorized over |lanes| lanes, compiled without warnings (and
// without AVX-512 where lanes < 0).
UnaryRun run_unary_vector(const std::vector<float>& inputs, int lanes,
                          const std::function<Expr(Expr)>& f) {
  const int n = static_cast<int>(inputs.size()), width = std::abs(lanes);
  Buffer a = make_buffer("A", kF32, {n});
  Buffer b = make_buffer("B", kF32, {n});
  Var o("o"), i("i");
  Expr at = o * width + i;
  Program p = make_program(
      "unary", {a}, {b},
      make_for(o, 0, n / width, kSerial,
               make_for(i, 0, width, kVectorized, make_store(b, {at}, f(make_load(a, {at}))))));
  UnaryRun run{codegen_c(p), {}};
  CompileOptions options;
  options.flags.insert(options.flags.end(), {"-Wall", "-Wextra", "-Werror"});
  if (lanes < 0) options.flags.push_back("-mno-avx512f");
  Module mod = Module::compile(run.code, options);
  NDArray av = NDArray::empty(a->shape, kF32), bv = NDArray::empty(b->shape, kF32);
  for (int64_t k = 0; k < n; ++k) av.set(k, inputs[k]);
  mod.run({&av, &bv});
  for (int64_t k = 0; k < n; ++k) run.out.push_back(bv.get(k));
  return run;
}

// The vector exp against libm over its whole range: overflow to inf, results down to the
// denormals and zero, NaN kept.
TEST(CodegenC, VectorExpMatchesLibmOverItsRange) {
  std::vector<float> inputs = {
      -200.f, -104.5f, -103.9f, -100.f,  -90.f,  -87.5f,  -87.3f,        -50.f, -10.f, -1.f,
      -1e-6f, 0.f,     1e-6f,   0.25f,   0.5f,   0.6931f, 1.f,           3.f,   10.f,  50.f,
      80.f,   88.f,    88.72f,  88.722f, 88.73f, 100.f,   std::nanf(""), -0.f,  2.5f,  -2.5f};
  while (inputs.size() < 32) inputs.push_back(0.125f * static_cast<float>(inputs.size()));
  for (int lanes : kIntrinsicLanes) {
    SCOPED_TRACE(lanes);
    const int width = std::abs(lanes);
    UnaryRun run = run_unary_vector(inputs, lanes, [](Expr x) { return exp(x); });
    // Vectors wider than 8 lanes have an AVX-512 form and one of 8-lane chunks for AVX2.
    EXPECT_EQ(run.code.find("_mm512_scalef_ps") != std::string::npos, width == 16) << run.code;
    EXPECT_EQ(run.code.find("i_chunk") != std::string::npos, width > 8) << run.code;
    for (size_t k = 0; k < inputs.size(); ++k) {
      float x = inputs[k], got = static_cast<float>(run.out[k]), want = std::exp(x);
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

// The vector sigmoid (1 / (1 + e^-x) with an exp that only saturates beyond the normal floats)
// against libm: 0 and 1 at the ends, infinities included, NaN kept.
TEST(CodegenC, VectorSigmoidMatchesLibmOverItsRange) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> inputs = {
      -inf,  -200.f, -104.f, -100.f, -89.f, -88.72f, -88.5f, -88.f,         -87.5f, -87.f, -50.f,
      -10.f, -1.f,   -1e-6f, 0.f,    1e-6f, 0.5f,    1.f,    3.f,           10.f,   17.f,  50.f,
      86.9f, 87.1f,  88.f,   89.f,   100.f, 200.f,   inf,    std::nanf(""), -0.f,   2.5f};
  for (int lanes : kIntrinsicLanes) {
    SCOPED_TRACE(lanes);
    UnaryRun run = run_unary_vector(inputs, lanes, [](Expr x) { return sigmoid(x); });
    EXPECT_EQ(run.code.find("tsr_sigmoid_f32"), std::string::npos) << run.code;  // no libm call
    for (size_t k = 0; k < inputs.size(); ++k) {
      double x = inputs[k], got = run.out[k], want = 1.0 / (1.0 + std::exp(-x));
      if (std::isnan(x)) {
        EXPECT_TRUE(std::isnan(got)) << got;
      } else {
        // Below e^-87 the result may flush to 0 (the true value is under 1e-38).
        EXPECT_NEAR(got, want, 1e-37 + 4e-7 * want) << x;
        EXPECT_TRUE(got >= 0 && got <= 1) << x << " -> " << got;
      }
    }
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

}  // namespace
}  // namespace tessera
