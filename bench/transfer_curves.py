#!/usr/bin/python3
"""Transfer learning as in AutoTVM's Figs. 8 and 9: best GFLOP/s against trials on target
workloads, tuned with a global model trained on a source domain's records (knob, loop-context or
context-relation features) or without transfer.

Every run starts from a copy of the source DB (records of the source workloads only) so that runs
never see each other's records. The source DB is --source-db, or, with --source-tasks, one that
`tessera tune-all` fills first (--source-trials per task, no transfer, kept as OUT-source.db and
reused when it exists). Writes a CSV, a PNG (one panel per target), a Markdown table and prints
the trials each variant needs to reach 90% of the no-transfer run's final best. The variants
`treegru-none` and `treegru` are the TreeGRU from scratch and from a TreeGRU pretrained on the
source DB (`tessera pretrain --tuner treegru`, kept as OUT-source.gru), each compared with the
TreeGRU's own no-transfer run. The issue's
experiment (source C1-C6, targets C7-C9 and matmul 1024; hours on 2 cores):

  python3 bench/transfer_curves.py --source-tasks bench/workloads/transfer-source.txt \\
      --targets $(cat bench/workloads/transfer-targets.txt) --trials 300 --seeds 0 1 2 \\
      --threads 2 --out docs/bench/transfer300

A run's best is the fastest of a few hundred noisy measurements, so a run can find another's best
kernel and still not "reach" it. With --keep-dbs DIR --retime N every run's pick after each trial
(its best so far) is timed again at the end, all runs of a target together in N rounds, and the
table is written a second time from those timings (OUT-retimed.*).
"""
import argparse
import csv
import json
import os
import random
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tuning_curves import plot  # noqa: E402

# variant -> (tuner, transfer, features); the TreeGRU transfers through a model pretrained on the
# source DB rather than the DB's global model.
VARIANTS = {"none": ("xgb", "off", "relation"), "knob": ("xgb", "on", "knob"),
            "context": ("xgb", "on", "context"), "relation": ("xgb", "on", "relation"),
            "treegru-none": ("treegru", "off", "relation"), "treegru": ("treegru", "pretrained", "relation")}


def baseline(variant):
    """The no-transfer variant of the same cost model, which a variant's curve is compared with."""
    return "treegru-none" if VARIANTS[variant][0] == "treegru" else "none"


def kept_db(args, workload, variant, seed):
    tag = re.sub(r"[^A-Za-z0-9]+", "_", workload).strip("_")
    return os.path.join(args.keep_dbs, f"{tag}-{variant}-s{seed}.db")


def tune(args, workload, variant, seed):
    if args.keep_dbs:
        db = kept_db(args, workload, variant, seed)
        if os.path.exists(db):
            print(f"reusing {db}", file=sys.stderr)
            return None
        os.makedirs(args.keep_dbs, exist_ok=True)
        r = run_tune(args, workload, variant, seed, db + ".partial")
        os.replace(db + ".partial", db)
        return r
    with tempfile.TemporaryDirectory() as tmp:
        return run_tune(args, workload, variant, seed, os.path.join(tmp, "transfer.db"))


def run_tune(args, workload, variant, seed, db):
    tuner, transfer, features = VARIANTS[variant]
    shutil.copy(args.source_db, db)
    cmd = [args.tessera, "tune", workload, "--seed", str(seed), "--trials", str(args.trials),
           "--batch", str(args.batch), "--db", db, "--tuner", tuner, "--features", features,
           "--json", "--retime", "0",  # the curves come from the records; --retime N is below
           "--first", args.first]
    if transfer == "pretrained":
        cmd += ["--pretrained", pretrained_treegru(args)]
    else:
        # The xgb runs never start from the model shipped with tessera: the source DB is the
        # only prior they may use.
        cmd += ["--transfer", transfer, "--pretrained", "none"]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    if args.transfer_n0:
        cmd += ["--transfer-n0", str(args.transfer_n0)]
    if args.transfer_epsilon is not None:
        cmd += ["--transfer-epsilon", str(args.transfer_epsilon)]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    r = json.loads(out)
    t = r.get("transfer", {})
    prior = (f"pretrained model {t.get('model', '')}" if t.get("pretrained")
             else f"global model on {t.get('records', 0)} records")
    print(f"{workload} {variant} seed {seed}: best {r['best_gflops']:.1f} GFLOP/s after {r['trials']} "
          f"trials, {r['seconds']:.0f} s, {prior}", file=sys.stderr, flush=True)
    return r


