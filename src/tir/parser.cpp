#include "tir/parser.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <string>

#include "te/error.h"
#include "tir/printer.h"

namespace tessera {

namespace {

// ---- lexer ----

enum class Tok : uint8_t { kIdent, kKeyword, kInt, kFloat, kPunct, kEnd };

struct Token {
  Tok kind;
  std::string_view text;
  int line;
  int column;
  size_t offset;
};

constexpr std::string_view kKeywords[] = {
    "program", "for",   "in",      "parallel", "vectorized", "unrolled", "alloc",
    "if",      "else",  "select",  "min",      "max",        "true",     "false",
    "bool",    "int32", "float32", "float64",  "prefetch"};
// Float specials read as number tokens so that `-inf` is a negative literal like `-3`.
constexpr std::string_view kFloatWords[] = {"inf", "inff", "nan", "nanf"};
// Longest first, so that `<=` is not read as `<` then `=`.
constexpr std::string_view kPuncts[] = {"->", "..", "==", "!=", "<=", ">=", "&&", "||", "(",
                                        ")",  "[",  "]",  "{",  "}",  ",",  ":",  "+",  "-",
                                        "*",  "/",  "%",  "<",  ">",  "!",  "="};

template <size_t N>
bool one_of(std::string_view s, const std::string_view (&list)[N]) {
  for (std::string_view w : list) {
    if (s == w) return true;
  }
  return false;
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_ident_char(char c) {
  return is_ident_start(c) || is_digit(c);
}

[[noreturn]] void fail_at(int line, int column, const std::string& what) {
  throw Error(fmt::format("line {}, column {}: {}", line, column, what));
}

std::vector<Token> lex(std::string_view src) {
  std::vector<Token> out;
  size_t i = 0;
  int line = 1;
  size_t line_start = 0;
  auto at = [&](size_t k) { return k < src.size() ? src[k] : '\0'; };
  while (true) {
    // Whitespace and `#` comments; newlines only count lines.
    while (i < src.size()) {
      char c = src[i];
      if (c == '\n') {
        ++line;
        line_start = ++i;
      } else if (c == ' ' || c == '\t' || c == '\r') {
        ++i;
      } else if (c == '#') {
        while (i < src.size() && src[i] != '\n') ++i;
      } else {
        break;
      }
    }
    Token t{Tok::kEnd, {}, line, static_cast<int>(i - line_start) + 1, i};
    if (i >= src.size()) {
      out.push_back(t);
      return out;
    }
    size_t start = i;
    char c = src[i];
    if (is_ident_start(c)) {
      // A dot belongs to a name only when a name character follows: `i.outer`, but `n..+4`.
      while (is_ident_char(at(i)) || (at(i) == '.' && is_ident_char(at(i + 1)))) ++i;
      t.text = src.substr(start, i - start);
      t.kind = one_of(t.text, kFloatWords) ? Tok::kFloat
               : one_of(t.text, kKeywords) ? Tok::kKeyword
                                           : Tok::kIdent;
    } else if (is_digit(c)) {
      bool is_float_text = false;
      while (is_digit(at(i))) ++i;
      // `0..64` is a range, so a dot is part of a number only when a digit follows.
      if (at(i) == '.' && is_digit(at(i + 1))) {
        is_float_text = true;
        for (++i; is_digit(at(i));) ++i;
      }
      if (at(i) == 'e' || at(i) == 'E') {
        size_t k = i + 1;
        if (at(k) == '+' || at(k) == '-') ++k;
        if (!is_digit(at(k))) fail_at(t.line, t.column, "malformed number");
        is_float_text = true;
        for (i = k; is_digit(at(i));) ++i;
      }
      if (at(i) == 'f') {
        is_float_text = true;
        ++i;
      }
      if (is_ident_char(at(i)) || (at(i) == '.' && is_digit(at(i + 1)))) {
        fail_at(t.line, t.column, "malformed number");
      }
      t.text = src.substr(start, i - start);
      t.kind = is_float_text ? Tok::kFloat : Tok::kInt;
    } else {
      for (std::string_view p : kPuncts) {
        if (src.substr(i, p.size()) == p) {
          t.kind = Tok::kPunct;
          t.text = p;
          i += p.size();
          break;
        }
      }
      if (t.kind != Tok::kPunct)
        fail_at(t.line, t.column, fmt::format("unexpected character '{}'", c));
    }
    out.push_back(t);
  }
}

// ---- parser ----

class Parser {
 public:
  Parser(std::string_view text, const std::vector<Var>& vars, const std::vector<Buffer>& buffers)
      : toks_(lex(text)), vars_(vars), buffers_(buffers) {}

  Program parse_program() {
    Program p;
    expect_keyword("program");
    p.name = std::string(expect_ident("program name").text);
    expect("(");
    p.inputs = parse_decls();
    expect(")");
    expect("->");
    expect("(");
    p.outputs = parse_decls();
    expect(")");
    expect("{");
    if (!is("}")) p.body = parse_stmts();
    expect("}");
    expect_end();
    return p;
  }

  Expr parse_whole_expr() {
    Expr e = parse_expr();
    expect_end();
    return e;
  }

  Stmt parse_whole_stmts() {
    Stmt s = parse_stmts();
    expect_end();
    return s;
  }

 private:
  // -- tokens --
  const Token& peek(size_t ahead = 0) const {
    return toks_[std::min(pos_ + ahead, toks_.size() - 1)];
  }
  const Token& advance() {
    const Token& t = toks_[pos_];
    if (t.kind != Tok::kEnd) ++pos_;
    return t;
  }
  bool is(std::string_view punct) const {
    return peek().kind == Tok::kPunct && peek().text == punct;
  }
  bool is_keyword(std::string_view word) const {
    return peek().kind == Tok::kKeyword && peek().text == word;
  }
  [[noreturn]] void fail(const Token& t, const std::string& what) const {
    fail_at(t.line, t.column, what);
  }
  const Token& expect(std::string_view punct) {
    if (!is(punct)) fail(peek(), fmt::format("expected '{}'", punct));
    return advance();
  }
  void expect_keyword(std::string_view word) {
    if (!is_keyword(word)) fail(peek(), fmt::format("expected '{}'", word));
    advance();
  }
  const Token& expect_ident(std::string_view what) {
    if (peek().kind != Tok::kIdent) fail(peek(), fmt::format("expected {}", what));
    return advance();
  }
  void expect_end() {
    if (peek().kind != Tok::kEnd) fail(peek(), "expected end of input");
  }

  // Runs a validating maker; its complaint becomes a parse error at `t`.
  template <typename F>
  auto checked(const Token& t, F&& make) const {
    try {
      return make();
    } catch (const Error& e) {
      fail(t, e.what());
    }
  }

  int64_t parse_int(const Token& t, bool negative) const {
    uint64_t magnitude = 0;
    auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), magnitude);
    uint64_t limit = negative ? uint64_t{1} << 31 : (uint64_t{1} << 31) - 1;
    if (r.ec != std::errc() || magnitude > limit) {
      fail(t, fmt::format("integer literal {}{} does not fit int32", negative ? "-" : "", t.text));
    }
    return negative ? -static_cast<int64_t>(magnitude) : static_cast<int64_t>(magnitude);
  }

