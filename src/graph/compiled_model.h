/// Loads a model library written by `tessera compile -o model.so` and runs it. Header-only and
/// free of the rest of tessera (the standard library and dlopen only), so an application can
/// copy this header and graph/model_abi.h and link with -ldl:
///
///   tessera::CompiledModel model = tessera::CompiledModel::load("resnet18.so");
///   model.set_input(0, image);  // std::vector<float> of the input's shape
///   model.run();
///   std::vector<float> logits = model.get_output(0);
#pragma once

#include <dlfcn.h>
#include <elf.h>
#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "graph/model_abi.h"

namespace tessera {

/// A library that cannot be loaded or an input of the wrong size.
class CompiledModelError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class CompiledModel {
 public:
  /// dlopens `path` (a path with a slash, or one found on the loader's path), checks its ABI
  /// version and creates an instance with its own buffers. A path with a slash is checked against
  /// the library's seal first (model_abi.h), so libraries written before the seal are refused
  /// there; found on the loader's path, they load.
  static CompiledModel load(const std::string& path) {
    // A file named by its path is checked against its seal first: dlopen of a truncated
    // library crashed (SIGBUS) and a damaged one failed an assertion inside ld.so.
    if (path.find('/') != std::string::npos) {
      std::string why = seal_problem(path);
      if (!why.empty()) throw CompiledModelError(path + ": " + why);
    }
    CompiledModel m;
    m.handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!m.handle_) throw CompiledModelError("cannot load " + path + ": " + dlerror());
    if (!m.bind(m.abi_version_, "tessera_model_abi_version") || !m.bind_all())
      throw CompiledModelError(path + " is not a tessera model library (missing " + m.missing_ +
                               ")");
    // Version 1 libraries lack only integer inputs.
    const int version = m.abi_version_();
    if (version < 1 || version > TESSERA_MODEL_ABI_VERSION)
      throw CompiledModelError(path + ": model ABI version " + std::to_string(version) +
                               ", this header reads 1 to " +
                               std::to_string(TESSERA_MODEL_ABI_VERSION));
    if (version >= 2 && (!m.bind(m.input_dtype_, "tessera_model_input_dtype") ||
                         !m.bind(m.input_ids_, "tessera_model_input_ids") ||
                         !m.bind(m.adaptive_, "tessera_model_set_adaptive_threads") ||
                         !m.bind(m.in_use_, "tessera_model_threads_in_use")))
      throw CompiledModelError(path + " is not a tessera model library (missing " + m.missing_ +
                               ")");
    m.model_ = m.create_();
    if (!m.model_) throw CompiledModelError(path + ": cannot allocate the model's buffers");
    return m;
  }

  CompiledModel(CompiledModel&& o) noexcept { *this = std::move(o); }
  CompiledModel& operator=(CompiledModel&& o) noexcept {
    if (this != &o) {
      release();
      handle_ = std::exchange(o.handle_, nullptr);
      model_ = std::exchange(o.model_, nullptr);
      abi_version_ = o.abi_version_, description_ = o.description_;
      num_inputs_ = o.num_inputs_, input_name_ = o.input_name_, input_rank_ = o.input_rank_;
      input_shape_ = o.input_shape_, num_outputs_ = o.num_outputs_;
      output_name_ = o.output_name_, output_rank_ = o.output_rank_;
      output_shape_ = o.output_shape_, create_ = o.create_, destroy_ = o.destroy_;
      input_ = o.input_, output_ = o.output_, run_ = o.run_, threads_ = o.threads_;
      input_dtype_ = o.input_dtype_, input_ids_ = o.input_ids_;
      adaptive_ = o.adaptive_, in_use_ = o.in_use_;
    }
    return *this;
  }
  CompiledModel(const CompiledModel&) = delete;
  CompiledModel& operator=(const CompiledModel&) = delete;
  ~CompiledModel() { release(); }

  size_t num_inputs() const { return static_cast<size_t>(num_inputs_()); }
  std::string input_name(size_t i) const { return input_name_(index(i, num_inputs())); }
  std::vector<int64_t> input_shape(size_t i) const {
    int k = index(i, num_inputs());
    return {input_shape_(k), input_shape_(k) + input_rank_(k)};
  }
  size_t num_outputs() const { return static_cast<size_t>(num_outputs_()); }
  std::string output_name(size_t i) const { return output_name_(index(i, num_outputs())); }
  std::vector<int64_t> output_shape(size_t i) const {
    int k = index(i, num_outputs());
    return {output_shape_(k), output_shape_(k) + output_rank_(k)};
  }
  /// The index of the input called `name`; throws if there is none.
  size_t input_index(const std::string& name) const {
    for (size_t i = 0; i < num_inputs(); ++i)
      if (input_name(i) == name) return i;
    throw CompiledModelError("the model has no input '" + name + "'");
  }

