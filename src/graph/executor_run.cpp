// Running a compiled Executor: its inputs (floats, or ids converted as the model library does),
// the steps in order, per-kernel profiles and the outputs.
#include <algorithm>
#include <chrono>

#include "graph/executor.h"
#include "graph/op_table.h"
#include "te/error.h"

namespace tessera::graph {

NDArray to_ndarray(const HostTensor& t) {
  NDArray a = NDArray::empty(t.shape, DType::kFloat32);
  a.from_doubles(t.data);
  return a;
}

HostTensor to_host(const NDArray& a, const std::vector<int64_t>& shape) {
  return {shape, a.to_doubles(), false};
}

std::vector<int64_t>& Executor::input_ids(size_t i) {
  if (!input_is_int(i)) throw_error("input '{}' takes floats, not ids", input_names_.at(i));
  return *input_ids_[i];
}

void Executor::set_input(size_t i, const HostTensor& value) {
  if (value.shape != arrays_[input_slots_.at(i)].shape())
    throw_error("input '{}' has shape {}, given {}", input_names_[i],
                shape_text(arrays_[input_slots_[i]].shape()), shape_text(value.shape));
  if (!input_is_int(i)) return input(i).from_doubles(value.data);
  if (!value.is_int) throw_error("input '{}' takes integer ids, given floats", input_names_[i]);
  std::vector<int64_t>& ids = *input_ids_[i];
  for (size_t k = 0; k < ids.size(); ++k) ids[k] = saturated_int(value.data[k]);
}

void Executor::run() {
  // Ids run as float32, exact below 2^24; kernels clamp them into their table.
  constexpr int64_t kExact = int64_t{1} << 24;
  for (size_t i = 0; i < input_ids_.size(); ++i) {
    if (!input_ids_[i]) continue;
    float* x = arrays_[input_slots_[i]].data_as<float>();
    const std::vector<int64_t>& ids = *input_ids_[i];
    for (size_t k = 0; k < ids.size(); ++k)
      x[k] = static_cast<float>(std::clamp(ids[k], -kExact, kExact));
  }
  for (const Step& s : steps_) modules_[s.kernel]->run(s.args);
}

std::vector<double> Executor::profile(int repeat) const {
  std::vector<std::vector<double>> step_ms(steps_.size());
  for (int r = 0; r < std::max(repeat, 1); ++r) {
    for (size_t i = 0; i < steps_.size(); ++i) {
      auto start = std::chrono::steady_clock::now();
      modules_[steps_[i].kernel]->run(steps_[i].args);
      step_ms[i].push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count());
    }
  }
  std::vector<double> kernel_ms(kernels_.size(), 0.0);
  for (size_t i = 0; i < steps_.size(); ++i) {
    std::vector<double>& v = step_ms[i];
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    kernel_ms[steps_[i].kernel] += v[v.size() / 2];
  }
  return kernel_ms;
}

HostTensor Executor::output(size_t i) const {
  return to_host(arrays_[output_slots_.at(i)], output_shapes_.at(i));
}

}  // namespace tessera::graph
