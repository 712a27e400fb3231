#!/usr/bin/python3
"""Roofline of benchmark tables: tessera's and the libraries' GFLOP/s from bench/suite.py CSVs,
placed by arithmetic intensity (FLOPs per byte of compulsory traffic: every input read once,
every output written once) under the machine's roofs from bench/fma_peak (the FMA peak and the
read bandwidth of L2, L3 and memory at the tables' thread count).

The benchmarks time a kernel back to back, so after the first run its data sits in the smallest
cache level that holds the compulsory bytes; that level's bandwidth makes the slanted roof a
workload is held to. A point near the flat roof is bound by the FMA units: what it lacks is in
the instruction stream. A point near its slanted roof is bound by that level's bandwidth: what it
lacks is reuse. The model is coarse: writes are held to the read bandwidth, and a private level
counts once per thread (one thread per core). Writes a figure (.png) and a table (.md) with each
workload's share of its roof; a workload in several tables is taken from the last, rows whose
kernel was wrong are left out. The roof is the ISA's that fma_peak measures: TESSERA_ISA=avx2
gives the AVX2 roof on any AVX2 machine (run the suite under the same setting). Example:

  /usr/bin/python3 bench/roofline.py --csv docs/bench/2026-12-01-matmul-v6-t2.csv \\
      docs/bench/2026-12-01-resnet-nchwc-t2.csv --threads 2 --out docs/bench/roofline-t2
"""
import argparse
import csv
import json
import subprocess
import sys

FLOAT_BYTES = 4


def parse_workload(text):
    op, _, rest = text.partition(":")
    keys = {}
    for item in rest.split(","):
        if item:
            k, _, v = item.partition("=")
            keys[k] = int(v)
    return op, keys


def conv_out(size, k, s, p, d=1):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def compulsory_bytes(workload):
    """Bytes that any kernel must move at least once: inputs read, outputs written."""
    op, k = parse_workload(workload)
    if op == "matmul":
        floats = k["M"] * k["K"] + k["K"] * k["N"] + k["M"] * k["N"]
    elif op == "batch_matmul":
        floats = k["B"] * (k["M"] * k["K"] + k["K"] * k["N"] + k["M"] * k["N"])
    elif op == "dense":
        floats = k["B"] * k["I"] + k["O"] * k["I"] + k["B"] * k["O"]
    elif op in ("conv2d", "conv2d_nchwc", "conv2d_bias_relu"):
        d, g = k.get("D", 1), k.get("G", 1)
        oh = conv_out(k["H"], k["K"], k["S"], k["P"], d)
        ow = conv_out(k["W"], k["K"], k["S"], k["P"], d)
        floats = (k["N"] * k["C"] * k["H"] * k["W"] + k["O"] * (k["C"] // g) * k["K"] * k["K"] +
                  k["N"] * k["O"] * oh * ow)
    elif op in ("depthwise_conv2d", "depthwise_conv2d_nchwc"):
        oh = conv_out(k["H"], k["K"], k["S"], k["P"])
        ow = conv_out(k["W"], k["K"], k["S"], k["P"])
        floats = k["N"] * k["C"] * (k["H"] * k["W"] + oh * ow) + k["C"] * k["K"] * k["K"]
    elif op in ("max_pool2d", "avg_pool2d"):
        oh = conv_out(k["H"], k["K"], k["S"], k["P"])
        ow = conv_out(k["W"], k["K"], k["S"], k["P"])
        floats = k["N"] * k["C"] * (k["H"] * k["W"] + oh * ow)
    elif op == "add":
        floats = 3 * k["M"] * k["N"]
    elif op in ("relu", "softmax"):
        floats = 2 * k["M"] * k["N"]
    elif op == "bias_add":
        floats = 2 * k["M"] * k["N"] + k["N"]
    else:
        return None
    return floats * FLOAT_BYTES


def read_rows(paths, threads):
    rows = {}
    for path in paths:
        with open(path) as f:
            for r in csv.DictReader(f):
                if int(r["threads"]) != threads or r["correct"] != "True":
                    continue
                nbytes = compulsory_bytes(r["workload"])
                if nbytes is None:
                    print(f"roofline: no traffic model for {r['workload']}, left out",
                          file=sys.stderr)
                    continue
                flops = float(r["flops"])
                library = float(r["library_gflops"]) if r["library_gflops"] else None
                # The same name may stand for a layer in two layouts (C1 as conv2d and as
                # conv2d_nchwc): blocked ones are labelled apart.
                label = r["name"] + ("·b" if r["workload"].split(":")[0].endswith("_nchwc") else "")
                rows[r["workload"]] = {"name": label, "workload": r["workload"],
                                       "bytes": nbytes, "intensity": flops / nbytes,
                                       "tessera": float(r["gflops"]), "library": library,
                                       "library_name": r["library"]}
    return list(rows.values())


def resident_level(nbytes, roofs, threads):
    """The smallest level that holds the working set (private levels: one per thread)."""
    caches = roofs["cache_bytes"]
    for level in ("L2", "L3"):
        capacity = caches[level] * (threads if level in caches["private"] else 1)
        if nbytes <= capacity:
            return level
    return "memory"


def machine_roofs(args):
    if args.peak_json:
        with open(args.peak_json) as f:
            return json.load(f)
    cmd = [args.fma_peak, "--threads", str(args.threads), "--bandwidth", "--json"]
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    return json.loads(subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True).stdout)