  Expr parse_number(const Token& t, bool negative) const {
    if (t.kind == Tok::kInt) return make_int(parse_int(t, negative));
    std::string_view text = t.text;
    // `inf` ends in f but is float64; the float32 specials are `inff` and `nanf`.
    bool is_special = t.text.starts_with("inf") || t.text.starts_with("nan");
    DType type = text.back() == 'f' && text != "inf" ? DType::kFloat32 : DType::kFloat64;
    if (type == DType::kFloat32) text.remove_suffix(1);
    double value;
    if (is_special) {
      value = text == "inf" ? std::numeric_limits<double>::infinity()
                            : std::numeric_limits<double>::quiet_NaN();
    } else {
      // Read in the literal's own type: rounding through double first could differ.
      std::from_chars_result r;
      if (type == DType::kFloat32) {
        float f = 0;
        r = std::from_chars(text.data(), text.data() + text.size(), f);
        value = f;
      } else {
        r = std::from_chars(text.data(), text.data() + text.size(), value);
      }
      if (r.ec != std::errc()) fail(t, fmt::format("float literal {} is out of range", t.text));
    }
    return make_float(negative ? -value : value, type);
  }

  // -- declarations --
  Buffer parse_decl() {
    const Token& name = expect_ident("buffer name");
    expect(":");
    const Token& type_tok = peek();
    auto type = type_tok.kind == Tok::kKeyword ? parse_dtype(type_tok.text) : std::nullopt;
    if (!type) fail(type_tok, "expected a dtype (bool, int32, float32, float64)");
    advance();
    expect("[");
    std::vector<int64_t> shape;
    while (!is("]")) {
      if (!shape.empty()) expect(",");
      if (peek().kind != Tok::kInt) fail(peek(), "expected an integer extent");
      shape.push_back(parse_int(advance(), false));
      if (!is(",") && !is("]")) fail(peek(), "expected ']'");
    }
    advance();
    return checked(name, [&] { return make_buffer(std::string(name.text), *type, shape); });
  }

