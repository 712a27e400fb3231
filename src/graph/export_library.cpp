// Writes an Executor as one shared object: the kernels' C sources, a generated driver that owns
// the step list and the buffers, and the weights embedded as read-only data by `.incbin`.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "graph/executor.h"
#include "graph/model_abi.h"
#include "graph/thread_policy_text.h"
#include "measure/target.h"
#include "runtime/isa.h"
#include "runtime/shared_library.h"
#include "te/error.h"

namespace tessera::graph {

namespace {

constexpr size_t kAlign = 64;  // a cache line, and an AVX-512 vector

size_t align_up(size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

// `text` as a C string literal; octal escapes keep every byte exact.
std::string c_string(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\')
      out += fmt::format("\\{}", static_cast<char>(c));
    else if (c >= 0x20 && c < 0x7f && c != '?')  // '?' starts trigraphs
      out += static_cast<char>(c);
    else
      out += fmt::format("\\{:03o}", c);
  }
  return out + "\"";
}

// A static array definition; C has no empty arrays, so an empty one holds a single 0.
template <typename T>
std::string c_array(const std::string& type, const std::string& name, const std::vector<T>& v) {
  std::string body;
  for (size_t i = 0; i < v.size(); ++i) body += fmt::format("{}{}", i ? ", " : "", v[i]);
  if (v.empty()) body = "0";
  return fmt::format("static const {} {}[] = {{{}}};\n", type, name, body);
}

// The seal of model_abi.h, appended to the linked library.
void append_seal(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint64_t hash = 14695981039346656037ull, length = 0;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    for (std::streamsize i = 0; i < in.gcount(); ++i) {
      hash = (hash ^ static_cast<unsigned char>(buffer[i])) * 1099511628211ull;
    }
    length += static_cast<uint64_t>(in.gcount());
  }
  in.close();
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out.write(TESSERA_MODEL_SEAL_MAGIC, 8);
  for (uint64_t v : {length, hash})
    for (int b = 0; b < 8; ++b) out.put(static_cast<char>((v >> (8 * b)) & 0xff));
  out.flush();
  if (!out) throw_error("cannot write {}", path);
}

}  // namespace

Executor::MemoryPlan Executor::plan_memory() const {
  // Lifetime of each buffer in steps: from its first to its last use, both included, so a
  // step never writes into the memory of a value it reads.
  const int end = static_cast<int>(steps_.size());
  std::vector<int> first(arrays_.size(), end + 1), last(arrays_.size(), -1);
  // A part's uses are uses of the array it is part of.
  auto whole = [&](size_t slot) { return part_of_[slot] ? part_of_[slot]->of : slot; };
  for (int s = 0; s < end; ++s)
    for (size_t slot : steps_[s].slots) {
      first[whole(slot)] = std::min(first[whole(slot)], s);
      last[whole(slot)] = std::max(last[whole(slot)], s);
    }
  for (size_t slot : input_slots_)
    first[whole(slot)] = -1, last[whole(slot)] = std::max(last[whole(slot)], end);
  for (size_t slot : output_slots_)
    last[whole(slot)] = end, first[whole(slot)] = std::min(first[whole(slot)], end);

  MemoryPlan plan;
  plan.offsets.assign(arrays_.size(), 0);
  plan.in_arena.assign(arrays_.size(), false);
  std::vector<size_t> order;
  for (size_t a = 0; a < arrays_.size(); ++a)
    if (!constant_[a] && !part_of_[a] && last[a] >= 0) {
      order.push_back(a);
      plan.in_arena[a] = true;
      plan.separate_bytes += align_up(arrays_[a].bytes());
    }
  // Largest first, each at the lowest offset free of every placed buffer it is alive with.
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return arrays_[a].bytes() > arrays_[b].bytes(); });
  std::vector<size_t> placed;
  for (size_t a : order) {
    std::vector<std::pair<size_t, size_t>> busy;
    for (size_t p : placed)
      if (first[p] <= last[a] && first[a] <= last[p])
        busy.push_back({plan.offsets[p], plan.offsets[p] + align_up(arrays_[p].bytes())});
    std::sort(busy.begin(), busy.end());
    size_t offset = 0, size = align_up(arrays_[a].bytes());
    for (auto [lo, hi] : busy) {
      if (offset + size <= lo) break;
      offset = std::max(offset, hi);
    }
    plan.offsets[a] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + size);
    placed.push_back(a);
  }
  for (size_t a = 0; a < arrays_.size(); ++a)
    if (part_of_[a] && plan.in_arena[part_of_[a]->of]) {
      plan.in_arena[a] = true;
      plan.offsets[a] = plan.offsets[part_of_[a]->of] + part_of_[a]->bytes;
    }
  return plan;
}

