// ONNX model bytes: import refuses with a tessera::Error that says why, or gives a graph whose
// every value has a static, non-negative shape of at most 2^31 - 1 elements (what the planner and
// the generated code's 32-bit indices rely on). A message may hold the model's own line breaks:
// print_error escapes them.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "graph/onnx_import.h"
#include "te/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  std::string bytes(reinterpret_cast<const char*>(data), size);
  graph::Graph g;
  try {
    g = graph::import_onnx_bytes(bytes);  // no folder: external data is refused
  } catch (const Error& e) {
    if (std::string_view(e.what()).empty()) fuzz::finding("(onnx bytes)", "an empty refusal");
    return 0;
  }
  for (const auto& [name, shape] : g.shapes) {
    int64_t elements = 1;
    for (int64_t d : shape) {
      if (d < 0) fuzz::finding("(onnx bytes)", "value " + name + " has a negative dimension");
      if (__builtin_mul_overflow(elements, d, &elements) || elements > (int64_t{1} << 31) - 1)
        fuzz::finding("(onnx bytes)", "value " + name + " has more than 2^31 - 1 elements");
    }
  }
  return 0;
}
