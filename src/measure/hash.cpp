#include "measure/hash.h"

#include <fmt/format.h>

#include <cstdint>

namespace tessera {

namespace {

using u128 = unsigned __int128;

// FNV-1a 128-bit parameters (http://www.isthe.com/chongo/tech/comp/fnv/).
constexpr u128 kPrime = (u128{1} << 88) | 0x13b;
constexpr u128 kOffset = (u128{0x6c62272e07bb0142ULL} << 64) | 0x62b821756295c58dULL;

void mix(u128& h, std::string_view bytes) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= kPrime;
  }
}

}  // namespace

std::string stable_hash(std::initializer_list<std::string_view> parts) {
  u128 h = kOffset;
  for (std::string_view p : parts) {
    mix(h, fmt::format("{}:", p.size()));
    mix(h, p);
  }
  return fmt::format("{:016x}{:016x}", static_cast<uint64_t>(h >> 64), static_cast<uint64_t>(h));
}

}  // namespace tessera
