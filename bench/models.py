#!/usr/bin/env python3
"""Whole models: tessera against onnxruntime in the same run.

Builds ResNet-18 (224x224), MobileNet-v2 (224x224, depthwise convolutions and Clip), the Nature
DQN (4x84x84) and a small MLP with the `onnx` package and seeded random weights, batch 1. For each
thread count it times onnxruntime (CPU provider, all graph optimizations, intra_op_num_threads =
the thread count, one inter-op thread) and the model compiled by `tessera compile -o model.so`
and run by `tessera run-model model.so --json` on the same input, in alternating rounds (the
median of each side's round medians is reported), checks that the outputs agree, and prints the
medians and their ratio as a Markdown table.

With `--trials N --db FILE` `tessera compile` first tunes every model (its distinct library
operators as one task list) and builds the library from those records; the tuning seconds are
reported. Without them the library holds the templates' default configurations.

Run it in the repository's .venv (scripts/setup.sh installs onnx, onnxruntime and numpy there):

    .venv/bin/python bench/models.py --tessera build/tessera --threads 1 2 --out docs/bench/models
"""
import argparse
import csv
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "graph"))
from compare_onnxruntime import Builder, resnet18  # noqa: E402  (the test's builders, shared)


def mobilenet_v2():
    """torchvision's mobilenet_v2 (width 1.0): inverted residuals with ReLU6 as Clip(0, 6)."""
    b = Builder(2)

    def conv_bn_clip(x, c_in, c_out, k, stride, group=1):
        h = b.bn(b.conv(x, c_in, c_out, k, stride, k // 2, group=group, bias=False), c_out)
        return b.clip6(h)

    def inverted_residual(x, c_in, c_out, expand, stride):
        c = c_in * expand
        h = x if expand == 1 else conv_bn_clip(x, c_in, c, 1, 1)
        h = conv_bn_clip(h, c, c, 3, stride, group=c)
        h = b.bn(b.conv(h, c, c_out, 1, bias=False), c_out)
        return b.op("Add", [h, x]) if stride == 1 and c_in == c_out else h

    h = conv_bn_clip("input", 3, 32, 3, 2)
    c = 32
    for t, c_out, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                           (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
        for i in range(n):
            h = inverted_residual(h, c, c_out, t, s if i == 0 else 1)
            c = c_out
    h = conv_bn_clip(h, c, 1280, 1, 1)
    h = b.op("Flatten", [b.op("GlobalAveragePool", [h])], axis=1)
    return b.model("mobilenet_v2", [1, 3, 224, 224], b.gemm(h, 1280, 1000))


def dqn():
    """The Nature DQN (Mnih et al. 2015): three convolutions, two dense layers, 18 actions."""
    b = Builder(3)
    h = b.op("Relu", [b.conv("input", 4, 32, 8, stride=4)])
    h = b.op("Relu", [b.conv(h, 32, 64, 4, stride=2)])
    h = b.op("Relu", [b.conv(h, 64, 64, 3, stride=1)])
    h = b.op("Flatten", [h], axis=1)
    h = b.op("Relu", [b.gemm(h, 64 * 7 * 7, 512)])
    return b.model("dqn", [1, 4, 84, 84], b.gemm(h, 512, 18))


def mlp():
    """784-512-256-10 with ReLU and a softmax, batch 1."""
    b = Builder(4)
    h = b.op("Relu", [b.gemm("input", 784, 512)])
    h = b.op("Relu", [b.gemm(h, 512, 256)])
    return b.model("mlp", [1, 784], b.op("Softmax", [b.gemm(h, 256, 10)], axis=-1))


MODELS = {"resnet18": resnet18, "mobilenet_v2": mobilenet_v2, "dqn": dqn, "mlp": mlp}


def median_ms(run, repeat, min_repeat_ms=20.0):
    """Median over `repeat` repeats of the mean time of one call, each repeat at least
    min_repeat_ms long (tessera's time_function does the same)."""
    run()  # warm-up
    number = 1
    while True:
        start = time.perf_counter()
        for _ in range(number):
            run()
        elapsed = time.perf_counter() - start
        if elapsed * 1e3 >= min_repeat_ms:
            break
        number *= 2
    times = [elapsed / number]
    while len(times) < repeat:
        start = time.perf_counter()
        for _ in range(number):
            run()
        times.append((time.perf_counter() - start) / number)
    return 1e3 * float(np.median(times))


def ort_session(path, threads):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def cpu_line():
    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                info.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    flags = set(info.get("flags", "").split())
    isa = os.environ.get("TESSERA_ISA")
    return (f"CPU: {info.get('model name', platform.processor() or 'unknown')}, "
            f"{os.cpu_count()} logical cores; avx512f "
            f"{'present' if 'avx512f' in flags else 'absent'}, avx2 "
            f"{'present' if 'avx2' in flags else 'absent'}; TESSERA_ISA="
            f"{isa if isa else '(not set)'}; onnxruntime {ort.__version__}")


def tessera_compile(args, path, lib, db, threads):
    cmd = [args.tessera, "compile", path, "--trials", str(args.trials), "--db", db,
           "--threads", str(threads), "--conv-algorithm", args.conv_algorithm, "--json", "-o", lib]
    cmd += args.compile_args.split()
    start = time.perf_counter()
    run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=sys.stderr if args.verbose else
                         subprocess.DEVNULL, text=True)
    seconds = time.perf_counter() - start
    if run.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {run.returncode}")
    report = json.loads(run.stdout) if args.trials else {"trials": 0}
    return seconds, report


def tessera_run(args, lib, in_path, out_path, threads):
    cmd = [args.tessera, "run-model", lib, "--input", in_path, "--output", out_path,
           "--threads", str(threads), "--repeat", str(args.repeat), "--json"]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {run.returncode}: {run.stderr.strip()}")
    return json.loads(run.stdout)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tessera", default="build/tessera", help="the tessera binary")
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    p.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    p.add_argument("--repeat", type=int, default=10, help="timed repeats per round (median)")
    p.add_argument("--rounds", type=int, default=3,
                   help="alternating rounds of onnxruntime then tessera (median of the rounds)")
    p.add_argument("--trials", type=int, default=0,
                   help="tune each model with `tessera compile` first (needs --db)")
    p.add_argument("--db", help="records DB: tuned into with --trials, read by run-model")
    p.add_argument("--tune-threads", type=int, default=2, help="threads while tuning")
    p.add_argument("--compile-args", default="",
                   help="more arguments for tessera compile, e.g. '--transfer off' or "
                        "'--pretrained none' (one string, split on spaces)")
    p.add_argument("--conv-algorithm", default="auto", choices=["auto", "direct"],
                   help="tessera compile's --conv-algorithm (direct: no Winograd)")
    p.add_argument("--workdir", default="build/bench_models", help="models and arrays go here")
    p.add_argument("--out", help="also write OUT.md and OUT.csv")
    p.add_argument("--verbose", action="store_true", help="show tessera compile's progress")
    args = p.parse_args()
    if args.trials and not args.db:
        p.error("--trials needs --db")
    os.makedirs(args.workdir, exist_ok=True)

    rows = []
    for name in args.models:
        model = MODELS[name]()
        path = os.path.join(args.workdir, name + ".onnx")
        onnx.save(model, path)
        shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
        x = np.random.default_rng(7).uniform(-1, 1, shape).astype(np.float32)
        in_path = os.path.join(args.workdir, name + ".in.npy")
        out_path = os.path.join(args.workdir, name + ".out.npy")
        np.save(in_path, x)
        lib = os.path.join(args.workdir, name + ".so")
        db = args.db or os.path.join(args.workdir, "no-records.db")
        compile_s, report = tessera_compile(args, path, lib, db, args.tune_threads)
        tune_s = compile_s if args.trials else None
        trials = report["trials"]
        for threads in args.threads:
            sess = ort_session(path, threads)
            feed = {sess.get_inputs()[0].name: x}
            expected = sess.run(None, feed)[0]
            # Alternating rounds, so that a slow phase of a shared machine hits both sides.
            ort_rounds, tessera_rounds = [], []
            for _ in range(args.rounds):
                ort_rounds.append(median_ms(lambda: sess.run(None, feed), args.repeat))
                report = tessera_run(args, lib, in_path, out_path, threads)
                tessera_rounds.append(report["ms_median"])
            ort_ms = float(np.median(ort_rounds))
            report["ms_median"] = float(np.median(tessera_rounds))
            got = np.load(out_path)
            err = float(np.max(np.abs(got - expected)) /
                        max(float(np.max(np.abs(expected))), 1e-30))
            schedules = [k["schedule"] for k in report["library"]["kernels"]]
            rows.append({
                "model": name, "threads": threads,
                "onnxruntime_ms": round(ort_ms, 3),
                "tessera_ms": round(report["ms_median"], 3),
                "speedup": round(ort_ms / report["ms_median"], 3),
                "tuned_kernels": schedules.count("db"),
                "default_kernels": schedules.count("default") + schedules.count("plain"),
                "te_kernels": schedules.count("fixed"),
                "steps": report["library"]["steps"],
                "trials": trials,
                "tuning_s": round(tune_s, 1) if tune_s is not None else "",
                "max_rel_err": f"{err:.1e}",
            })
            print(f"{name} {threads} thread(s): onnxruntime {ort_ms:.3f} ms, tessera "
                  f"{report['ms_median']:.3f} ms", file=sys.stderr)

    header = ["model", "threads", "onnxruntime ms", "tessera ms", "speedup (ort / tessera)",
              "kernels tuned / default / te", "steps", "trials", "tuning s", "max rel err"]
    lines = [cpu_line(), "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['threads']} | {r['onnxruntime_ms']:.3f} | {r['tessera_ms']:.3f} "
            f"| {r['speedup']:.2f}x | {r['tuned_kernels']} / {r['default_kernels']} / "
            f"{r['te_kernels']} | {r['steps']} | {r['trials']} | {r['tuning_s']} "
            f"| {r['max_rel_err']} |")
    table = "\n".join(lines)
    print(table)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out + ".md", "w") as f:
            f.write(table + "\n")
        with open(args.out + ".csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    bad = [r for r in rows if float(r["max_rel_err"]) > 1e-3]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
