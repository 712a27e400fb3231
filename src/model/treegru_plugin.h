/// The C interface between the TreeGRU cost model (model/treegru_model.cpp, in tessera_core) and
/// its network (model/torch/treegru_net.cpp, the shared library libtessera_treegru.so, the only
/// part that links libtorch). Loading libtorch takes about 0.4 s, so tessera opens the library
/// on the first TreeGRU fit or load, and the CLI, the measurement worker and the Python module
/// start without it.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

/// Programs of a batch as one forest, nodes grouped by depth (roots first) so that every level
/// is one contiguous block of rows.
struct TesseraTreeForest {
  const float* x;  // nodes * width inputs, already scaled
  int64_t nodes;
  int64_t width;
  const int64_t* level_start;  // levels + 1 offsets: level d is rows [level_start[d], [d + 1])
  int64_t levels;
  /// For each node below the roots, in row order: its parent's position within the level above.
  const int64_t* parent_local;
};

/// Functions return 0 on success and -1 on failure with a message in `error` (NUL-terminated,
/// at most error_size bytes).
struct TesseraTreeGruApi {
  int version;  // kTesseraTreeGruApiVersion
  void* (*create)(int64_t width, int64_t hidden, uint64_t seed, double learning_rate,
                  double weight_decay, char* error, size_t error_size);
  void (*destroy)(void* net);
  /// One Adam step on the forest's roots with one label each; objective 0 is the pairwise rank
  /// loss, 1 squared error. Returns 1 (and no step) when a rank batch has nothing to order.
  int (*train_step)(void* net, const TesseraTreeForest* forest, const float* labels, int objective,
                    double* loss, char* error, size_t error_size);
  int (*predict)(void* net, const TesseraTreeForest* forest, float* scores, char* error,
                 size_t error_size);
  /// The weights as bytes that `load` reads; free them with free_bytes.
  int (*save)(void* net, char** bytes, size_t* size, char* error, size_t error_size);
  void* (*load)(const char* bytes, size_t size, int64_t width, int64_t hidden, double learning_rate,
                double weight_decay, char* error, size_t error_size);
  void (*free_bytes)(char* bytes);
};

const TesseraTreeGruApi* tessera_treegru_api(void);
}

inline constexpr int kTesseraTreeGruApiVersion = 1;
inline constexpr const char* kTesseraTreeGruSymbol = "tessera_treegru_api";