  std::vector<Buffer> parse_decls() {
    std::vector<Buffer> out;
    if (is(")")) return out;
    do {
      const Token& name = peek();
      out.push_back(parse_decl());
      for (const Buffer& b : buffers_) {
        if (b->name == name.text) fail(name, fmt::format("duplicate buffer {}", name.text));
      }
      buffers_.push_back(out.back());
    } while (is(",") && (advance(), true));
    return out;
  }

  // -- statements --
  Stmt parse_stmts() {
    std::vector<Stmt> stmts;
    do {
      stmts.push_back(parse_stmt());
    } while (!is("}") && peek().kind != Tok::kEnd);
    return make_seq(std::move(stmts));
  }

  Stmt parse_block() {
    expect("{");
    if (is("}")) fail(peek(), "expected a statement");
    Stmt body = parse_stmts();
    expect("}");
    return body;
  }

  Stmt parse_stmt() {
    const Token& t = peek();
    if (t.kind == Tok::kKeyword) {
      if (t.text == "alloc") return parse_alloc();
      if (t.text == "if") return parse_if();
      if (t.text == "prefetch") return parse_prefetch();
      for (ForKind k :
           {ForKind::kSerial, ForKind::kParallel, ForKind::kVectorized, ForKind::kUnrolled}) {
        if (t.text == (k == ForKind::kSerial ? "for" : for_kind_name(k))) return parse_for(k);
      }
    }
    if (t.kind == Tok::kIdent) return parse_store();
    fail(t, "expected a statement");
  }

  Stmt parse_for(ForKind kind) {
    const Token& start = peek();
    if (kind != ForKind::kSerial) advance();
    expect_keyword("for");
    const Token& name = expect_ident("loop variable name");
    expect_keyword("in");
    const Token& min_tok = peek();
    Expr min = parse_expr();
    if (min.dtype() != DType::kInt32) fail(min_tok, "loop start must be int32");
    expect("..");
    int64_t extent;
    if (is("+")) {
      advance();
      if (peek().kind != Tok::kInt) fail(peek(), "expected an integer extent");
      extent = parse_int(advance(), false);
    } else {
      const int64_t* c = as_const_int(min);
      if (!c)
        fail(peek(), "expected '+': a loop with a non-constant start is written (MIN)..+EXTENT");
      bool negative = is("-") && peek(1).kind == Tok::kInt && peek(1).offset == peek().offset + 1;
      if (negative) advance();
      if (peek().kind != Tok::kInt) fail(peek(), "expected an integer loop end");
      extent = parse_int(advance(), negative) - *c;
    }
    Var var(std::string(name.text));
    vars_.push_back(var);
    Stmt body = parse_block();
    vars_.pop_back();
    return checked(start, [&] { return make_for(var, min, extent, kind, body); });
  }

  Stmt parse_alloc() {
    advance();
    Buffer buffer = parse_decl();
    buffers_.push_back(buffer);
    Stmt body = parse_block();
    buffers_.pop_back();
    return make_allocate(buffer, body);
  }

  Stmt parse_if() {
    advance();
    expect("(");
    const Token& cond_tok = peek();
    Expr cond = parse_expr();
    if (cond.dtype() != DType::kBool) {
      fail(cond_tok, fmt::format("if condition must be bool, not {}", dtype_name(cond.dtype())));
    }
    expect(")");
    Stmt then_case = parse_block();
    Stmt else_case;
    if (is_keyword("else")) {
      advance();
      else_case = parse_block();
    }
    return make_if(cond, then_case, else_case);
  }

  Stmt parse_prefetch() {
    advance();
    const Token& name = expect_ident("buffer name");
    Buffer buffer = find_buffer(name);
    std::vector<Expr> indices = parse_indices();
    return checked(name, [&] { return make_prefetch(buffer, indices); });
  }

  Stmt parse_store() {
    const Token& name = advance();
    Buffer buffer = find_buffer(name);
    std::vector<Expr> indices = parse_indices();
    expect("=");
    Expr value = parse_expr();
    return checked(name, [&] { return make_store(buffer, indices, value); });
  }

  // -- expressions (precedence climbing; every binary operator is left-associative) --
  Expr parse_expr(int min_prec = 1) {
    Expr lhs = parse_unary();
    while (true) {
      const Token& op = peek();
      ExprKind kind;
      if (op.kind != Tok::kPunct || !binary_kind(op.text, &kind)) break;
      int prec = expr_precedence(kind);
      if (prec < min_prec) break;
      advance();
      Expr rhs = parse_expr(prec + 1);
      lhs = checked(op, [&] { return make_binary(kind, lhs, rhs); });
    }
    return lhs;
  }

