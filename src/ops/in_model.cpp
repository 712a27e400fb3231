#include "ops/in_model.h"

#include "runtime/isa.h"
#include "schedule/rules.h"

namespace tessera {

// What a kernel needs in a model and not alone. Tuning times a convolution back to back, its
// weights in cache, so it cannot see that in a model (ResNet-18: 54 MB of weights, more than
// the L3) a layer's weights come from DRAM; there the hardware prefetcher trails the weight
// stream, and hints 16 KB ahead hide the misses (7x7x512 with its weights flushed: 1.11 ->
// 0.88 ms; in cache 0.674 -> 0.677, Xeon AVX-512, 2 threads). Below a megabyte of weights
// (MobileNet-v2's layers, 14 MB in all) the hints only cost issue slots.
std::vector<ProgramStrategy> in_model_strategies(const Workload& w) {
  if (w.op == "conv2d_nchwc") {
    const int64_t weight_bytes =
        w.get("O") * (w.get("C") / w.get_or("G", 1)) * w.get("K") * w.kernel_width() * 4;
    if (weight_bytes < (int64_t{1} << 20)) return {};
    // Each step of ib moves the weights on by one output block of floats.
    const int64_t step_bytes = w.get_or("CB", 16) * 4;
    return {prefetch("weight", "ib", 16 * 1024 / step_bytes)};
  }
  // A pre-packed dense reads each column block's panel of weights whole in its first row tile
  // and from L2 in the others, so that first tile waits on DRAM in a model (BERT-base: 340 MB of
  // weights per inference); the next panel hinted across the current one's row tiles hides it
  // (768 x 3072 with its weights out of cache: 297 -> 325 GFLOP/s, in cache 334 -> 343, Xeon
  // AVX-512, 2 threads). With a kc block the steps of k inside are k.inner.outer.
  if (w.op == "dense" && w.get_or("WB", 0) > 0 && w.get("O") * w.get("I") * 4 >= (1 << 20))
    return {prefetch_next("W", "j.outer", "k.outer"),
            prefetch_next("W", "j.outer", "k.inner.outer")};
  // A batched product reads each column panel of its right operand once per row tile, and the
  // panel's rows lie a whole row of B apart, a page or more: the hardware prefetchers stop at
  // each page, and Winograd's transformed weights come from DRAM in a model. The next panel
  // hinted took ResNet-50's 14x14x256 products from 5.3-5.6 to 3.5-3.7 ms (five layers) and its
  // 28x28x128 ones from 1.7 to 1.1-1.6 (AMD EPYC, Zen 2, AVX2, 2 threads); alone, with the
  // operand in cache, the hints cost 184 -> 147 GFLOP/s, so they stay an in-model strategy.
  if (w.op == "batch_matmul" && w.get("B") * w.get("K") * w.get("N") * 4 >= (1 << 20))
    return {prefetch_next("B", "j.outer", "k.outer")};
  return {};
}

namespace {

// Where a hint pays depends on the machine. On the AVX-512 Xeon the hints above paid even one to a
// dozen stores, and on an AVX-512 Zen 5 too: requiring 32 there made ResNet-18 1.05x and
// ResNet-50 1.02x slower (interleaved, 2 threads). On AVX2 (AMD EPYC, Zen 2) the hardware
// prefetchers keep up with weights from DRAM (a dense with its weights out of cache: 3.02 -> 3.24
// ms unhinted), and a hint beside few stores only costs issue slots: a tuned dense whose k loop
// steps by one, a hint per 12 vector FMAs, ran 4.1 ms in BERT against 3.2 without; the
// convolutions' hints (a store per 6) cost ResNet-50 and ResNet-18 2% each. The defaults' dense and
// batched products, a hint per 96 stores, gain there.
int64_t min_stores_per_hint() {
  return target_isa().name == "avx512" ? 0 : 32;
}

}  // namespace

Program with_in_model_hints(const Workload& w, Program program, std::string* applied) {
  if (applied) applied->clear();
  for (const ProgramStrategy& hint : in_model_strategies(w)) {
    RewriteResult<Program> r = hint(program);
    if (!r || stores_per_hint(r.program()) < min_stores_per_hint()) continue;
    if (applied) *applied = hint.text();
    return r.program();
  }
  return program;
}

}  // namespace tessera
