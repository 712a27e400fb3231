/// Shared by the fuzz targets: what counts as a finding, and the interpreter checks that turn a
/// fuzzer from "does not crash" into "does not compute something else".
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "tir/interpreter.h"
#include "tir/program.h"
#include "tir/stmt_functor.h"

namespace tessera::fuzz {

/// Stops the run: libFuzzer saves the input that got here as a crash.
[[noreturn]] inline void finding(std::string_view input, const std::string& what) {
  std::fprintf(stderr, "FINDING on input \"%.*s\": %s\n", static_cast<int>(input.size()),
               input.data(), what.c_str());
  std::abort();
}

/// Elements of every buffer the interpreter would hold for p: its arguments and what it allocates.
inline int64_t held_elements(const Program& p) {
  struct Allocations : StmtVisitor {
    int64_t elements = 0;
    void visit_(const AllocateNode& n, const Stmt& self) override {
      elements += n.buffer->num_elements();
      StmtVisitor::visit_(n, self);
    }
    using StmtVisitor::visit_;
  };
  Allocations a;
  a.visit(p.body);
  for (const Buffer& b : p.args()) a.elements += b->num_elements();
  return a.elements;
}

/// The first output element (of the last `outputs` arrays) where `actual` and `expected` differ
/// by more than `tol` relative; empty when they agree. Two NaNs agree.
inline std::string first_difference(const std::vector<std::vector<double>>& actual,
                                    const std::vector<std::vector<double>>& expected,
                                    size_t outputs, double tol) {
  for (size_t a = actual.size() - outputs; a < actual.size(); ++a) {
    if (actual[a].size() != expected[a].size()) return "output sizes differ";
    for (size_t i = 0; i < actual[a].size(); ++i) {
      double x = actual[a][i], y = expected[a][i];
      if (std::isnan(x) && std::isnan(y)) continue;
      if (!(std::abs(x - y) <= tol * (1 + std::abs(y))))
        return "output " + std::to_string(a) + " element " + std::to_string(i) + ": " +
               std::to_string(x) + " instead of " + std::to_string(y);
    }
  }
  return "";
}

}  // namespace tessera::fuzz
