/// The one-step loop rules, as strategies on loop programs. Each checks its own legality and,
/// where it does not apply, says so (naming itself and the reason) instead of changing the program.
#pragma once

#include <string>
#include <vector>

#include "strategy/strategy.h"
#include "tir/program.h"

namespace tessera {

using ProgramStrategy = Strategy<Program>;

/// for x in [0, n) -> for x.outer in [0, ceil(n/f)) for x.inner in [0, f), guarded when f does not
/// divide n.
/// A parallel loop splits too: its outer part stays parallel (each thread runs whole blocks of
/// the inner part, serial).
ProgramStrategy split(const std::string& loop, int64_t factor);
/// A loop's iterations in the opposite order; the loop must be serial and its iterations
/// independent (no reduction across them).
ProgramStrategy reverse(const std::string& loop);
/// Permutes the named loops among their positions in one perfect nest (others stay in place).
ProgramStrategy reorder(const std::vector<std::string>& loops);
/// for a for b -> for a.b.fused in [0, |a|*|b|); b must be a's only child.
ProgramStrategy fuse(const std::string& outer, const std::string& inner);
/// Marks an innermost loop vectorized; fails if iterations may depend on each other.
ProgramStrategy vectorize(const std::string& loop);
/// Marks a loop fully unrolled.
ProgramStrategy unroll(const std::string& loop);
/// Runs a loop's iterations on threads; fails on dependences or inside another parallel loop.
ProgramStrategy parallel(const std::string& loop);

// Stage-level rules. Loops may be given as names or @-locations (schedule/location.h).

/// Moves the nest computing intermediate `stage` into `loop`, computing per iteration only the
/// box of the stage that the loop's body reads.
ProgramStrategy compute_at(const std::string& stage, const std::string& loop);
/// The converse, for an epilogue: moves the nest of `stage`, which reads one buffer that `loop`
/// writes element by element, to the end of the loop's body, computing per iteration only the
/// block that iteration wrote (that buffer must be written nowhere else).
ProgramStrategy reverse_compute_at(const std::string& stage, const std::string& loop);
/// Reduction loop `loop` of stage S becomes a dimension of partial results `S.rf[..][l]` (init
/// nest `S.rf.init.*`, the update redirected, a combining nest `S.rf.*` after it), so that its
/// iterations write different elements and it can be vectorized. S's update must be
/// `S[..] = S[..] op value` with op one of + * max min.
ProgramStrategy rfactor(const std::string& stage, const std::string& loop);
/// Replaces reads of intermediate `stage` by its defining expression and drops the stage.
ProgramStrategy compute_inline(const std::string& stage);
/// Accumulates the block of `stage` that one iteration of `loop` writes in a local buffer
/// `<stage>.local`, copied in before the body and back after it. `layout`, when given, orders the
/// local buffer's dimensions (dimension layout[d] of the stage becomes its d-th): an NCHW
/// convolution vectorized over output channels accumulates in a [.., x, o] block (layout
/// 0, 2, 3, 1) and is transposed back once per block.
ProgramStrategy cache_write(const std::string& stage, const std::string& loop,
                            const std::vector<int64_t>& layout = {});
/// Copies the block of `buffer` that one iteration of `loop` reads into `<buffer>.local` first.
ProgramStrategy cache_read(const std::string& buffer, const std::string& loop);
/// Materializes the elements of `buffer` that the program reads into `<buffer>.gathered`, indexed
/// by the named loops (outermost first), in a nest `<buffer>.gather.<d>` before the loop nest that
/// reads it; the read then loads the copy at the loops' variables. The read's indices may use only
/// those loops. With a convolution's (n, rc, ry, rx, y, x) the copy is im2col's matrix.
ProgramStrategy gather(const std::string& buffer, const std::vector<std::string>& loops);
/// Removes the init nest of `stage` (the first nest writing it, setting it to one constant) when
/// nothing reads the buffer and a later store provably writes every element — as a write cache
/// started from the initial value does on write-back: the init pass would only be overwritten.
ProgramStrategy drop_init(const std::string& stage);
/// After cache_write(stage, L) and reverse_compute_at(epilogue, L): the epilogue reads each block
/// from `<stage>.local` instead of `stage`, so the copy-back, `stage` itself and its init pass go
/// (TVM gets this by computing the convolution at the epilogue's loop). Applies when the
/// epilogue's reads provably stay inside the cached block and nothing else reads `stage`.
ProgramStrategy fuse_write_back(const std::string& stage);
/// Dimensions `dim` and `dim + 1` of `buffer` become one (TVM's transform_layout for this case):
/// every access [.., a, b, ..] becomes [.., a * extent + b, ..]. Buffers are dense row-major, so
/// the storage and every element's address stay the same; what changes is that indices of a fused
/// loop, (p / W, p % W), fold back into p, and a block of p becomes a box that cache_write can
/// hold.
ProgramStrategy merge_dims(const std::string& buffer, int64_t dim);
/// Array packing: input `buffer` is copied into `<buffer>.packed` with dimension `dim` split by
/// `factor`, its outer part moved first and its inner part last (B[K][N] with dim 1 ->
/// B.packed[N/f][K][f]; W[O][C][KH][KW] with dim 0 -> W.packed[O/f][C][KH][KW][f]); reads of
/// the buffer become reads of the packed copy. A partial last block is zero-padded.
ProgramStrategy pack(const std::string& buffer, int64_t dim, int64_t factor);
/// TVM's prefetch: at the top of each iteration of `loop`, a cache hint for every line of
/// `buffer` that the iteration `distance` later reads (unrolled inner loops at each of their
/// values, other inner loops at their first). Values are unchanged; the loop must not be
/// vectorized and must read the buffer, and is left with a sequence as its body (apply it last).
ProgramStrategy prefetch(const std::string& buffer, const std::string& loop, int64_t distance);
/// The next iteration's data ahead of it: while an iteration of `outer` runs, cache hints for
/// every line of `buffer` that the next iteration of `outer` reads, spread over the iterations of
/// `inner` (a loop inside it, counted across the loops between), a few per iteration, so that all
/// have been hinted when the next iteration starts. For a block of weights each iteration reads
/// whole and then reuses from cache (dense's panel per column block), whose first pass would
/// otherwise wait on DRAM. Values are unchanged; apply it last.
ProgramStrategy prefetch_next(const std::string& buffer, const std::string& outer,
                              const std::string& inner);
/// The fewest stores (a vector store counting once) that one cache hint of `program` shares an
/// iteration with: for each loop whose body holds hints, the stores one iteration runs divided
/// by its hints. A large number when the program has no hint.
int64_t stores_per_hint(const Program& program);

}  // namespace tessera