  static bool binary_kind(std::string_view symbol, ExprKind* kind) {
#define TESSERA_BINARY_NODE(Name)                                               \
  if (const char* s = expr_infix_symbol(ExprKind::k##Name); s && symbol == s) { \
    *kind = ExprKind::k##Name;                                                  \
    return true;                                                                \
  }
#define TESSERA_EXPR_NODE(Name)
#include "te/expr_nodes.def"
    return false;
  }

  Expr parse_unary() {
    if (!is("!")) return parse_primary();
    const Token& op = advance();
    Expr a = parse_unary();
    return checked(op, [&] { return make_not(a); });
  }

  Expr parse_primary() {
    const Token& t = peek();
    if (t.kind == Tok::kInt || t.kind == Tok::kFloat) return parse_number(advance(), false);
    if (is("-")) {
      const Token& num = peek(1);
      // `-` directly followed by a number is a negative literal; `0 - x` is a subtraction.
      if ((num.kind == Tok::kInt || num.kind == Tok::kFloat) && num.offset == t.offset + 1) {
        advance();
        return parse_number(advance(), true);
      }
      fail(t, "expected an expression");
    }
    if (is("(")) {
      advance();
      Expr e = parse_expr();
      expect(")");
      return e;
    }
    if (t.kind == Tok::kKeyword) return parse_keyword_expr();
    if (t.kind == Tok::kIdent) {
      advance();
      if (is("(")) return parse_call(t);
      if (is("[")) {
        Buffer buffer = find_buffer(t);
        std::vector<Expr> indices = parse_indices();
        return checked(t, [&] { return make_load(buffer, indices); });
      }
      for (auto it = vars_.rbegin(); it != vars_.rend(); ++it) {
        if (it->name() == t.text) return *it;
      }
      fail(t, fmt::format("unknown variable {}", t.text));
    }
    fail(t, "expected an expression");
  }

  Expr parse_keyword_expr() {
    const Token& t = advance();
    if (t.text == "true" || t.text == "false") return make_int(t.text == "true", DType::kBool);
    std::optional<DType> cast_type = parse_dtype(t.text);
    size_t arity = cast_type                            ? 1
                   : t.text == "select"                 ? 3
                   : t.text == "min" || t.text == "max" ? 2
                                                        : 0;
    if (arity == 0) fail(t, fmt::format("expected an expression, found keyword {}", t.text));
    std::vector<Expr> args = parse_args(t.text, arity);
    return checked(t, [&] {
      if (cast_type) return make_cast(*cast_type, args[0]);
      if (arity == 3) return make_select(args[0], args[1], args[2]);
      return make_binary(t.text == "min" ? ExprKind::kMin : ExprKind::kMax, args[0], args[1]);
    });
  }

  // An intrinsic call `exp(x)`; intrinsic names are not keywords, so `exp` may still name a
  // loop or a buffer.
  Expr parse_call(const Token& t) {
    std::optional<Intrinsic> f = intrinsic_from_name(t.text);
    if (!f) fail(t, fmt::format("unknown function {}", t.text));
    std::vector<Expr> args = parse_args(t.text, intrinsic_arity(*f));
    return checked(t, [&] { return make_call(*f, args); });
  }

  // `(a, b, ...)` with exactly `arity` arguments.
  std::vector<Expr> parse_args(std::string_view name, size_t arity) {
    expect("(");
    std::vector<Expr> args;
    while (!is(")")) {
      if (!args.empty()) expect(",");
      args.push_back(parse_expr());
      if (!is(",") && !is(")")) fail(peek(), "expected ')'");
    }
    if (args.size() != arity) {
      fail(peek(), fmt::format("{} takes {} argument{}, not {}", name, arity, arity > 1 ? "s" : "",
                               args.size()));
    }
    advance();
    return args;
  }

  std::vector<Expr> parse_indices() {
    expect("[");
    std::vector<Expr> out;
    while (!is("]")) {
      if (!out.empty()) expect(",");
      out.push_back(parse_expr());
      if (!is(",") && !is("]")) fail(peek(), "expected ']'");
    }
    advance();
    return out;
  }

  Buffer find_buffer(const Token& t) const {
    for (auto it = buffers_.rbegin(); it != buffers_.rend(); ++it) {
      if ((*it)->name == t.text) return *it;
    }
    fail(t, fmt::format("unknown buffer {}", t.text));
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
  std::vector<Var> vars_;
  std::vector<Buffer> buffers_;
};

}  // namespace

Program parse_program(std::string_view text) {
  return Parser(text, {}, {}).parse_program();
}

Expr parse_expr(std::string_view text, const std::vector<Var>& vars,
                const std::vector<Buffer>& buffers) {
  return Parser(text, vars, buffers).parse_whole_expr();
}

Stmt parse_stmt(std::string_view text, const std::vector<Var>& vars,
                const std::vector<Buffer>& buffers) {
  return Parser(text, vars, buffers).parse_whole_stmts();
}

}  // namespace tessera
