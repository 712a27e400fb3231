#include "model/treegru_model.h"

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <sstream>

#include "feature/feature.h"
#include "model/treegru_plugin.h"
#include "te/error.h"

namespace tessera {

const char* objective_name(TreeGRUParams::Objective objective) {
  return objective == TreeGRUParams::Objective::kRank ? "rank" : "reg";
}

namespace {

// A node's input: the program totals for the root (the whole program), a loop's context vector
// for every other node, side by side so that one projection reads both, and a root flag.
struct InputLayout {
  int64_t globals, loop, width;
};

InputLayout input_layout() {
  TreeLayout t = tree_layout();
  int64_t loop = static_cast<int64_t>(t.node_width) - 2;
  return {static_cast<int64_t>(t.globals), loop, static_cast<int64_t>(t.globals) + loop + 1};
}

// Rows of kTree features as one forest, its nodes grouped by depth (the roots first), so that
// each level's nodes are one contiguous slice and the network runs level by level, deepest
// first, over every program of the batch at once.
struct Forest {
  std::vector<float> x;               // nodes * input width, level by level
  std::vector<int64_t> level_start;   // level d is rows [level_start[d], level_start[d + 1])
  std::vector<int64_t> parent_local;  // per node below the roots: its parent's place in its level

  TesseraTreeForest view(int64_t width) const {
    return {x.data(),           static_cast<int64_t>(x.size()) / width,       width,
            level_start.data(), static_cast<int64_t>(level_start.size()) - 1, parent_local.data()};
  }
};

// `rows` are pointers so that a training step's minibatch is built without copying its rows.
Forest make_forest(const std::vector<const std::vector<float>*>& rows) {
  const TreeLayout t = tree_layout();
  const InputLayout in = input_layout();
  struct Node {
    int64_t key;     // row * stride + slot + 1 (+ 0: the root)
    int64_t parent;  // the parent's key (-1 for a root)
  };
  const int64_t stride = static_cast<int64_t>(t.nodes) + 1;
  std::vector<std::vector<Node>> levels(1);
  std::vector<int> depth(t.nodes);
  for (size_t r = 0; r < rows.size(); ++r) {
    const float* row = rows[r]->data();
    const int64_t root = static_cast<int64_t>(r) * stride;
    levels[0].push_back({root, -1});
    std::fill(depth.begin(), depth.end(), 0);
    for (int64_t i = 0; i < stride - 1; ++i) {
      const float* node = row + t.globals + i * t.node_width;
      if (node[0] == 0) continue;
      // The parent's slot precedes the child's (feature.h); anything else is not a kTree row.
      int64_t parent = static_cast<int64_t>(node[1]);
      if (parent < 0 || parent > i || (parent > 0 && depth[parent - 1] == 0))
        throw_error("a TreeGRU row whose node {} names parent {}: not a tree feature row", i,
                    parent);
      depth[i] = parent == 0 ? 1 : depth[parent - 1] + 1;
      if (static_cast<int>(levels.size()) <= depth[i]) levels.resize(depth[i] + 1);
      levels[depth[i]].push_back({root + i + 1, root + parent});
    }
  }
  size_t total = 0;
  for (const auto& l : levels) total += l.size();
  Forest f;
  f.x.assign(total * in.width, 0.0f);
  f.parent_local.reserve(total - rows.size());
  // Every node's place within its level, by key: its children, one level down, look it up.
  std::vector<int64_t> position(rows.size() * stride, -1);
  size_t at = 0;
  for (const std::vector<Node>& level : levels) {
    f.level_start.push_back(static_cast<int64_t>(at));
    for (size_t k = 0; k < level.size(); ++k, ++at) {
      const Node& n = level[k];
      const float* row = rows[n.key / stride]->data();
      const int64_t slot = n.key % stride - 1;
      float* dst = f.x.data() + at * in.width;
      if (slot < 0) {
        std::copy(row, row + in.globals, dst);
        dst[in.width - 1] = 1;
      } else {
        const float* node = row + t.globals + slot * t.node_width;
        std::copy(node + 2, node + t.node_width, dst + in.globals);
        f.parent_local.push_back(position[n.parent]);
      }
      position[n.key] = static_cast<int64_t>(k);
    }
  }
  f.level_start.push_back(static_cast<int64_t>(at));
  return f;
}

std::vector<const std::vector<float>*> row_pointers(const std::vector<std::vector<float>>& x,
                                                    size_t begin, size_t end) {
  std::vector<const std::vector<float>*> out;
  for (size_t i = begin; i < end; ++i) out.push_back(&x[i]);
  return out;
}

// The network lives in libtessera_treegru.so (model/treegru_plugin.h says why), found next to
// the binary that holds this code (the tessera executable, a test, the Python module), else
// where the build put it.
const TesseraTreeGruApi& plugin() {
  static const TesseraTreeGruApi* api = nullptr;
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<std::string> candidates;
    Dl_info info;
    if (dladdr(reinterpret_cast<void*>(&input_layout), &info) && info.dli_fname) {
      std::string self = info.dli_fname;
      size_t slash = self.rfind('/');
      if (slash != std::string::npos)
        candidates.push_back(self.substr(0, slash + 1) + "libtessera_treegru.so");
    }
#ifdef TESSERA_TREEGRU_PATH
    candidates.push_back(TESSERA_TREEGRU_PATH);
#endif
    for (const std::string& path : candidates) {
      void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!handle) {
        const char* why = dlerror();
        if (failure.empty() && why) failure = why;
        continue;
      }
      auto entry =
          reinterpret_cast<const TesseraTreeGruApi* (*)()>(dlsym(handle, kTesseraTreeGruSymbol));
      if (entry && entry()->version == kTesseraTreeGruApiVersion) {
        api = entry();
        return;
      }
      failure = path + " is not this tessera's TreeGRU library";
    }
  });
  if (!api) {
    throw_error("the TreeGRU cost model needs libtessera_treegru.so (built with libtorch){}{}",
                failure.empty() ? "" : ": ", failure);
  }
  return *api;
}