def picks_from_db(db, workload):
    """The run's trials in order, as the strategy it would return after each one (its best so far by
    its own measurements) and that measurement in GFLOP/s."""
    con = sqlite3.connect(db)
    rows = con.execute(
        "select c.strategy, r.error_kind, r.median, w.flops from results r join configs c on "
        "r.config_id = c.id join workloads w on c.workload_id = w.id where w.key = ? order by r.id",
        (workload,)).fetchall()
    con.close()
    if not rows:
        raise SystemExit(f"{db} holds no records of {workload}")
    picks, best, best_gflops = [], None, 0.0
    for strategy, error_kind, median, flops in rows:
        if error_kind == "ok" and median > 0 and flops / median * 1e-9 > best_gflops:
            best, best_gflops = strategy, flops / median * 1e-9
        picks.append((best, best_gflops))
    return picks


def retime(args, workload, strategies):
    """Times every strategy again, in --retime rounds of a fresh random order each, and returns the
    median GFLOP/s of each: the runs' picks compared under one machine state instead of each
    against its own run's luck."""
    times = {s: [] for s in strategies}
    rng = random.Random(0)
    for rnd in range(args.retime):
        order = list(strategies)
        rng.shuffle(order)
        for s in order:
            # The tuner's own worker and protocol (caches flushed per repeat), so that only the
            # moment differs, not the way of timing.
            cmd = [args.tessera, "measure", workload, "--strategy", s, "--no-db", "--json",
                   "--repeat", str(args.retime_repeat)]
            if args.threads:
                cmd += ["--threads", str(args.threads)]
            out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
            r = json.loads(out)
            if r["error"] != "ok":
                raise SystemExit(f"re-timing {workload} with {s}: {r['error']}: {r['message']}")
            times[s].append(r["flops"] / r["median"] * 1e-9)
        print(f"{workload}: re-timing round {rnd + 1}/{args.retime} of {len(order)} strategies",
              file=sys.stderr, flush=True)
    return {s: statistics.median(g) for s, g in times.items()}


def build_source(args):
    db = args.out + "-source.db"
    if os.path.exists(db):
        print(f"reusing the source records in {db}", file=sys.stderr)
        return db
    count = sum(1 for line in open(args.source_tasks) if line.split("#", 1)[0].strip())
    cmd = [args.tessera, "tune-all", args.source_tasks, "--trials", str(args.source_trials * count),
           "--db", db + ".partial", "--transfer", "off", "--task-early-stop", "0", "--seed", "0"]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    os.replace(db + ".partial", db)
    return db


def pretrained_treegru(args):
    """A TreeGRU trained on the source DB's records, made once and kept beside the outputs."""
    model = args.out + "-source.gru"
    if not os.path.exists(model):
        cmd = [args.tessera, "pretrain", "--db", args.source_db, "--tuner", "treegru", "-o",
               model + ".partial", "--seed", "0"]
        print("+", " ".join(cmd), file=sys.stderr, flush=True)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        os.replace(model + ".partial", model)
    return model


