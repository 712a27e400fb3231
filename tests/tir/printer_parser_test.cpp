// Round trips of the loop-program text form, parse errors, and structural equality.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "te/error.h"
#include "te/tensor.h"
#include "tir/parser.h"
#include "tir/printer.h"
#include "tir/structural_equal.h"

namespace tessera {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// print -> parse -> print is the identity on text, and the parse is equal to the original.
void expect_round_trip(const Program& p) {
  std::string text = print_program(p);
  Program q = parse_program(text);
  EXPECT_EQ(print_program(q), text);
  EXPECT_TRUE(structural_equal(p, q)) << text;
  EXPECT_EQ(structural_hash(p), structural_hash(q)) << text;
}

void expect_parse_error(const std::string& text, const std::string& message) {
  try {
    parse_program(text);
    ADD_FAILURE() << "no error for:\n" << text;
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), message) << text;
  }
}

// The example of the text format, with every float literal in its printed form.
const char* const kExample =
    R"(program matmul(A: float32[64, 32], B: float32[32, 48]) -> (C: float32[64, 48]) {
  for i in 0..64 {
    for j in 0..48 {
      C[i, j] = 0.0f
    }
  }
  parallel for i.outer in 0..16 {
    vectorized for j.inner in 0..16 {
      C[i.outer*4 + 1, j.inner] = C[i.outer*4 + 1, j.inner] + A[i.outer, 0]*B[0, j.inner]
    }
  }
  alloc P: float32[1, 3, 230, 230] {
    for y in 1..101 {
      unrolled for x in (y*2 - 1)..+3 {
        if (x < 5 && y >= 0) {
          P[0, 0, x, y] = select(x < 3, float32(x), 0.5f)
        } else {
          P[0, 0, x, y] = min(P[0, 0, x, y], 1.0f)
        }
      }
    }
  }
}
)";

TEST(PrinterParserTest, ExampleReadsBackToTheSameText) {
  Program p = parse_program(kExample);
  EXPECT_EQ(print_program(p), kExample);
  EXPECT_EQ(p.name, "matmul");
  ASSERT_EQ(p.inputs.size(), 2u);
  EXPECT_EQ(p.outputs[0]->shape, (std::vector<int64_t>{64, 48}));
  expect_round_trip(p);
}

TEST(PrinterParserTest, AcceptsLooseSpellings) {
  // `0f`, an explicit `..+` after a literal start, comments and free spacing.
  Program p = parse_program(
      "program f() -> (C: float32[4]) {  # comment\n"
      "for i in 1..+3 { C[i]=0f }\n"
      "}");
  EXPECT_EQ(print_program(p),
            "program f() -> (C: float32[4]) {\n"
            "  for i in 1..4 {\n"
            "    C[i] = 0.0f\n"
            "  }\n"
            "}\n");
  Program empty = parse_program("program g() -> () {}");
  EXPECT_FALSE(empty.body.defined());
  EXPECT_EQ(print_program(empty), "program g() -> () {\n}\n");
}

