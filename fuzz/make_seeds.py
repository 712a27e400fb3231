"""Writes the fuzzers' starting inputs into a folder of corpora, one subfolder per fuzzer.

Text seeds come from the forms the tests use; ONNX seeds are the small models of the onnxruntime
comparison test (tests/graph/compare_onnxruntime.py); .npy seeds are written by numpy itself.
Needs the .venv of scripts/setup.sh (onnx, numpy).
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnx

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "graph"))
import compare_onnxruntime as models  # noqa: E402

# The first character picks the fuzzer's workload: 0 matmul, 1 conv2d, 2 conv2d_bias_relu,
# 3 conv2d_nchwc, 4 add, 5 relu (fuzz/strategy_fuzzer.cpp).
STRATEGIES = [
    "0split(i, 4) ; split(j, 4) ; reorder(i.outer, j.outer, k, i.inner, j.inner) ; vectorize(j.inner)",
    "0split(i, 4) ; unroll(i.inner)",
    "0try(split(k, 2)) ; parallel(i) <+ fail",
    "0repeat(split(i, 2))",
    "0cache_write(C, j) ; fuse(i, j)",
    "0cache_read(A, k) ; prefetch(B, k, 2)",
    "0pack(B, 1, 4) ; gather(A, k)",
    "1split(x, 2) ; reorder(o, y, x.outer, rc, ry, rx, x.inner) ; vectorize(x.inner)",
    "1compute_at(pad, y) ; unroll(rx) ; fuse_write_back(conv)",
    "1rfactor(conv, rc) ; drop_init(conv)",
    "2compute_inline(pad) ; parallel(o)",
    "3merge_dims(conv, 1)",
    "4split(j, 8) ; vectorize(j.inner) ; parallel(i)",
    "5(id ; id) <+ unroll(i)",
]

WORKLOADS = [
    "matmul:M=8,N=12,K=6",
    "conv2d:N=1,C=3,H=6,W=6,O=4,K=3,S=2,P=1,D=1,G=1",
    "conv2d:N=1,C=4,H=5,W=5,O=4,K=3,S=1,P=1,G=2",
    "conv2d_bias_relu:N=1,C=2,H=5,W=5,O=2,K=3,S=1,P=1",
    "conv2d_nchwc:N=1,C=8,H=3,W=5,O=16,K=3,S=1,P=1,CB=4",
    "add:M=5,N=33",
    "relu:M=8,N=8",
    "softmax:M=4,N=9",
]

# Loop programs as `tessera run --json` prints them, before and after these strategies.
PROGRAM_RUNS = [
    ("matmul:M=8,N=12,K=6", "split(j, 4) ; reorder(i, j.outer, k, j.inner) ; vectorize(j.inner)"),
    ("matmul:M=8,N=12,K=6", "cache_write(C, j) ; parallel(i)"),
    ("conv2d:N=1,C=3,H=6,W=6,O=4,K=3,S=1,P=1", "split(x, 2) ; parallel(o)"),
    ("conv2d_nchwc:N=1,C=8,H=3,W=5,O=16,K=3,S=1,P=1,CB=4", "id"),
    ("softmax:M=4,N=9", "id"),
]


# A records line as `tessera db export` writes it (src/db/jsonl.cpp).
RECORD = ('{"build_seconds":0.41,"dtype":"float32","error":"ok","flops":2097152.0,"mean":0.0001,'
          '"median":9.5e-05,"message":"","number":10,"repeats":[9.5e-05,0.0001,0.000105],'
          '"run_seconds":0.02,"schema_version":3,"std":4e-06,'
          '"strategy":"split(i, 4) ; vectorize(i.inner)",'
          '"target":{"compiler":"gcc 12.2.0","cores":2,"cpu_model":"Intel(R) Xeon(R) Processor",'
          '"flags":"-O3 -march=native","isa":["avx2","avx512f"]},'
          '"tessera_version":"0.1.0","timestamp_ms":1764860000000,"workload":"matmul:M=64,N=128,K=128"}')


def write(folder, name, data):
    os.makedirs(folder, exist_ok=True)
    mode = "wb" if isinstance(data, bytes) else "w"
    with open(os.path.join(folder, name), mode) as f:
        f.write(data)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("out", help="folder to write <fuzzer>/<seed> files into")
    p.add_argument("--tessera", help="tessera binary: its printed loop programs become seeds")
    args = p.parse_args()
    for i, s in enumerate(STRATEGIES):
        write(os.path.join(args.out, "strategy"), f"seed{i}", s)
    write(os.path.join(args.out, "record"), "seed0", RECORD)
    write(os.path.join(args.out, "record"), "seed1",
          RECORD.replace('"error":"ok"', '"error":"run_timeout"').replace("9.5e-05", "0"))
    for i, w in enumerate(WORKLOADS):
        write(os.path.join(args.out, "workload"), f"seed{i}", w)
    if args.tessera:
        for i, (workload, strategy) in enumerate(PROGRAM_RUNS):
            run = subprocess.run([args.tessera, "run", workload, "-s", strategy, "--json",
                                  "--no-check", "--repeat", "1"],
                                 capture_output=True, text=True, check=True)
            report = json.loads(run.stdout)
            write(os.path.join(args.out, "program"), f"seed{i}a", report["program_before"])
            write(os.path.join(args.out, "program"), f"seed{i}b", report["program_after"])
    npy = os.path.join(args.out, "npy")
    os.makedirs(npy, exist_ok=True)
    rng = np.random.default_rng(0)
    for i, a in enumerate([rng.standard_normal((2, 3)).astype(np.float32),
                           np.arange(5, dtype=np.int64), np.float64(1.5),
                           np.zeros((0, 4), np.float32), np.ones((1, 1, 2), np.int32)]):
        np.save(os.path.join(npy, f"seed{i}.npy"), a)
    for build in (models.mlp, models.misc, models.se_block, models.encoder, models.more_ops,
                  models.dcgan, models.matmul_broadcast, models.recurrent_lm):
        model, _ = build()
        data = model.SerializeToString()
        if len(data) <= 256 * 1024:  # libFuzzer mutates small inputs far faster
            write(os.path.join(args.out, "onnx"), model.graph.name + ".onnx", data)
    print(f"seeds written under {args.out}")


if __name__ == "__main__":
    main()
