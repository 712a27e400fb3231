// End-to-end tests of C code generation: hand-built loop programs are compiled, run on random
// inputs and compared with naive C++ loops; a few tests check the generated text or assembly.

#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <sstream>

#include "codegen/codegen_c.h"
#include "codegen_test_util.h"
#include "runtime/module.h"
#include "runtime/ndarray.h"
#include "te/error.h"

namespace tessera {
namespace {

using namespace codegen_test;

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
  // The guarded load is made only on the lanes that pass (codegen_vector_test.cpp has the rest).
  EXPECT_NE(code.find("side_mask"), std::string::npos) << code;
  Module mod = compile_strict(code);
  NDArray av = random_array(a, 9), bv = NDArray::empty({n}, kF32), cv = NDArray::empty({n}, kF32);
  mod.run({&av, &bv, &cv});
  for (int64_t x = 0; x < n; ++x) {
    EXPECT_EQ(bv.get(x), x < 10 ? float(av.get(x) * 2) : -1.0) << x;
    EXPECT_EQ(cv.get(x), x >= 1 ? av.get(x - 1) : 0.0) << x;
  }
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