// A hand-built program with every statement kind, loop kind, dtype and expression kind.
Program build_everything() {
  Buffer a = make_buffer("A", DType::kFloat32, {16, 8});
  Buffer b = make_buffer("B", DType::kFloat64, {8});
  Buffer m = make_buffer("M", DType::kInt32, {4, 4});
  Buffer f = make_buffer("F", DType::kBool, {4});
  Buffer s = make_buffer("S", DType::kFloat32, {});
  Buffer c = make_buffer("C", DType::kFloat32, {16, 8});
  Buffer d = make_buffer("D", DType::kFloat64, {8});
  Buffer e = make_buffer("E", DType::kInt32, {4});
  Buffer g = make_buffer("G", DType::kBool, {4});
  Buffer z = make_buffer("Z", DType::kFloat64, {});
  Buffer t = make_buffer("conv.T", DType::kFloat32, {4});
  Buffer u = make_buffer("U", DType::kInt32, {2, 2});
  auto f32 = [](double v) { return make_float(v, DType::kFloat32); };
  auto f64 = [](double v) { return make_float(v, DType::kFloat64); };
  Var i("i"), j("j.inner"), k("k"), p("p"), q("q.outer"), r("r"), w("w");
  std::vector<Stmt> body;

  Expr aij = make_load(a, {i, j});
  body.push_back(
      make_for(i, 0, 16, ForKind::kSerial,
               make_for(j, 0, 8, ForKind::kVectorized,
                        make_store(c, {i, j},
                                   aij * f32(0.1f) + select(aij < f32(0), f32(-kInf), f32(kInf)) -
                                       (aij - (f32(1e-30f) - f32(3.4028235e38f)))))));

  Expr bk = make_load(b, {k + 3});
  body.push_back(
      make_for(k, -3, 8, ForKind::kParallel,
               make_store(d, {k + 3},
                          bk / (make_load(b, {0}) * f64(2.5)) - (bk - f64(1e-30)) +
                              (bk + f64(5e-324)) * f64(1.7976931348623157e308) + f64(-0.0))));

  // A non-constant start, negative literals, integer % and nested min/max.
  body.push_back(
      make_for(p, 0, 2, ForKind::kSerial,
               make_for(q, p * 2 - 1, 2, ForKind::kUnrolled,
                        make_store(e, {q + 1},
                                   make_load(m, {p, q + 1}) % 3 - -7 + q * -2 / (p + 1) +
                                       max(min(q, Expr(-2147483647 - 1)), Expr(-1)) - (0 - p)))));

  // Nested allocates, if with and without else, casts and logic.
  Expr tr = make_load(t, {r});
  Stmt inner = make_seq({
      make_if(!(r < 2) && make_load(f, {r}),
              make_store(t, {r}, cast(DType::kFloat32, make_load(e, {r}))),
              make_store(t, {r}, f32(kNaN))),
      make_store(u, {r / 2, r % 2}, cast(DType::kInt32, tr * f32(1e-45f)) + 1),
      make_if(eq(make_load(u, {0, 0}), 3) || make_load(f, {r}),
              make_store(t, {r}, min(tr, f32(-0.0f)) / (tr * f32(2)))),
  });
  body.push_back(make_allocate(t, make_allocate(u, make_for(r, 0, 4, ForKind::kSerial, inner))));

  Expr fw = make_load(f, {w});
  body.push_back(make_for(
      w, 0, 4, ForKind::kSerial,
      make_seq({make_if(fw || eq(make_load(g, {w}), make_int(0, DType::kBool)),
                        make_store(g, {w}, ne(!fw, make_int(1, DType::kBool)))),
                make_store(g, {w},
                           !!(ne(eq(w, 1), w < 2) && (fw || make_load(g, {w}))) || (fw && fw))})));

  body.push_back(make_store(
      z, {},
      cast(DType::kFloat64, make_load(s, {})) + f64(kNaN) * f64(-kInf) - f64(kInf) +
          select(cast(DType::kBool, make_load(m, {0, 0})), f64(2), f64(0.1)) + f64(-kNaN)));
  body.push_back(make_store(
      c, {0, 0},
      select(ne(make_load(s, {}), f32(kNaN)), f32(-kNaN), f32(16777216.0f)) + f32(123456792.0f)));
  return Program{"everything", {a, b, m, f, s}, {c, d, e, g, z}, make_seq(std::move(body))};
}

TEST(PrinterParserTest, EveryKindRoundTrips) {
  Program p = build_everything();
  expect_round_trip(p);
  std::string text = print_program(p);
  for (const char* piece : {"vectorized for j.inner in 0..8 {",
                            "parallel for k in -3..5 {",
                            "unrolled for q.outer in (p*2 - 1)..+2 {",
                            "alloc conv.T: float32[4] {",
                            "alloc U: int32[2, 2] {",
                            "} else {",
                            "S: float32[]",
                            "Z[] = ",
                            "0.1f",
                            "1e-30f",
                            "3.4028235e+38f",
                            "-inff",
                            "nanf",
                            "-nanf",
                            "1e-45f",
                            "-0.0f",
                            "5e-324",
                            "1.7976931348623157e+308",
                            "-0.0",
                            "inf",
                            "-inf",
                            "nan",
                            "-nan",
                            " - -7",
                            "q.outer*-2/(p + 1)",
                            "-2147483648",
                            "0 - p",
                            "!(r < 2) && F[r]",
                            "float32(E[r])",
                            "int32(conv.T[r]*1e-45f) + 1",
                            "U[r/2, r%2]",
                            "bool(M[0, 0])",
                            "!!",
                            "== false",
                            "!F[w] != true",
                            "16777216.0f",
                            "123456792.0f"}) {
    EXPECT_NE(text.find(piece), std::string::npos) << piece << " not in\n" << text;
  }
}

