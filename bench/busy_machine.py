#!/usr/bin/env python3
"""A compiled model on a busy machine: `tessera run-model model.so` with its adaptive thread
count (the default), with --fixed-threads, and onnxruntime on the same ONNX file, each beside N
CPU-bound processes (busy loops of sh), in alternating rounds.

    .venv/bin/python bench/busy_machine.py --tessera build/tessera --library r18.so \\
        --onnx resnet18.onnx --hogs 0 1 2 --rounds 3

Prints one line per round (median ms of --repeat runs, and the threads tessera's runs used at
the end) and a Markdown table of the medians over rounds, headed by the CPU.
"""
import argparse
import json
import os
import statistics
import subprocess
import time

import numpy as np


def tessera(args, *extra):
    cmd = [args.tessera, "run-model", args.library, "--threads", str(args.threads), "--repeat",
           str(args.repeat), "--json", *extra]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(run.stderr.strip())
    report = json.loads(run.stdout)
    return report["ms_median"], report.get("threads_in_use", -1)


def onnxruntime_session(args):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = args.threads
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(args.onnx, opts, providers=["CPUExecutionProvider"])


def onnxruntime_ms(session, repeat):
    inp = session.get_inputs()[0]
    x = np.random.default_rng(0).random([d if isinstance(d, int) else 1 for d in inp.shape],
                                        dtype=np.float32)
    for _ in range(3):
        session.run(None, {inp.name: x})
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        session.run(None, {inp.name: x})
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times))


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tessera", required=True)
    p.add_argument("--library", required=True, help="model.so from tessera compile -o")
    p.add_argument("--onnx", required=True, help="the same model for onnxruntime")
    p.add_argument("--hogs", type=int, nargs="+", default=[0, 2])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeat", type=int, default=40)
    args = p.parse_args()

    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), "?")
    isa = "AVX-512" if "avx512f" in open("/proc/cpuinfo").read() else "AVX2"
    print(f"# {cpu}, {isa}, {os.cpu_count()} cores, {args.threads} threads, "
          f"{args.repeat} runs per round")
    session = onnxruntime_session(args)
    table = []
    for hogs in args.hogs:
        procs = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(hogs)]
        time.sleep(1)
        rows = []
        try:
            for r in range(args.rounds):
                adaptive, used = tessera(args)
                fixed, _ = tessera(args, "--fixed-threads")
                ort_ms = onnxruntime_ms(session, args.repeat)
                rows.append((adaptive, fixed, ort_ms))
                print(f"hogs {hogs} round {r}: adaptive {adaptive:.1f} ms ({used} threads at the "
                      f"end), fixed {fixed:.1f}, onnxruntime {ort_ms:.1f}", flush=True)
        finally:
            for proc in procs:
                proc.kill()
        table.append((hogs, *[statistics.median(c) for c in zip(*rows)],
                      *[max(c) for c in zip(*rows)]))
    print("\n| other processes | adaptive ms | fixed ms | onnxruntime ms | worst: adaptive | "
          "fixed | onnxruntime |")
    print("|---|---|---|---|---|---|---|")
    for hogs, a, f, o, wa, wf, wo in table:
        print(f"| {hogs} | {a:.1f} | {f:.1f} | {o:.1f} | {wa:.1f} | {wf:.1f} | {wo:.1f} |")


if __name__ == "__main__":
    main()
