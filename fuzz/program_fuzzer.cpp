// Loop program text: parse_program refuses with tessera::Error, or the program prints as text
// that parses back to the same print (the printer and the parser agree on everything they accept).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "te/error.h"
#include "tir/parser.h"
#include "tir/printer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string printed;
  try {
    printed = print_program(parse_program(text));
  } catch (const Error&) {
    return 0;
  }
  std::string again;
  try {
    again = print_program(parse_program(printed));
  } catch (const Error& e) {
    fuzz::finding(text,
                  "the printed program does not parse: " + std::string(e.what()) + "\n" + printed);
  }
  if (again != printed)
    fuzz::finding(text, "printing the reparsed program changes it:\n" + printed + "\n" + again);
  return 0;
}