  /// Whether input i takes int64 ids (token ids) rather than floats.
  bool input_is_int(size_t i) const {
    return input_dtype_ && input_dtype_(index(i, num_inputs())) == TESSERA_MODEL_INT64;
  }

  /// Copies `count` floats (row-major, the input's shape) into input i.
  void set_input(size_t i, const float* data, size_t count) {
    check_input(i, count, false);
    float* dst = input_data(i);
    for (size_t k = 0; k < count; ++k) dst[k] = data[k];
  }
  /// Copies `count` ids (row-major, the input's shape) into integer input i.
  void set_input_ids(size_t i, const int64_t* data, size_t count) {
    check_input(i, count, true);
    int64_t* dst = input_ids_(model_, static_cast<int>(i));
    for (size_t k = 0; k < count; ++k) dst[k] = data[k];
  }
  void set_input_ids(size_t i, const std::vector<int64_t>& ids) {
    set_input_ids(i, ids.data(), ids.size());
  }
  void set_input(size_t i, const std::vector<float>& data) {
    set_input(i, data.data(), data.size());
  }
  void set_input(const std::string& name, const std::vector<float>& data) {
    set_input(input_index(name), data);
  }
  /// Input i's buffer, to fill in place.
  float* input_data(size_t i) { return input_(model_, index(i, num_inputs())); }

  void run() { run_(model_); }

  std::vector<float> get_output(size_t i) const {
    const float* p = output_data(i);
    return {p, p + elements(output_shape(i))};
  }
  /// Output i's buffer, valid until the next run().
  const float* output_data(size_t i) const { return output_(model_, index(i, num_outputs())); }

  /// OpenMP threads of the model's parallel kernels (process-wide).
  void set_num_threads(int n) { threads_(n); }
  /// Fewer threads while the machine is busy and that runs faster (the default; model_abi.h);
  /// off: every run uses the thread count. A no-op on version-1 libraries.
  void set_adaptive_threads(bool on) {
    if (adaptive_) adaptive_(model_, on ? 1 : 0);
  }
  /// The threads runs use now.
  int threads_in_use() const { return in_use_ ? in_use_(model_) : -1; }
  /// JSON: source model, target, kernels and where their schedules came from, arena bytes.
  std::string description() const { return description_(); }

 private:
  CompiledModel() = default;

