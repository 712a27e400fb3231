// Helpers of the code generation tests (codegen_test.cpp, codegen_vector_test.cpp): hand-built
// loop programs compiled strictly and run on random inputs.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "codegen/codegen_c.h"
#include "runtime/module.h"
#include "runtime/ndarray.h"

namespace tessera::codegen_test {

constexpr DType kF32 = DType::kFloat32;
constexpr DType kF64 = DType::kFloat64;
constexpr DType kI32 = DType::kInt32;
constexpr ForKind kSerial = ForKind::kSerial;
constexpr ForKind kParallel = ForKind::kParallel;
constexpr ForKind kVectorized = ForKind::kVectorized;

inline Program make_program(std::string name, std::vector<Buffer> inputs,
                            std::vector<Buffer> outputs, Stmt body) {
  Program p;
  p.name = std::move(name);
  p.inputs = std::move(inputs);
  p.outputs = std::move(outputs);
  p.body = std::move(body);
  return p;
}

// Every generated kernel must compile without warnings.
inline Module compile_strict(const std::string& code) {
  CompileOptions strict;
  strict.flags.insert(strict.flags.end(), {"-Wall", "-Wextra", "-Werror"});
  return Module::compile(code, strict);
}

inline NDArray random_array(const Buffer& b, uint64_t seed, double lo = -1, double hi = 1) {
  NDArray a = NDArray::empty(b->shape, b->dtype);
  a.fill_random(seed, lo, hi);
  return a;
}

inline void expect_close(const NDArray& actual, const NDArray& expected,
                         int64_t reduction_length = 1) {
  CompareResult r =
      compare(actual, expected, default_tolerance(expected.dtype(), reduction_length));
  EXPECT_TRUE(r.ok) << r.message;
}

/// Occurrences of `what` in `text`.
inline size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

}  // namespace tessera::codegen_test
