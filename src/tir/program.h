/// A loop program: the unit that strategies rewrite, codegen compiles and the interpreter runs.
#pragma once

#include <string>
#include <vector>

#include "tir/stmt.h"

namespace tessera {

struct Program {
  std::string name;
  std::vector<Buffer> inputs;
  std::vector<Buffer> outputs;
  Stmt body;

  /// Inputs then outputs: the order of a compiled kernel's arguments.
  std::vector<Buffer> args() const;
};

}  // namespace tessera