Executor::MemoryPlan Executor::export_library(const std::string& path,
                                              const ExportOptions& options) const {
  std::filesystem::path dir = std::filesystem::absolute(path).parent_path();
  if (!std::filesystem::is_directory(dir))
    throw_error("cannot write {}: {} is not a directory", path, dir.string());
  MemoryPlan memory = plan_memory();

  // Weights: every constant once, each aligned, in one blob.
  std::vector<size_t> weight_offset(arrays_.size(), 0);
  size_t weight_bytes = 0;
  for (size_t a = 0; a < arrays_.size(); ++a)
    if (constant_[a] && !part_of_[a]) {
      weight_offset[a] = weight_bytes;
      weight_bytes += align_up(arrays_[a].bytes());
    }
  std::vector<unsigned char> blob(std::max(weight_bytes, kAlign), 0);
  for (size_t a = 0; a < arrays_.size(); ++a)
    if (constant_[a] && !part_of_[a])
      std::copy_n(static_cast<const unsigned char*>(arrays_[a].data()), arrays_[a].bytes(),
                  blob.begin() + static_cast<std::ptrdiff_t>(weight_offset[a]));

  nlohmann::json d;
  d["model"] = options.model;
  d["target"] = detect_target().key();
  d["isa"] = target_isa().name;
  d["steps"] = steps_.size();
  d["arena_bytes"] = memory.arena_bytes;
  d["separate_bytes"] = memory.separate_bytes;
  d["weight_bytes"] = weight_bytes;
  for (const KernelInfo& k : kernels_)
    d["kernels"].push_back({{"workload", k.workload},
                            {"schedule", k.schedule},
                            {"strategy", k.strategy},
                            {"in_model", k.in_model},
                            {"uses", k.uses}});

  std::vector<int> step_kernel, step_first_arg, arg_slot;
  for (const Step& s : steps_) {
    step_kernel.push_back(s.kernel);
    step_first_arg.push_back(static_cast<int>(arg_slot.size()));
    for (size_t slot : s.slots) arg_slot.push_back(static_cast<int>(slot));
  }
  step_first_arg.push_back(static_cast<int>(arg_slot.size()));
  std::vector<int> slot_is_weight;
  std::vector<size_t> slot_offset;
  for (size_t a = 0; a < arrays_.size(); ++a) {
    slot_is_weight.push_back(constant_[a] ? 1 : 0);
    if (constant_[a] && part_of_[a])
      slot_offset.push_back(weight_offset[part_of_[a]->of] + part_of_[a]->bytes);
    else
      slot_offset.push_back(constant_[a] ? weight_offset[a] : memory.offsets[a]);
  }

  std::vector<int> input_is_int;
  std::vector<int64_t> input_elements;
  for (size_t i = 0; i < input_slots_.size(); ++i) {
    input_is_int.push_back(this->input_is_int(i) ? 1 : 0);
    input_elements.push_back(num_elements(arrays_[input_slots_[i]].shape()));
    d["inputs"].push_back({{"name", input_names_[i]},
                           {"dtype", this->input_is_int(i) ? "int64" : "float32"},
                           {"id_bound", input_id_bound_[i]}});
  }

  std::string c =
      "#include <omp.h>\n#include <stdint.h>\n#include <stdlib.h>\n#include <time.h>\n\n";
  c += kThreadPolicySource;
  c += "#define TSR_API __attribute__((visibility(\"default\")))\n";
  c += "typedef struct tessera_model tessera_model;\n";
  c += "typedef void (*tsr_kernel_fn)(void* const* args);\n";
  c += "extern const unsigned char tsr_weights[];\n";
  std::vector<std::string> entries;
  for (size_t k = 0; k < codes_.size(); ++k) {
    entries.push_back(kernel_entry(k));
    c += fmt::format("void {}(void* const* args);\n", entries.back());
  }
  c += fmt::format("static tsr_kernel_fn const tsr_kernels[] = {{{}}};\n",
                   entries.empty() ? "0" : fmt::format("{}", fmt::join(entries, ", ")));
  c += c_array("int32_t", "step_kernel", step_kernel);
  c += c_array("int32_t", "step_first_arg", step_first_arg);
  c += c_array("int32_t", "arg_slot", arg_slot);
  c += c_array("uint8_t", "slot_is_weight", slot_is_weight);
  c += c_array("uint64_t", "slot_offset", slot_offset);
  c += c_array("int32_t", "input_slot", input_slots_);
  c += c_array("int32_t", "output_slot", output_slots_);
  c += c_array("uint8_t", "input_is_int", input_is_int);
  c += c_array("int64_t", "input_elements", input_elements);
  auto describe = [&](const std::string& kind, const std::vector<std::string>& names,
                      const std::vector<std::vector<int64_t>>& shapes) {
    std::vector<std::string> quoted, shape_names;
    std::vector<size_t> ranks;
    for (size_t i = 0; i < names.size(); ++i) {
      quoted.push_back(c_string(names[i]));
      shape_names.push_back(fmt::format("{}_shape_{}", kind, i));
      ranks.push_back(shapes[i].size());
      c += c_array("int64_t", shape_names.back(), shapes[i]);
    }
    c += fmt::format("static const char* const {}_names[] = {{{}}};\n", kind,
                     fmt::join(quoted, ", "));
    c += fmt::format("static const int64_t* const {}_shapes[] = {{{}}};\n", kind,
                     fmt::join(shape_names, ", "));
    c += c_array("int32_t", kind + "_ranks", ranks);
  };
  std::vector<std::vector<int64_t>> input_shapes;
  for (size_t slot : input_slots_) input_shapes.push_back(arrays_[slot].shape());
  describe("input", input_names_, input_shapes);
  describe("output", output_names_, output_shapes_);
  c += fmt::format("static const char tsr_description[] = {};\n\n", c_string(d.dump()));
  c += fmt::format(R"(enum {{ NUM_STEPS = {}, NUM_ARGS = {}, NUM_INPUTS = {}, NUM_OUTPUTS = {} }};
#define ARENA_BYTES ((size_t){}u)

struct tessera_model {{
  unsigned char* arena;
  int adaptive;
  tsr_thread_policy threads;
  int64_t* ids[NUM_INPUTS > 0 ? NUM_INPUTS : 1];
  void* args[NUM_ARGS > 0 ? NUM_ARGS : 1];
}};

TSR_API void tessera_model_destroy(tessera_model* m);

static void* slot_pointer(const tessera_model* m, int slot) {{
  const unsigned char* base = slot_is_weight[slot] ? tsr_weights : m->arena;
  return (void*)(base + slot_offset[slot]);
}}

TSR_API int tessera_model_abi_version(void) {{ return 2; }}
TSR_API const char* tessera_model_description(void) {{ return tsr_description; }}
TSR_API int tessera_model_num_inputs(void) {{ return NUM_INPUTS; }}
TSR_API const char* tessera_model_input_name(int i) {{ return input_names[i]; }}
TSR_API int tessera_model_input_rank(int i) {{ return input_ranks[i]; }}
TSR_API const int64_t* tessera_model_input_shape(int i) {{ return input_shapes[i]; }}
TSR_API int tessera_model_input_dtype(int i) {{ return input_is_int[i] ? 1 : 0; }}
TSR_API int tessera_model_num_outputs(void) {{ return NUM_OUTPUTS; }}
TSR_API const char* tessera_model_output_name(int i) {{ return output_names[i]; }}
TSR_API int tessera_model_output_rank(int i) {{ return output_ranks[i]; }}
TSR_API const int64_t* tessera_model_output_shape(int i) {{ return output_shapes[i]; }}

TSR_API tessera_model* tessera_model_create(void) {{
  tessera_model* m = (tessera_model*)calloc(1, sizeof *m);
  if (!m) return 0;
  m->arena = (unsigned char*)aligned_alloc({}, ARENA_BYTES > 0 ? ARENA_BYTES : {});
  if (!m->arena) {{
    free(m);
    return 0;
  }}
  m->adaptive = 1;
  for (int a = 0; a < NUM_ARGS; ++a) m->args[a] = slot_pointer(m, arg_slot[a]);
  for (int i = 0; i < NUM_INPUTS; ++i) {{
    if (!input_is_int[i]) continue;
    m->ids[i] = (int64_t*)calloc((size_t)input_elements[i], sizeof(int64_t));
    if (!m->ids[i]) {{
      tessera_model_destroy(m);
      return 0;
    }}
  }}
  return m;
}}

TSR_API void tessera_model_destroy(tessera_model* m) {{
  if (!m) return;
  for (int i = 0; i < NUM_INPUTS; ++i) free(m->ids[i]);
  free(m->arena);
  free(m);
}}

TSR_API float* tessera_model_input(tessera_model* m, int i) {{
  return input_is_int[i] ? 0 : (float*)slot_pointer(m, input_slot[i]);
}}

TSR_API int64_t* tessera_model_input_ids(tessera_model* m, int i) {{
  return m->ids[i];
}}

TSR_API const float* tessera_model_output(const tessera_model* m, int i) {{
  return (const float*)slot_pointer(m, output_slot[i]);
}}

TSR_API void tessera_model_run(tessera_model* m) {{
  /* Ids run as float32, exact below 2^24; kernels clamp them into their table. */
  for (int i = 0; i < NUM_INPUTS; ++i) {{
    if (!input_is_int[i]) continue;
    float* x = (float*)slot_pointer(m, input_slot[i]);
    for (int64_t k = 0; k < input_elements[i]; ++k) {{
      int64_t id = m->ids[i][k];
      x[k] = (float)(id < -(1 << 24) ? -(1 << 24) : id > (1 << 24) ? (1 << 24) : id);
    }}
  }}
  /* Fewer threads while the machine is busy (thread_policy.h); the caller's count is restored. */
  const int cap = omp_get_max_threads();
  const int threads = m->adaptive ? tsr_policy_next(&m->threads, cap) : cap;
  if (threads != cap) omp_set_num_threads(threads);
  struct timespec start, end;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (int s = 0; s < NUM_STEPS; ++s) tsr_kernels[step_kernel[s]](m->args + step_first_arg[s]);
  clock_gettime(CLOCK_MONOTONIC, &end);
  if (threads != cap) omp_set_num_threads(cap);
  if (m->adaptive)
    tsr_policy_record(&m->threads, 1e3 * (double)(end.tv_sec - start.tv_sec) +
                                       1e-6 * (double)(end.tv_nsec - start.tv_nsec));
}}

TSR_API void tessera_model_set_adaptive_threads(tessera_model* m, int on) {{ m->adaptive = on; }}
TSR_API int tessera_model_threads_in_use(const tessera_model* m) {{
  const int cap = omp_get_max_threads();
  if (!m->adaptive || m->threads.cap != cap) return cap;
  const int threads = cap >> m->threads.home;
  return threads < 1 ? 1 : threads;
}}

TSR_API void tessera_model_set_num_threads(int n) {{ omp_set_num_threads(n); }}
)",
                   steps_.size(), arg_slot.size(), input_slots_.size(), output_slots_.size(),
                   memory.arena_bytes, kAlign, kAlign);

  SharedLibraryBuilder build;
  build.add_data("weights.bin", blob.data(), blob.size());
  build.add_source("weights.S", fmt::format(".section .rodata\n.balign {}\n.globl tsr_weights\n"
                                            ".hidden tsr_weights\ntsr_weights:\n.incbin {}\n"
                                            ".section .note.GNU-stack,\"\",@progbits\n",
                                            kAlign, c_string(build.path("weights.bin"))));
  build.add_source("model.c", c);
  for (size_t k = 0; k < codes_.size(); ++k)
    build.add_source(fmt::format("kernel{}.c", k), codes_[k]);
  try {
    build.link(path, {}, options.compile_jobs, append_seal);
  } catch (const Error& e) {
    throw KernelBuildError(fmt::format("cannot build {}: {}", path, e.what()));
  }
  return memory;
}

}  // namespace tessera::graph
