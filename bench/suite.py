#!/usr/bin/env python3
"""Operator benchmark suite: for each workload of the given lists and each thread count, tune with
a trial budget (records already in the DB count towards it), then re-time tessera's best
configuration against the libraries in the same process (`tessera bench`) and write the table as
Markdown and CSV.

    bench/suite.py --lists bench/workloads/matmul.txt --trials 256 --threads 1 2 --out docs/bench

Each thread count tunes into its own DB (<db-prefix>-t<threads>.db): the best configuration for one
thread is rarely the best for two. Only the Python standard library is used.
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def read_list(path):
    """(name, workload) pairs of a workload list: `NAME WORKLOAD` lines, `#` comments."""
    items = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 2:
                sys.exit(f"{path}:{number}: expected 'NAME WORKLOAD', got '{line}'")
            items.append((parts[0], parts[1]))
    return items


def machine_line():
    """The CPU and the vector ISA the kernels were compiled for, as every figure must say."""
    model, flags = "unknown CPU", set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model == "unknown CPU":
                model = value.strip()
            if key.strip() == "flags" and not flags:
                flags = set(value.split())
    host = "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else "sse"
    isa = os.environ.get("TESSERA_ISA", "") or host
    if isa == "native":
        isa = host
    held = f" (TESSERA_ISA={isa} on an {host.upper()} CPU; libraries held to it too)" \
        if isa != host else ""
    return f"Machine: {model}, {os.cpu_count()} logical CPUs, kernels for {isa}{held}."


def run_json(cmd, timeout):
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()}")
    return json.loads(done.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lists", nargs="+", required=True, help="workload list files")
    ap.add_argument("--only", nargs="*", default=None, help="names to keep (default: all)")
    ap.add_argument("--trials", type=int, default=256, help="trial budget per workload")
    ap.add_argument("--tuner", default="xgb")
    ap.add_argument("--batch", type=int, default=32, help="measurements between model updates")
    ap.add_argument("--threads", type=int, nargs="+", default=[2])
    ap.add_argument("--db-prefix", default="bench-suite", help="DBs are <prefix>-t<threads>.db")
    ap.add_argument("--out", default="bench-suite", help="writes <out>.md and <out>.csv")
    ap.add_argument("--tessera", default=os.path.join(ROOT, "build", "tessera"))
    ap.add_argument("--timeout", type=int, default=7200, help="seconds per tuning run")
    args = ap.parse_args()

    workloads = [item for path in args.lists for item in read_list(path)]
    if args.only is not None:
        workloads = [w for w in workloads if w[0] in args.only]
    rows = []
    for threads in args.threads:
        db = f"{args.db_prefix}-t{threads}.db"
        for name, workload in workloads:
            start = time.time()
            tuned = run_json([args.tessera, "tune", workload, "--trials", str(args.trials),
                              "--tuner", args.tuner, "--batch", str(args.batch),
                              "--threads", str(threads), "--db", db,
                              "--json"], args.timeout)
            bench = run_json([args.tessera, "bench", workload, "--threads", str(threads),
                              "--db", db, "--json"], 1800)
            blocked = [b for b in bench.get("baselines", []) if b.get("own_layouts")]
            row = {
                "name": name,
                "workload": workload,
                "threads": threads,
                "trials": tuned["trials"],
                # The run's fastest single measurement, and its re-timed pick (what bench times).
                "tuned_gflops": round(tuned.get("best_tuned_gflops", tuned["best_gflops"]), 1),
                "picked_gflops": round(tuned["best_gflops"], 1),
                "gflops": round(bench["gflops"], 1),
                "correct": bench["correct"],
                "library": bench.get("baseline", ""),
                "library_gflops": round(bench.get("baseline_gflops", 0.0), 1),
                "ratio": round(bench.get("ratio", 0.0), 3),
                "ratio_range": (f"{bench['ratio_min']:.2f}-{bench['ratio_max']:.2f}"
                                if "ratio_min" in bench else ""),
                "blocked_gflops": round(blocked[0]["gflops"], 1) if blocked else "",
                "flops": bench["flops"],
                "seconds": round(time.time() - start, 1),
            }
            rows.append(row)
            print(f"{name:8} t{threads} {row['gflops']:8.1f} GFLOP/s vs {row['library_gflops']:8.1f}"
                  f" ({row['ratio']:.2f}x) after {row['trials']} trials, {row['seconds']} s",
                  flush=True)

    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out + ".csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        writer.writeheader()
        writer.writerows(rows)
    with open(args.out + ".md", "w") as f:
        f.write(machine_line() + "\n\n")
        f.write("| name | workload | threads | trials | tessera GFLOP/s | library | library GFLOP/s "
                "| ratio | ratio range | library blocked GFLOP/s | correct |\n")
        f.write("|---|---|---|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            f.write(f"| {r['name']} | `{r['workload']}` | {r['threads']} | {r['trials']} | "
                    f"{r['gflops']} | {r['library']} | {r['library_gflops']} | {r['ratio']} | "
                    f"{r['ratio_range']} | "
                    f"{r['blocked_gflops']} | {'yes' if r['correct'] else 'NO'} |\n")
        # Whole-network view: total time is what an end-to-end model pays.
        for threads in args.threads:
            mine = [r for r in rows if r["threads"] == threads and r["gflops"] > 0
                    and r["library_gflops"] > 0]
            if len(mine) < 2:
                continue
            flops = {r["name"]: r["flops"] for r in mine}
            total = sum(flops[r["name"]] / (r["gflops"] * 1e9) for r in mine)
            library = sum(flops[r["name"]] / (r["library_gflops"] * 1e9) for r in mine)
            line = (f"\nTotal over {len(mine)} workloads at {threads} thread(s): tessera "
                    f"{total * 1e3:.2f} ms, library (same layout) {library * 1e3:.2f} ms "
                    f"({library / total:.2f}x)")
            with_blocked = [r for r in mine if r["blocked_gflops"] != ""]
            if len(with_blocked) == len(mine):
                blocked = sum(flops[r["name"]] / (r["blocked_gflops"] * 1e9) for r in mine)
                line += f", library blocked layouts {blocked * 1e3:.2f} ms ({blocked / total:.2f}x)"
            f.write(line + ".\n")
    print(f"wrote {args.out}.md and {args.out}.csv")


if __name__ == "__main__":
    main()
