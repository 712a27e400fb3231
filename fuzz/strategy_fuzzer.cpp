// Strategy text, parsed and applied to a small operator: whatever the text, parsing and
// application either refuse with tessera::Error / a failed rewrite, or give a program that the
// interpreter shows computes what the original did. An internal error is a finding.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "fuzz_util.h"
#include "ops/workload.h"
#include "schedule/strategy_parser.h"
#include "te/error.h"
#include "tir/parser.h"
#include "tir/printer.h"

namespace {

// Small enough that the interpreter runs in microseconds; every loop and buffer name the rules
// take (i, j, k, rc, ry, rx, C, A, B, ...) appears in one of them. The first byte picks one.
constexpr const char* kWorkloads[] = {
    "matmul:M=8,N=12,K=6",
    "conv2d:N=1,C=3,H=6,W=6,O=4,K=3,S=1,P=1",
    "conv2d_bias_relu:N=1,C=2,H=5,W=5,O=2,K=3,S=2,P=1",
    "conv2d_nchwc:N=1,C=8,H=3,W=5,O=16,K=3,S=1,P=1,CB=4",
    "add:M=5,N=33",
    "relu:M=8,N=8",
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  if (size == 0) return 0;
  const char* workload = kWorkloads[data[0] % std::size(kWorkloads)];
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::optional<ProgramStrategy> strategy;
  try {
    strategy = parse_strategy(text);
  } catch (const Error&) {
    return 0;  // refused in one message: what the parser should do with bad text
  }
  OpInstance op = instantiate(parse_workload(workload));
  RewriteResult<Program> r = (*strategy)(op.program);
  if (r.kind() == RewriteResult<Program>::Kind::kInternalError && !r.out_of_budget())
    fuzz::finding(text, r.message());
  if (!r) return 0;
  // A rule may pad a buffer far past the operator (pack to a large factor): not interpreted.
  if (fuzz::held_elements(r.program()) > (1 << 16)) return 0;
  auto expected = random_args(op.program, 7);
  auto actual = expected;
  interpret(op.program, expected);
  try {
    interpret(r.program(), actual);
  } catch (const Error& e) {
    fuzz::finding(text, std::string("the rewritten program fails in the interpreter: ") + e.what());
  }
  std::string diff = fuzz::first_difference(actual, expected, op.program.outputs.size(), 1e-5);
  if (!diff.empty())
    fuzz::finding(text, std::string(workload) + " computes another result: " + diff);
  // The text form of every rewritten program reads back as itself.
  std::string printed = print_program(r.program());
  if (print_program(parse_program(printed)) != printed)
    fuzz::finding(text, "the rewritten program does not print and parse back:\n" + printed);
  return 0;
}