constexpr size_t kErrorSize = 512;

template <typename F>
void call(const char* what, F&& f) {
  char error[kErrorSize] = "";
  if (f(error, kErrorSize) < 0) throw_error("TreeGRU {}: {}", what, error);
}

struct NetDeleter {
  void operator()(void* net) const {
    if (net) plugin().destroy(net);
  }
};

}  // namespace

struct TreeGRUModel::Impl {
  std::unique_ptr<void, NetDeleter> net;
  std::vector<float> mean, inv_std;  // input scaling, fixed by the first fit
  std::mt19937_64 rng;
  mutable std::mutex mutex;  // predict is const and may be called from several threads

  Forest scaled(const std::vector<const std::vector<float>*>& rows) const {
    Forest f = make_forest(rows);
    const size_t width = mean.size();
    for (size_t i = 0; i < f.x.size(); ++i)
      f.x[i] = (f.x[i] - mean[i % width]) * inv_std[i % width];
    return f;
  }
};

TreeGRUModel::TreeGRUModel(TreeGRUParams params)
    : params_(params), impl_(std::make_unique<Impl>()) {
  impl_->rng.seed(params.seed);
}
TreeGRUModel::~TreeGRUModel() = default;
TreeGRUModel::TreeGRUModel(TreeGRUModel&&) noexcept = default;
TreeGRUModel& TreeGRUModel::operator=(TreeGRUModel&&) noexcept = default;

bool TreeGRUModel::fitted() const {
  return impl_->net != nullptr;
}

std::string TreeGRUModel::name() const {
  return std::string("treegru-") + objective_name(params_.objective);
}

