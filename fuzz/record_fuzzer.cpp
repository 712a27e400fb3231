// A records line, as `db import` reads it: record_from_json refuses with tessera::Error, or gives
// a record whose JSON reads back as the same record (after the first write has replaced what JSON
// cannot hold, such as invalid UTF-8), and a successful one has a positive, finite median.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "db/jsonl.h"
#include "fuzz_util.h"
#include "te/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  std::string line(reinterpret_cast<const char*>(data), size);
  Record record;
  try {
    record = record_from_json(line);
  } catch (const Error&) {
    return 0;
  }
  if (record.result.error == ErrorKind::kOk &&
      !(record.result.timing.median > 0 && std::isfinite(record.result.timing.median)))
    fuzz::finding(line, "a successful record without a positive time");
  const std::string written = record_to_json(record);
  std::string again;
  try {
    again = record_to_json(record_from_json(written));
  } catch (const Error& e) {
    fuzz::finding(line, "its own export is refused: " + std::string(e.what()) + "\n" + written);
  }
  if (again != written) fuzz::finding(line, "the export changes on reading back:\n" + written);
  return 0;
}
