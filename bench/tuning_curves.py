#!/usr/bin/python3
"""Tuning curves as in AutoTVM's Fig. 4: best GFLOP/s against trials for several tuners and seeds.

Runs `tessera tune --json` once per (workload, tuner, seed) with a fresh records DB, appends every
curve to a CSV as soon as its run ends (a run already in the CSV is not run again, so the
experiment can be done in pieces), prints a summary table and draws one panel per workload into
a PNG (matplotlib, from Debian's python3-matplotlib). Tuners: xgb, xgb-reg, treegru, treegru-reg,
ga, random. Every tuner starts from its own proposals, as AutoTVM's curves do (--first tuner); with
--first default the first trial is tessera's default configuration, as `tessera tune` runs by
default (CSVs written before this option, with no `first` column, were run that way). Example
(the full experiment takes hours on 2 cores):

  python3 bench/tuning_curves.py --trials 800 --seeds 0 1 2 \
      --workloads matmul:M=1024,N=1024,K=1024 conv2d:N=1,C=64,H=56,W=56,O=64,K=3,S=1,P=1 \
      --out docs/tuning-curves
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile


def tune(tessera, workload, tuner, seed, trials, batch, threads, first):
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [tessera, "tune", workload, "--tuner", tuner, "--seed", str(seed), "--trials", str(trials),
               "--batch", str(batch), "--db", os.path.join(tmp, "curve.db"), "--json", "--first", first,
               # The curves are the tuners' own measurements; a final re-timing only adds time.
               "--retime", "0",
               # From scratch, as in Fig. 4: not from the cost model shipped with tessera.
               "--transfer", "off"]
        if threads:
            cmd += ["--threads", str(threads)]
        out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
        return json.loads(out)


def plot(rows, workloads, series_key, series, seeds, out):
    """One panel per workload, one line per series (mean best-so-far over seeds) into out.png."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(workloads), figsize=(6 * len(workloads), 4), squeeze=False)
    for ax, w in zip(axes[0], workloads):
        for t in series:
            curves = [[r["best_gflops"] for r in rows if r["workload"] == w and r[series_key] == t
                       and r["seed"] == s and r["trial"] != "seconds"] for s in seeds]
            curves = [c for c in curves if c]
            if not curves:
                continue
            n = min(len(c) for c in curves)
            mean = [sum(c[i] for c in curves) / len(curves) for i in range(n)]
            ax.plot(range(1, n + 1), mean, label=t)
        ax.set_title(w, fontsize=8)
        ax.set_xlabel("trials")
        ax.set_ylabel("best GFLOP/s (mean over seeds)")
        ax.legend()
    fig.tight_layout()
    fig.savefig(out + ".png", dpi=120)


