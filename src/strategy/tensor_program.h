/// A te-level program (tensors before lowering) as a program type for strategies, for rewrites of
/// the algorithm itself such as separating a filter (ops/separate_filter.h).
#pragma once

#include <string>
#include <vector>

#include "strategy/strategy.h"
#include "te/tensor.h"

namespace tessera {

/// The tensors of a kernel in argument order, placeholders then outputs, as `lower` takes them.
/// Stages in between are reached through the outputs' bodies.
struct TensorProgram {
  std::string name;
  std::vector<Tensor> args;
};

using TensorStrategy = Strategy<TensorProgram>;

/// The compute stage named `name` among the tensors args depend on; undefined if none.
Tensor find_stage(const TensorProgram& p, const std::string& name);

/// p with the stage `old` replaced by `replacement` (same shape and type): every stage that reads
/// `old`, directly or through other stages, is rebuilt to read the replacement; stages that do
/// not depend on it stay shared.
TensorProgram replace_stage(const TensorProgram& p, const Tensor& old, const Tensor& replacement);

/// One line per compute stage, producers first: `vert[vy, vx] = in[vy, vx]*0.25f + ...`.
std::string print_tensor_program(const TensorProgram& p);

}  // namespace tessera
