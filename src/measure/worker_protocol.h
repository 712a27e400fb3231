/// What the runner and its worker processes say to each other: one JSON object per line.
///
///   runner -> worker  {"workload": ..., "library": ..., "entry": ..., "check": ..., "seed": ...,
///                      "timing": {...}}
///   worker -> runner  {"event": "prepared"}   inputs and reference ready; the run clock starts
///   worker -> runner  {"event": "done", "error": "ok", "message": ..., "repeats": [...], ...}
#pragma once

#include <cstdint>
#include <string>

#include "measure/error_kind.h"
#include "measure/timing.h"

namespace tessera {

struct RunRequest {
  std::string workload;  // `op:key=value,...`
  std::string library;   // path of the kernel's shared object
  std::string entry = "tsr_main";
  bool check = true;   // compare the output with the reference before timing
  uint64_t seed = 42;  // random inputs: argument i is filled with seed + i
  TimingParams timing;
};

struct RunResult {
  ErrorKind error = ErrorKind::kOk;
  std::string message;
  TimingResult timing;  // when ok
  double max_abs_error = 0;
  double seconds = 0;  // wall time of the run, as the runner saw it
};

std::string encode_request(const RunRequest& r);
/// Throws tessera::Error on a malformed line.
RunRequest decode_request(const std::string& line);

std::string encode_prepared();
std::string encode_result(const RunResult& r);
/// Sets `prepared` for a "prepared" line; otherwise fills `result`. Throws tessera::Error on a
/// malformed line.
void decode_reply(const std::string& line, bool& prepared, RunResult& result);

}  // namespace tessera
