/// Scalar element types of tensors and expressions.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tessera {

enum class DType : uint8_t { kBool, kInt32, kFloat32, kFloat64 };

const char* dtype_name(DType t);
std::optional<DType> parse_dtype(std::string_view name);
int dtype_bytes(DType t);
inline bool is_float(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64;
}
/// The C type a generated kernel uses for elements of this type.
const char* dtype_c_type(DType t);

}  // namespace tessera