TEST(PrinterParserTest, FloatLiteralsRoundTripExactly) {
  for (double v : {0.1, 1e-30, 2.0, -2.0, 1e22, 123456.789, 5e-324, 2.2250738585072014e-308,
                   1.7976931348623157e308, -0.0, 0.0, kInf, -kInf, kNaN}) {
    for (DType t : {DType::kFloat32, DType::kFloat64}) {
      Expr lit = make_float(v, t);
      std::string text = print_expr(lit);
      Expr back = parse_expr(text);
      EXPECT_EQ(back.dtype(), t) << text;
      EXPECT_TRUE(structural_equal(lit, back)) << text;
      EXPECT_EQ(print_expr(back), text);
    }
  }
  EXPECT_EQ(print_float_literal(0.5, DType::kFloat32), "0.5f");
  EXPECT_EQ(print_float_literal(2.0, DType::kFloat64), "2.0");
  EXPECT_EQ(print_float_literal(0.1f, DType::kFloat32), "0.1f");
  EXPECT_EQ(print_float_literal(0.1, DType::kFloat64), "0.1");
  EXPECT_EQ(print_float_literal(kInf, DType::kFloat32), "inff");
  EXPECT_EQ(print_float_literal(-kInf, DType::kFloat64), "-inf");
  EXPECT_EQ(print_float_literal(kNaN, DType::kFloat64), "nan");
  EXPECT_EQ(print_float_literal(1e-30, DType::kFloat64), "1e-30");
}

TEST(PrinterParserTest, ExpressionsPrintWithMinimalParentheses) {
  Var x("x"), y("y"), z("z");
  std::vector<Var> vars = {x, y, z};
  std::vector<Buffer> bufs = {make_buffer("A", DType::kFloat32, {4, 4}),
                              make_buffer("B", DType::kFloat64, {4}),
                              make_buffer("P", DType::kBool, {4})};
  EXPECT_EQ(print_expr(x - (y - z)), "x - (y - z)");
  EXPECT_EQ(print_expr(x - y - z), "x - y - z");
  EXPECT_EQ(print_expr((x + y) * z), "(x + y)*z");
  EXPECT_EQ(print_expr(x / (y * z)), "x/(y*z)");
  EXPECT_EQ(print_expr(!(x < y) && z > 0), "!(x < y) && z > 0");
  EXPECT_EQ(print_expr(-x), "0 - x");
  EXPECT_EQ(print_expr(x * Expr(-3)), "x*-3");
  for (const char* text : {"x - (y - z)",
                           "x - y - z",
                           "(x + y)*z",
                           "x/(y*z)",
                           "x*y/z",
                           "x*(y/z)",
                           "x + y*z",
                           "(x + y)%(z - 1)",
                           "!(x < y) && P[z]",
                           "x < y == y < z",
                           "x == y == (y == z)",
                           "x == y != P[0]",
                           "P[0] == (P[1] != P[2])",
                           "P[0] || P[1] && P[2]",
                           "(P[0] || P[1]) && P[2]",
                           "!!P[0] || !(P[1] || P[2])",
                           "x*-3 + -2147483648",
                           "0 - x",
                           "-5 - x",
                           "x%7 - -1",
                           "min(x, max(y, -1))",
                           "select(x >= y, A[x, y], -0.5f)",
                           "float64(x) + 1e-30",
                           "int32(A[0, 0])*2",
                           "bool(x) != false",
                           "A[x + 1, y*2]/A[0, 0] + 3.4028235e+38f",
                           "B[x] - 1.7976931348623157e+308",
                           "B[0] + inf",
                           "B[0]*-inf",
                           "B[0] != nan",
                           "A[0, 0] + nanf",
                           "B[0] + 5e-324",
                           "A[0, 0] + 1e-45f",
                           "-0.0 - B[0]",
                           "select(P[x], 1, 2) <= x",
                           "x > 0 && y > 0 || z > 0",
                           "x > 0 && (y > 0 || z > 0)"}) {
    Expr e = parse_expr(text, vars, bufs);
    EXPECT_EQ(print_expr(e), text);
    EXPECT_TRUE(structural_equal(e, parse_expr(print_expr(e), vars, bufs))) << text;
  }
  // Input spelling with redundant parentheses normalises.
  EXPECT_EQ(print_expr(parse_expr("((x) + (y*z))", vars)), "x + y*z");
  EXPECT_EQ(print_expr(parse_expr("x-3", vars)), "x - 3");
}

