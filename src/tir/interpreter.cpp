#include "tir/interpreter.h"

#include <cmath>
#include <limits>
#include <random>
#include <unordered_map>

#include "te/error.h"
#include "tir/stmt_functor.h"

namespace tessera {

namespace {

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// Rounds a value the way storing it in a variable of type t would.
double round_to(DType t, double v) {
  switch (t) {
    case DType::kFloat32:
      return static_cast<float>(v);
    case DType::kFloat64:
      return v;
    case DType::kInt32:
      return static_cast<double>(static_cast<int32_t>(v));
    case DType::kBool:
      return v != 0 ? 1 : 0;
  }
  return v;
}

class Interpreter {
 public:
  void bind(const Buffer& b, std::vector<double>* storage) { buffers_[b.get()] = storage; }

  void exec(const Stmt& s) {
    switch (s.kind()) {
      case StmtKind::kFor: {
        const auto* n = s.as<ForNode>();
        int64_t lo = static_cast<int64_t>(eval(n->min));
        for (int64_t i = lo; i < lo + n->extent; ++i) {
          vars_[n->var.get()] = i;
          exec(n->body);
        }
        vars_.erase(n->var.get());
        return;
      }
      case StmtKind::kStore: {
        const auto* n = s.as<StoreNode>();
        size_t off = offset(n->buffer, n->indices);
        double v = eval(n->value);
        storage(n->buffer)[off] = round_to(n->buffer->dtype, v);
        return;
      }
      case StmtKind::kAllocate: {
        const auto* n = s.as<AllocateNode>();
        std::vector<double> data(n->buffer->num_elements(),
                                 std::numeric_limits<double>::quiet_NaN());
        auto* previous = buffers_.count(n->buffer.get()) ? buffers_[n->buffer.get()] : nullptr;
        buffers_[n->buffer.get()] = &data;
        exec(n->body);
        buffers_[n->buffer.get()] = previous;
        return;
      }
      case StmtKind::kSeq:
        for (const Stmt& c : s.as<SeqNode>()->stmts) exec(c);
        return;
      case StmtKind::kPrefetch:  // a cache hint: nothing to compute
        return;
      case StmtKind::kIfThenElse: {
        const auto* n = s.as<IfThenElseNode>();
        if (eval(n->cond) != 0) {
          exec(n->then_case);
        } else if (n->else_case.defined()) {
          exec(n->else_case);
        }
        return;
      }
    }
  }

  double eval(const Expr& e) {
    DType t = e.dtype();
    switch (e.kind()) {
      case ExprKind::kIntImm:
        return static_cast<double>(e.as<IntImmNode>()->value);
      case ExprKind::kFloatImm:
        return e.as<FloatImmNode>()->value;
      case ExprKind::kVar: {
        auto it = vars_.find(e.as<VarNode>());
        if (it == vars_.end())
          throw_error("interpreter: unbound variable {}", e.as<VarNode>()->name);
        return static_cast<double>(it->second);
      }
      case ExprKind::kAdd:
        return arith(e.as<AddNode>(), t, [](double a, double b) { return a + b; });
      case ExprKind::kSub:
        return arith(e.as<SubNode>(), t, [](double a, double b) { return a - b; });
      case ExprKind::kMul:
        return arith(e.as<MulNode>(), t, [](double a, double b) { return a * b; });
      case ExprKind::kDiv: {
        const auto* n = e.as<DivNode>();
        double a = eval(n->a), b = eval(n->b);
        if (is_float(t)) return round_to(t, a / b);
        if (b == 0) throw_error("interpreter: integer division by zero");
        return static_cast<double>(floor_div(static_cast<int64_t>(a), static_cast<int64_t>(b)));
      }
      case ExprKind::kMod: {
        const auto* n = e.as<ModNode>();
        auto a = static_cast<int64_t>(eval(n->a)), b = static_cast<int64_t>(eval(n->b));
        if (b == 0) throw_error("interpreter: integer modulo by zero");
        return static_cast<double>(a - floor_div(a, b) * b);
      }
      case ExprKind::kMin:
        return arith(e.as<MinNode>(), t, [](double a, double b) { return a < b ? a : b; });
      case ExprKind::kMax:
        return arith(e.as<MaxNode>(), t, [](double a, double b) { return a > b ? a : b; });
      case ExprKind::kEQ:
        return cmp(e.as<EQNode>(), [](double a, double b) { return a == b; });
      case ExprKind::kNE:
        return cmp(e.as<NENode>(), [](double a, double b) { return a != b; });
      case ExprKind::kLT:
        return cmp(e.as<LTNode>(), [](double a, double b) { return a < b; });
      case ExprKind::kLE:
        return cmp(e.as<LENode>(), [](double a, double b) { return a <= b; });
      case ExprKind::kGT:
        return cmp(e.as<GTNode>(), [](double a, double b) { return a > b; });
      case ExprKind::kGE:
        return cmp(e.as<GENode>(), [](double a, double b) { return a >= b; });
      case ExprKind::kAnd: {
        const auto* n = e.as<AndNode>();
        return (eval(n->a) != 0 && eval(n->b) != 0) ? 1 : 0;
      }
      case ExprKind::kOr: {
        const auto* n = e.as<OrNode>();
        return (eval(n->a) != 0 || eval(n->b) != 0) ? 1 : 0;
      }
      case ExprKind::kNot:
        return eval(e.as<NotNode>()->a) != 0 ? 0 : 1;
      case ExprKind::kSelect: {
        const auto* n = e.as<SelectNode>();
        return eval(n->cond) != 0 ? eval(n->true_value) : eval(n->false_value);
      }
      case ExprKind::kCast: {
        double v = eval(e.as<CastNode>()->value);
        if (t == DType::kInt32) return static_cast<double>(static_cast<int32_t>(std::trunc(v)));
        return round_to(t, v);
      }
      case ExprKind::kCall: {
        // Computed in double, then rounded to the call's type like every float operation.
        const auto* n = e.as<CallNode>();
        return round_to(t, eval_intrinsic(n->op, eval(n->args[0])));
      }
      case ExprKind::kLoad: {
        const auto* n = e.as<LoadNode>();
        return storage(n->buffer)[offset(n->buffer, n->indices)];
      }
      case ExprKind::kTensorRead:
      case ExprKind::kReduce:
        throw_internal("interpreter: {} in a loop program (lower it first)",
                       expr_kind_name(e.kind()));
    }
    throw_internal("interpreter: unknown expression kind");
  }

