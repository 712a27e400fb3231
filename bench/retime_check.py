#!/usr/bin/python3
"""Does re-timing at the end of `tessera tune` return a faster kernel than the run's single
fastest measurement?

For each workload and seed, tunes from an empty DB (no transfer) with `--retime TOP`, which times
the TOP fastest configurations again together and returns the best median. The run's JSON names
both answers: the single fastest measurement (the first candidate) and the pick. When all runs of
a workload are done, every such strategy is timed again, independently of the runs, in
--check-rounds rounds of a fresh random order each (`tessera measure`, the tuner's own worker and
protocol), and the table compares the two answers under that common timing:

  python3 bench/retime_check.py --workloads $(cat bench/workloads/transfer-targets.txt) \\
      --trials 128 --seeds 0 1 2 --threads 2 --out docs/bench/retime-check
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from transfer_curves import retime  # noqa: E402


def tune(args, workload, seed):
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [args.tessera, "tune", workload, "--seed", str(seed), "--trials", str(args.trials),
               "--batch", str(args.batch), "--db", os.path.join(tmp, "retime.db"),
               "--transfer", "off", "--retime", str(args.top), "--retime-rounds",
               str(args.rounds), "--json"]
        if args.threads:
            cmd += ["--threads", str(args.threads)]
        r = json.loads(subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout)
    if not r.get("retime"):
        raise SystemExit(f"{workload} seed {seed}: the run was not re-timed")
    first = r["retime"]["candidates"][0]
    rank = [c["strategy"] for c in r["retime"]["candidates"]].index(r["retime"]["picked"]) + 1
    print(f"{workload} seed {seed}: single fastest {first['tuned_gflops']:.1f} GFLOP/s "
          f"(re-timed in the run {first['gflops']:.1f}), pick #{rank} {r['best_gflops']:.1f}, "
          f"re-timing {r['retime']['seconds']:.0f} s of {r['seconds']:.0f} s",
          file=sys.stderr, flush=True)
    return {"workload": workload, "seed": seed, "single": first["strategy"],
            "single_tuned": first["tuned_gflops"], "single_in_run": first["gflops"],
            "picked": r["retime"]["picked"], "picked_rank": rank,
            "picked_in_run": r["best_gflops"], "retime_seconds": r["retime"]["seconds"],
            "seconds": r["seconds"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", nargs="+")
    ap.add_argument("--trials", type=int, default=128)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--check-rounds", type=int, default=5)
    ap.add_argument("--check-repeat", type=int, default=10)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--tessera", default="build/tessera")
    ap.add_argument("--out", required=True, help="path prefix of the .json and .md written")
    ap.add_argument("--recheck", help="a JSON this script wrote: time its runs' answers again "
                    "(the check only, no tuning)")
    args = ap.parse_args()

    earlier = json.load(open(args.recheck))["runs"] if args.recheck else None
    if not args.workloads:
        if not earlier:
            raise SystemExit("--workloads is needed unless --recheck gives them")
        args.workloads = list(dict.fromkeys(r["workload"] for r in earlier))
    rows = []
    for w in args.workloads:
        runs = ([r for r in earlier if r["workload"] == w] if earlier
                else [tune(args, w, s) for s in args.seeds])
        strategies = sorted({r["single"] for r in runs} | {r["picked"] for r in runs})
        check = retime(SimpleNamespace(retime=args.check_rounds, retime_repeat=args.check_repeat,
                                       threads=args.threads, tessera=args.tessera), w, strategies)
        for r in runs:
            r["single_check"] = check[r["single"]]
            r["picked_check"] = check[r["picked"]]
            rows.append(r)

    with open(args.out + ".json", "w") as f:
        json.dump({"args": vars(args), "runs": rows}, f, indent=1)
    lines = [f"Re-timing check: {args.trials} trials, --retime {args.top} --retime-rounds "
             f"{args.rounds}, independent check {args.check_rounds} rounds, "
             f"{args.threads or 'all'} threads. GFLOP/s.", "",
             "| workload | seed | single fastest: tuned | in-run re-timing | check | pick (rank) | "
             "in-run re-timing | check | pick / single (check) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| `{r['workload']}` | {r['seed']} | {r['single_tuned']:.1f} | "
                     f"{r['single_in_run']:.1f} | {r['single_check']:.1f} | #{r['picked_rank']} | "
                     f"{r['picked_in_run']:.1f} | {r['picked_check']:.1f} | "
                     f"{r['picked_check'] / r['single_check']:.3f} |")
    changed = [r for r in rows if r["picked"] != r["single"]]
    ratios = [r["picked_check"] / r["single_check"] for r in changed]
    lines += ["", f"The pick differs from the single fastest in {len(changed)} of {len(rows)} runs"
              + (f"; there, pick / single under the check: median {statistics.median(ratios):.3f},"
                 f" range {min(ratios):.3f}-{max(ratios):.3f}." if ratios else "."),
              f"Re-timing took {statistics.median([r['retime_seconds'] for r in rows]):.0f} s per "
              f"run (median) of {statistics.median([r['seconds'] for r in rows]):.0f} s."]
    with open(args.out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
