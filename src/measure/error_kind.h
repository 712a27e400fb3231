/// How measuring one candidate ended: ok, or one named kind of failure.
#pragma once

#include <optional>
#include <string_view>

namespace tessera {

enum class ErrorKind {
  kOk,              // built, ran, matched the reference, timed
  kInstantiation,   // the workload or strategy does not parse, or the strategy does not apply
  kCompileError,    // the C compiler rejected the code
  kCompileTimeout,  // the C compiler ran past BuildParams::timeout_s
  kRuntimeError,    // the kernel crashed (signal), could not be loaded, or ran out of memory
  kRunTimeout,      // the kernel ran past RunParams::timeout_s
  kWrongAnswer,     // the kernel's output differs from the reference
  kUnknown,         // anything else (a worker that cannot start, a protocol error)
};

/// "ok", "instantiation", "compile_error", "compile_timeout", "runtime_error", "run_timeout",
/// "wrong_answer", "unknown": the names records and the CLI use.
const char* error_kind_name(ErrorKind kind);
std::optional<ErrorKind> parse_error_kind(std::string_view name);

}  // namespace tessera
