/// The outcome of applying a strategy: success with a program, not applicable, or internal error.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "te/error.h"

namespace tessera {

template <typename P>
class [[nodiscard]] RewriteResult {
 public:
  enum class Kind { kSuccess, kNotApplicable, kInternalError };

  static RewriteResult success(P program) {
    RewriteResult r;
    r.kind_ = Kind::kSuccess;
    r.program_ = std::move(program);
    return r;
  }
  /// `strategy` names the strategy that did not apply; `reason` says why.
  static RewriteResult not_applicable(std::string strategy, std::string reason) {
    RewriteResult r;
    r.kind_ = Kind::kNotApplicable;
    r.strategy_ = std::move(strategy);
    r.reason_ = std::move(reason);
    return r;
  }
  static RewriteResult internal_error(std::string strategy, std::string reason) {
    RewriteResult r = not_applicable(std::move(strategy), std::move(reason));
    r.kind_ = Kind::kInternalError;
    return r;
  }
  /// A strategy that ran out of its budget of steps (strategy/strategy.h): it ends the whole
  /// application as an internal error does, but is the input's fault, not tessera's.
  static RewriteResult out_of_budget(std::string strategy, std::string reason) {
    RewriteResult r = internal_error(std::move(strategy), std::move(reason));
    r.budget_ = true;
    return r;
  }
  bool out_of_budget() const { return budget_; }

  Kind kind() const { return kind_; }
  bool ok() const { return kind_ == Kind::kSuccess; }
  explicit operator bool() const { return ok(); }

  const P& program() const& {
    if (!ok()) throw_internal("program() of a failed rewrite: {}", message());
    return *program_;
  }
  P&& program() && {
    if (!ok()) throw_internal("program() of a failed rewrite: {}", message());
    return std::move(*program_);
  }
  const std::string& strategy() const { return strategy_; }
  const std::string& reason() const { return reason_; }
  /// "split(i, 4): no loop named i" for failures.
  std::string message() const {
    if (ok()) return "success";
    std::string prefix = kind_ == Kind::kInternalError && !budget_ ? "internal error in " : "";
    return prefix + strategy_ + ": " + reason_;
  }

 private:
  RewriteResult() = default;
  Kind kind_ = Kind::kNotApplicable;
  std::optional<P> program_;
  std::string strategy_;
  std::string reason_;
  bool budget_ = false;
};

}  // namespace tessera
