/* How many threads a model library's next run uses (C and C++; its text is compiled into every
 * library `tessera compile -o` writes, and tests include it).
 *
 * On a machine other processes keep busy, OpenMP's threads that spin at the end of each kernel
 * take turns with the thread that has work: ResNet-18 at 2 threads beside two CPU-bound
 * processes ran 59-65 ms where one thread ran 35-43 (idle: 20 and 34). No setting of libgomp's
 * wait policy can be made from a library once libgomp has started, so each instance watches its
 * own run times instead: while they stay near the fastest seen it keeps every thread it was
 * given; when they slow down by 30% (and once early on, then every 256 runs, for a machine busy
 * from the start) it tries half the threads for one run and moves there if that run is 15%
 * faster; from fewer threads it tries twice as many after 4 runs, then after 8, 16, ... 128 while
 * that fails, so that a burst of noise costs a few runs and a lasting load one slow run in 128. An
 * idle machine leaves the full count for one run in 256. */
#ifndef TESSERA_THREAD_POLICY_H
#define TESSERA_THREAD_POLICY_H

#define TSR_POLICY_LEVELS 8

typedef struct tsr_thread_policy {
  int cap;         /* the threads the caller allows; level k uses cap >> k (at least 1) */
  int home;        /* the level runs use */
  int level;       /* the level of the next run: home, or one beside it on trial */
  int since_probe; /* runs at home since the last trial */
  int wait_up; /* runs at home before trying more threads: 4, doubling to 128 while that fails */
  double ewma[TSR_POLICY_LEVELS]; /* recent run time at each level, ms (0: none yet) */
  double fast[TSR_POLICY_LEVELS]; /* fastest run at each level, ms (0: none yet) */
} tsr_thread_policy;

static inline int tsr_policy_levels(int cap) {
  int n = 1;
  while (n < TSR_POLICY_LEVELS && (cap >> n) >= 1) ++n;
  return n;
}

/* The thread count of the next run, for a caller that allows `cap`; a new cap starts over. */
static inline int tsr_policy_next(tsr_thread_policy* p, int cap) {
  if (cap != p->cap) {
    p->cap = cap < 1 ? 1 : cap;
    p->home = p->level = p->since_probe = 0;
    p->wait_up = 4;
    for (int k = 0; k < TSR_POLICY_LEVELS; ++k) p->ewma[k] = p->fast[k] = 0;
  }
  int threads = p->cap >> p->level;
  return threads < 1 ? 1 : threads;
}

/* Records the run tsr_policy_next announced, `ms` long, and picks the next run's level. */
static inline void tsr_policy_record(tsr_thread_policy* p, double ms) {
  const int level = p->level, home = p->home;
  if (p->fast[level] == 0 || ms < p->fast[level]) p->fast[level] = ms;
  if (level != home) { /* a trial: move there if clearly faster than home lately */
    if (ms < 0.85 * p->ewma[home]) {
      p->home = level;
      p->ewma[level] = ms;
      p->wait_up = 4;
    } else if (level < home) {
      p->wait_up = p->wait_up >= 64 ? 128 : 2 * p->wait_up;
    }
    p->level = p->home;
    p->since_probe = 0;
    return;
  }
  p->ewma[home] = p->ewma[home] == 0 ? ms : 0.75 * p->ewma[home] + 0.25 * ms;
  ++p->since_probe;
  const int slowed = p->ewma[home] > 1.3 * p->fast[home];
  /* A machine busy from the first run never looks slowed: fewer threads are also tried once
   * early on (once 16 runs have settled the average), then every 256 runs (on an idle machine,
   * one slower run in 256). */
  const int fewer = home + 1 < tsr_policy_levels(p->cap);
  const int due = fewer && p->since_probe >= (p->fast[home + 1] == 0 ? 16 : 256);
  if (fewer && (slowed || due) && p->since_probe >= 4)
    p->level = home + 1;
  else if (home > 0 && p->since_probe >= p->wait_up)
    p->level = home - 1;
}

#endif /* TESSERA_THREAD_POLICY_H */