namespace {
void check_rows(const std::vector<std::vector<float>>& x) {
  const size_t length = feature_length(FeatureKind::kTree);
  for (const auto& row : x) {
    if (row.size() != length)
      throw_error("the TreeGRU reads tree feature rows of {} floats, not {}", length, row.size());
  }
}
}  // namespace

void TreeGRUModel::fit(const std::vector<std::vector<float>>& x, const std::vector<float>& y) {
  if (x.size() != y.size()) throw_error("TreeGRU fit: {} rows but {} labels", x.size(), y.size());
  check_rows(x);
  if (x.empty()) return;
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mutex);
  const InputLayout in = input_layout();
  const bool first = m.net == nullptr;
  if (first) {
    // Each input scaled by the nodes of the first fit, so that log-sized features enter the
    // gates near unit size; the root flag and constant inputs keep scale 1.
    Forest all = make_forest(row_pointers(x, 0, x.size()));
    const size_t width = static_cast<size_t>(in.width), nodes = all.x.size() / width;
    std::vector<double> sum(width, 0), square(width, 0);
    for (size_t i = 0; i < all.x.size(); ++i) {
      sum[i % width] += all.x[i];
      square[i % width] += double(all.x[i]) * all.x[i];
    }
    m.mean.assign(width, 0.0f);
    m.inv_std.assign(width, 1.0f);
    for (size_t c = 0; c + 1 < width; ++c) {
      double mean = sum[c] / nodes, var = square[c] / nodes - mean * mean;
      m.mean[c] = static_cast<float>(mean);
      if (var > 1e-12) m.inv_std[c] = static_cast<float>(1 / std::sqrt(var));
    }
    call("create", [&](char* error, size_t size) {
      void* net = plugin().create(in.width, params_.hidden, params_.seed, params_.learning_rate,
                                  params_.weight_decay, error, size);
      m.net.reset(net);
      return net ? 0 : -1;
    });
  }
  std::vector<float> labels(y);
  for (float& v : labels)
    if (!std::isfinite(v)) v = 0;

  const int steps = first ? params_.first_fit_steps : params_.refit_steps;
  const size_t batch = std::min<size_t>(std::max(params_.batch_rows, 2), x.size());
  const int objective = params_.objective == TreeGRUParams::Objective::kRank ? 0 : 1;
  std::vector<size_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  size_t next = order.size();  // shuffled at the first step
  double loss_sum = 0;
  int loss_count = 0;
  std::vector<const std::vector<float>*> rows(batch);
  std::vector<float> ys(batch);
  for (int step = 0; step < steps; ++step) {
    for (size_t k = 0; k < batch; ++k) {
      if (next == order.size()) {
        std::shuffle(order.begin(), order.end(), m.rng);
        next = 0;
      }
      rows[k] = &x[order[next]];
      ys[k] = labels[order[next]];
      ++next;
    }
    Forest f = m.scaled(rows);
    TesseraTreeForest view = f.view(in.width);
    double loss = 0;
    int status = 0;
    call("training", [&](char* error, size_t size) {
      status = plugin().train_step(m.net.get(), &view, ys.data(), objective, &loss, error, size);
      return status;
    });
    if (status == 0 && step >= steps - std::max(1, steps / 10)) {
      loss_sum += loss;
      ++loss_count;
    }
  }
  last_loss_ = loss_count ? loss_sum / loss_count : 0;
}

std::vector<float> TreeGRUModel::predict(const std::vector<std::vector<float>>& x) const {
  check_rows(x);
  std::vector<float> out(x.size(), 0.0f);
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mutex);
  if (!m.net) return out;
  const int64_t width = input_layout().width;
  constexpr size_t kChunk = 1024;  // bounds the forest's memory for large candidate sets
  for (size_t begin = 0; begin < x.size(); begin += kChunk) {
    size_t end = std::min(x.size(), begin + kChunk);
    Forest f = m.scaled(row_pointers(x, begin, end));
    TesseraTreeForest view = f.view(width);
    call("prediction", [&](char* error, size_t size) {
      return plugin().predict(m.net.get(), &view, out.data() + begin, error, size);
    });
  }
  return out;
}