TEST(PrinterParserTest, PrintsStatementsAtAnIndent) {
  Buffer c = make_buffer("C", DType::kInt32, {4});
  Var i("i");
  Stmt s = make_for(i, 0, 4, ForKind::kSerial, make_store(c, {i}, i));
  EXPECT_EQ(print_stmt(s, 1), "  for i in 0..4 {\n    C[i] = i\n  }\n");
  EXPECT_TRUE(structural_equal(s, parse_stmt(print_stmt(s), {}, {c})));
}

TEST(PrinterParserTest, PrintsTensorExpressionsForDebugging) {
  Tensor t = placeholder({4, 4}, DType::kFloat32, "T");
  Var i("i");
  IterVar k = reduce_axis(4, "k");
  IterVar l = reduce_axis(3, "l");
  EXPECT_EQ(print_expr(t(i, k.var)), "T[i, k]");
  EXPECT_EQ(print_expr(sum(t(i, k.var + l.var) * 2.0f, {k, l})), "sum(T[i, k + l]*2.0f, k:4, l:3)");
}

TEST(ParserErrorTest, ReportsLineAndColumn) {
  const std::string head = "program f(A: float32[4, 4], B: float64[4]) -> (C: float32[4, 4]) {\n";
  expect_parse_error(head + "  for i in 0..4 {\n    C[i, q] = 0f\n  }\n}",
                     "line 3, column 10: unknown variable q");
  expect_parse_error(head + "  for i in 0..4 {\n    C[i, i = 0f\n  }\n}",
                     "line 3, column 12: expected ']'");
  expect_parse_error(head + "  X[0, 0] = 0f\n}", "line 2, column 3: unknown buffer X");
  expect_parse_error(head + "  C[0, 0] = A[0, 0] + B[0]\n}",
                     "line 2, column 21: operator Add on mismatched types float32 and float64; "
                     "insert a cast");
  expect_parse_error(head + "  C[0] = 0f\n}",
                     "line 2, column 3: buffer C has 2 dimensions but is stored with 1 indices");
  expect_parse_error(head + "  C[0, 0] = A[0]\n}",
                     "line 2, column 13: buffer A has 2 dimensions but is indexed with 1");
  expect_parse_error(head + "  for i in 5..5 {\n    C[i, i] = 0f\n  }\n}",
                     "line 2, column 3: loop i has non-positive extent 0");
  expect_parse_error(
      head + "  for i in 0..4 {\n    for j in (i)..4 {\n      C[i, j] = 0f\n    }\n  }\n}",
      "line 3, column 19: expected '+': a loop with a non-constant start is "
      "written (MIN)..+EXTENT");
  expect_parse_error(head + "  for i in 0.5..4 {\n    C[i, i] = 0f\n  }\n}",
                     "line 2, column 12: loop start must be int32");
  expect_parse_error(head + "  if (1) {\n    C[0, 0] = 0f\n  }\n}",
                     "line 2, column 7: if condition must be bool, not int32");
  expect_parse_error(head + "  C[0, 0] = A[0, 0] @ 1f\n}",
                     "line 2, column 21: unexpected character '@'");
  expect_parse_error(head + "  C[0, 0] = 12abc\n}", "line 2, column 13: malformed number");
  expect_parse_error(head + "  C[0, 0] = 1e+f\n}", "line 2, column 13: malformed number");
  expect_parse_error(head + "  for in in 0..4 {\n  }\n}",
                     "line 2, column 7: expected loop variable name");
  expect_parse_error(head + "  for i in 0..4 {\n  }\n}", "line 3, column 3: expected a statement");
  expect_parse_error(head + "  C[0, 0] = 1f\n", "line 3, column 1: expected '}'");
  expect_parse_error(head + "  C[0, 0] = 1f\n}\n}", "line 4, column 1: expected end of input");
  expect_parse_error(head + "  C[0, 0] = float32(2147483648)\n}",
                     "line 2, column 21: integer literal 2147483648 does not fit int32");
  expect_parse_error(head + "  C[0, 0] = 1e39f\n}",
                     "line 2, column 13: float literal 1e39f is out of range");
  expect_parse_error(head + "  C[0, 0] = - 1f\n}", "line 2, column 13: expected an expression");
  expect_parse_error(head + "  C[0, 0] = select(true, 1f)\n}",
                     "line 2, column 28: select takes 3 arguments, not 2");
  expect_parse_error(head + "  C[0, 0] = A[0, 0] + for\n}",
                     "line 2, column 23: expected an expression, found keyword for");
  expect_parse_error("program f(A: float32[4], A: int32[2]) -> () {}",
                     "line 1, column 26: duplicate buffer A");
  expect_parse_error("program f(A: float16[4]) -> () {}",
                     "line 1, column 14: expected a dtype (bool, int32, float32, float64)");
  expect_parse_error("program f(A: float32[0]) -> () {}",
                     "line 1, column 11: buffer A has non-positive extent 0");
  expect_parse_error("program f() {}", "line 1, column 13: expected '->'");
  expect_parse_error("", "line 1, column 1: expected 'program'");
}

