/* The C interface of a model library that `tessera compile -o model.so` writes
 * (graph::Executor::export_library). graph/compiled_model.h wraps it for C++; a C program can
 * dlopen the library and call these directly. The library is self-contained: kernels, weights
 * (read-only data) and the step list; it needs libgomp and libc only. */
#ifndef TESSERA_MODEL_ABI_H
#define TESSERA_MODEL_ABI_H

#include <stdint.h>

/* 2: integer inputs (tessera_model_input_dtype, tessera_model_input_ids), adaptive threads. */
#define TESSERA_MODEL_ABI_VERSION 2

/* Element types of an input. */
#define TESSERA_MODEL_FLOAT32 0
#define TESSERA_MODEL_INT64 1

/* The seal `tessera compile -o` appends to the library file (past the ELF image, which the
 * loader ignores), checked before dlopen so that a truncated or damaged file is an error rather
 * than a crash in the loader: the 8 bytes TESSERA_MODEL_SEAL_MAGIC, then the length of the bytes
 * before the seal and their FNV-1a 64-bit hash (offset basis 14695981039346656037, prime
 * 1099511628211), each a little-endian uint64. */
#define TESSERA_MODEL_SEAL_MAGIC "TSRSEAL1"
#define TESSERA_MODEL_SEAL_BYTES 24

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tessera_model tessera_model;

/* TESSERA_MODEL_ABI_VERSION of the library. */
int tessera_model_abi_version(void);
/* JSON: the source model, target, kernels (workload, schedule source, strategy, uses), steps
 * and arena bytes. */
const char* tessera_model_description(void);

int tessera_model_num_inputs(void);
const char* tessera_model_input_name(int i);
int tessera_model_input_rank(int i);
const int64_t* tessera_model_input_shape(int i);
/* TESSERA_MODEL_FLOAT32, or TESSERA_MODEL_INT64 for ids (token ids a Gather reads). */
int tessera_model_input_dtype(int i);
int tessera_model_num_outputs(void);
const char* tessera_model_output_name(int i);
int tessera_model_output_rank(int i);
const int64_t* tessera_model_output_shape(int i);

/* An instance with its own buffers (instances may run concurrently); NULL when out of memory. */
tessera_model* tessera_model_create(void);
void tessera_model_destroy(tessera_model* m);
/* Input i's float32 buffer (row-major, the input's shape): write it before run. NULL for an
 * int64 input. */
float* tessera_model_input(tessera_model* m, int i);
/* An int64 input's buffer of ids, NULL for a float32 one. Ids run as float32 (exact below 2^24);
 * a negative id counts from the end of the table it indexes, an id outside the table reads its
 * nearest end (the description's `id_bound` gives the table's size). */
int64_t* tessera_model_input_ids(tessera_model* m, int i);
/* Output i's float32 buffer, valid until the next run or destroy. */
const float* tessera_model_output(const tessera_model* m, int i);
void tessera_model_run(tessera_model* m);
/* OpenMP threads of the parallel kernels (the process-wide setting of libgomp). */
void tessera_model_set_num_threads(int n);
/* On (the default): while other processes keep the machine busy and runs slow down, an instance
 * tries fewer threads and keeps them where that is faster, returning to all of them when the
 * machine is free (graph/thread_policy.h); off: every run uses the thread count. */
void tessera_model_set_adaptive_threads(tessera_model* m, int on);
/* The threads the instance's runs use now. */
int tessera_model_threads_in_use(const tessera_model* m);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_MODEL_ABI_H */
