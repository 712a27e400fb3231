/// What the rows of the operator table share (graph/op_table.h): reading a node's constant
/// inputs and axes, flat indices, te helpers. Internal to the op_*.cpp files; each of those adds
/// its family of rows to the table.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "graph/op_table.h"

namespace tessera::graph {

namespace rows {

const std::vector<int64_t>& input_shape(const Node& n, const Graph& g, size_t i);
bool has_input(const Node& n, size_t i);
/// A constant integer input (a shape, axes, pads): static shapes need it known at import.
std::vector<int64_t> constant_ints(const Node& n, const Graph& g, size_t i, const char* what);
/// Axes from input `input` where the opset moved them there, else from the attribute.
std::optional<std::vector<int64_t>> axes_of(const Node& n, const Graph& g, size_t input);
/// Axes made non-negative and sorted; throws for one out of range or repeated.
std::vector<int64_t> normalized_axes(const Node& n, std::vector<int64_t> axes, int64_t rank);
std::vector<int64_t> unravel(int64_t i, const std::vector<int64_t>& shape);
int64_t ravel(const std::vector<int64_t>& idx, const std::vector<int64_t>& shape);
/// Loop names i0, i1, ... of a compute of rank `rank`.
std::vector<std::string> axis_names(size_t rank);
Expr f32(double v);
/// 1.0f where `cond` holds, else 0.0f.
Expr as_float(Expr cond);
/// Rows and columns of a tensor split at `axis`: everything before it, everything from it on.
std::pair<int64_t, int64_t> split_at(const std::vector<int64_t>& shape, int64_t axis);

/// A Gather's axis (normalized), its constant indices (each counted from the front; empty when
/// the indices are a runtime input), the indices' shape and the output's shape.
struct GatherSpec {
  int64_t axis = 0;
  std::vector<int64_t> indices, index_shape, out;
};
GatherSpec gather_spec(const Node& n, const Graph& g);

}  // namespace rows

/// The families of rows, in the files that define them.
void add_elementwise_rows(std::vector<OpDef>& table);  // op_elementwise.cpp
void add_view_rows(std::vector<OpDef>& table);         // op_data.cpp: Squeeze, Unsqueeze
void add_data_rows(std::vector<OpDef>& table);         // op_data.cpp: Slice, Pad, ..., Gather
void add_folded_rows(std::vector<OpDef>& table);       // op_data.cpp: Shape, Range, ...
void add_nn_rows(std::vector<OpDef>& table);           // op_nn.cpp: reductions, ConvTranspose, ...
void add_norm_rows(std::vector<OpDef>& table);       // op_norms.cpp: Layer-, InstanceNormalization
void add_recurrent_rows(std::vector<OpDef>& table);  // op_rnn.cpp: LSTM, GRU
void add_resize_rows(std::vector<OpDef>& table);     // op_resize.cpp: Resize, Upsample
void add_einsum_rows(std::vector<OpDef>& table);     // op_einsum.cpp: Einsum
void add_mask_rows(std::vector<OpDef>& table);       // op_masks.cpp: Trilu, ScatterND, CumSum, ...
void add_attention_rows(std::vector<OpDef>& table);  // fuse_attention.cpp: tessera.Attention

}  // namespace tessera::graph
