/// ONNX models into the graph IR, through the protobuf classes Debian's libonnx-dev ships.
#pragma once

#include <string>

#include "graph/graph.h"

namespace tessera::graph {

/// Reads an ONNX model file: initializers and Constant nodes become constants, the other nodes
/// keep their op type and attributes, then nodes are sorted and every shape is inferred. Throws
/// tessera::Error with one line for an unreadable file, an input with a dynamic or unknown
/// dimension (naming the node that reads it), a non-float32 input, or an unsupported operator
/// (every unsupported node and attribute in one message).
Graph import_onnx(const std::string& path);
/// The same from the serialized bytes of a ModelProto; tensors kept in external data files are
/// read from `folder` (the model file's folder; empty: refused).
Graph import_onnx_bytes(const std::string& bytes, const std::string& folder = "");

}  // namespace tessera::graph