namespace {
// A saved model: this line, one line of JSON (the network's shape, objective and input
// scaling), then the network's weights as libtorch wrote them.
constexpr const char* kMagic = "tessera-treegru 1\n";
}  // namespace

std::string TreeGRUModel::to_bytes() const {
  const Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mutex);
  if (!m.net) throw_error("the TreeGRU model has not been fitted: nothing to save");
  nlohmann::json header = {{"width", input_layout().width},
                           {"hidden", params_.hidden},
                           {"objective", objective_name(params_.objective)},
                           {"mean", m.mean},
                           {"inv_std", m.inv_std}};
  char* weights = nullptr;
  size_t size = 0;
  call("saving", [&](char* error, size_t error_size) {
    return plugin().save(m.net.get(), &weights, &size, error, error_size);
  });
  std::string out = kMagic + header.dump() + "\n" + std::string(weights, size);
  plugin().free_bytes(weights);
  return out;
}

void TreeGRUModel::load_bytes(const std::string& bytes, const std::string& source) {
  const std::string magic = kMagic;
  if (bytes.compare(0, magic.size(), magic) != 0)
    throw_error("{}: not a TreeGRU model (no '{}' line)", source,
                magic.substr(0, magic.size() - 1));
  size_t eol = bytes.find('\n', magic.size());
  if (eol == std::string::npos) throw_error("{}: a TreeGRU model cut short", source);
  TreeGRUParams params = params_;
  std::vector<float> mean, inv_std;
  const int64_t width = input_layout().width;
  try {
    nlohmann::json h = nlohmann::json::parse(bytes.substr(magic.size(), eol - magic.size()));
    if (h.at("width").get<int64_t>() != width)
      throw_error("trained on nodes of {} inputs; this tessera's have {}",
                  h.at("width").get<int64_t>(), width);
    int64_t hidden = h.at("hidden").get<int64_t>();
    if (hidden < 1 || hidden > 4096) throw_error("a hidden width of {}", hidden);
    params.hidden = static_cast<int>(hidden);
    std::string objective = h.at("objective").get<std::string>();
    if (objective != "rank" && objective != "reg")
      throw_error("an unknown objective '{}'", objective);
    params.objective = objective == "rank" ? TreeGRUParams::Objective::kRank
                                           : TreeGRUParams::Objective::kRegression;
    mean = h.at("mean").get<std::vector<float>>();
    inv_std = h.at("inv_std").get<std::vector<float>>();
    if (mean.size() != static_cast<size_t>(width) || inv_std.size() != mean.size())
      throw_error("an input scaling of {} values for {} inputs", mean.size(), width);
    for (size_t i = 0; i < mean.size(); ++i) {
      if (!std::isfinite(mean[i]) || !std::isfinite(inv_std[i]))
        throw_error("a non-finite input scaling");
    }
  } catch (const Error& e) {
    throw_error("{}: not a usable TreeGRU model: {}", source, e.what());
  } catch (const nlohmann::json::exception& e) {
    throw_error("{}: not a usable TreeGRU model: its header: {}", source, e.what());
  }
  void* net = nullptr;
  char error[kErrorSize] = "";
  net = plugin().load(bytes.data() + eol + 1, bytes.size() - eol - 1, width, params.hidden,
                      params.learning_rate, params.weight_decay, error, kErrorSize);
  if (!net) throw_error("{}: not a usable TreeGRU model: its weights: {}", source, error);
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mutex);
  m.net.reset(net);
  m.mean = std::move(mean);
  m.inv_std = std::move(inv_std);
  params_ = params;
}

void TreeGRUModel::save(const std::string& path) const {
  std::string bytes = to_bytes();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw_error("cannot write {}", path);
}

void TreeGRUModel::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error("cannot read {}", path);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  load_bytes(bytes.str(), path);
}

}  // namespace tessera
