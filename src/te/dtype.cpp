#include "te/dtype.h"

namespace tessera {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kBool:
      return "bool";
    case DType::kInt32:
      return "int32";
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (DType t : {DType::kBool, DType::kInt32, DType::kFloat32, DType::kFloat64}) {
    if (name == dtype_name(t)) return t;
  }
  return std::nullopt;
}

int dtype_bytes(DType t) {
  switch (t) {
    case DType::kBool:
      return 1;
    case DType::kInt32:
      return 4;
    case DType::kFloat32:
      return 4;
    case DType::kFloat64:
      return 8;
  }
  return 0;
}

const char* dtype_c_type(DType t) {
  switch (t) {
    case DType::kBool:
      return "_Bool";
    case DType::kInt32:
      return "int32_t";
    case DType::kFloat32:
      return "float";
    case DType::kFloat64:
      return "double";
  }
  return "void";
}

}  // namespace tessera
