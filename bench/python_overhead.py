#!/usr/bin/env python3
"""What calling tessera from Python costs over C++, measured in alternating rounds.

1. A kernel: a small elementwise kernel called from Python (`kernel(a, b, out)` in place, and
   `kernel(a, b)` allocating its output) against the same kernel timed by C++'s loop
   (`Kernel.time`, which calls the entry point back to back). The difference is the binding's
   cost per call.
2. A model: a model library called through `tessera.load(...)(x)` against `tessera run-model
   model.so --json` (the C interface timed by the CLI), medians of alternating rounds.

Usage: PYTHONPATH=build/python .venv/bin/python bench/python_overhead.py \
           --tessera build/tessera [--model resnet18.onnx] [--rounds 5]
Without --model, a ResNet-18 of random weights is built with the onnx package.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import tessera
from tessera import te


def cpu_name():
    with open("/proc/cpuinfo") as f:
        info = f.read()
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines()
                  if line.startswith("model name")), "unknown CPU")
    isa = "AVX-512" if " avx512f" in info else "AVX2" if " avx2" in info else "SSE"
    return f"{model}, {isa}, {os.cpu_count()} cores"


def python_call_seconds(fn, calls):
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def kernel_rounds(rounds, n=256, calls=20000):
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    kernel = tessera.build(te.lower("add", [A, B, C]))
    a, b, out = (np.ones(n, np.float32) for _ in range(3))
    rows = {"python_in_place": [], "python_allocating": [], "cpp": []}
    for _ in range(rounds):
        rows["cpp"].append(kernel.time(a, b, out, repeat=1, min_repeat_ms=200).median)
        rows["python_in_place"].append(python_call_seconds(lambda: kernel(a, b, out), calls))
        rows["python_allocating"].append(python_call_seconds(lambda: kernel(a, b), calls))
    return {k: statistics.median(v) for k, v in rows.items()}


def model_rounds(rounds, tessera_bin, library, shape, repeat=20):
    model = tessera.load(library)
    x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
    model(x)
    python_ms, c_ms = [], []
    for _ in range(rounds):
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            model(x)
            times.append(time.perf_counter() - t0)
        python_ms.append(statistics.median(times) * 1e3)
        out = subprocess.run([tessera_bin, "run-model", library, "--json", "--repeat",
                              str(repeat)], check=True, capture_output=True, text=True).stdout
        c_ms.append(json.loads(out)["ms_median"])
    return statistics.median(python_ms), statistics.median(c_ms)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tessera", default="build/tessera")
    parser.add_argument("--model", help="an ONNX file; default: ResNet-18, random weights")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    print(f"machine: {cpu_name()}; threads: OpenMP default")
    k = kernel_rounds(args.rounds)
    print("kernel (256-element add), microseconds per call, medians of "
          f"{args.rounds} alternating rounds:")
    print(f"  C++ loop {k['cpp'] * 1e6:.3f}; Python in place {k['python_in_place'] * 1e6:.3f} "
          f"(+{(k['python_in_place'] - k['cpp']) * 1e6:.2f}); Python allocating "
          f"{k['python_allocating'] * 1e6:.3f} (+{(k['python_allocating'] - k['cpp']) * 1e6:.2f})")

    with tempfile.TemporaryDirectory() as tmp:
        path = args.model
        if path is None:
            import onnx
            sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "graph"))
            from compare_onnxruntime import resnet18
            path = os.path.join(tmp, "resnet18.onnx")
            onnx.save(resnet18(), path)
        compiled = tessera.compile(path)
        library = os.path.join(tmp, "model.so")
        compiled.save(library)
        shape = compiled.inputs[0].shape
        del compiled
        py, c = model_rounds(args.rounds, args.tessera, library, shape)
        print(f"model ({os.path.basename(path)}), ms per run, medians of {args.rounds} "
              f"alternating rounds: Python {py:.3f}, C interface (run-model) {c:.3f}, "
              f"ratio {py / c:.3f}")


if __name__ == "__main__":
    main()
