// libtessera_treegru.so: the TreeGRU network, its losses and its weights' bytes on libtorch,
// behind the C interface of model/treegru_plugin.h.
#include <torch/torch.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/treegru_plugin.h"

namespace {

// Child-sum tree GRU: a node's state mixes the sum of its children's states with a candidate
// computed from its input and its children's states, each child's gated by a reset gate of its
// own (the GRU form of Tai et al.'s child-sum tree LSTM), run bottom-up over every program of
// the batch at once; a two-layer head scores the root's state.
struct TreeGRUNet : torch::nn::Module {
  TreeGRUNet(int64_t width, int64_t hidden)
      : input(register_module("input", torch::nn::Linear(width, 3 * hidden))),
        update(register_module("update", linear_without_bias(hidden))),
        reset(register_module("reset", linear_without_bias(hidden))),
        candidate(register_module("candidate", linear_without_bias(hidden))),
        head1(register_module("head1", torch::nn::Linear(hidden, hidden))),
        head2(register_module("head2", torch::nn::Linear(hidden, 1))),
        hidden_(hidden) {}

  static torch::nn::Linear linear_without_bias(int64_t n) {
    return torch::nn::Linear(torch::nn::LinearOptions(n, n).bias(false));
  }

  torch::Tensor forward(const TesseraTreeForest& f) {
    // from_blob does not copy: the caller's arrays outlive the call.
    torch::Tensor x = torch::from_blob(const_cast<float*>(f.x), {f.nodes, f.width});
    std::vector<torch::Tensor> gates = input->forward(x).chunk(3, 1);
    torch::Tensor below;  // states of the level under the current one
    for (int64_t d = f.levels - 1; d >= 0; --d) {
      int64_t start = f.level_start[d], count = f.level_start[d + 1] - start;
      torch::Tensor xz = gates[0].narrow(0, start, count);
      torch::Tensor xr = gates[1].narrow(0, start, count);
      torch::Tensor xh = gates[2].narrow(0, start, count);
      torch::Tensor sum = torch::zeros({count, hidden_});
      torch::Tensor reset_sum = torch::zeros({count, hidden_});
      if (below.defined()) {
        // parent_local covers the nodes below the roots: level d + 1 starts at its offset
        // minus the roots.
        int64_t first = f.level_start[d + 1] - f.level_start[1];
        int64_t children = below.size(0);
        torch::Tensor parent = torch::from_blob(const_cast<int64_t*>(f.parent_local) + first,
                                                {children}, torch::kLong);
        sum = sum.index_add(0, parent, below);
        torch::Tensor r = torch::sigmoid(xr.index_select(0, parent) + reset->forward(below));
        reset_sum = reset_sum.index_add(0, parent, r * below);
      }
      torch::Tensor z = torch::sigmoid(xz + update->forward(sum));
      torch::Tensor c = torch::tanh(xh + candidate->forward(reset_sum));
      below = z * sum + (1 - z) * c;
    }
    return head2->forward(torch::relu(head1->forward(below))).squeeze(1);
  }

  torch::nn::Linear input, update, reset, candidate, head1, head2;
  int64_t hidden_;
};

struct Net {
  std::shared_ptr<TreeGRUNet> module;
  std::unique_ptr<torch::optim::Adam> optimizer;
};

void set_error(char* error, size_t size, const std::string& message) {
  if (!error || size == 0) return;
  // libtorch's messages carry a backtrace after the first line.
  std::string first = message.substr(0, message.find('\n'));
  std::strncpy(error, first.c_str(), size - 1);
  error[size - 1] = '\0';
}

template <typename F>
int guarded(char* error, size_t size, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    set_error(error, size, e.what());
  } catch (...) {
    set_error(error, size, "unknown error");
  }
  return -1;
}

Net* make_net(int64_t width, int64_t hidden, double learning_rate, double weight_decay) {
  auto net = std::make_unique<Net>();
  net->module = std::make_shared<TreeGRUNet>(width, hidden);
  net->optimizer = std::make_unique<torch::optim::Adam>(
      net->module->parameters(),
      torch::optim::AdamOptions(learning_rate).weight_decay(weight_decay));
  return net.release();
}

