// .npy bytes: parse_npy refuses with tessera::Error, or holds exactly the elements its shape says.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_util.h"
#include "graph/npy.h"
#include "te/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  graph::HostTensor t;
  try {
    t = graph::parse_npy(bytes);
  } catch (const Error&) {
    return 0;
  }
  size_t elements = 1;
  for (int64_t d : t.shape) {
    if (d < 0) fuzz::finding(bytes, "a negative dimension was accepted");
    elements *= static_cast<size_t>(d);
  }
  if (elements != t.data.size())
    fuzz::finding(bytes, "the shape's elements and the data differ in number");
  return 0;
}
