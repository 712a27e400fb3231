/// What the stage-level rules (compute_at, compute_inline, cache_write, cache_read, pack) share:
/// finding buffers and stage nests, and the box of elements a loop body accesses.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "strategy/rewrite_result.h"
#include "tir/program.h"

namespace tessera {

/// An integer or float literal (an init nest's value).
bool is_constant(const Expr& e);

/// A buffer of the program by name: an argument or an allocation.
Buffer find_buffer(const Program& p, const std::string& name);
bool is_argument(const Program& p, const Buffer& b);

/// The loop named `name`, if any.
const ForNode* find_loop(const Program& p, const std::string& name);

/// The elements of a buffer that one iteration of a loop's body accesses, as a box per dimension:
/// [base + lo, base + lo + extent), where base depends only on the loop's variable and the loops
/// around it, and lo/extent are constants from the ranges of the loops inside the body.
struct AccessBox {
  std::vector<Expr> base;
  std::vector<int64_t> lo;
  std::vector<int64_t> extent;
  int loads = 0;
  int stores = 0;
};

/// Fails (with the reason) when an index does not separate into outer and inner parts or two
/// accesses are not a constant distance apart.
std::variant<AccessBox, std::string> access_box(const ForNode& loop, const Buffer& buffer,
                                                bool loads, bool stores);

/// A stage computed by one perfect nest whose only statement stores `buffer[v0, ..., vn]`, the
/// loop variables in order (the form `lower` gives a non-reduction stage).
struct StageNest {
  Stmt stmt;
  std::vector<const ForNode*> loops;
  const StoreNode* store = nullptr;
};
std::variant<StageNest, std::string> find_stage_nest(const Program& p, const Buffer& buffer);

/// A reduction stage in the form `lower` gives it: an init nest (a plain StageNest storing a
/// constant) followed by an update nest whose outer loops are the stage's dimensions in order
/// (`update_loops`) and whose body below them (the reduction loops, however scheduled) stores
/// `buffer` only at those loops' variables.
struct ReductionNests {
  StageNest init;
  Stmt update;
  std::vector<const ForNode*> update_loops;
  Stmt reduction_body;
};
std::variant<ReductionNests, std::string> find_reduction_nests(const Program& p,
                                                               const Buffer& buffer);

/// Every load and store of `buffer` in `s`, each with the loops around it (outermost first).
struct BufferSites {
  struct Load {
    const LoadNode* load;
    std::vector<const ForNode*> loops;
  };
  struct Store {
    const StoreNode* store;
    std::vector<const ForNode*> loops;
    std::vector<Expr> guards;  // conditions of the ifs around it (an else branch: the negation)
  };
  std::vector<Load> loads;
  std::vector<Store> stores;
};
BufferSites buffer_sites(const Stmt& s, const Buffer& buffer);
/// Every store in `s`, to any buffer.
int count_stores(const Stmt& s);

/// The statement (the For node as a Stmt) of `loop` inside `root`; undefined if it is not there.
Stmt loop_statement(const Stmt& root, const ForNode* loop);

/// Removes `target` from the sequence that holds it.
Stmt remove_statement(const Stmt& root, const Stmt& target);

/// True if `buffer` is allocated somewhere inside `s` (it does not exist around `s`).
bool allocated_inside(const Stmt& s, const Buffer& buffer);
/// Loads and stores of `from` become accesses of `to` at map(indices), and its allocation one of
/// `to`.
using IndexMap = std::function<std::vector<Expr>(const std::vector<Expr>&)>;
Stmt reindex_buffer(const Stmt& s, const Buffer& from, const Buffer& to, const IndexMap& map);
/// Loads and stores of `from` become accesses of `to` at index - offset. A non-empty `order`
/// permutes the dimensions: dimension d of `to` is dimension order[d] of `from`.
Stmt redirect_buffer(const Stmt& s, const Buffer& from, const Buffer& to,
                     const std::vector<Expr>& offset, const std::vector<size_t>& order = {});
/// Drops the allocation of `buffer` (keeping its body).
Stmt remove_allocation(const Stmt& s, const Buffer& buffer);

/// `AND` of lo <= index < hi for each dimension; the simplifier removes what ranges prove.
Expr in_bounds(const Buffer& b, const std::vector<Expr>& indices);

/// cache_write and cache_read: a local copy of the box of `buffer` that one iteration of the loop
/// accesses, filled before the loop's body and, when `write`, copied back after it. Loops of the
/// copies are named `<buffer>.load.<d>` and `<buffer>.store.<d>`; the copy is `<buffer>.local`.
/// A non-empty `order` (a permutation of the dimensions) lays the copy out with dimension
/// order[d] of the buffer as its d-th, so that a loop vectorized over any dimension can find it
/// innermost and contiguous.
RewriteResult<Program> cache_box(const Program& p, const std::string& rule_text,
                                 const std::string& buffer, const std::string& loop_ref, bool write,
                                 const std::vector<int64_t>& order = {});

}  // namespace tessera
