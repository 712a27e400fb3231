/// Workloads named by one string, `op:key=value,...`, and the registry of operators.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "te/tensor.h"
#include "tir/program.h"

namespace tessera {

/// The largest value of any workload key, either way (sizes, paddings, strides, blocks).
constexpr int64_t kMaxWorkloadKey = int64_t{1} << 20;

struct Workload {
  std::string op;
  std::vector<std::pair<std::string, int64_t>> params;

  /// The value of `key`; throws tessera::Error if absent.
  int64_t get(const std::string& key) const;
  /// The value of `key`, or `fallback` when the workload does not give it.
  int64_t get_or(const std::string& key, int64_t fallback) const;
  /// The value of `key`, a size: throws tessera::Error unless it is in [1, kMaxWorkloadKey].
  int64_t positive(const std::string& key) const;
  /// A convolution window's width and the padding of W: conv2d_nchwc's KW and PW where the
  /// window is rectangular, else K and P.
  int64_t kernel_width() const;
  int64_t width_padding() const;
  /// Canonical text, `op:key=value,...` in the given order.
  std::string text() const;
};

/// Parses `op:key=value,...`; throws tessera::Error with a one-line message when malformed.
/// Optional keys given at their defaults are dropped (see canonical).
Workload parse_workload(std::string_view text);

/// An operator instantiated for one workload.
struct OpInstance {
  std::vector<Tensor> args;      // placeholders then outputs: the kernel's argument order
  Program program;               // the plain lowered loop program
  double flops = 0;              // floating-point operations of one run
  int64_t reduction_length = 1;  // terms per output element, for comparison tolerances
  /// Hand-written naive implementation over row-major double arrays, in argument order.
  std::function<void(std::vector<std::vector<double>>&)> reference;
};

struct OpDef {
  std::string name;
  std::vector<std::string> keys;
  /// Keys a workload may leave out, with their defaults (conv2d's dilation D=1 and groups G=1).
  std::vector<std::pair<std::string, int64_t>> optional;
  std::string summary;
  std::function<OpInstance(const Workload&)> build;
};

const std::vector<OpDef>& op_registry();
/// Builds the operator a workload names; throws tessera::Error for an unknown op, a missing or
/// unknown key, or an invalid shape.
/// The largest tensor a kernel takes: generated code indexes with 32-bit integers.
constexpr int64_t kMaxTensorElements = (int64_t{1} << 31) - 1;

OpInstance instantiate(const Workload& w);
/// The workload with optional keys at their defaults left out, so that two spellings of the
/// same operator share records (`conv2d:...,D=1,G=1` is `conv2d:...`). Unknown ops pass through.
Workload canonical(const Workload& w);
/// Canonical workload text: the operator's keys in the registry's order, then its optional keys
/// not at their defaults (`matmul:N=2,M=1,K=3` and `matmul:M=1,N=2,K=3` are the same workload).
/// Throws tessera::Error like parse_workload and for an unknown operator or key.
std::string canonical_workload(const std::string& text);

}  // namespace tessera
