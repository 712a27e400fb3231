/// User-facing errors (bad input) versus internal errors (a tessera bug).
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace tessera {

/// Bad input from the user: a malformed expression, an invalid shape, a parse error.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A broken invariant inside tessera.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

template <typename... Args>
[[noreturn]] void throw_error(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

template <typename... Args>
[[noreturn]] void throw_internal(fmt::format_string<Args...> f, Args&&... args) {
  throw InternalError(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace tessera
