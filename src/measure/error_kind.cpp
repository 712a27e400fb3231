#include "measure/error_kind.h"

#include <array>
#include <utility>

namespace tessera {

namespace {

constexpr std::array<std::pair<ErrorKind, const char*>, 8> kNames{{
    {ErrorKind::kOk, "ok"},
    {ErrorKind::kInstantiation, "instantiation"},
    {ErrorKind::kCompileError, "compile_error"},
    {ErrorKind::kCompileTimeout, "compile_timeout"},
    {ErrorKind::kRuntimeError, "runtime_error"},
    {ErrorKind::kRunTimeout, "run_timeout"},
    {ErrorKind::kWrongAnswer, "wrong_answer"},
    {ErrorKind::kUnknown, "unknown"},
}};

}  // namespace

const char* error_kind_name(ErrorKind kind) {
  for (const auto& [k, name] : kNames) {
    if (k == kind) return name;
  }
  return "unknown";
}

std::optional<ErrorKind> parse_error_kind(std::string_view name) {
  for (const auto& [k, n] : kNames) {
    if (name == n) return k;
  }
  return std::nullopt;
}

}  // namespace tessera