def trials_to_reach(curve, level):
    for i, g in enumerate(curve):
        if g >= level:
            return i + 1
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tessera", default="build/tessera")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--source-db", help="records of the source domain")
    source.add_argument("--source-tasks", help="task list tuned first into OUT-source.db")
    p.add_argument("--source-trials", type=int, default=96, help="trials per source task")
    p.add_argument("--targets", nargs="+", required=True)
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    p.add_argument("--seeds", nargs="+", type=int, default=[0])
    p.add_argument("--trials", type=int, default=300)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--first", choices=["tuner", "default"], default="tuner",
                   help="tuner (default): every run starts from its own proposals, so that the first "
                   "trials show what the prior knows; default: from tessera's default configuration")
    p.add_argument("--out", default="docs/transfer-curves", help="prefix of the .csv and .png written")
    p.add_argument("--transfer-n0", type=float, default=0, help="passed to tessera tune (0: its default)")
    p.add_argument("--transfer-epsilon", type=float, default=None,
                   help="passed to tessera tune (default: its default)")
    p.add_argument("--from-csv", help="redraw the figure and table from an earlier run's CSV")
    p.add_argument("--keep-dbs", help="directory that keeps each run's DB (a run whose DB is there is "
                   "not tuned again); needed by --retime")
    p.add_argument("--retime", type=int, default=0,
                   help="rounds of timing every run's picks again at the end, all runs of a target "
                   "together (0: off); writes OUT-retimed.{csv,md,png} beside the tuners' own curves")
    p.add_argument("--retime-repeat", type=int, default=10, help="timed repeats per re-timing run")
    args = p.parse_args()
    if args.from_csv:
        with open(args.from_csv) as f:
            rows = [dict(r, seed=int(r["seed"]), trial=int(r["trial"]), best_gflops=float(r["best_gflops"]))
                    for r in csv.DictReader(f)]
        curves = {}
        for r in rows:
            curves.setdefault((r["workload"], r["variant"], r["seed"]), []).append(r["best_gflops"])
        report(args, rows, curves, args.out)
        return
    if not args.source_db and not args.source_tasks:
        p.error("give --source-db or --source-tasks (or --from-csv)")
    if args.retime and not args.keep_dbs:
        p.error("--retime needs --keep-dbs: the picks are read from each run's DB")
    if args.source_tasks:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        args.source_db = build_source(args)

    rows, curves, picks = [], {}, {}
    for w in args.targets:
        for v in args.variants:
            for s in args.seeds:
                r = tune(args, w, v, s)
                if args.keep_dbs:
                    picks[(w, v, s)] = picks_from_db(kept_db(args, w, v, s), w)[:args.trials]
                    curves[(w, v, s)] = [g for _, g in picks[(w, v, s)]]
                    if r and len(r["best_curve"]) != len(curves[(w, v, s)]):
                        raise SystemExit(f"{w} {v} seed {s}: the DB holds {len(curves[(w, v, s)])} "
                                         f"trials, the tuner reported {len(r['best_curve'])}")
                else:
                    curves[(w, v, s)] = r["best_curve"]
                for i, g in enumerate(curves[(w, v, s)]):
                    rows.append({"workload": w, "variant": v, "seed": s, "trial": i + 1, "best_gflops": g})
    write_csv(args.out, rows)
    report(args, rows, curves, args.out)
    if args.retime:
        rows, curves = [], {}
        for w in args.targets:
            runs = [k for k in picks if k[0] == w]
            strategies = sorted({p for k in runs for p, _ in picks[k] if p is not None})
            timed = retime(args, w, strategies)
            for k in runs:
                curves[k] = [timed[p] if p is not None else 0.0 for p, _ in picks[k]]
                rows += [{"workload": w, "variant": k[1], "seed": k[2], "trial": i + 1, "best_gflops": g}
                         for i, g in enumerate(curves[k])]
        write_csv(args.out + "-retimed", rows)
        report(args, rows, curves, args.out + "-retimed",
               note=f"Each run's pick after each trial (its best so far by its own measurements) timed "
               f"again at the end: {args.retime} rounds over all runs' picks of a target in a fresh "
               f"random order each, {args.retime_repeat} repeats per timing, median of the rounds.")


def write_csv(out, rows):
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    with open(out + ".csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["workload", "variant", "seed", "trial", "best_gflops"])
        writer.writeheader()
        writer.writerows(rows)


def report(args, rows, curves, out, note=""):
    plot(rows, args.targets, "variant", args.variants, args.seeds, out)

    # Trials to 90% and to 100% of the no-transfer run's final best (same seed, same cost model):
    # the first is what the issue reports, the second what its goal compares.
    bases = [b for b in ("none", "treegru-none") if b in args.variants]
    table = ["| target | seed | " + " | ".join(f"{b} best" for b in bases) + " | " +
             " | ".join(f"{v}: trials to 90% / 100%" for v in args.variants) + " |",
             "|---|---|" + "---|" * (len(bases) + len(args.variants))]
    for w in args.targets:
        for s in args.seeds:
            if not any(curves.get((w, b, s)) for b in bases):
                continue
            cells = [f"{curves[(w, b, s)][-1]:.1f}" if curves.get((w, b, s)) else "-" for b in bases]
            for v in args.variants:
                c, base = curves.get((w, v, s)), curves.get((w, baseline(v), s))
                if not c or not base:
                    cells.append("-")
                    continue
                reach = [trials_to_reach(c, f * base[-1]) for f in (0.9, 1.0)]
                cells.append(" / ".join(str(t) if t else f">{len(c)}" for t in reach))
            table.append(f"| `{w}` | {s} | " + " | ".join(cells) + " |")
    print("\n".join(table))
    with open(out + ".md", "w") as f:
        f.write(f"{args.trials} trials, batch {args.batch}, {args.threads or 'all'} threads, first trials "
                f"from the {'tuner' if args.first == 'tuner' else 'default configuration'}, source "
                f"{args.source_tasks or args.source_db}. {note}\n\n" + "\n".join(table) + "\n")
    print(f"wrote {out}.csv, {out}.md and {out}.png", file=sys.stderr)


if __name__ == "__main__":
    main()
