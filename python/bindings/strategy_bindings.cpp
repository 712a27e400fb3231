// Strategies from Python: the schedule rules, Elevate's combinators, the text form, and rules
// written as Python functions. Composition is on values (`a >> b` is `a ; b`, `a | b` is
// `a <+ b`), so a Python function returning a Strategy is a user-defined strategy.
#include <fmt/format.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "schedule/library.h"
#include "schedule/rules.h"
#include "schedule/strategy_parser.h"
#include "strategy/stmt_traversal.h"
#include "strategy/strategy.h"
#include "strategy/traversal.h"

namespace tessera::python {

namespace {

const char* kind_name(RewriteResult<Program>::Kind kind) {
  switch (kind) {
    case RewriteResult<Program>::Kind::kSuccess:
      return "success";
    case RewriteResult<Program>::Kind::kNotApplicable:
      return "not_applicable";
    case RewriteResult<Program>::Kind::kInternalError:
      return "internal_error";
  }
  return "internal_error";
}

// A rule whose step is a Python callable: it returns the rewritten Program, or None where it
// does not apply. A Python exception inside it is an internal error of the rule, as a C++
// rule's exception is.
ProgramStrategy python_rule(const std::string& name, nb::callable fn) {
  return ProgramStrategy(name, ProgramStrategy::RuleFn([name, fn](const Program& p) {
                           nb::gil_scoped_acquire gil;
                           nb::object out;
                           try {
                             out = fn(p);
                           } catch (nb::python_error& e) {
                             return RewriteResult<Program>::internal_error(name, e.what());
                           }
                           if (out.is_none())
                             return RewriteResult<Program>::not_applicable(
                                 name, "the function returned None");
                           if (!nb::isinstance<Program>(out))
                             return RewriteResult<Program>::internal_error(
                                 name, "the function returned neither a Program nor None");
                           return RewriteResult<Program>::success(nb::cast<Program>(out));
                         }));
}

}  // namespace

void bind_strategy(nb::module_& m) {
  nb::class_<ProgramStrategy>(m, "Strategy",
                              "A strategy over loop programs: applies, or fails with a reason.")
      .def_prop_ro("text", &ProgramStrategy::text)
      .def("__str__", &ProgramStrategy::text)
      .def("__repr__",
           [](const ProgramStrategy& s) { return fmt::format("Strategy({})", s.text()); })
      .def("__rshift__",
           [](const ProgramStrategy& a, const ProgramStrategy& b) { return seq(a, b); })
      .def("__or__",
           [](const ProgramStrategy& a, const ProgramStrategy& b) { return lchoice(a, b); });

  // (ok, program or None, kind, reason): the Python side raises StrategyFailed on failure.
  m.def(
      "apply",
      [](const ProgramStrategy& s, const Program& p) {
        RewriteResult<Program> r = s(p);
        std::optional<Program> program;
        if (r) program = r.program();
        return std::make_tuple(r.ok(), program, std::string(kind_name(r.kind())),
                               r.ok() ? std::string() : r.message());
      },
      nb::arg("strategy"), nb::arg("program"));
  m.def(
      "parse", [](const std::string& text) { return parse_strategy(text); }, nb::arg("text"));
  m.def("rule", &python_rule, nb::arg("name"), nb::arg("fn"));
  m.def("named", &named, nb::arg("text"), nb::arg("body"));

  m.def("id", [] { return id<Program>(); });
  m.def("fail", [] { return fail<Program>(); });
  m.def("seq", [](std::vector<ProgramStrategy> steps) { return seq_all(std::move(steps)); });
  m.def("lchoice",
        [](const ProgramStrategy& a, const ProgramStrategy& b) { return lchoice(a, b); });
  m.def("try_", [](const ProgramStrategy& s) { return try_(s); });
  m.def(
      "repeat", [](const ProgramStrategy& s, int limit) { return repeat(s, limit); },
      nb::arg("strategy"), nb::arg("limit") = 1000);
  m.def("repeat_n", [](const ProgramStrategy& s, int n) { return repeat_n(s, n); });

  // Traversals run on the program's statements: a StmtStrategy, lifted by body(s).
  nb::class_<StmtStrategy>(m, "StmtStrategy",
                           "A strategy over loop-program statements, for traversals.")
      .def_prop_ro("text", &StmtStrategy::text)
      .def("__str__", &StmtStrategy::text)
      .def("__repr__",
           [](const StmtStrategy& s) { return fmt::format("StmtStrategy({})", s.text()); })
      .def("__rshift__", [](const StmtStrategy& a, const StmtStrategy& b) { return seq(a, b); })
      .def("__or__", [](const StmtStrategy& a, const StmtStrategy& b) { return lchoice(a, b); });
  m.def("body", &body, nb::arg("strategy"), "Elevate's body(s): s on the program's statement.");
  m.def("stmt_id", [] { return id<Stmt>(); });
  m.def("stmt_try", [](const StmtStrategy& s) { return try_(s); });
  m.def(
      "stmt_repeat", [](const StmtStrategy& s, int limit) { return repeat(s, limit); },
      nb::arg("strategy"), nb::arg("limit") = 1000);
  m.def("all", [](const StmtStrategy& s) { return all(s); });
  m.def("one", [](const StmtStrategy& s) { return one(s); });
  m.def("some", [](const StmtStrategy& s) { return some(s); });
  m.def("top_down", [](const StmtStrategy& s) { return top_down(s); });
  m.def("bottom_up", [](const StmtStrategy& s) { return bottom_up(s); });
  m.def("all_top_down", [](const StmtStrategy& s) { return all_top_down(s); });
  m.def("all_bottom_up", [](const StmtStrategy& s) { return all_bottom_up(s); });
  m.def("try_all", [](const StmtStrategy& s) { return try_all(s); });
  m.def(
      "normalize", [](const StmtStrategy& s, int limit) { return normalize(s, limit); },
      nb::arg("strategy"), nb::arg("limit") = 1000);
  m.def(
      "position", [](int n, const StmtStrategy& s) { return position(n, s); }, nb::arg("n"),
      nb::arg("strategy"));
  m.def("is_loop", &is_loop, nb::arg("name"));
  m.def("unroll_loop_here", &unroll_loop_here);
  m.def("vectorize_loop_here", &vectorize_loop_here);
  m.def("inline_unit_loop", &inline_unit_loop);

  m.def("split", &split, nb::arg("loop"), nb::arg("factor"));
  m.def("reorder", &reorder, nb::arg("loops"));
  m.def("fuse", &fuse, nb::arg("outer"), nb::arg("inner"));
  m.def("vectorize", &vectorize, nb::arg("loop"));
  m.def("unroll", &unroll, nb::arg("loop"));
  m.def("parallel", &parallel, nb::arg("loop"));
  m.def("compute_at", &compute_at, nb::arg("stage"), nb::arg("loop"));
  m.def("reverse_compute_at", &reverse_compute_at, nb::arg("stage"), nb::arg("loop"));
  m.def("rfactor", &rfactor, nb::arg("stage"), nb::arg("loop"));
  m.def("compute_inline", &compute_inline, nb::arg("stage"));
  m.def("cache_write", &cache_write, nb::arg("stage"), nb::arg("loop"),
        nb::arg("layout") = std::vector<int64_t>{});
  m.def("cache_read", &cache_read, nb::arg("buffer"), nb::arg("loop"));
  m.def("gather", &gather, nb::arg("buffer"), nb::arg("loops"));
  m.def("drop_init", &drop_init, nb::arg("stage"));
  m.def("fuse_write_back", &fuse_write_back, nb::arg("stage"));
  m.def("merge_dims", &merge_dims, nb::arg("buffer"), nb::arg("dim"));
  m.def("pack", &pack, nb::arg("buffer"), nb::arg("dim"), nb::arg("factor"));
  m.def("prefetch", &prefetch, nb::arg("buffer"), nb::arg("loop"), nb::arg("distance"));
  m.def("prefetch_next", &prefetch_next, nb::arg("buffer"), nb::arg("outer"), nb::arg("inner"));
  m.def("reverse", &reverse, nb::arg("loop"));
  m.def("tile", &tile, nb::arg("x"), nb::arg("y"), nb::arg("fx"), nb::arg("fy"));
  m.def("tile_nd", &tile_nd, nb::arg("loops"), nb::arg("sizes"));
  m.def("permute", &permute, nb::arg("permutation"));
}

}  // namespace tessera::python
