// Base pointers hoisted before unrolled nests (codegen_c_hoist.cpp): where they appear, where
// they must not, and that the kernels compute the same values either way.

#include <gtest/gtest.h>

#include "codegen/codegen_c.h"
#include "codegen_test_util.h"

namespace tessera {
namespace {

using namespace codegen_test;
constexpr ForKind kUnrolled = ForKind::kUnrolled;

// A 1-D convolution with a register tile of 4 outputs:
//   for i: for r: for x (unrolled): C[i*4 + x] += A[i*4 + x + r] * W[r]
// C was zeroed by an init nest. The nest's loads and stores differ by constants once unrolled.
TEST(CodegenHoist, RegisterTileIndexesOneBasePerBuffer) {
  Buffer a = make_buffer("A", kF32, {35});
  Buffer w = make_buffer("W", kF32, {3});
  Buffer c = make_buffer("C", kF32, {32});
  Var i0("i0"), x0("x0"), i("i"), r("r"), x("x");
  Stmt init =
      make_for(i0, 0, 8, kSerial, make_for(x0, 0, 4, kUnrolled, make_store(c, {i0 * 4 + x0}, 0.0)));
  Expr update = make_load(c, {i * 4 + x}) + make_load(a, {i * 4 + x + r}) * make_load(w, {r});
  Stmt loops = make_for(
      i, 0, 8, kSerial,
      make_for(r, 0, 3, kSerial, make_for(x, 0, 4, kUnrolled, make_store(c, {i * 4 + x}, update))));
  Program p = make_program("conv1d", {a, w}, {c}, make_seq({init, loops}));
  std::string code = codegen_c(p);
  EXPECT_NE(code.find("const float* A_base = &A[i * 4 + r];"), std::string::npos) << code;
  EXPECT_NE(code.find("float* C_base_1 = &C[i * 4];"), std::string::npos) << code;
  EXPECT_NE(code.find("C_base_1[x] = C_base_1[x] + A_base[x] * W[r];"), std::string::npos) << code;
  // W's index has no part the nest changes: nothing to gain from a base.
  EXPECT_EQ(code.find("W_base"), std::string::npos) << code;

  Module mod = compile_strict(code);
  NDArray av = random_array(a, 3), wv = random_array(w, 4), cv = NDArray::empty({32}, kF32);
  cv.fill(7);
  mod.run({&av, &wv, &cv});
  NDArray expected = NDArray::empty({32}, kF32);
  for (int o = 0; o < 32; ++o) {
    double s = 0;
    for (int k = 0; k < 3; ++k) s += av.get(o + k) * wv.get(k);
    expected.set(o, s);
  }
  expect_close(cv, expected, 3);
}

// A buffer stored through two different invariant parts keeps its direct indexing (gcc cannot
// tell two bases of one buffer apart); a stack array indexed by an outer loop takes one as any
// buffer does.
TEST(CodegenHoist, StoredBufferWithTwoInvariantPartsStaysDirect) {
  Buffer a = make_buffer("A", kF32, {8, 4});
  Buffer b = make_buffer("B", kF32, {8, 4});
  Buffer acc = make_buffer("acc", kF32, {2, 4});
  Var i("i"), x("x"), t("t"), y("y");
  // B[i, x] = B[i, x] + B[7 - i, x] * A[i, x], row by row: rows past the middle read updated ones.
  Expr update = make_load(b, {i, x}) + make_load(b, {7 - i, x}) * make_load(a, {i, x});
  Stmt mirror =
      make_for(i, 0, 8, kSerial, make_for(x, 0, 4, kUnrolled, make_store(b, {i, x}, update)));
  // acc[t, y] = A[t, y] for t in 0..1, then B[t, y] += acc[t, y].
  Stmt tile = make_allocate(
      acc,
      make_for(
          t, 0, 2, kSerial,
          make_seq(
              {make_for(y, 0, 4, kUnrolled, make_store(acc, {t, y}, make_load(a, {t, y}))),
               make_for(y, 0, 4, kUnrolled,
                        make_store(b, {t, y}, make_load(b, {t, y}) + make_load(acc, {t, y})))})));
  Program p = make_program("mirror", {a}, {b}, make_seq({mirror, tile}));
  std::string code = codegen_c(p);
  EXPECT_NE(code.find("B[i * 4 + x] = B[i * 4 + x] + B[(7 - i) * 4 + x] * A_base[x];"),
            std::string::npos)
      << code;
  EXPECT_NE(code.find("acc_base[y] = A_base_1[y];"), std::string::npos) << code;

  Module mod = compile_strict(code);
  NDArray av = random_array(a, 5), bv = random_array(b, 6);
  std::vector<double> e = bv.to_doubles();
  const std::vector<double> ad = av.to_doubles();
  for (int r = 0; r < 8; ++r)
    for (int k = 0; k < 4; ++k)
      e[r * 4 + k] = float(e[r * 4 + k] + float(e[(7 - r) * 4 + k] * ad[r * 4 + k]));
  for (int r = 0; r < 2; ++r)
    for (int k = 0; k < 4; ++k) e[r * 4 + k] = float(e[r * 4 + k] + ad[r * 4 + k]);
  mod.run({&av, &bv});
  NDArray expected = NDArray::empty({8, 4}, kF32);
  expected.from_doubles(e);
  expect_close(bv, expected);
}

}  // namespace
}  // namespace tessera
