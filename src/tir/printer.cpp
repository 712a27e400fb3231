#include "tir/printer.h"

#include <fmt/ranges.h>

#include <charconv>
#include <cmath>

#include "te/expr_functor.h"
#include "te/tensor.h"
#include "tir/stmt_functor.h"

namespace tessera {

namespace {

constexpr int kUnary = 7;
constexpr int kPrimary = 8;

class ExprPrinter : public ExprFunctor<void> {
 public:
  explicit ExprPrinter(std::string* out) : out_(*out) {}

 protected:
  void visit_(const IntImmNode& n, const Expr&) override {
    if (n.dtype == DType::kBool) {
      out_ += n.value != 0 ? "true" : "false";
    } else {
      out_ += fmt::format("{}", n.value);
    }
  }
  void visit_(const FloatImmNode& n, const Expr&) override {
    out_ += print_float_literal(n.value, n.dtype);
  }
  void visit_(const VarNode& n, const Expr&) override { out_ += n.name; }

#define TESSERA_BINARY_NODE(Name)                                            \
  void visit_(const Name##Node& n, const Expr& self) override {              \
    print_binary(ExprKind::k##Name, n.a, n.b, expr_precedence(self.kind())); \
  }
#define TESSERA_EXPR_NODE(Name)
#include "te/expr_nodes.def"

  void visit_(const NotNode& n, const Expr&) override {
    out_ += '!';
    print_operand(n.a, expr_precedence(n.a.kind()) < kUnary);
  }
  void visit_(const SelectNode& n, const Expr&) override {
    print_call("select", {n.cond, n.true_value, n.false_value});
  }
  void visit_(const CastNode& n, const Expr&) override {
    print_call(dtype_name(n.dtype), {n.value});
  }
  void visit_(const CallNode& n, const Expr&) override {
    out_ += intrinsic_name(n.op);
    out_ += '(';
    for (size_t i = 0; i < n.args.size(); ++i) {
      if (i > 0) out_ += ", ";
      visit(n.args[i]);
    }
    out_ += ')';
  }
  void visit_(const LoadNode& n, const Expr&) override {
    out_ += n.buffer->name;
    print_indices(n.indices);
  }
  void visit_(const TensorReadNode& n, const Expr&) override {
    out_ += n.tensor->name;
    print_indices(n.indices);
  }
  void visit_(const ReduceNode& n, const Expr&) override {
    out_ += reduce_op_name(n.op);
    out_ += '(';
    visit(n.source);
    for (const IterVar& iv : n.axes) out_ += fmt::format(", {}:{}", iv.var.name(), iv.extent);
    out_ += ')';
  }

 private:
  void print_binary(ExprKind kind, const Expr& a, const Expr& b, int prec) {
    if (kind == ExprKind::kMin || kind == ExprKind::kMax) {
      print_call(kind == ExprKind::kMin ? "min" : "max", {a, b});
      return;
    }
    // `*`, `/` and `%` print without spaces so that a product reads as one term.
    const char* symbol = expr_infix_symbol(kind);
    bool spaced = expr_precedence(kind) < expr_precedence(ExprKind::kMul);
    print_operand(a, expr_precedence(a.kind()) < prec);
    out_ += spaced ? fmt::format(" {} ", symbol) : symbol;
    print_operand(b, expr_precedence(b.kind()) <= prec);
  }
  void print_operand(const Expr& e, bool parens) {
    if (parens) out_ += '(';
    visit(e);
    if (parens) out_ += ')';
  }
  void print_call(const char* name, std::initializer_list<Expr> args) {
    out_ += name;
    out_ += '(';
    bool first = true;
    for (const Expr& a : args) {
      if (!first) out_ += ", ";
      first = false;
      visit(a);
    }
    out_ += ')';
  }
  void print_indices(const std::vector<Expr>& indices) {
    out_ += '[';
    for (size_t i = 0; i < indices.size(); ++i) {
      if (i > 0) out_ += ", ";
      visit(indices[i]);
    }
    out_ += ']';
  }

  std::string& out_;
};

std::string print_shape(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

std::string print_buffer_decl(const Buffer& b) {
  return fmt::format("{}: {}{}", b->name, dtype_name(b->dtype), print_shape(b->shape));
}

class StmtPrinter : public StmtFunctor<void> {
 public:
  StmtPrinter(std::string* out, int indent) : out_(*out), indent_(indent) {}

 protected:
  void visit_(const ForNode& n, const Stmt&) override {
    line_start();
    if (n.for_kind != ForKind::kSerial) {
      out_ += for_kind_name(n.for_kind);
      out_ += ' ';
    }
    out_ += fmt::format("for {} in ", n.var.name());
    if (const int64_t* c = as_const_int(n.min)) {
      out_ += fmt::format("{}..{}", *c, *c + n.extent);
    } else {
      out_ += fmt::format("({})..+{}", print_expr(n.min), n.extent);
    }
    print_block(n.body);
    out_ += '\n';
  }
  void visit_(const StoreNode& n, const Stmt&) override {
    line_start();
    out_ += n.buffer->name;
    std::vector<std::string> idx;
    for (const Expr& i : n.indices) idx.push_back(print_expr(i));
    out_ += fmt::format("[{}] = {}\n", fmt::join(idx, ", "), print_expr(n.value));
  }
  void visit_(const PrefetchNode& n, const Stmt&) override {
    line_start();
    std::vector<std::string> idx;
    for (const Expr& i : n.indices) idx.push_back(print_expr(i));
    out_ += fmt::format("prefetch {}[{}]\n", n.buffer->name, fmt::join(idx, ", "));
  }
  void visit_(const AllocateNode& n, const Stmt&) override {
    line_start();
    out_ += "alloc " + print_buffer_decl(n.buffer);
    print_block(n.body);
    out_ += '\n';
  }
  void visit_(const SeqNode& n, const Stmt&) override {
    for (const Stmt& s : n.stmts) visit(s);
  }
  void visit_(const IfThenElseNode& n, const Stmt&) override {
    line_start();
    out_ += fmt::format("if ({})", print_expr(n.cond));
    print_block(n.then_case);
    if (n.else_case.defined()) {
      out_ += " else";
      print_block(n.else_case);
    }
    out_ += '\n';
  }

 private:
  void line_start() { out_.append(static_cast<size_t>(2 * indent_), ' '); }
  // ` {`, the body one level deeper, then the closing brace without its newline.
  void print_block(const Stmt& body) {
    out_ += " {\n";
    ++indent_;
    visit(body);
    --indent_;
    line_start();
    out_ += '}';
  }

  std::string& out_;
  int indent_;
};

}  // namespace

// Every binary operator is left-associative: a right operand of equal strength gets parentheses.
int expr_precedence(ExprKind kind) {
  switch (kind) {
    case ExprKind::kOr:
      return 1;
    case ExprKind::kAnd:
      return 2;
    case ExprKind::kEQ:
    case ExprKind::kNE:
      return 3;
    case ExprKind::kLT:
    case ExprKind::kLE:
    case ExprKind::kGT:
    case ExprKind::kGE:
      return 4;
    case ExprKind::kAdd:
    case ExprKind::kSub:
      return 5;
    case ExprKind::kMul:
    case ExprKind::kDiv:
    case ExprKind::kMod:
      return 6;
    case ExprKind::kNot:
      return kUnary;
    default:
      return kPrimary;
  }
}

const char* expr_infix_symbol(ExprKind kind) {
  switch (kind) {
    case ExprKind::kAdd:
      return "+";
    case ExprKind::kSub:
      return "-";
    case ExprKind::kMul:
      return "*";
    case ExprKind::kDiv:
      return "/";
    case ExprKind::kMod:
      return "%";
    case ExprKind::kEQ:
      return "==";
    case ExprKind::kNE:
      return "!=";
    case ExprKind::kLT:
      return "<";
    case ExprKind::kLE:
      return "<=";
    case ExprKind::kGT:
      return ">";
    case ExprKind::kGE:
      return ">=";
    case ExprKind::kAnd:
      return "&&";
    case ExprKind::kOr:
      return "||";
    default:
      return nullptr;
  }
}

std::string print_float_literal(double value, DType t) {
  const char* suffix = t == DType::kFloat32 ? "f" : "";
  if (std::isnan(value)) return fmt::format("{}nan{}", std::signbit(value) ? "-" : "", suffix);
  if (std::isinf(value)) return fmt::format("{}inf{}", value < 0 ? "-" : "", suffix);
  // Shortest text that reads back to the same value in the literal's own type.
  char buf[64];
  std::to_chars_result r = t == DType::kFloat32
                               ? std::to_chars(buf, buf + sizeof buf, static_cast<float>(value))
                               : std::to_chars(buf, buf + sizeof buf, value);
  std::string text(buf, r.ptr);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text + suffix;
}

std::string print_expr(const Expr& e) {
  if (!e.defined()) return "<undefined>";
  std::string out;
  ExprPrinter(&out).visit(e);
  return out;
}

std::string print_stmt(const Stmt& s, int indent) {
  if (!s.defined()) return "";
  std::string out;
  StmtPrinter(&out, indent).visit(s);
  return out;
}

std::string print_program(const Program& p) {
  std::vector<std::string> ins, outs;
  for (const Buffer& b : p.inputs) ins.push_back(print_buffer_decl(b));
  for (const Buffer& b : p.outputs) outs.push_back(print_buffer_decl(b));
  return fmt::format("program {}({}) -> ({}) {{\n{}}}\n", p.name, fmt::join(ins, ", "),
                     fmt::join(outs, ", "), print_stmt(p.body, 1));
}

}  // namespace tessera
