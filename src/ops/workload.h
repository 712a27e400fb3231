/// Workloads named by one string, `op:key=value,...`, and the registry of operators.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "te/tensor.h"
#include "tir/program.h"

namespace tessera {

struct Workload {
  std::string op;
  std::vector<std::pair<std::string, int64_t>> params;

  /// The value of `key`; throws tessera::Error if absent.
  int64_t get(const std::string& key) const;
  /// Canonical text, `op:key=value,...` in the given order.
  std::string text() const;
};

/// Parses `op:key=value,...`; throws tessera::Error with a one-line message when malformed.
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
  std::string summary;
  std::function<OpInstance(const Workload&)> build;
};

const std::vector<OpDef>& op_registry();
/// Builds the operator a workload names; throws tessera::Error for an unknown op, a missing or
/// unknown key, or an invalid shape.
OpInstance instantiate(const Workload& w);

}  // namespace tessera
