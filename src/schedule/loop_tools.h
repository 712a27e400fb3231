/// Finding and replacing loops by name, and the dependence checks the loop rules share.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "strategy/rewrite_result.h"
#include "tir/program.h"

namespace tessera {

/// A loop found in a program, with the loops that enclose it (outermost first).
struct LoopSite {
  const ForNode* loop;
  Stmt stmt;
  std::vector<const ForNode*> enclosing;
};

/// A loop rewrite returns the replacement statement, or the reason it does not apply.
using LoopRewrite = std::function<std::variant<Stmt, std::string>(const LoopSite&)>;

/// Whether a loop rewrite made expressions the simplifier should see: a split does; an annotation
/// that changes only the loop's kind does not.
enum class Resimplify { kYes, kNo };

/// Applies `rewrite` to the loop named `loop` and, unless told not to, simplifies the statement it
/// returns within the ranges of the loops around it (the rest of the program is unchanged, and
/// simplifying all of it after every step was most of the cost of instantiating a configuration
/// for the cost model). Not applicable (named `rule`) when no loop has that name or the rewrite
/// declines.
RewriteResult<Program> rewrite_loop(const Program& p, const std::string& rule,
                                    const std::string& loop, const LoopRewrite& rewrite,
                                    Resimplify resimplify = Resimplify::kYes);

/// Names of all loops, in program order.
std::vector<std::string> loop_names(const Program& p);
bool has_loop(const Program& p, const std::string& name);

/// Why iterations of `loop` may interfere (nullopt if they provably do not): every store must
/// write elements no other iteration writes, and a buffer stored in the loop may only be read at
/// the element the same statement stores.
std::optional<std::string> iteration_conflict(const ForNode& loop);

/// Reads of a stored buffer at other elements than the store's, anywhere in `s` (nullopt if none).
std::optional<std::string> cross_element_dependence(const Stmt& s);

}  // namespace tessera
