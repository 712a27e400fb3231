/// Loop-program statements: immutable nodes behind refcounted handles, built by validating makers.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "te/expr.h"

namespace tessera {

enum class StmtKind : uint8_t {
#define TESSERA_STMT_NODE(Name) k##Name,
#include "tir/stmt_nodes.def"
};

const char* stmt_kind_name(StmtKind kind);

struct StmtNode {
  explicit StmtNode(StmtKind k) : kind(k) {}
  virtual ~StmtNode() = default;
  const StmtKind kind;
};

class Stmt {
 public:
  Stmt() = default;
  explicit Stmt(std::shared_ptr<const StmtNode> node) : node_(std::move(node)) {}

  bool defined() const { return node_ != nullptr; }
  const StmtNode* get() const { return node_.get(); }
  StmtKind kind() const { return node_->kind; }
  bool same_as(const Stmt& other) const { return node_ == other.node_; }

  template <typename T>
  const T* as() const {
    return node_ && node_->kind == T::kKind ? static_cast<const T*>(node_.get()) : nullptr;
  }

 private:
  std::shared_ptr<const StmtNode> node_;
};

enum class ForKind : uint8_t { kSerial, kParallel, kVectorized, kUnrolled };
const char* for_kind_name(ForKind kind);

/// for var in [min, min + extent): body. Extents are compile-time constants.
struct ForNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kFor;
  ForNode(Var v, Expr mn, int64_t ext, ForKind k, Stmt b)
      : StmtNode(kKind),
        var(std::move(v)),
        min(std::move(mn)),
        extent(ext),
        for_kind(k),
        body(std::move(b)) {}
  Var var;
  Expr min;
  int64_t extent;
  ForKind for_kind;
  Stmt body;
};

struct StoreNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kStore;
  StoreNode(Buffer b, std::vector<Expr> idx, Expr v)
      : StmtNode(kKind), buffer(std::move(b)), indices(std::move(idx)), value(std::move(v)) {}
  Buffer buffer;
  std::vector<Expr> indices;
  Expr value;
};

/// A buffer that lives for the duration of body (an intermediate stage, a cache).
struct AllocateNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kAllocate;
  AllocateNode(Buffer b, Stmt s) : StmtNode(kKind), buffer(std::move(b)), body(std::move(s)) {}
  Buffer buffer;
  Stmt body;
};

struct SeqNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kSeq;
  explicit SeqNode(std::vector<Stmt> s) : StmtNode(kKind), stmts(std::move(s)) {}
  std::vector<Stmt> stmts;
};

struct IfThenElseNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kIfThenElse;
  IfThenElseNode(Expr c, Stmt t, Stmt e)
      : StmtNode(kKind), cond(std::move(c)), then_case(std::move(t)), else_case(std::move(e)) {}
  Expr cond;
  Stmt then_case;
  Stmt else_case;  // may be undefined
};

/// A hint to bring the cache line holding buffer[indices] closer (the `prefetch` rule): no effect
/// on values, and an index past the buffer's end is allowed (the hardware ignores it).
struct PrefetchNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kPrefetch;
  PrefetchNode(Buffer b, std::vector<Expr> idx)
      : StmtNode(kKind), buffer(std::move(b)), indices(std::move(idx)) {}
  Buffer buffer;
  std::vector<Expr> indices;
};

Stmt make_for(Var var, Expr min, int64_t extent, ForKind kind, Stmt body);
Stmt make_store(Buffer buffer, std::vector<Expr> indices, Expr value);
Stmt make_allocate(Buffer buffer, Stmt body);
/// A sequence; nested sequences are flattened and a single statement is returned as is.
Stmt make_seq(std::vector<Stmt> stmts);
Stmt make_if(Expr cond, Stmt then_case, Stmt else_case = Stmt());
Stmt make_prefetch(Buffer buffer, std::vector<Expr> indices);

}  // namespace tessera
