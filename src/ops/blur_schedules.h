/// Schedules of the blur (workload `blur2d:H=..,W=..,separate=..`) as strategy texts, the way
/// `tessera run --strategy` takes them; bench/bench_blur.cpp measures them (docs/blur.md).
#pragma once

namespace tessera {

/// separate=0: the 3x3 stencil, rows in parallel, columns SIMD.
inline constexpr const char* kBlur2dSchedule = "parallel(y) ; vectorize(x)";

/// separate=1, two full passes: the whole vertical pass into an H-2 x W buffer, then the
/// horizontal pass; each with rows in parallel and columns SIMD.
inline constexpr const char* kBlurTwoPassSchedule =
    "parallel(vy) ; vectorize(vx) ; parallel(y) ; vectorize(x)";

/// separate=1, scanline (Halide's `b_y.compute_at(out, y)`): the vertical pass computed at each
/// row y of the output into a one-row buffer that the horizontal pass reads while it is in
/// cache; rows in parallel (each thread its own row buffer), columns SIMD.
inline constexpr const char* kBlurScanlineSchedule =
    "compute_at(vert, y) ; parallel(y) ; vectorize(vx) ; vectorize(x)";

}  // namespace tessera