TEST(PrinterParserTest, IntrinsicCallsRoundTrip) {
  // Intrinsic names are not keywords: `exp` also names a loop and `log` a buffer here.
  const char* text =
      R"(program f(A: float32[4], D: float64[4]) -> (log: float32[4], E: float64[4]) {
  for exp in 0..4 {
    log[exp] = exp(A[exp] - 1.0f)/sqrt(tanh(A[exp])*2.0f) + log(A[exp]) - sigmoid(0.0f - A[exp])
    E[exp] = exp(D[exp]) + log(1.5) + float64(exp(float32(exp)))
  }
}
)";
  Program p = parse_program(text);
  EXPECT_EQ(print_program(p), text);
  expect_round_trip(p);
  Program other =
      parse_program(std::string(text).replace(std::string(text).find("sqrt"), 4, "exp"));
  EXPECT_FALSE(structural_equal(p, other));
  EXPECT_NE(structural_hash(p), structural_hash(other));
}

TEST(ParserErrorTest, IntrinsicCallErrors) {
  const std::string head = "program f(A: float32[4]) -> (B: float32[4]) {\n";
  expect_parse_error(head + "  B[0] = exp(A[0], A[1])\n}",
                     "line 2, column 24: exp takes 1 argument, not 2");
  expect_parse_error(head + "  B[0] = foo(A[0])\n}", "line 2, column 10: unknown function foo");
  expect_parse_error(head + "  for i in 0..4 {\n    B[i] = exp(i)\n  }\n}",
                     "line 3, column 12: exp needs a float32 or float64 argument, not int32; "
                     "insert a cast");
  expect_parse_error(head + "  B[0] = exp A[0]\n}", "line 2, column 10: unknown variable exp");
}

TEST(ParserErrorTest, LoopVariablesAreScoped) {
  expect_parse_error(
      "program f() -> (C: int32[4]) {\n  for i in 0..4 {\n    C[i] = i\n  }\n  C[0] = i\n}",
      "line 5, column 10: unknown variable i");
  expect_parse_error(
      "program f() -> (C: int32[4]) {\n  alloc T: int32[4] {\n    T[0] = 1\n  }\n  C[0] = T[0]\n}",
      "line 5, column 10: unknown buffer T");
}

TEST(StructuralEqualTest, AlphaRenamedLoopsAreEqual) {
  const char* a =
      "program f() -> (C: int32[4, 4]) {\n"
      "  for i in 0..4 {\n    for j in 0..4 {\n      C[i, j] = i*4 + j\n    }\n  }\n}";
  const char* b =
      "program f() -> (C: int32[4, 4]) {\n"
      "  for x.o in 0..4 {\n    for y in 0..4 {\n      C[x.o, y] = x.o*4 + y\n    }\n  }\n}";
  const char* swapped =
      "program f() -> (C: int32[4, 4]) {\n"
      "  for i in 0..4 {\n    for j in 0..4 {\n      C[j, i] = j*4 + i\n    }\n  }\n}";
  Program pa = parse_program(a), pb = parse_program(b), ps = parse_program(swapped);
  EXPECT_TRUE(structural_equal(pa, pb));
  EXPECT_EQ(structural_hash(pa), structural_hash(pb));
  EXPECT_FALSE(structural_equal(pa, ps));
  EXPECT_NE(structural_hash(pa), structural_hash(ps));

  // The same var node bound at different depths is not the same variable.
  Buffer c = make_buffer("C", DType::kInt32, {4});
  Var i("i"), j("j");
  Stmt s1 = make_for(i, 0, 4, ForKind::kSerial,
                     make_for(j, 0, 4, ForKind::kSerial, make_store(c, {i}, j)));
  Stmt s2 = make_for(j, 0, 4, ForKind::kSerial,
                     make_for(i, 0, 4, ForKind::kSerial, make_store(c, {i}, j)));
  EXPECT_FALSE(structural_equal(s1, s2));
  Stmt s3 = make_for(j, 0, 4, ForKind::kSerial,
                     make_for(i, 0, 4, ForKind::kSerial, make_store(c, {j}, i)));
  EXPECT_TRUE(structural_equal(s1, s3));
  EXPECT_EQ(structural_hash(s1), structural_hash(s3));
}