  template <typename Fn>
  bool bind(Fn& fn, const char* name) {
    fn = reinterpret_cast<Fn>(dlsym(handle_, name));
    if (!fn) missing_ = name;
    return fn != nullptr;
  }
  bool bind_all() {
    return bind(description_, "tessera_model_description") &&
           bind(num_inputs_, "tessera_model_num_inputs") &&
           bind(input_name_, "tessera_model_input_name") &&
           bind(input_rank_, "tessera_model_input_rank") &&
           bind(input_shape_, "tessera_model_input_shape") &&
           bind(num_outputs_, "tessera_model_num_outputs") &&
           bind(output_name_, "tessera_model_output_name") &&
           bind(output_rank_, "tessera_model_output_rank") &&
           bind(output_shape_, "tessera_model_output_shape") &&
           bind(create_, "tessera_model_create") && bind(destroy_, "tessera_model_destroy") &&
           bind(input_, "tessera_model_input") && bind(output_, "tessera_model_output") &&
           bind(run_, "tessera_model_run") && bind(threads_, "tessera_model_set_num_threads");
  }
  // Why the file fails its seal (model_abi.h), or "" when it passes.
  static std::string seal_problem(const std::string& path) {
    // A FIFO would block the read below, a device never end it.
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      return "cannot load: not a regular file";
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) return "cannot load: the file does not exist or cannot be read";
    const auto size = static_cast<uint64_t>(in.tellg());
    const uint64_t seal = TESSERA_MODEL_SEAL_BYTES;
    const std::string rebuild = " (rebuild it with tessera compile -o)";
    if (size < seal) return "too short to be a model library: truncated?" + rebuild;
    in.seekg(static_cast<std::streamoff>(size - seal));
    char tail[TESSERA_MODEL_SEAL_BYTES];
    in.read(tail, sizeof tail);
    if (std::string(tail, 8) != TESSERA_MODEL_SEAL_MAGIC)
      return "has no seal: not a model library tessera compile wrote, or truncated" + rebuild;
    auto field = [&](int k) {
      uint64_t v = 0;
      for (int b = 7; b >= 0; --b) v = v << 8 | static_cast<unsigned char>(tail[8 + 8 * k + b]);
      return v;
    };
    if (field(0) != size - seal) return "is not as long as its seal says: damaged" + rebuild;
    in.seekg(0);
    uint64_t hash = 14695981039346656037ull, left = size - seal;
    char buffer[1 << 16];
    while (left > 0 && in.read(buffer, static_cast<std::streamsize>(
                                           left < sizeof buffer ? left : sizeof buffer))) {
      for (std::streamsize i = 0; i < in.gcount(); ++i)
        hash = (hash ^ static_cast<unsigned char>(buffer[i])) * 1099511628211ull;
      left -= static_cast<uint64_t>(in.gcount());
    }
    if (left != 0 || hash != field(1)) return "does not match its checksum: damaged" + rebuild;
    // The seal guards against damage, not forgery: a library cut short and sealed again still
    // fails here, before dlopen maps segments past the end of the file (SIGBUS).
    return elf_problem(in, size - seal, rebuild);
  }

  // Why the ELF image of `size` bytes is not one dlopen can map whole, or "".
  static std::string elf_problem(std::ifstream& in, uint64_t size, const std::string& rebuild) {
    Elf64_Ehdr header{};
    in.clear();
    in.seekg(0);
    if (size < sizeof header || !in.read(reinterpret_cast<char*>(&header), sizeof header) ||
        std::string(reinterpret_cast<const char*>(header.e_ident), 4) !=
            "\x7f"
            "ELF" ||
        header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_phentsize != sizeof(Elf64_Phdr))
      return "is not a 64-bit ELF shared library" + rebuild;
    if (header.e_phoff > size || header.e_phnum > (size - header.e_phoff) / sizeof(Elf64_Phdr))
      return "has program headers past its end: truncated" + rebuild;
    for (uint16_t i = 0; i < header.e_phnum; ++i) {
      Elf64_Phdr segment{};
      in.seekg(static_cast<std::streamoff>(header.e_phoff + i * sizeof segment));
      if (!in.read(reinterpret_cast<char*>(&segment), sizeof segment))
        return "cannot read its program headers" + rebuild;
      if (segment.p_offset > size || segment.p_filesz > size - segment.p_offset)
        return "has a segment past its end: truncated" + rebuild;
    }
    return "";
  }

  void check_input(size_t i, size_t count, bool ids) const {
    if (input_is_int(i) != ids)
      throw CompiledModelError("input '" + input_name(i) + "' takes " +
                               (input_is_int(i) ? "int64 ids" : "floats"));
    size_t expected = elements(input_shape(i));
    if (count != expected)
      throw CompiledModelError("input '" + input_name(i) + "' takes " + std::to_string(expected) +
                               (ids ? " ids" : " floats") + ", got " + std::to_string(count));
  }
  void release() {
    if (model_) destroy_(model_);
    if (handle_) dlclose(handle_);
    model_ = nullptr;
    handle_ = nullptr;
  }
  static int index(size_t i, size_t n) {
    if (i >= n)
      throw CompiledModelError("index " + std::to_string(i) + " out of range (the model has " +
                               std::to_string(n) + ")");
    return static_cast<int>(i);
  }
  static size_t elements(const std::vector<int64_t>& shape) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    return n;
  }

  void* handle_ = nullptr;
  tessera_model* model_ = nullptr;
  std::string missing_;
  int (*abi_version_)() = nullptr;
  const char* (*description_)() = nullptr;
  int (*num_inputs_)() = nullptr;
  const char* (*input_name_)(int) = nullptr;
  int (*input_rank_)(int) = nullptr;
  const int64_t* (*input_shape_)(int) = nullptr;
  int (*num_outputs_)() = nullptr;
  const char* (*output_name_)(int) = nullptr;
  int (*output_rank_)(int) = nullptr;
  const int64_t* (*output_shape_)(int) = nullptr;
  tessera_model* (*create_)() = nullptr;
  void (*destroy_)(tessera_model*) = nullptr;
  float* (*input_)(tessera_model*, int) = nullptr;
  const float* (*output_)(const tessera_model*, int) = nullptr;
  void (*run_)(tessera_model*) = nullptr;
  void (*threads_)(int) = nullptr;
  int (*input_dtype_)(int) = nullptr;                     // ABI 2
  int64_t* (*input_ids_)(tessera_model*, int) = nullptr;  // ABI 2
  void (*adaptive_)(tessera_model*, int) = nullptr;       // ABI 2
  int (*in_use_)(const tessera_model*) = nullptr;         // ABI 2
};

}  // namespace tessera
