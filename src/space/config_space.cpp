#include "space/config_space.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "te/error.h"

namespace tessera {

namespace {

void factorizations(int64_t extent, int parts, int64_t max_inner, std::vector<int64_t>& prefix,
                    std::vector<std::vector<int64_t>>& out) {
  if (parts == 1) {
    std::vector<int64_t> v{extent};
    v.insert(v.end(), prefix.rbegin(), prefix.rend());
    out.push_back(v);
    return;
  }
  for (int64_t f = 1; f <= std::min(extent, max_inner); ++f) {
    if (extent % f != 0) continue;
    prefix.push_back(f);
    factorizations(extent / f, parts - 1, max_inner, prefix, out);
    prefix.pop_back();
  }
}

void power_splits(int64_t extent, int parts, int64_t max_inner, std::vector<int64_t>& prefix,
                  std::vector<std::vector<int64_t>>& out) {
  if (parts == 1) {
    int64_t inner = 1;
    for (int64_t f : prefix) inner *= f;
    std::vector<int64_t> v{(extent + inner - 1) / inner};
    v.insert(v.end(), prefix.rbegin(), prefix.rend());
    out.push_back(v);
    return;
  }
  int64_t inner = 1;
  for (int64_t f : prefix) inner *= f;
  for (int64_t f = 1; f <= max_inner && f * inner <= extent; f *= 2) {
    prefix.push_back(f);
    power_splits(extent, parts - 1, max_inner, prefix, out);
    prefix.pop_back();
  }
}

}  // namespace

Knob split_knob(std::string name, int64_t extent, int parts, SplitPolicy policy,
                int64_t max_inner) {
  if (parts < 1 || extent < 1)
    throw_error("split knob {}: bad extent {} or parts {}", name, extent, parts);
  Knob k{std::move(name), {}, {}};
  std::vector<int64_t> prefix;
  if (policy == SplitPolicy::kAllFactors) {
    factorizations(extent, parts, max_inner, prefix, k.values);
  } else {
    power_splits(extent, parts, max_inner, prefix, k.values);
  }
  return k;
}

Knob split_knob_from(std::string name, int64_t extent,
                     const std::vector<std::vector<int64_t>>& inner_candidates) {
  Knob k{std::move(name), {}, {}};
  for (const std::vector<int64_t>& inner : inner_candidates) {
    int64_t product = 1;
    for (int64_t f : inner) product *= f;
    if (product > extent) continue;
    std::vector<int64_t> v{(extent + product - 1) / product};
    v.insert(v.end(), inner.begin(), inner.end());
    k.values.push_back(v);
  }
  if (k.values.empty())
    k.values.push_back([&] {
      std::vector<int64_t> v{extent};
      v.resize(inner_candidates.empty() ? 1 : inner_candidates[0].size() + 1, 1);
      return v;
    }());
  return k;
}

Knob choice_knob(std::string name, std::vector<std::string> options) {
  Knob k{std::move(name), {}, std::move(options)};
  for (size_t i = 0; i < k.labels.size(); ++i) k.values.push_back({static_cast<int64_t>(i)});
  return k;
}

Knob int_knob(std::string name, std::vector<int64_t> values) {
  Knob k{std::move(name), {}, {}};
  for (int64_t v : values) k.values.push_back({v});
  return k;
}

ConfigSpace::ConfigSpace(std::string name, std::vector<Knob> knobs, Template instantiate)
    : name_(std::move(name)), knobs_(std::move(knobs)), instantiate_(std::move(instantiate)) {
  for (const Knob& k : knobs_) {
    if (k.values.empty()) throw_error("space {}: knob {} has no values", name_, k.name);
    uint64_t n = k.values.size();
    size_ = size_ > std::numeric_limits<uint64_t>::max() / 2 / n
                ? std::numeric_limits<uint64_t>::max() / 2
                : size_ * n;
  }
}

Config ConfigSpace::from_index(uint64_t index) const {
  Config c;
  for (const Knob& k : knobs_) {
    c.choice.push_back(static_cast<int>(index % k.values.size()));
    index /= k.values.size();
  }
  return c;
}

uint64_t ConfigSpace::to_index(const Config& c) const {
  uint64_t index = 0;
  for (size_t i = knobs_.size(); i-- > 0;)
    index = index * knobs_[i].values.size() + static_cast<uint64_t>(c.choice[i]);
  return index;
}

Config ConfigSpace::sample(std::mt19937_64& rng) const {
  Config c;
  for (const Knob& k : knobs_) c.choice.push_back(static_cast<int>(rng() % k.values.size()));
  return c;
}

std::vector<Config> ConfigSpace::neighbours(const Config& c) const {
  std::vector<Config> out;
  for (size_t i = 0; i < knobs_.size(); ++i) {
    for (size_t v = 0; v < knobs_[i].values.size(); ++v) {
      if (static_cast<int>(v) == c.choice[i]) continue;
      Config n = c;
      n.choice[i] = static_cast<int>(v);
      out.push_back(n);
    }
  }
  return out;
}

Config ConfigSpace::random_neighbour(const Config& c, std::mt19937_64& rng) const {
  std::vector<size_t> movable;
  for (size_t i = 0; i < knobs_.size(); ++i) {
    if (knobs_[i].values.size() > 1) movable.push_back(i);
  }
  if (movable.empty()) return c;
  size_t i = movable[rng() % movable.size()];
  Config n = c;
  int v = static_cast<int>(rng() % (knobs_[i].values.size() - 1));
  n.choice[i] = v >= c.choice[i] ? v + 1 : v;
  return n;
}

size_t ConfigSpace::knob_index(const std::string& knob) const {
  for (size_t i = 0; i < knobs_.size(); ++i) {
    if (knobs_[i].name == knob) return i;
  }
  throw_internal("space {} has no knob {}", name_, knob);
}

const std::vector<int64_t>& ConfigSpace::value(const Config& c, const std::string& knob) const {
  size_t i = knob_index(knob);
  return knobs_[i].values.at(static_cast<size_t>(c.choice.at(i)));
}

const std::string& ConfigSpace::label(const Config& c, const std::string& knob) const {
  size_t i = knob_index(knob);
  if (knobs_[i].labels.empty()) throw_internal("knob {} of {} is not a choice", knob, name_);
  return knobs_[i].labels.at(static_cast<size_t>(c.choice.at(i)));
}

std::string ConfigSpace::describe(const Config& c) const {
  std::vector<std::string> parts;
  for (size_t i = 0; i < knobs_.size(); ++i) {
    auto v = static_cast<size_t>(c.choice[i]);
    if (!knobs_[i].labels.empty()) {
      parts.push_back(knobs_[i].name + "=" + knobs_[i].labels[v]);
    } else if (knobs_[i].values[v].size() == 1) {
      parts.push_back(fmt::format("{}={}", knobs_[i].name, knobs_[i].values[v][0]));
    } else {
      parts.push_back(fmt::format("{}=[{}]", knobs_[i].name, fmt::join(knobs_[i].values[v], ", ")));
    }
  }
  return fmt::format("{}", fmt::join(parts, " "));
}

std::vector<float> ConfigSpace::knob_features(const Config& c) const {
  std::vector<float> f;
  for (size_t i = 0; i < knobs_.size(); ++i) {
    for (int64_t v : knobs_[i].values[static_cast<size_t>(c.choice[i])]) {
      f.push_back(knobs_[i].labels.empty() ? std::log2(static_cast<float>(v) + 1.0f)
                                           : static_cast<float>(v));
    }
  }
  return f;
}

ConfigSpace choice_of_spaces(std::string name, std::string knob,
                             std::vector<std::pair<std::string, ConfigSpace>> alternatives) {
  if (alternatives.empty()) throw_internal("space {}: no alternatives", name);
  std::vector<std::string> labels;
  std::vector<Knob> knobs{Knob{}};
  std::vector<size_t> first_knob;
  for (const auto& [label, space] : alternatives) {
    labels.push_back(label);
    first_knob.push_back(knobs.size());
    for (Knob k : space.knobs()) {
      k.name = label + "." + k.name;
      knobs.push_back(std::move(k));
    }
  }
  knobs[0] = choice_knob(std::move(knob), std::move(labels));
  auto instantiate = [alternatives, first_knob](const ConfigSpace&, const Config& c) {
    auto alt = static_cast<size_t>(c.choice.at(0));
    const ConfigSpace& chosen = alternatives.at(alt).second;
    auto begin = c.choice.begin() + static_cast<long>(first_knob[alt]);
    Config sub{std::vector<int>(begin, begin + static_cast<long>(chosen.knobs().size()))};
    return chosen.instantiate(sub);
  };
  return ConfigSpace(std::move(name), std::move(knobs), instantiate);
}

}  // namespace tessera
