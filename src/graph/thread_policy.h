/* How many threads a model library's next run uses (C and C++; its text is compiled into every
 * library `tessera compile -o` writes, and tests include it).
 *
 * On a machine other processes keep busy, OpenMP's threads that spin at the end of each kernel
 * take turns with the thread that has work: ResNet-18 at 2 threads beside two CPU-bound
 * processes ran 59-65 ms where one thread ran 35-43 (idle: 20 and 34). No setting of libgomp's
 * wait policy can be made from a library once libgomp has started, so each instance watches its
 * own run times instead. A lasting load slows most runs, while a shared guest's noise slows one
 * run in a few by up to 2x, so the policy reads the lower quartile of the last 8 runs at its
 * thread count (the third fastest): when that is 30% above the fastest seen (and after 8 runs,
 * then 16, 32, ... 256, for a machine busy from the start) it tries half the threads, and moves
 * there if a trial beats their median by 15%. A trial is one run where it clearly loses, else two
 * (which of them decides: see tsr_policy_record). From fewer threads it tries twice as many after
 * 4 runs, then after 8, 16, ... 128 while that fails, so that a burst of noise costs a few runs
 * and a lasting load a slow run or two in 128; a load under which all the threads stay faster
 * spaces its trials of fewer the same way. An idle machine leaves the full count for 5 runs in
 * its first 500, then one in 256. An instance's first run (page faults, cold caches) counts for
 * nothing. */
#ifndef TESSERA_THREAD_POLICY_H
#define TESSERA_THREAD_POLICY_H

#define TSR_POLICY_LEVELS 8
#define TSR_POLICY_RECENT 8 /* runs at home whose lower quartile tells a load from noise */
#define TSR_POLICY_TRIAL 2  /* runs of one trial of another thread count */

typedef struct tsr_thread_policy {
  int cap;         /* the threads the caller allows; level k uses cap >> k (at least 1) */
  int home;        /* the level runs use */
  int level;       /* the level of the next run: home, or one beside it on trial */
  int since_probe; /* runs at home since the last trial */
  int wait_up;    /* runs at home before trying more threads: 4, doubling to 128 while that fails */
  int wait_down;  /* runs slowed at home before trying fewer: 4, doubling to 128 while that fails */
  int due_every;  /* runs at home between trials of fewer when not slowed: 8, doubling to 256 */
  int started;    /* the first run, cold, is behind */
  int trial_runs; /* runs of the current trial so far */
  double trial_decisive; /* ms: the fastest of them on a trial of fewer threads, else the slowest */
  int recent_count;      /* runs in recent[] (at most TSR_POLICY_RECENT) */
  int recent_next;       /* where the next run at home goes in recent[] */
  double recent[TSR_POLICY_RECENT]; /* the last runs at home, ms */
  double fast[TSR_POLICY_LEVELS];   /* fastest run at each level, ms (0: none yet) */
} tsr_thread_policy;

static inline int tsr_policy_levels(int cap) {
  int n = 1;
  while (n < TSR_POLICY_LEVELS && (cap >> n) >= 1) ++n;
  return n;
}

static inline void tsr_policy_settle(tsr_thread_policy* p, int home) {
  p->home = p->level = home;
  p->since_probe = p->trial_runs = 0;
  p->recent_count = p->recent_next = 0;
}

/* The thread count of the next run, for a caller that allows `cap`; a new cap starts over. */
static inline int tsr_policy_next(tsr_thread_policy* p, int cap) {
  if (cap != p->cap) {
    p->cap = cap < 1 ? 1 : cap;
    p->wait_up = p->wait_down = 4;
    p->due_every = 8;
    p->started = 0;
    for (int k = 0; k < TSR_POLICY_LEVELS; ++k) p->fast[k] = 0;
    tsr_policy_settle(p, 0);
  }
  int threads = p->cap >> p->level;
  return threads < 1 ? 1 : threads;
}

/* The run at rank n * part / 4 of the last n runs at home, fastest first: part 1 the lower
 * quartile, part 2 the median. */
static inline double tsr_policy_recent(const tsr_thread_policy* p, int part) {
  double sorted[TSR_POLICY_RECENT];
  const int n = p->recent_count;
  for (int i = 0; i < n; ++i) {
    int j = i;
    for (; j > 0 && sorted[j - 1] > p->recent[i]; --j) sorted[j] = sorted[j - 1];
    sorted[j] = p->recent[i];
  }
  return sorted[n * part / 4];
}

/* Records the run tsr_policy_next announced, `ms` long, and picks the next run's level. */
static inline void tsr_policy_record(tsr_thread_policy* p, double ms) {
  if (!p->started) {
    p->started = 1;
    return;
  }
  const int level = p->level, home = p->home;
  if (p->fast[level] == 0 || ms < p->fast[level]) p->fast[level] = ms;
  if (level != home) { /* a trial: move there if clearly faster than home lately */
    const double home_now = tsr_policy_recent(p, 2);
    /* Fewer threads win on their fastest run: noise only slows runs, and one thread never
     * looks faster than two by luck. More threads must win on both runs: under a load one run
     * at all of them can slip through between the other processes' time slices. */
    const int up = level < home;
    if (p->trial_runs == 0 || (up ? ms > p->trial_decisive : ms < p->trial_decisive))
      p->trial_decisive = ms;
    const int second = up ? ms < home_now : ms < home_now && ms >= 0.85 * home_now;
    if (++p->trial_runs < TSR_POLICY_TRIAL && second) return;
    if (p->trial_decisive < 0.85 * home_now) {
      p->wait_up = p->wait_down = 4;
      tsr_policy_settle(p, level);
      return;
    }
    if (level < home) p->wait_up = p->wait_up >= 64 ? 128 : 2 * p->wait_up;
    if (level > home) {
      p->wait_down = p->wait_down >= 64 ? 128 : 2 * p->wait_down;
      p->due_every = p->due_every >= 128 ? 256 : 2 * p->due_every;
    }
    p->level = home;
    p->since_probe = p->trial_runs = 0;
    return;
  }
  p->recent[p->recent_next] = ms;
  p->recent_next = (p->recent_next + 1) % TSR_POLICY_RECENT;
  if (p->recent_count < TSR_POLICY_RECENT) ++p->recent_count;
  ++p->since_probe;
  const int slowed = p->recent_count >= 4 && tsr_policy_recent(p, 1) > 1.3 * p->fast[home];
  if (!slowed) p->wait_down = 4; /* the spacing holds through one stretch of load */
  /* A machine busy from the first run never looks slowed: fewer threads are also tried after 8
   * runs, then 16, 32, ... 256 while that fails. */
  const int fewer = home + 1 < tsr_policy_levels(p->cap);
  const int due = fewer && p->since_probe >= p->due_every;
  if (fewer && ((slowed && p->since_probe >= p->wait_down) || due) && p->since_probe >= 4)
    p->level = home + 1;
  else if (home > 0 && p->since_probe >= p->wait_up)
    p->level = home - 1;
}

#endif /* TESSERA_THREAD_POLICY_H */
