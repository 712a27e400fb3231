#include "tir/stmt.h"

#include "te/error.h"
#include "tir/program.h"

namespace tessera {

const char* stmt_kind_name(StmtKind kind) {
  switch (kind) {
#define TESSERA_STMT_NODE(Name) \
  case StmtKind::k##Name:       \
    return #Name;
#include "tir/stmt_nodes.def"
  }
  return "?";
}

const char* for_kind_name(ForKind kind) {
  switch (kind) {
    case ForKind::kSerial:
      return "serial";
    case ForKind::kParallel:
      return "parallel";
    case ForKind::kVectorized:
      return "vectorized";
    case ForKind::kUnrolled:
      return "unrolled";
  }
  return "?";
}

Stmt make_for(Var var, Expr min, int64_t extent, ForKind kind, Stmt body) {
  if (!var.defined() || var.dtype() != DType::kInt32) throw_internal("loop variable must be int32");
  if (!min.defined() || min.dtype() != DType::kInt32) {
    throw_internal("loop {} has a non-int32 start", var.name());
  }
  if (extent <= 0) throw_error("loop {} has non-positive extent {}", var.name(), extent);
  if (!body.defined()) throw_internal("loop {} has no body", var.name());
  return Stmt(
      std::make_shared<ForNode>(std::move(var), std::move(min), extent, kind, std::move(body)));
}

Stmt make_store(Buffer buffer, std::vector<Expr> indices, Expr value) {
  if (!buffer) throw_internal("store to a null buffer");
  if (indices.size() != buffer->shape.size()) {
    throw_error("buffer {} has {} dimensions but is stored with {} indices", buffer->name,
                buffer->shape.size(), indices.size());
  }
  for (const Expr& i : indices) {
    if (!i.defined() || i.dtype() != DType::kInt32) {
      throw_error("index into {} must be int32", buffer->name);
    }
  }
  if (!value.defined()) throw_internal("store of an undefined value into {}", buffer->name);
  if (value.dtype() != buffer->dtype) {
    if (const auto* imm = value.as<IntImmNode>()) {
      value = make_int(imm->value, buffer->dtype);
    } else if (const auto* f = value.as<FloatImmNode>(); f && is_float(buffer->dtype)) {
      value = make_float(f->value, buffer->dtype);
    } else {
      throw_error("store of {} into {} buffer {}", dtype_name(value.dtype()),
                  dtype_name(buffer->dtype), buffer->name);
    }
  }
  return Stmt(std::make_shared<StoreNode>(std::move(buffer), std::move(indices), std::move(value)));
}

Stmt make_allocate(Buffer buffer, Stmt body) {
  if (!buffer || !body.defined()) throw_internal("incomplete allocate");
  return Stmt(std::make_shared<AllocateNode>(std::move(buffer), std::move(body)));
}

Stmt make_seq(std::vector<Stmt> stmts) {
  std::vector<Stmt> flat;
  for (Stmt& s : stmts) {
    if (!s.defined()) continue;
    if (const auto* seq = s.as<SeqNode>()) {
      flat.insert(flat.end(), seq->stmts.begin(), seq->stmts.end());
    } else {
      flat.push_back(std::move(s));
    }
  }
  if (flat.empty()) throw_internal("empty sequence");
  if (flat.size() == 1) return flat[0];
  return Stmt(std::make_shared<SeqNode>(std::move(flat)));
}

Stmt make_if(Expr cond, Stmt then_case, Stmt else_case) {
  if (!cond.defined() || cond.dtype() != DType::kBool) throw_internal("if needs a bool condition");
  if (!then_case.defined()) throw_internal("if without a then branch");
  return Stmt(std::make_shared<IfThenElseNode>(std::move(cond), std::move(then_case),
                                               std::move(else_case)));
}

Stmt make_prefetch(Buffer buffer, std::vector<Expr> indices) {
  if (!buffer) throw_internal("prefetch of a null buffer");
  if (indices.size() != buffer->shape.size())
    throw_error("buffer {} has {} dimensions but is prefetched with {} indices", buffer->name,
                buffer->shape.size(), indices.size());
  for (const Expr& i : indices)
    if (!i.defined() || i.dtype() != DType::kInt32)
      throw_error("index into {} must be int32", buffer->name);
  return Stmt(std::make_shared<PrefetchNode>(std::move(buffer), std::move(indices)));
}

std::vector<Buffer> Program::args() const {
  std::vector<Buffer> all = inputs;
  all.insert(all.end(), outputs.begin(), outputs.end());
  return all;
}

}  // namespace tessera
