// Workload text: parsing refuses with tessera::Error or gives a workload whose canonical text
// parses to itself; an operator it instantiates small enough to interpret computes what the
// operator's hand-written reference does.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "ops/workload.h"
#include "runtime/ndarray.h"
#include "te/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  OpInstance op;
  std::string canonical;
  try {
    Workload w = parse_workload(text);
    canonical = canonical_workload(w.text());
    op = instantiate(w);
  } catch (const Error&) {
    return 0;
  }
  if (canonical_workload(canonical) != canonical)
    fuzz::finding(text, "canonical text " + canonical + " is not canonical");
  // The interpreter takes about 20 ns a step: keep each input under a millisecond or so.
  if (fuzz::held_elements(op.program) > (1 << 12) || op.flops > (1 << 16)) return 0;
  auto expected = random_args(op.program, 3);
  auto actual = expected;
  op.reference(expected);
  try {
    interpret(op.program, actual);
  } catch (const Error& e) {
    fuzz::finding(text, std::string("the lowered program fails in the interpreter: ") + e.what());
  }
  const Tolerance tol = default_tolerance(op.program.outputs.back()->dtype, op.reduction_length);
  std::string diff = fuzz::first_difference(actual, expected, op.program.outputs.size(), tol.rtol);
  if (!diff.empty()) fuzz::finding(text, "interpreter and reference differ: " + diff);
  return 0;
}
