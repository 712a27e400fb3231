#!/usr/bin/python3
"""Transfer learning as in AutoTVM's Figs. 8 and 9: best GFLOP/s against trials on target
workloads, tuned with a global model trained on a source domain's records (knob, loop-context or
context-relation features) or without transfer.

Every run starts from a copy of the source DB (records of the source workloads only) so that runs
never see each other's records. The source DB is --source-db, or, with --source-tasks, one that
`tessera tune-all` fills first (--source-trials per task, no transfer, kept as OUT-source.db and
reused when it exists). Writes a CSV, a PNG (one panel per target), a Markdown table and prints
the trials each variant needs to reach 90% of the no-transfer run's final best. The issue's
experiment (source C1-C6, targets C7-C9 and matmul 1024; hours on 2 cores):

  python3 bench/transfer_curves.py --source-tasks bench/workloads/transfer-source.txt \\
      --targets $(cat bench/workloads/transfer-targets.txt) --trials 300 --seeds 0 1 2 \\
      --threads 2 --out docs/bench/transfer300
"""
import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tuning_curves import plot  # noqa: E402

# variant -> (transfer, features)
VARIANTS = {"none": ("off", "relation"), "knob": ("on", "knob"), "context": ("on", "context"),
            "relation": ("on", "relation")}


def tune(args, workload, variant, seed):
    transfer, features = VARIANTS[variant]
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "transfer.db")
        shutil.copy(args.source_db, db)
        cmd = [args.tessera, "tune", workload, "--seed", str(seed), "--trials", str(args.trials),
               "--batch", str(args.batch), "--db", db, "--transfer", transfer, "--features", features,
               "--json"]
        if args.threads:
            cmd += ["--threads", str(args.threads)]
        if args.transfer_n0:
            cmd += ["--transfer-n0", str(args.transfer_n0)]
        if args.transfer_epsilon is not None:
            cmd += ["--transfer-epsilon", str(args.transfer_epsilon)]
        out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
        return json.loads(out)


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
    p.add_argument("--out", default="docs/transfer-curves", help="prefix of the .csv and .png written")
    p.add_argument("--transfer-n0", type=float, default=0, help="passed to tessera tune (0: its default)")
    p.add_argument("--transfer-epsilon", type=float, default=None,
                   help="passed to tessera tune (default: its default)")
    p.add_argument("--from-csv", help="redraw the figure and table from an earlier run's CSV")
    args = p.parse_args()
    if args.from_csv:
        with open(args.from_csv) as f:
            rows = [dict(r, seed=int(r["seed"]), trial=int(r["trial"]), best_gflops=float(r["best_gflops"]))
                    for r in csv.DictReader(f)]
        curves = {}
        for r in rows:
            curves.setdefault((r["workload"], r["variant"], r["seed"]), []).append(r["best_gflops"])
        report(args, rows, curves)
        return
    if not args.source_db and not args.source_tasks:
        p.error("give --source-db or --source-tasks (or --from-csv)")
    if args.source_tasks:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        args.source_db = build_source(args)

    rows, curves = [], {}
    for w in args.targets:
        for v in args.variants:
            for s in args.seeds:
                r = tune(args, w, v, s)
                curves[(w, v, s)] = r["best_curve"]
                t = r.get("transfer", {})
                print(f"{w} {v} seed {s}: best {r['best_gflops']:.1f} GFLOP/s after {r['trials']} trials, "
                      f"{r['seconds']:.0f} s, global model on {t.get('records', 0)} records",
                      file=sys.stderr, flush=True)
                for i, g in enumerate(r["best_curve"]):
                    rows.append({"workload": w, "variant": v, "seed": s, "trial": i + 1, "best_gflops": g})
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out + ".csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["workload", "variant", "seed", "trial", "best_gflops"])
        writer.writeheader()
        writer.writerows(rows)
    report(args, rows, curves)


def report(args, rows, curves):
    plot(rows, args.targets, "variant", args.variants, args.seeds, args.out)

    # Trials to 90% and to 100% of the no-transfer run's final best (same seed): the first is what
    # the issue reports, the second what its goal compares.
    table = ["| target | seed | no-transfer best | " +
             " | ".join(f"{v}: trials to 90% / 100%" for v in args.variants) + " |",
             "|---|---|---|" + "---|" * len(args.variants)]
    for w in args.targets:
        for s in args.seeds:
            base = curves.get((w, "none", s))
            if not base:
                continue
            cells = []
            for v in args.variants:
                c = curves.get((w, v, s))
                if not c:
                    cells.append("-")
                    continue
                reach = [trials_to_reach(c, f * base[-1]) for f in (0.9, 1.0)]
                cells.append(" / ".join(str(t) if t else f">{len(c)}" for t in reach))
            table.append(f"| `{w}` | {s} | {base[-1]:.1f} | " + " | ".join(cells) + " |")
    print("\n".join(table))
    with open(args.out + ".md", "w") as f:
        f.write(f"{args.trials} trials, batch {args.batch}, {args.threads or 'all'} threads, source "
                f"{args.source_tasks or args.source_db}.\n\n" + "\n".join(table) + "\n")
    print(f"wrote {args.out}.csv, {args.out}.md and {args.out}.png", file=sys.stderr)


if __name__ == "__main__":
    main()
