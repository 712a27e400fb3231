#!/usr/bin/python3
"""Multi-task tuning against tuning one by one (issue "Transfer learning and tuning many operators
at once", goal 2): the twelve ResNet-18 convolutions tuned

  * together by `tessera tune-all` with one budget of tasks x N trials (Ansor's gradient task
    scheduler, transfer through the DB's global model), and
  * one by one, N trials each, each task in a DB of its own with --transfer off,

and the sums of the best latencies compared. Every arm starts from an empty DB. Writes a Markdown
table and a JSON file with every task's best. Example (about an hour per arm on 2 cores at N=300):

  python3 bench/multitask.py --trials-per-task 300 --threads 2 --out docs/bench/multitask
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def read_tasks(path):
    tasks = []
    for line in open(path):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        tasks.append((parts[0], parts[-1]) if len(parts) > 1 else (parts[0], parts[0]))
    return tasks


def tune_all(args, task_file, trials, db, extra):
    # Transfer among the run's own tasks, not from the model shipped with tessera (which a fresh
    # DB would start from): that is what this benchmark compares with tuning one by one.
    cmd = [args.tessera, "tune-all", task_file, "--trials", str(trials), "--db", db, "--seed",
           str(args.seed), "--json", "--pretrained", "none"] + extra
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    start = time.time()
    out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True).stdout
    result = json.loads(out)
    result["wall_seconds"] = time.time() - start
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tessera", default="build/tessera")
    p.add_argument("--tasks", default=os.path.join(HERE, "workloads", "resnet18-conv.txt"))
    p.add_argument("--trials-per-task", type=int, default=300)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--arms", nargs="+", default=["tune-all", "one-by-one"],
                   choices=["tune-all", "one-by-one"])
    p.add_argument("--out", required=True, help="path prefix of the .md and .json written")
    args = p.parse_args()

    tasks = read_tasks(args.tasks)
    n = args.trials_per_task
    report = {"trials_per_task": n, "threads": args.threads, "seed": args.seed, "arms": {}}
    with tempfile.TemporaryDirectory() as tmp:
        if "tune-all" in args.arms:
            r = tune_all(args, args.tasks, n * len(tasks), os.path.join(tmp, "all.db"), [])
            report["arms"]["tune-all"] = {
                "trials": r["trials"], "wall_seconds": r["wall_seconds"],
                "total_latency_ms": r["total_latency_ms"],
                "tasks": {t["names"][0]: {"trials": t["trials"], "best_latency_ms": t["best_latency_ms"],
                                          "best_gflops": t["best_gflops"], "stopped": t["stopped"]}
                          for t in r["tasks"]}}
        if "one-by-one" in args.arms:
            arm = {"trials": 0, "wall_seconds": 0.0, "total_latency_ms": 0.0, "tasks": {}}
            for name, workload in tasks:
                task_file = os.path.join(tmp, name + ".txt")
                with open(task_file, "w") as f:
                    f.write(f"{name} {workload}\n")
                # One task in its own DB: no transfer, no early stop, exactly n trials.
                r = tune_all(args, task_file, n, os.path.join(tmp, name + ".db"),
                             ["--transfer", "off", "--task-early-stop", "0"])
                t = r["tasks"][0]
                arm["trials"] += r["trials"]
                arm["wall_seconds"] += r["wall_seconds"]
                arm["total_latency_ms"] += t["best_latency_ms"]
                arm["tasks"][name] = {"trials": t["trials"], "best_latency_ms": t["best_latency_ms"],
                                      "best_gflops": t["best_gflops"], "stopped": t["stopped"]}
            report["arms"]["one-by-one"] = arm

    with open(args.out + ".json", "w") as f:
        json.dump(report, f, indent=2)
    arms = list(report["arms"])
    lines = [f"ResNet-18 C1-C12, {n} trials per task, seed {args.seed}, "
             f"{args.threads or 'all'} threads. Best latency per task (ms).", "",
             "| task | " + " | ".join(arms) + " |", "|---|" + "---|" * len(arms)]
    for name, _ in tasks:
        cells = []
        for a in arms:
            t = report["arms"][a]["tasks"].get(name)
            cells.append(f"{t['best_latency_ms']:.3f} ({t['trials']} trials)" if t else "-")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("| **total** | " + " | ".join(
        f"**{report['arms'][a]['total_latency_ms']:.3f}** ({report['arms'][a]['trials']} trials, "
        f"{report['arms'][a]['wall_seconds'] / 60:.0f} min)" for a in arms) + " |")
    if len(arms) == 2:
        a, b = (report["arms"][x]["total_latency_ms"] for x in arms)
        lines += ["", f"tune-all total / one-by-one total = {a / b:.3f}"]
    with open(args.out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
