/// Search spaces are strategies with knobs: the knobs' candidate values, configurations that pick
/// one value per knob, and the template that turns a configuration into a concrete strategy.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "schedule/rules.h"

namespace tessera {

/// A hole in a strategy with a finite list of candidate values; each value is a tuple of integers
/// (the factors of a split, the index of a choice, a flag, an unroll depth).
struct Knob {
  std::string name;
  std::vector<std::vector<int64_t>> values;
  std::vector<std::string> labels;  // for choices: the option names, printed in configurations
};

enum class SplitPolicy { kAllFactors, kPowersOfTwo };

/// Splits of `extent` into `parts` factors (outermost first) whose product covers the extent:
/// exact factorizations (kAllFactors), or inner factors that are powers of two with the outermost
/// rounded up (kPowersOfTwo). Inner factors are at most max_inner each.
Knob split_knob(std::string name, int64_t extent, int parts, SplitPolicy policy, int64_t max_inner);
/// Splits whose inner factors are taken from `candidates` (the outermost covers the rest).
Knob split_knob_from(std::string name, int64_t extent,
                     const std::vector<std::vector<int64_t>>& inner_candidates);
Knob choice_knob(std::string name, std::vector<std::string> options);
Knob int_knob(std::string name, std::vector<int64_t> values);

/// One value index per knob.
struct Config {
  std::vector<int> choice;
  bool operator==(const Config& o) const { return choice == o.choice; }
};

class ConfigSpace {
 public:
  using Template = std::function<ProgramStrategy(const ConfigSpace&, const Config&)>;

  ConfigSpace(std::string name, std::vector<Knob> knobs, Template instantiate);

  const std::string& name() const { return name_; }
  const std::vector<Knob>& knobs() const { return knobs_; }
  /// Number of configurations (saturates at 2^63).
  uint64_t size() const { return size_; }
  Config from_index(uint64_t index) const;
  uint64_t to_index(const Config& c) const;
  Config sample(std::mt19937_64& rng) const;
  /// Every configuration that differs from c in exactly one knob.
  std::vector<Config> neighbours(const Config& c) const;
  Config random_neighbour(const Config& c, std::mt19937_64& rng) const;

  /// The value a configuration gives a knob.
  const std::vector<int64_t>& value(const Config& c, const std::string& knob) const;
  int64_t value0(const Config& c, const std::string& knob) const { return value(c, knob).at(0); }
  /// The option name a configuration picks for a choice knob.
  const std::string& label(const Config& c, const std::string& knob) const;
  /// The filled-in strategy; its text parses back to an equal strategy.
  ProgramStrategy instantiate(const Config& c) const { return instantiate_(*this, c); }
  /// `tile_i=[16, 4] order=j_first ...`: the knob values, for logs.
  std::string describe(const Config& c) const;
  /// Knob values as numbers (log2 of split factors), the "knob features".
  std::vector<float> knob_features(const Config& c) const;

 private:
  size_t knob_index(const std::string& knob) const;
  std::string name_;
  std::vector<Knob> knobs_;
  Template instantiate_;
  uint64_t size_ = 1;
};

/// A choice between alternative spaces (strategies with knobs) as one space: a choice knob
/// `knob` picks the alternative, whose knobs follow under `<label>.<knob>`; a configuration
/// instantiates the chosen alternative with its own knobs (the others' knobs are ignored).
ConfigSpace choice_of_spaces(std::string name, std::string knob,
                             std::vector<std::pair<std::string, ConfigSpace>> alternatives);

}  // namespace tessera