TEST(StructuralEqualTest, DifferencesAreNotEqual) {
  Buffer c = make_buffer("C", DType::kFloat32, {8});
  auto loop = [](Buffer buf, int64_t extent, Expr value, ForKind kind = ForKind::kSerial,
                 Expr min = 0) {
    Var i("i");
    return make_for(i, min, extent, kind, make_store(buf, {i}, value));
  };
  Expr one = make_float(1.0, DType::kFloat32);
  Stmt base = loop(c, 4, one);
  EXPECT_TRUE(structural_equal(base, loop(c, 4, one)));
  EXPECT_TRUE(structural_equal(base, loop(make_buffer("C", DType::kFloat32, {8}), 4, one)));
  EXPECT_EQ(structural_hash(base),
            structural_hash(loop(make_buffer("C", DType::kFloat32, {8}), 4, one)));
  EXPECT_FALSE(structural_equal(base, loop(c, 5, one)));
  EXPECT_FALSE(structural_equal(base, loop(c, 4, make_float(2.0, DType::kFloat32))));
  EXPECT_FALSE(structural_equal(base, loop(make_buffer("D", DType::kFloat32, {8}), 4, one)));
  EXPECT_FALSE(structural_equal(base, loop(make_buffer("C", DType::kFloat32, {9}), 4, one)));
  EXPECT_FALSE(structural_equal(
      base, loop(make_buffer("C", DType::kFloat64, {8}), 4, make_float(1.0, DType::kFloat64))));
  EXPECT_FALSE(structural_equal(base, loop(c, 4, one, ForKind::kParallel)));
  EXPECT_FALSE(structural_equal(base, loop(c, 4, one, ForKind::kSerial, 1)));
  EXPECT_NE(structural_hash(base), structural_hash(loop(c, 5, one)));
  EXPECT_NE(structural_hash(base), structural_hash(loop(c, 4, one, ForKind::kUnrolled)));

  // Free variables are equal only to themselves; constants compare by value and type.
  Var x("x"), x2("x");
  EXPECT_TRUE(structural_equal(x + 1, x + 1));
  EXPECT_FALSE(structural_equal(x + 1, x2 + 1));
  EXPECT_FALSE(structural_equal(Expr(1), make_int(1, DType::kBool)));
  EXPECT_TRUE(
      structural_equal(make_float(kNaN, DType::kFloat64), make_float(-kNaN, DType::kFloat64)));
  EXPECT_FALSE(
      structural_equal(make_float(0.0, DType::kFloat64), make_float(-0.0, DType::kFloat64)));
  EXPECT_FALSE(
      structural_equal(make_float(0.5, DType::kFloat64), make_float(0.5, DType::kFloat32)));

  // If with and without else; program name and buffer lists.
  Expr cond = x < 3;
  Stmt st = make_store(c, {0}, one);
  EXPECT_FALSE(structural_equal(make_if(cond, st), make_if(cond, st, st)));
  EXPECT_TRUE(structural_equal(make_if(cond, st, st), make_if(cond, st, st)));
  Program p = build_everything();
  Program renamed = p;
  renamed.name = "other";
  EXPECT_FALSE(structural_equal(p, renamed));
  Program fewer = p;
  fewer.outputs.pop_back();
  EXPECT_FALSE(structural_equal(p, fewer));
  EXPECT_TRUE(structural_equal(p, build_everything()));
  EXPECT_EQ(structural_hash(p), structural_hash(build_everything()));
}

}  // namespace
}  // namespace tessera
