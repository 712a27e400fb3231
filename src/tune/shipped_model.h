/// The cost models that ship with tessera: one global model per vector ISA, pretrained on the
/// records of workloads tuned for the purpose (share/cost-models/README.md says which), so that a
/// first run on a new machine starts from a model rather than from nothing.
#pragma once

#include <optional>
#include <string>

#include "db/record_db.h"
#include "tune/tuner.h"

namespace tessera {

/// `--pretrained none`: no pretrained model, not even the shipped one.
inline constexpr const char* kNoPretrained = "none";

/// The shipped model for `isa` ("avx512", "avx2", "sse"), or nullopt when none ships for it.
/// Looked for in `cost-models/` beside the binary that holds this code (the Python package),
/// in `../share/tessera/cost-models/` from it (an install prefix), and in the source tree.
std::optional<std::string> shipped_cost_model(const std::string& isa);

/// Whether a run with `params` starts from the shipped model of this machine's ISA: it was not
/// given --pretrained (a file or none), transfer is not off, its tuner and features are the shipped
/// model's (xgb, relation), and `db` (null: none) holds no record of `target_key`. Returns the
/// model's path.
std::optional<std::string> default_pretrained(const TuneParams& params, RecordDb* db,
                                              const std::string& target_key);

}  // namespace tessera