def summary(rows, workloads, tuners, seeds):
    """Per workload and tuner, over the seeds: final best (mean and spread), the trials to reach
    random search's mean final best, and the share of wall time in model fitting and search."""
    import statistics
    print("| workload | tuner | seeds | trials | final best GFLOP/s (mean ± sd) | trials to random's final best "
          "| model+search share |")
    print("|---|---|---|---|---|---|---|")
    for w in workloads:
        def curves(t):
            out = {}
            for s in seeds:
                c = [r["best_gflops"] for r in rows if r["workload"] == w and r["tuner"] == t and r["seed"] == s
                     and r["trial"] != "seconds"]
                if c:
                    out[s] = c
            return out
        random_final = [c[-1] for c in curves("random").values()]
        target = statistics.mean(random_final) if random_final else None
        for t in tuners:
            cs = curves(t)
            if not cs:
                continue
            finals = [c[-1] for c in cs.values()]
            sd = statistics.stdev(finals) if len(finals) > 1 else 0.0
            reach = "-"
            if target is not None:
                hits = [next((i + 1 for i, g in enumerate(c) if g >= target), None) for c in cs.values()]
                reach = ", ".join(str(h) if h else f">{len(c)}" for h, c in zip(hits, cs.values()))
            times = [r["best_gflops"].split("/") for r in rows if r["workload"] == w and r["tuner"] == t
                     and r["trial"] == "seconds" and r["seed"] in cs]
            share = sum(float(b) for _, b in times) / max(1e-9, sum(float(a) for a, _ in times))
            print(f"| {w} | {t} | {len(cs)} | {min(len(c) for c in cs.values())} | "
                  f"{statistics.mean(finals):.1f} ± {sd:.1f} | {reach} | {100 * share:.1f}% |")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tessera", default="build/tessera")
    p.add_argument("--workloads", nargs="+", default=["matmul:M=1024,N=1024,K=1024"])
    p.add_argument("--tuners", nargs="+", default=["xgb", "xgb-reg", "random", "ga"])
    p.add_argument("--seeds", nargs="+", type=int, default=[0])
    p.add_argument("--trials", type=int, default=128)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--first", choices=["tuner", "default"], default="tuner",
                   help="the first trial: the tuner's own proposal (AutoTVM's curves) or the default configuration")
    p.add_argument("--out", default="docs/tuning-curves", help="prefix of the .csv and .png written")
    args = p.parse_args()

    fields = ["workload", "tuner", "seed", "trial", "best_gflops", "first", "batch"]
    path = args.out + ".csv"
    rows = []
    if os.path.exists(path):
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            if "first" not in (reader.fieldnames or []):
                sys.exit(f"{path} has no 'first' column: its runs started from the default configuration; "
                         "pass a new --out for these curves")
            rows = [dict(r, seed=int(r["seed"]), trial=r["trial"] if r["trial"] == "seconds" else int(r["trial"]),
                         best_gflops=r["best_gflops"] if r["trial"] == "seconds" else float(r["best_gflops"]))
                    for r in reader]
            # Curves of another batch size are not the same experiment, and nothing else in a row
            # says which it had.
            if "batch" not in (reader.fieldnames or []):
                sys.exit(f"{path} has no 'batch' column: add one with the --batch its runs used, or "
                         "pass a new --out")
        others = {r["first"] for r in rows} - {args.first}
        if others:
            sys.exit(f"{path} holds runs with --first {', '.join(sorted(others))}; pass a new --out for "
                     f"--first {args.first}")
        batches = {int(r["batch"]) for r in rows} - {args.batch}
        if batches:
            sys.exit(f"{path} holds runs with --batch {', '.join(map(str, sorted(batches)))}; pass that "
                     f"--batch or a new --out")
    done = {(r["workload"], r["tuner"], r["seed"]) for r in rows if r["trial"] == "seconds"}
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    for w in args.workloads:
        for t in args.tuners:
            for s in args.seeds:
                if (w, t, s) in done:
                    continue
                r = tune(args.tessera, w, t, s, args.trials, args.batch, args.threads, args.first)
                print(f"{w} {t} seed {s}: best {r['best_gflops']:.1f} GFLOP/s after {r['trials']} trials, "
                      f"{r['seconds']:.0f} s ({r['tuner_seconds']:.0f} s model and search)", file=sys.stderr)
                run = [{"workload": w, "tuner": t, "seed": s, "trial": i + 1, "best_gflops": g, "first": args.first,
                        "batch": args.batch} for i, g in enumerate(r["best_curve"])]
                run.append({"workload": w, "tuner": t, "seed": s, "trial": "seconds",
                            "best_gflops": f"{r['seconds']:.1f}/{r['tuner_seconds']:.1f}", "first": args.first,
                            "batch": args.batch})
                new_file = not os.path.exists(path)
                with open(path, "a", newline="") as f:
                    writer = csv.DictWriter(f, fieldnames=fields)
                    if new_file:
                        writer.writeheader()
                    writer.writerows(run)
                rows += run

    summary(rows, args.workloads, args.tuners, args.seeds)
    plot(rows, args.workloads, "tuner", args.tuners, args.seeds, args.out)
    print(f"wrote {args.out}.csv and {args.out}.png", file=sys.stderr)


if __name__ == "__main__":
    main()
