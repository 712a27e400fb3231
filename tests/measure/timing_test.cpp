// The timing protocol: statistics over repeats, warm-up, calibration to min_repeat_ms, flushes.
#include "measure/timing.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "te/error.h"

namespace tessera {
namespace {

TEST(Timing, StatisticsDropMinAndMaxWhenMoreThanTwoRepeats) {
  TimingResult r = summarize_repeats({5.0, 1.0, 100.0, 3.0, 4.0}, 7);
  EXPECT_EQ(r.repeats, (std::vector<double>{5.0, 1.0, 100.0, 3.0, 4.0}));  // all kept, in order
  EXPECT_EQ(r.number, 7);
  // Kept: 3, 4, 5.
  EXPECT_DOUBLE_EQ(r.median, 4.0);
  EXPECT_DOUBLE_EQ(r.mean, 4.0);
  EXPECT_DOUBLE_EQ(r.std, 1.0);
}

TEST(Timing, StatisticsOfTwoOrFewerRepeatsUseAll) {
  TimingResult two = summarize_repeats({1.0, 3.0});
  EXPECT_DOUBLE_EQ(two.median, 2.0);
  EXPECT_DOUBLE_EQ(two.mean, 2.0);
  EXPECT_DOUBLE_EQ(two.std, std::sqrt(2.0));
  TimingResult one = summarize_repeats({0.5});
  EXPECT_DOUBLE_EQ(one.median, 0.5);
  EXPECT_DOUBLE_EQ(one.std, 0.0);
  TimingResult four = summarize_repeats({4.0, 1.0, 2.0, 10.0});  // kept: 2, 4
  EXPECT_DOUBLE_EQ(four.median, 3.0);
  EXPECT_DOUBLE_EQ(four.mean, 3.0);
}

TEST(Timing, CountsWarmupCalibrationAndRepeats) {
  int calls = 0, flushes = 0;
  TimingParams p;
  p.warmup = 2;
  p.number = 3;
  p.repeat = 4;
  p.min_repeat_ms = 0;  // no calibration round
  p.flush_cache = true;
  TimingResult r = time_kernel([&] { ++calls; }, [&] { ++flushes; }, p);
  EXPECT_EQ(calls, 2 + 4 * 3);
  EXPECT_EQ(flushes, 4);
  EXPECT_EQ(r.number, 3);
  EXPECT_EQ(r.repeats.size(), 4u);

  calls = flushes = 0;
  p.flush_cache = false;
  p.min_repeat_ms = 1e-9;  // calibration runs `number` once more, but needs no growth
  time_kernel(
      [&] {
        std::this_thread::sleep_for(std::chrono::microseconds(10));
        ++calls;
      },
      [&] { ++flushes; }, p);
  EXPECT_EQ(calls, 2 + 3 + 4 * 3);
  EXPECT_EQ(flushes, 0);
}

TEST(Timing, MinRepeatMsGrowsNumberSoEachRepeatLastsLongEnough) {
  TimingParams p;
  p.warmup = 0;
  p.number = 1;
  p.repeat = 3;
  p.min_repeat_ms = 20;
  const auto sleep = [] { std::this_thread::sleep_for(std::chrono::microseconds(500)); };
  TimingResult r = time_kernel(sleep, nullptr, p);
  // 0.5 ms (plus oversleep) per run: about 20 * 1.1 / 0.5 = 44 runs per repeat, fewer when
  // the machine is busy and sleeps overshoot, never more.
  EXPECT_GE(r.number, 4);
  EXPECT_LE(r.number, 45);
  for (double s : r.repeats) EXPECT_GE(s, 0.0005);
  // The calibration's last round lasted min_repeat_ms; repeats of the same number do too,
  // unless that round was slowed down (hence the margin).
  EXPECT_GE(r.median * static_cast<double>(r.number), 0.020 * 0.5);
  // A slow kernel keeps the given number.
  p.min_repeat_ms = 1;
  p.number = 2;
  EXPECT_EQ(time_kernel(sleep, nullptr, p).number, 2);
}

TEST(Timing, RejectsNonsense) {
  TimingParams p;
  p.repeat = 0;
  EXPECT_THROW(time_kernel([] {}, nullptr, p), Error);
}

TEST(Timing, FlushEvictsWithoutChangingData) {
  std::vector<float> v(100000, 1.5f);
  flush_from_caches(v.data(), v.size() * sizeof(float));
  for (float x : v) ASSERT_EQ(x, 1.5f);
}

}  // namespace
}  // namespace tessera
