/// A stable content hash (FNV-1a, 128 bits) for cache keys and record keys: the same bytes give
/// the same key on every machine and in every version of tessera.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

namespace tessera {

/// 32 lowercase hex digits. Each part is length-prefixed, so ("ab", "c") and ("a", "bc") differ.
std::string stable_hash(std::initializer_list<std::string_view> parts);

}  // namespace tessera