def roof_at(intensity, peak, bandwidth):
    return min(peak, intensity * bandwidth)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--csv", nargs="+", required=True, help="tables written by bench/suite.py")
    p.add_argument("--threads", type=int, default=2, help="rows of this thread count are drawn")
    p.add_argument("--fma-peak", default="build/bench/fma_peak")
    p.add_argument("--peak-json", help="roofs saved from fma_peak --json (else it is run)")
    p.add_argument("--out", required=True, help="path prefix of the .png, .md and .json written")
    args = p.parse_args()

    roofs = machine_roofs(args)
    t = str(args.threads)
    if t not in roofs.get("peak_gflops", {}) or t not in roofs.get("read_gbytes_per_s", {}):
        sys.exit(f"roofline: the roofs have no peak and bandwidth for {args.threads} thread(s); "
                 f"run fma_peak --threads {args.threads} --bandwidth --json")
    peak = roofs["peak_gflops"][t]
    bandwidth = roofs["read_gbytes_per_s"][t]
    rows = read_rows(args.csv, args.threads)
    if not rows:
        sys.exit(f"roofline: no rows with threads={args.threads} in {', '.join(args.csv)}")
    isa = roofs.get("isa", "avx512")  # fma_peak before it measured AVX2 knew only AVX-512
    lines = [f"Roofline, {args.threads} thread(s), {isa}: FMA peak {peak:.1f} GFLOP/s; read "
             "bandwidth "
             + ", ".join(f"{lvl} {bandwidth[lvl]:.1f}" for lvl in ("L2", "L3", "memory"))
             + " GB/s (bench/fma_peak). Intensity: FLOPs per compulsory byte. Roof: the lower of "
             "the FMA peak and intensity × the bandwidth of the level that holds the working set. "
             "·b: a layer in its channel-blocked (NCHWc) layout.", "",
             "| workload | MB | FLOP/byte | level | roof | tessera | % of roof | library | "
             "% of roof |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        r["level"] = resident_level(r["bytes"], roofs, args.threads)
        roof = roof_at(r["intensity"], peak, bandwidth[r["level"]])
        r["roof"] = roof
        lib = r["library"]
        lines.append(f"| {r['name']} | {r['bytes'] / 1e6:.1f} | {r['intensity']:.1f} | "
                     f"{r['level']} | {roof:.1f} | {r['tessera']:.1f} | "
                     f"{100 * r['tessera'] / roof:.0f}% | "
                     + (f"{lib:.1f} | {100 * lib / roof:.0f}% |" if lib else "– | – |"))
    with open(args.out + ".json", "w") as f:
        json.dump({"roofs": roofs, "threads": args.threads, "rows": rows}, f, indent=1)
    with open(args.out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 5.5))
    lo = min(r["intensity"] for r in rows) / 2
    hi = max(r["intensity"] for r in rows) * 2
    xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    for level, style in (("memory", "-"), ("L3", "--"), ("L2", ":")):
        ax.plot(xs, [roof_at(x, peak, bandwidth[level]) for x in xs], "k" + style, lw=1,
                label=f"roof, {level} {bandwidth[level]:.0f} GB/s")
    ax.axhline(peak, color="k", lw=0.5)
    ax.plot([r["intensity"] for r in rows], [r["tessera"] for r in rows], "o", color="tab:blue",
            label="tessera")
    libs = [r for r in rows if r["library"]]
    ax.plot([r["intensity"] for r in libs], [r["library"] for r in libs], "o", mfc="none",
            color="tab:red", label="library")
    for r in rows:
        ax.annotate(r["name"], (r["intensity"], r["tessera"]), fontsize=7,
                    xytext=(3, -9), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per compulsory byte)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title(f"Roofline, {args.threads} thread(s), {isa}, FMA peak {peak:.0f} GFLOP/s")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(True, which="both", lw=0.2)
    fig.tight_layout()
    fig.savefig(args.out + ".png", dpi=120)
    print(f"wrote {args.out}.png, .md, .json", file=sys.stderr)


if __name__ == "__main__":
    main()