 private:
  template <typename Node, typename F>
  double arith(const Node* n, DType t, F f) {
    double v = f(eval(n->a), eval(n->b));
    return is_float(t) ? round_to(t, v) : round_to(DType::kInt32, v);
  }
  template <typename Node, typename F>
  double cmp(const Node* n, F f) {
    return f(eval(n->a), eval(n->b)) ? 1 : 0;
  }

  std::vector<double>& storage(const Buffer& b) {
    auto it = buffers_.find(b.get());
    if (it == buffers_.end() || !it->second)
      throw_error("interpreter: buffer {} is not allocated", b->name);
    return *it->second;
  }

  size_t offset(const Buffer& b, const std::vector<Expr>& indices) {
    int64_t off = 0;
    for (size_t d = 0; d < indices.size(); ++d) {
      auto i = static_cast<int64_t>(eval(indices[d]));
      if (i < 0 || i >= b->shape[d]) {
        throw_error("interpreter: index {} out of bounds [0, {}) in dimension {} of {}", i,
                    b->shape[d], d, b->name);
      }
      off = off * b->shape[d] + i;
    }
    return static_cast<size_t>(off);
  }

  std::unordered_map<const VarNode*, int64_t> vars_;
  std::unordered_map<const BufferNode*, std::vector<double>*> buffers_;
};

}  // namespace

void interpret(const Program& p, std::vector<std::vector<double>>& args) {
  std::vector<Buffer> bufs = p.args();
  if (args.size() != bufs.size()) {
    throw_error("interpreter: {} expects {} arguments, got {}", p.name, bufs.size(), args.size());
  }
  Interpreter in;
  for (size_t i = 0; i < bufs.size(); ++i) {
    if (static_cast<int64_t>(args[i].size()) != bufs[i]->num_elements()) {
      throw_error("interpreter: argument {} ({}) has {} elements, expected {}", i, bufs[i]->name,
                  args[i].size(), bufs[i]->num_elements());
    }
    in.bind(bufs[i], &args[i]);
  }
  in.exec(p.body);
}

std::vector<std::vector<double>> random_args(const Program& p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::uniform_int_distribution<int> integer(-5, 5);
  std::vector<std::vector<double>> args;
  for (const Buffer& b : p.inputs) {
    std::vector<double> v(b->num_elements());
    for (double& x : v) {
      x = is_float(b->dtype) ? real(rng) : integer(rng);
      if (b->dtype == DType::kFloat32) x = static_cast<float>(x);
    }
    args.push_back(std::move(v));
  }
  for (const Buffer& b : p.outputs) args.emplace_back(b->num_elements(), std::nan(""));
  return args;
}

}  // namespace tessera
