// The thread policy of model libraries (graph/thread_policy.h) against a simulated machine:
// ResNet-18's times measured on a 2-core guest, idle and beside two CPU-bound processes.
#include "graph/thread_policy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

namespace tessera {
namespace {

// ms of one run at `threads` of 2; busy: two other CPU-bound processes (2026-12-03, AMD EPYC).
double resnet18_ms(int threads, bool busy, int run) {
  double ms = busy ? (threads == 2 ? 62 : 38) : (threads == 2 ? 20 : 34);
  return ms * (1 + 0.04 * std::sin(run * 1.7));  // a little noise
}

struct Simulation {
  tsr_thread_policy policy{};
  int run = 0;
  // Runs n times; returns how many of them used all threads.
  int runs(int n, bool busy, int cap = 2) {
    int full = 0;
    for (int i = 0; i < n; ++i, ++run) {
      int threads = tsr_policy_next(&policy, cap);
      full += threads == cap;
      tsr_policy_record(&policy, resnet18_ms(threads, busy, run));
    }
    return full;
  }
};

// Trials of one thread after 8, 16, 32, ... runs, then one in 256: 6 in the first 600 runs.
TEST(ThreadPolicy, AnIdleMachineKeepsEveryThread) {
  Simulation s;
  EXPECT_GE(s.runs(600, false), 600 - 6);
  EXPECT_EQ(tsr_policy_next(&s.policy, 2), 2);
}

// Busy from the first run: no run is slower than the fastest seen, and the early trial finds
// one thread faster.
TEST(ThreadPolicy, AMachineBusyFromTheStartFindsFewerThreads) {
  Simulation s;
  s.runs(20, true);
  EXPECT_EQ(tsr_policy_next(&s.policy, 2), 1);
}

TEST(ThreadPolicy, ABusyMachineMovesToFewerThreadsAndBackWhenFree) {
  Simulation s;
  s.runs(50, false);
  s.runs(12, true);
  // Settled on one thread while busy, save trials of two ever further apart (to one in 128).
  int full = s.runs(400, true);
  EXPECT_LE(full, 8);
  EXPECT_EQ(tsr_policy_next(&s.policy, 2), 1);
  // Free again: back to two within a trial period, then stays, save a trial of one or two.
  s.runs(130, false);
  EXPECT_GE(s.runs(200, false), 198);
}

// A burst of noise that sends it to one thread costs a few runs: two are tried again after 4.
TEST(ThreadPolicy, AShortBurstCostsAFewRuns) {
  Simulation s;
  s.runs(50, false);
  s.runs(8, true);
  ASSERT_EQ(tsr_policy_next(&s.policy, 2), 1) << "the burst moved it to one thread";
  EXPECT_GE(s.runs(40, false), 32);
  EXPECT_EQ(tsr_policy_next(&s.policy, 2), 2);
}

// A shared guest's noise, as DCGAN's generator met it on a 2-core AMD EPYC (2026-12-05): a cold
// first run three times as long, then about one run in four slowed by half to all of its length,
// on an otherwise idle machine. One thread (1.6x slower) is never faster, so nothing of that may
// move the model there; the old policy, which compared one trial run with an average the spikes
// inflated, ran a third of DCGAN's runs on one thread (4.4 ms against 2.7).
TEST(ThreadPolicy, SpikesOfNoiseOnAnIdleMachineKeepEveryThread) {
  tsr_thread_policy policy{};
  uint32_t state = 12345;
  int full = 0;
  const int runs = 400;
  for (int run = 0; run < runs; ++run) {
    int threads = tsr_policy_next(&policy, 2);
    full += threads == 2;
    state = state * 1664525u + 1013904223u;
    double spike = (state >> 24) % 4 == 0 ? 1.5 + ((state >> 16) % 256) / 512.0 : 1.0;
    double ms = (threads == 2 ? 2.7 : 4.4) * spike * (run == 0 ? 3.0 : 1.0);
    tsr_policy_record(&policy, ms);
  }
  EXPECT_EQ(tsr_policy_next(&policy, 2), 2);
  EXPECT_GE(full, runs - 8);
}

// A load under which two threads stay faster than one (30 ms against 40; idle 20): the runs
// stay slowed, and the trials of one thread that show it come ever further apart.
TEST(ThreadPolicy, ALoadUnderWhichEveryThreadStillPaysKeepsThemWithFewTrials) {
  tsr_thread_policy policy{};
  int full = 0;
  for (int run = 0; run < 450; ++run) {
    int threads = tsr_policy_next(&policy, 2);
    if (run >= 50) full += threads == 2;
    const bool busy = run >= 50;
    tsr_policy_record(&policy, threads == 2 ? (busy ? 30.0 : 20.0) : (busy ? 40.0 : 34.0));
  }
  EXPECT_EQ(tsr_policy_next(&policy, 2), 2);
  EXPECT_GE(full, 400 - 10);
}

TEST(ThreadPolicy, ANewThreadCountStartsOver) {
  Simulation s;
  s.runs(50, false);
  s.runs(60, true);
  EXPECT_EQ(tsr_policy_next(&s.policy, 2), 1);
  EXPECT_EQ(tsr_policy_next(&s.policy, 4), 4);  // the caller asked for another count
  EXPECT_EQ(tsr_policy_next(&s.policy, 1), 1);
  EXPECT_EQ(s.policy.home, 0);
}

}  // namespace
}  // namespace tessera