// torch's global generator draws the initial weights; seeding and drawing happen together.
std::mutex& init_mutex() {
  static std::mutex m;
  return m;
}

void* create(int64_t width, int64_t hidden, uint64_t seed, double learning_rate,
             double weight_decay, char* error, size_t error_size) {
  void* out = nullptr;
  guarded(error, error_size, [&] {
    std::lock_guard<std::mutex> lock(init_mutex());
    torch::manual_seed(seed);
    out = make_net(width, hidden, learning_rate, weight_decay);
    return 0;
  });
  return out;
}

void destroy(void* net) {
  delete static_cast<Net*>(net);
}

int train_step(void* handle, const TesseraTreeForest* forest, const float* labels, int objective,
               double* loss_out, char* error, size_t error_size) {
  return guarded(error, error_size, [&] {
    Net& net = *static_cast<Net*>(handle);
    net.module->train();
    torch::Tensor score = net.module->forward(*forest);
    torch::Tensor target = torch::from_blob(const_cast<float*>(labels), {score.size(0)}).clone();
    torch::Tensor loss;
    if (objective == 0) {
      // AutoTVM's eq. 2: log(1 + exp(-(s_i - s_j))) over the pairs with y_i > y_j.
      torch::Tensor better = target.unsqueeze(1) > target.unsqueeze(0);
      if (!better.any().item<bool>()) return 1;
      torch::Tensor margin = score.unsqueeze(1) - score.unsqueeze(0);
      loss = torch::softplus(-margin.masked_select(better)).mean();
    } else {
      loss = torch::mse_loss(score, target);
    }
    net.optimizer->zero_grad();
    loss.backward();
    net.optimizer->step();
    *loss_out = loss.item<double>();
    return 0;
  });
}

int predict(void* handle, const TesseraTreeForest* forest, float* scores, char* error,
            size_t error_size) {
  return guarded(error, error_size, [&] {
    Net& net = *static_cast<Net*>(handle);
    net.module->eval();
    torch::InferenceMode inference;
    torch::Tensor s = net.module->forward(*forest).contiguous();
    std::memcpy(scores, s.data_ptr<float>(), sizeof(float) * s.size(0));
    return 0;
  });
}

int save(void* handle, char** bytes, size_t* size, char* error, size_t error_size) {
  return guarded(error, error_size, [&] {
    Net& net = *static_cast<Net*>(handle);
    torch::serialize::OutputArchive archive;
    net.module->save(archive);
    std::ostringstream out;
    archive.save_to(out);
    std::string s = out.str();
    *bytes = static_cast<char*>(std::malloc(s.size()));
    if (!*bytes) throw std::bad_alloc();
    std::memcpy(*bytes, s.data(), s.size());
    *size = s.size();
    return 0;
  });
}

void* load(const char* bytes, size_t size, int64_t width, int64_t hidden, double learning_rate,
           double weight_decay, char* error, size_t error_size) {
  void* out = nullptr;
  guarded(error, error_size, [&] {
    std::unique_ptr<Net> net(make_net(width, hidden, learning_rate, weight_decay));
    std::vector<std::vector<int64_t>> shapes;
    for (const torch::Tensor& p : net->module->parameters()) shapes.push_back(p.sizes().vec());
    torch::serialize::InputArchive archive;
    std::istringstream in(std::string(bytes, size));
    archive.load_from(in);
    net->module->load(archive);
    // Reading replaces each tensor whatever its shape: weights of another shape are refused
    // here rather than at the first prediction.
    std::vector<torch::Tensor> loaded = net->module->parameters();
    for (size_t i = 0; i < loaded.size(); ++i) {
      if (loaded[i].sizes().vec() != shapes[i] || loaded[i].scalar_type() != torch::kFloat)
        throw std::runtime_error("weights of another shape than the network's");
    }
    out = net.release();
    return 0;
  });
  return out;
}

void free_bytes(char* bytes) {
  std::free(bytes);
}

const TesseraTreeGruApi kApi = {
    kTesseraTreeGruApiVersion, create, destroy, train_step, predict, save, load, free_bytes};

}  // namespace

extern "C" __attribute__((visibility("default"))) const TesseraTreeGruApi* tessera_treegru_api() {
  return &kApi;
}
