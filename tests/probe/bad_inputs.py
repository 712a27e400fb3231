#!/usr/bin/env python3
"""Bad inputs to every command of the tessera CLI: none may crash, hang or destroy a file.

    python3 tests/probe/bad_inputs.py [--tessera build/tessera] [--quick] [--jobs 1]
                                      [--report FILE.md] [--report FILE.csv] [--only REGEX]
                                      [--list] [--keep-failed] [--verbose]

Each probe runs one `tessera ...` command line in a fresh folder of its own (its files copied or
written there first; $TMPDIR a folder inside it) under a time limit, then checks:

- the process was not killed by a signal (negative return code, or 128 + n) and did not run past
  its time limit (60 s unless the probe says otherwise);
- its exit code is one the probe allows: 2 (a refusal) unless the probe is marked as an input
  that is actually acceptable (0, or "0 or 2" where either answer is right; 1, a wrong or failed
  kernel or no record, only where a probe says so);
- a refusal (exit code 2, or any unexpected non-zero code) is exactly one line on stderr,
  starting with `tessera: error: `;
- every file the probe set up is still there, of the same kind (a device is still a character
  device, a folder still a folder) and byte-identical. A healthy records DB the command may write
  (marked per probe) is checked by its rows instead: it must still pass SQLite's integrity check
  and hold every result it held before, and a refused `db import` must add none;
- nothing is left behind: $TMPDIR is empty again, no `.NAME.XXXXXX` temporary output remains and
  no process it started (one whose environment holds its $TMPDIR) still runs a few seconds later.

The fixtures (tiny ONNX models written here as protobuf bytes, model libraries `tessera compile -o`
writes, a records DB `tessera measure` fills and SQLite edits of it, its `db export`) are built
once at the start. Run as root, probes of read-only folders run as `nobody`, and device nodes
(/dev/full, /dev/null, /dev/zero) are private copies in the probe's folder, so that a command that
replaced one would not destroy the machine's. Endless inputs run under a 4 GiB address-space limit;
a full disk is RLIMIT_FSIZE with SIGXFSZ ignored.

`--quick` runs a fixed subset (QUICK: 70 probes, seconds) for CI (ctest BadInputsQuick); without
it all 2,600 or so run (about 12 minutes on 2 cores, most of it FIFO probes waiting out their
20 s). The exit code is 0 when every probe passed, 1 otherwise (or when a fixture cannot be
built), 2 on bad usage. Python 3 standard library only.
"""
import argparse
import concurrent.futures
import csv
import dataclasses
import hashlib
import io
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent.parent
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
NOBODY = 65534
REFUSE = frozenset({2})
OK = frozenset({0})
EITHER = frozenset({0, 2})
GIB = 1 << 30

# ---------------------------------------------------------------------------------------------
# Protobuf bytes of ONNX models, by hand (field numbers of onnx/onnx.proto)


def _varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _key(field, wire):
    return _varint(field << 3 | wire)


def pb_int(field, v):
    return _key(field, 0) + _varint(v)


def pb_bytes(field, b):
    if isinstance(b, str):
        b = b.encode()
    return _key(field, 2) + _varint(len(b)) + b


def pb_float(field, v):
    return _key(field, 5) + struct.pack("<f", v)


FLOAT, INT64, STRING, DOUBLE = 1, 7, 8, 11  # TensorProto.DataType


def onnx_value(name, elem=FLOAT, shape=(1, 4)):
    """ValueInfoProto; shape None: no shape; a str dimension is symbolic."""
    tensor = pb_int(1, elem)
    if shape is not None:
        dims = b"".join(pb_bytes(1, pb_int(1, d) if isinstance(d, int) else pb_bytes(2, d))
                        for d in shape)
        tensor += pb_bytes(2, dims)
    return pb_bytes(1, name) + pb_bytes(2, pb_bytes(1, tensor))


def onnx_tensor(name, dims, floats=None, raw=None, dtype=FLOAT, ints=None, external=None):
    b = b"".join(pb_int(1, d) for d in dims) + pb_int(2, dtype) + pb_bytes(8, name)
    if floats is not None:
        b += pb_bytes(4, b"".join(struct.pack("<f", x) for x in floats))
    if ints is not None:
        b += pb_bytes(7, b"".join(_varint(x) for x in ints))
    if raw is not None:
        b += pb_bytes(9, raw)
    if external is not None:
        for k, v in external:
            b += pb_bytes(13, pb_bytes(1, k) + pb_bytes(2, v))
        b += pb_int(14, 1)
    return b


def attr_int(name, v):
    return pb_bytes(1, name) + pb_int(20, 2) + pb_int(3, v)


def attr_ints(name, vs):
    return pb_bytes(1, name) + pb_int(20, 7) + b"".join(pb_int(8, v) for v in vs)


def attr_float(name, v):
    return pb_bytes(1, name) + pb_int(20, 1) + pb_float(2, v)


def attr_graph(name):
    return pb_bytes(1, name) + pb_int(20, 5) + pb_bytes(6, pb_bytes(2, "sub"))


def onnx_node(op, inputs, outputs, name="", attrs=(), domain=None):
    b = b"".join(pb_bytes(1, i) for i in inputs) + b"".join(pb_bytes(2, o) for o in outputs)
    if name:
        b += pb_bytes(3, name)
    b += pb_bytes(4, op) + b"".join(pb_bytes(5, a) for a in attrs)
    if domain is not None:
        b += pb_bytes(7, domain)
    return b


def onnx_graph(nodes, inputs, outputs, initializers=()):
    return (b"".join(pb_bytes(1, n) for n in nodes) + pb_bytes(2, "probe")
            + b"".join(pb_bytes(5, t) for t in initializers)
            + b"".join(pb_bytes(11, v) for v in inputs)
            + b"".join(pb_bytes(12, v) for v in outputs))


def onnx_model(graph, opset=13, ir=8, domain=""):
    b = pb_int(1, ir) + pb_bytes(2, "bad_inputs.py")
    if opset is not None:
        b += pb_bytes(8, pb_bytes(1, domain) + pb_int(2, opset))
    return b + pb_bytes(7, graph)


def relu_model(shape=(1, 4), elem=FLOAT, opset=13):
    return onnx_model(onnx_graph([onnx_node("Relu", ["x"], ["y"], "relu0")],
                                 [onnx_value("x", elem, shape)], [onnx_value("y", FLOAT, shape)]),
                      opset=opset)


def conv_model():
    rng = random.Random(7)
    w = [rng.uniform(-1, 1) for _ in range(8 * 4 * 3 * 3)]
    conv = onnx_node("Conv", ["x", "w"], ["c"], "conv0",
                     [attr_ints("kernel_shape", [3, 3]), attr_ints("pads", [1, 1, 1, 1]),
                      attr_ints("strides", [1, 1])])
    return onnx_model(onnx_graph([conv, onnx_node("Relu", ["c"], ["y"], "relu0")],
                                 [onnx_value("x", FLOAT, (1, 4, 8, 8))],
                                 [onnx_value("y", FLOAT, (1, 8, 8, 8))],
                                 [onnx_tensor("w", [8, 4, 3, 3], floats=w)]))


def ids_model():
    """An embedding lookup: int64 ids [1, 3] into a [10, 4] table."""
    table = [float(i) for i in range(40)]
    return onnx_model(onnx_graph([onnx_node("Gather", ["table", "ids"], ["y"], "gather0")],
                                 [onnx_value("ids", INT64, (1, 3))],
                                 [onnx_value("y", FLOAT, (1, 3, 4))],
                                 [onnx_tensor("table", [10, 4], floats=table)]))


def deep_model(levels):
    """A graph whose node has a graph attribute whose node has one ... `levels` deep."""
    g = pb_bytes(2, "leaf")
    for _ in range(levels):
        g = pb_bytes(1, pb_bytes(4, "If") + pb_bytes(5, pb_bytes(1, "then_branch")
                                                  + pb_int(20, 5) + pb_bytes(6, g)))
    return pb_int(1, 8) + pb_bytes(8, pb_int(2, 13)) + pb_bytes(7, g)


def one_node_model(op, inputs, attrs=(), initializers=(), x_shape=(1, 4), y_shape=(1, 4),
                   extra_inputs=()):
    """x (and extra graph inputs) -> op -> y."""
    return onnx_model(onnx_graph([onnx_node(op, inputs, ["y"], op.lower() + "0", attrs)],
                                 [onnx_value("x", FLOAT, x_shape)] + list(extra_inputs),
                                 [onnx_value("y", FLOAT, y_shape)], initializers))


# ---------------------------------------------------------------------------------------------
# .npy bytes


def npy(header, data=b"", major=1, magic=b"\x93NUMPY", header_len=None):
    h = header.encode() if isinstance(header, str) else header
    total = len(magic) + 2 + (2 if major == 1 else 4) + len(h) + 1
    h = h + b" " * ((64 - total % 64) % 64) + b"\n"
    n = len(h) if header_len is None else header_len
    size = struct.pack("<H", n & 0xFFFF) if major == 1 else struct.pack("<I", n & 0xFFFFFFFF)
    return magic + bytes([major, 0]) + size + h + data


def npy_f4(shape, values=None, descr="<f4"):
    count = 1
    for d in shape:
        count *= d
    values = [0.5] * count if values is None else values
    shape_text = "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
    fmt = {"<f4": "<f", "<f8": "<d", "<i4": "<i", "<i8": "<q"}[descr]
    body = b"".join(struct.pack(fmt, v if "f" in descr else int(v)) for v in values)
    return npy("{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape_text),
               body)


def overflowing_shape():
    """Two dimensions of at most 12 digits whose int64 product wraps to a negative number n
    with n * 4 = 4 (mod 2^64): a reader that multiplies unchecked finds 4 data bytes enough.
    (Found by a search over odd a below 10^12 of c = (3 * 2^62 + 1) / a mod 2^64.)"""
    a, c = 999948118823, 480336630935
    assert (a * c) % 2**64 == 3 * 2**62 + 1 and (a * c * 4) % 2**64 == 4
    return a, c


# ---------------------------------------------------------------------------------------------
# What a probe sets up in its folder


def f_bytes(data):
    def make(path, fx):
        path.write_bytes(data)
    return make


def f_copy(name):
    def make(path, fx):
        shutil.copyfile(fx / name, path)
    return make


def f_dir(path, fx):
    path.mkdir()


def f_fifo(path, fx):
    os.mkfifo(path)


def f_symlink(target):
    def make(path, fx):
        os.symlink(target, path)
    return make


def f_hardlink(target):
    def make(path, fx):
        os.link(path.parent / target, path)
    return make


def f_readonly_dir(contents=()):
    """A folder of 0555 (the probe runs as nobody when this script runs as root)."""
    def make(path, fx):
        path.mkdir()
        for name, maker in contents:
            maker(path / name, fx)
        path.chmod(0o555)
    return make


def f_chardev(major, minor):
    """A character device node like /dev/full (major 1, minor 7) inside the probe's folder, so
    that a command that replaced it would not destroy the machine's own. Needs root; without it
    the probe uses the real /dev path (which a user cannot replace anyway)."""
    def make(path, fx):
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    return make


def dev(name, probe_files):
    """The path of a device for a probe: a private node when root, /dev/NAME otherwise."""
    if IS_ROOT:
        probe_files["dev_" + name] = f_chardev(1, {"null": 3, "zero": 5, "full": 7}[name])
        return "dev_" + name
    return "/dev/" + name


# ---------------------------------------------------------------------------------------------
# Probes


@dataclasses.dataclass
class Probe:
    name: str                     # unique: command/family/variant
    args: List                    # argv after `tessera` (str or bytes)
    files: Dict[str, Callable] = dataclasses.field(default_factory=dict)
    expect: frozenset = REFUSE
    timeout: float = 60
    mutable_db: Sequence[str] = ()  # files (records DBs: rows only added) it may write...
    mutable_on: frozenset = frozenset({0})  # ... when it exits with one of these
    all_or_nothing: bool = False  # a refusal must leave a healthy records DB's rows as they were
    rlimit_as: Optional[int] = None     # address-space limit (bytes) for inputs that never end
    rlimit_fsize: Optional[int] = None  # file-size limit: a full disk, SIGXFSZ ignored
    as_nobody: bool = False
    signal_after: Optional[float] = None  # send SIGTERM after this many seconds
    forbid: Optional[str] = None  # a regex the stderr must not match
    env: Dict[str, str] = dataclasses.field(default_factory=dict)  # added to the environment
    volatile: Sequence[str] = ()  # files SQLite may rewrite whatever happens (-shm, -wal)
    slow: bool = False            # never in --quick
    note: str = ""

    @property
    def command(self):
        a = [x.decode("utf-8", "replace") if isinstance(x, bytes) else x for x in self.args]
        if not a:
            return "(top level)"
        if a[0] == "db" and len(a) > 1 and a[1] in ("list", "best", "export", "import", "stats"):
            return "db " + a[1]
        if a[0] in KNOWN_COMMANDS:
            return a[0]
        return "(top level)"


KNOWN_COMMANDS = ("run", "ops", "db", "measure", "tune", "tune-all", "bench", "run-model",
                  "compile", "pretrain")
W = "matmul:M=8,N=8,K=8"        # a workload with records in good.db
W64 = "matmul:M=64,N=64,K=64"  # a workload to schedule by hand


class Builder:
    def __init__(self):
        self.probes: List[Probe] = []
        self.names = set()

    def add(self, name, args, **kw):
        if name in self.names:
            raise RuntimeError("duplicate probe name " + name)
        self.names.add(name)
        if list(args[:2]) == ["db", "import"]:
            kw.setdefault("all_or_nothing", True)  # `db import` is all or nothing
        self.probes.append(Probe(name, list(args), **kw))


BAD_WORKLOADS = [
    # (label, text, expect)
    ("empty", "", REFUSE),
    ("no-colon", "matmul", REFUSE),
    ("no-params", "matmul:", REFUSE),
    ("no-op", ":M=8,N=8,K=8", REFUSE),
    ("missing-key", "matmul:M=8,N=8", REFUSE),
    ("unknown-key", "matmul:M=8,N=8,K=8,Z=1", REFUSE),
    ("optional-key-of-another-op", "matmul:M=8,N=8,K=8,D=1", REFUSE),
    ("duplicate-key", "matmul:M=8,M=9,N=8,K=8", REFUSE),
    ("negative", "matmul:M=-8,N=8,K=8", REFUSE),
    ("zero", "matmul:M=0,N=8,K=8", REFUSE),
    ("fraction", "matmul:M=8.5,N=8,K=8", REFUSE),
    ("nan", "matmul:M=nan,N=8,K=8", REFUSE),
    ("1e309", "matmul:M=1e309,N=8,K=8", REFUSE),
    ("2^63", "matmul:M=9223372036854775808,N=8,K=8", REFUSE),
    ("-2^63-1", "matmul:M=-9223372036854775809,N=8,K=8", REFUSE),
    ("26-digits", "matmul:M=99999999999999999999999999,N=8,K=8", REFUSE),
    ("hex", "matmul:M=8,N=8,K=0x8", REFUSE),
    ("key-cap+1", "matmul:M=1048577,N=8,K=8", REFUSE),
    ("2^31", "matmul:M=2147483648,N=1,K=1", REFUSE),
    ("product-2^40", "matmul:M=1048576,N=1048576,K=1", REFUSE),
    ("conv-product-overflow", "conv2d:N=16,C=1048576,H=1048576,W=1048576,O=1,K=1,S=1048576,P=0",
     REFUSE),
    ("conv-2^40-input", "conv2d:N=1,C=1,H=1048576,W=1048576,O=1,K=1,S=1,P=0", REFUSE),
    ("conv-kernel-larger", "conv2d:N=1,C=3,H=8,W=8,O=4,K=9,S=1,P=0", REFUSE),
    ("conv-stride-0", "conv2d:N=1,C=3,H=8,W=8,O=4,K=3,S=0,P=0", REFUSE),
    ("conv-pad-negative", "conv2d:N=1,C=3,H=8,W=8,O=4,K=3,S=1,P=-1", REFUSE),
    ("conv-pad-2^20", "conv2d:N=1,C=3,H=8,W=8,O=4,K=3,S=1,P=1048576", REFUSE),
    ("conv-dilation-0", "conv2d:N=1,C=3,H=8,W=8,O=4,K=3,S=1,P=0,D=0", REFUSE),
    ("conv-dilation-huge", "conv2d:N=1,C=3,H=8,W=8,O=4,K=3,S=1,P=0,D=1048576", REFUSE),
    ("conv-groups-not-dividing", "conv2d:N=1,C=3,H=8,W=8,O=4,K=3,S=1,P=0,G=2", REFUSE),
    ("conv-groups-0", "conv2d:N=1,C=4,H=8,W=8,O=4,K=3,S=1,P=0,G=0", REFUSE),
    ("conv-groups-negative", "conv2d:N=1,C=4,H=8,W=8,O=4,K=3,S=1,P=0,G=-2", REFUSE),
    ("conv-wb-not-dividing", "conv2d:N=1,C=4,H=8,W=8,O=4,K=3,S=1,P=0,WB=3", REFUSE),
    ("conv-wb-negative", "conv2d:N=1,C=4,H=8,W=8,O=4,K=3,S=1,P=0,WB=-1", REFUSE),
    ("conv-im2col-7", "conv2d:N=1,C=4,H=8,W=8,O=4,K=3,S=1,P=0,IM2COL=7", REFUSE),
    ("nchwc-cb-0", "conv2d_nchwc:N=1,C=16,H=8,W=8,O=16,K=3,S=1,P=1,CB=0", REFUSE),
    ("nchwc-cb-negative", "conv2d_nchwc:N=1,C=16,H=8,W=8,O=16,K=3,S=1,P=1,CB=-16", REFUSE),
    ("nchwc-cb-not-dividing-O", "conv2d_nchwc:N=1,C=16,H=8,W=8,O=16,K=3,S=1,P=1,CB=5", REFUSE),
    ("nchwc-act-9", "conv2d_nchwc:N=1,C=16,H=8,W=8,O=16,K=3,S=1,P=1,ACT=9", REFUSE),
    ("nchwc-bias-2", "conv2d_nchwc:N=1,C=16,H=8,W=8,O=16,K=3,S=1,P=1,BIAS=2", REFUSE),
    ("nchwc-res-negative", "conv2d_nchwc:N=1,C=16,H=8,W=8,O=16,K=3,S=1,P=1,RES=-1", REFUSE),
    ("nchwc-ib-negative", "conv2d_nchwc:N=1,C=16,H=8,W=8,O=16,K=3,S=1,P=1,IB=-4", REFUSE),
    ("bias-relu-groups", "conv2d_bias_relu:N=1,C=4,H=8,W=8,O=4,K=3,S=1,P=0,G=3", REFUSE),
    ("depthwise-kernel-larger", "depthwise_conv2d:N=1,C=4,H=2,W=2,K=5,S=1,P=0", REFUSE),
    ("depthwise-nchwc-cb-0", "depthwise_conv2d_nchwc:N=1,C=16,H=8,W=8,K=3,S=1,P=1,CB=0", REFUSE),
    ("depthwise-nchwc-c-not-multiple",
     "depthwise_conv2d_nchwc:N=1,C=20,H=8,W=8,K=3,S=1,P=1,CB=16", REFUSE),
    ("maxpool-kernel-larger", "max_pool2d:N=1,C=1,H=4,W=4,K=5,S=1,P=0", REFUSE),
    ("avgpool-kernel-0", "avg_pool2d:N=1,C=1,H=4,W=4,K=0,S=1,P=0", REFUSE),
    ("dense-product", "dense:B=1048576,I=1048576,O=1", REFUSE),
    ("dense-wb-negative", "dense:B=1,I=8,O=8,WB=-3", REFUSE),
    ("batch-matmul-product", "batch_matmul:B=1048576,M=1048576,N=1,K=1", REFUSE),
    ("softmax-zero", "softmax:M=0,N=4", REFUSE),
    ("softmax-product", "softmax:M=1048576,N=1048576", REFUSE),
    ("bias-add-key-cap", "bias_add:M=1,N=1048577", REFUSE),
    ("add-negative", "add:M=-1,N=-1", REFUSE),
    ("relu-2^32", "relu:M=1048576,N=4096", REFUSE),
    ("blur-empty-output", "blur2d:H=2,W=2,separate=0", REFUSE),
    ("blur-separate-7", "blur2d:H=8,W=8,separate=7", REFUSE),
    ("blur-missing-key", "blur2d:H=8,W=8", REFUSE),
    ("blur-product", "blur2d:H=1048576,W=1048576,separate=1", REFUSE),
    ("unknown-op", "nosuchop:M=8", REFUSE),
    ("space-in-op", "mat mul:M=8,N=8,K=8", REFUSE),
    ("unicode-op", "m\u00e4tmul:M=8,N=8,K=8", REFUSE),
    ("control-char", "matmul:M=\x01,N=8,K=8", REFUSE),
    ("escape-sequence", "matmul:M=8,N=8,K=\x1b[31m8", REFUSE),
    ("double-comma", "matmul:M=8,,N=8,K=8", REFUSE),
    ("trailing-comma", "matmul:M=8,N=8,K=8,", REFUSE),
    ("empty-key", "matmul:=8,N=8,K=8", REFUSE),
    ("newline-inside", "matmul:M=8\nN=8,K=8", REFUSE),
    ("trailing-newline", "matmul:M=8,N=8,K=8\n", REFUSE),
    ("100k-chars", "matmul:M=8,N=8,K=8" + ",X=1" * 25000, REFUSE),
    ("many-duplicates", "matmul:" + "M=8," * 30000 + "N=8,K=8", REFUSE),
]

# Workloads that are odd but well defined: the command may run them (0) or refuse them (2).
ODD_WORKLOADS = [
    ("plus-sign", "matmul:M=+8,N=8,K=8"),
    ("leading-space", "matmul:M= 8,N=8,K=8"),
    ("keys-reordered", "matmul:K=8,N=8,M=8"),
    ("maxpool-pad-over-kernel", "max_pool2d:N=1,C=1,H=4,W=4,K=2,S=1,P=3"),
    ("nchwc-ib-3", "conv2d_nchwc:N=1,C=16,H=8,W=8,O=16,K=3,S=1,P=1,IB=3"),
    ("conv-stride-huge", "conv2d:N=1,C=3,H=8,W=8,O=4,K=3,S=1048576,P=0"),
    ("key-cap", "softmax:M=1,N=1048576"),
]

BAD_STRATEGIES = [
    ("open-paren", "("),
    ("close-paren", ")"),
    ("unbalanced", "((id)"),
    ("extra-close", "id)"),
    ("semicolon", ";"),
    ("trailing-semicolon", "id ;"),
    ("leading-semicolon", "; id"),
    ("split-open", "split("),
    ("split-one-arg", "split(i)"),
    ("split-empty-factor", "split(i,)"),
    ("split-unclosed", "split(i, 4"),
    ("split-word-factor", "split(i, four)"),
    ("split-0", "split(i, 0)"),
    ("split-negative", "split(i, -4)"),
    ("split-2^63", "split(i, 9223372036854775808)"),
    ("split-1e309", "split(i, 1e309)"),
    ("split-float", "split(i, 2.5)"),
    ("split-unknown-loop", "split(q, 4)"),
    ("split-twice-same", "split(i, 4) ; split(i, 4)"),
    ("split-minus-only", "split(i, -)"),
    ("reorder-one-unknown", "reorder(q)"),
    ("reorder-duplicate", "reorder(i, i)"),
    ("reorder-65", "reorder(" + ", ".join(["i"] * 65) + ")"),
    ("vectorize-reduction", "vectorize(k)"),
    ("parallel-reduction", "parallel(k)"),
    ("unroll-unknown", "unroll(q)"),
    ("vectorize-two", "vectorize(i, j)"),
    ("fuse-one", "fuse(i)"),
    ("tile-zero", "tile(i, j, 0, 0)"),
    ("tile-negative", "tile(i, j, -1, 4)"),
    ("tile-three", "tile(i, j, k, 4, 4, 4)"),
    ("tile-nd-mismatch", "tile_nd(i, j, k, 4, 4)"),
    ("tile-nd-size-first", "tile_nd(4, i)"),
    ("pack-2^30", "pack(B, 1, 1073741824)"),
    ("pack-dim-99", "pack(B, 99, 4)"),
    ("pack-dim-negative", "pack(B, -1, 4)"),
    ("pack-unknown-buffer", "pack(Z, 1, 4)"),
    ("pack-factor-0", "pack(B, 1, 0)"),
    ("merge-dims-99", "merge_dims(B, 99)"),
    ("merge-dims-negative", "merge_dims(B, -1)"),
    ("prefetch-unknown-loop", "prefetch(A, q, 4)"),
    ("cache-write-layout-huge", "cache_write(C, k, 9223372036854775807)"),
    ("cache-write-layout-99", "cache_write(C, i, 99, 99, 99)"),
    ("cache-read-unknown", "cache_read(Z, k)"),
    ("compute-at-unknown-loop", "compute_at(C, q)"),
    ("compute-inline-placeholder", "compute_inline(A)"),
    ("drop-init-unknown", "drop_init(Q)"),
    ("rfactor-unknown", "rfactor(C, q)"),
    ("gather-17-loops", "gather(A, " + ", ".join(["i", "j", "k"] * 6)[:-3] + ")"),
    ("loop-location-huge", "split(@loop(99999999999), 4)"),
    ("loop-location-negative", "split(@loop(-1), 4)"),
    ("loop-location-2^63", "split(@loop(C, 9223372036854775808), 4)"),
    ("unknown-location", "split(@nowhere, 4)"),
    ("innermost-unknown-stage", "split(@innermost(ZZ), 4)"),
    ("fail", "fail"),
    ("unknown-rule", "frobnicate(i)"),
    ("repeat-4-deep", "repeat(repeat(repeat(repeat(id))))"),
    ("nested-300-repeat", "repeat(" * 300 + "id" + ")" * 300),
    ("nested-300-parens", "(" * 300 + "id" + ")" * 300),
    ("nested-50000-parens", "(" * 50000 + "id" + ")" * 50000),
    ("split-chain-fails", " ; ".join(["split(i, 1)"] * 5000)),
    ("escape-sequence", "split(i, 4) \x1b[31m"),
    ("unicode-rule", "\u00fcnroll(i)"),
    ("newline-in-text", "split(i, 4)\n;\nfrob(j)"),
    ("unroll-128-cubed", "unroll(k) ; unroll(j) ; unroll(i)"),  # applies: the compiler limits
]
# Strategies that are valid: the command runs them (0) or refuses them in one line (2).
ODD_STRATEGIES = [
    ("empty", ""),
    ("spaces", "   \t  "),
    ("split-2^31", "split(i, 2147483648)"),
    ("split-2^63-1", "split(i, 9223372036854775807)"),
    ("split-1", "split(i, 1)"),
    ("try-fail", "try(fail)"),
    ("repeat-id", "repeat(id)"),
    ("reorder-k-first", "reorder(k, i, j)"),
    ("tabs-and-newlines", "split(i,\t4)\n;\nvectorize(j)"),
    ("25000-ids", " ; ".join(["id"] * 25000)),
    ("nested-200-parens", "(" * 200 + "id" + ")" * 200),
    ("rfactor", "rfactor(C, k)"),
    ("prefetch-2^31", "prefetch(A, k, 2147483648)"),
    ("prefetch-negative", "prefetch(A, k, -1)"),
    ("prefetch-2^63-1", "prefetch(A, k, 9223372036854775807)"),
    ("repeat-split", "repeat(split(@innermost, 2))"),
    ("fuse-reduction", "fuse(j, k)"),
]

GARBAGE = random.Random(30).randbytes(4096) if hasattr(random.Random, "randbytes") else bytes(
    random.Random(30).getrandbits(8) for _ in range(4096))
NAME_WITH_NEWLINE = "new\nline"
LONG_NAME = "n" * 300


def generic_file_variants(ext, huge_ok=True):
    """(label, files, path, extra probe keywords) of bad files for a file argument of the
    command: what a careless user passes where a file of kind `ext` is wanted."""
    v = [
        ("missing", {}, "missing" + ext, {}),
        ("missing-folder", {}, "nope/x" + ext, {}),
        ("directory", {"d" + ext: f_dir}, "d" + ext, {}),
        ("empty", {"e" + ext: f_bytes(b"")}, "e" + ext, {}),
        ("text", {"t" + ext: f_bytes(b"hello, I am not what you think\n")}, "t" + ext, {}),
        ("random-bytes", {"r" + ext: f_bytes(GARBAGE)}, "r" + ext, {}),
        ("nul-bytes", {"z" + ext: f_bytes(b"\0" * 1000)}, "z" + ext, {}),
        ("fifo", {"f" + ext: f_fifo}, "f" + ext, {"timeout": 20}),
        ("dangling-symlink", {"s" + ext: f_symlink("nowhere" + ext)}, "s" + ext, {}),
        ("symlink-loop", {"l" + ext: f_symlink("l" + ext)}, "l" + ext, {}),
        ("name-too-long", {}, LONG_NAME + ext, {}),
        ("name-with-newline", {}, NAME_WITH_NEWLINE + ext, {}),
        ("empty-name", {}, "", {}),
    ]
    files = {}
    null = dev("null", files)
    v.append(("dev-null", dict(files), null, {}))
    if huge_ok:
        files = {}
        zero = dev("zero", files)
        v.append(("dev-zero", files, zero, {"timeout": 30, "rlimit_as": 4 * GIB}))
    return v


def workload_parses(text):
    """Whether tessera's parse_workload (ops/workload.cpp) reads the text: op:key=value,... with
    integer values, no key twice. The `db` queries look records up by such text without
    checking that the operator exists or that its keys are right: for them a workload that
    parses but names nothing is "no record" (db best: exit 1; db list: nothing listed)."""
    op, colon, rest = text.partition(":")
    if not colon or not op or not re.fullmatch(r"[A-Za-z0-9_]+", op) or not rest:
        return False
    keys = set()
    for item in rest.split(","):
        key, eq, value = item.partition("=")
        if not eq or not key or key in keys:
            return False
        keys.add(key)
        if not re.fullmatch(r"[ \t\n\v\f\r]*[+-]?[0-9]+", value):
            return False
        if not -2**63 <= int(value) < 2**63:
            return False
    return True


def add_workload_probes(b: Builder):
    """Every bad workload to every command that takes one."""
    for label, text, expect in BAD_WORKLOADS:
        b.add(f"run/workload/{label}", ["run", text], expect=expect)
        b.add(f"measure/workload/{label}", ["measure", text, "--no-db"], expect=expect)
        b.add(f"tune/workload/{label}", ["tune", text, "--trials", "1", "--db", "t.db"],
              expect=expect)
        b.add(f"bench/workload/{label}", ["bench", text, "--db", "good.db"],
              files={"good.db": f_copy("good.db")}, expect=expect)
        parses = workload_parses(text)
        b.add(f"db best/workload/{label}", ["db", "best", text, "--db", "good.db"],
              files={"good.db": f_copy("good.db")},
              expect=frozenset({1, 2}) if parses else expect)
        b.add(f"db list/workload/{label}", ["db", "list", "-w", text, "--db", "good.db"],
              files={"good.db": f_copy("good.db")},
              expect=EITHER if parses or text == "" else expect,
              note="-w '' is no filter" if text == "" else "")
        if "\n" not in text:  # a task list line holds no newline
            b.add(f"tune-all/workload/{label}", ["tune-all", "tasks.txt", "--trials", "1",
                                                 "--db", "t.db"],
                  files={"tasks.txt": f_bytes(("conv " + (text or "''") + "\n").encode())},
                  expect=expect)
    for label, text in ODD_WORKLOADS:
        b.add(f"run/odd-workload/{label}", ["run", text, "--repeat", "1", "--no-check"],
              expect=EITHER)
        b.add(f"db best/odd-workload/{label}", ["db", "best", text, "--db", "good.db"],
              files={"good.db": f_copy("good.db")}, expect=frozenset({0, 1, 2}),
              note="exit 1: no record of it")


def add_strategy_probes(b: Builder):
    for label, text in BAD_STRATEGIES:
        heavy = label == "unroll-128-cubed"
        w = "matmul:M=128,N=128,K=128" if heavy else W64
        kw = dict(timeout=200, slow=True, expect=frozenset({0, 1, 2})) if heavy else {}
        b.add(f"run/strategy/{label}", ["run", w, "-s", text, "--repeat", "1"], **kw)
        b.add(f"measure/strategy/{label}", ["measure", w, "-s", text, "--no-db", "--repeat", "1",
                                            "--build-timeout", "150" if heavy else "30"], **kw)
        b.add(f"run/strategy-file/{label}", ["run", w, "--strategy-file", "s.txt", "--repeat",
                                             "1"],
              files={"s.txt": f_bytes(text.encode())}, **kw)
    for label, text in ODD_STRATEGIES:
        b.add(f"run/odd-strategy/{label}", ["run", W64, "-s", text, "--repeat", "1"],
              expect=EITHER)
        b.add(f"measure/odd-strategy/{label}", ["measure", W64, "-s", text, "--no-db",
                                                "--repeat", "1"], expect=EITHER)
    # Strategy files
    for label, files, path, kw in generic_file_variants(".txt"):
        expect = EITHER if label in ("empty", "dev-null") else REFUSE
        if label == "empty-name":
            expect = EITHER  # --strategy-file '' is no strategy file
        b.add(f"run/strategy-file-path/{label}", ["run", W64, "--strategy-file", path,
                                                  "--repeat", "1"],
              files=files, expect=expect, **kw)
    big = ("(" * 200000 + "id" + ")" * 200000).encode()
    b.add("run/strategy-file/nested-200000", ["run", W64, "--strategy-file", "s.txt"],
          files={"s.txt": f_bytes(big)})
    b.add("run/strategy-file/200000-ids", ["run", W64, "--strategy-file", "s.txt", "--repeat",
                                           "1"],
          files={"s.txt": f_bytes(" ; ".join(["id"] * 200000).encode())}, expect=EITHER,
          slow=True)
    b.add("run/strategy-file/nul-inside", ["run", W64, "--strategy-file", "s.txt"],
          files={"s.txt": f_bytes(b"split(i, 4)\0; vectorize(j)")})
    b.add("run/strategy-file/crlf", ["run", W64, "--strategy-file", "s.txt", "--repeat", "1"],
          files={"s.txt": f_bytes(b"split(i, 4) ;\r\nvectorize(i.inner)\r\n")}, expect=EITHER)
    b.add("run/strategy-file/readonly-folder", ["run", W64, "--strategy-file", "ro/s.txt",
                                                "--repeat", "1"],
          files={"ro": f_readonly_dir([("s.txt", f_bytes(b"split(i, 4)"))])}, expect=OK)
    b.add("run/strategy-and-file", ["run", W64, "-s", "id", "--strategy-file", "s.txt"],
          files={"s.txt": f_bytes(b"id")})
    b.add("measure/strategy/with-db-inapplicable", ["measure", W64, "-s", "vectorize(k)", "--db",
                                                    "good.db"],
          files={"good.db": f_copy("good.db")}, mutable_db=["good.db"], mutable_on=EITHER,
          note="an inapplicable strategy is recorded (the tuner learns from it) and refused")


def with_option(base, option, values):
    """base argv with `option` set to values (replacing a value the base gives it)."""
    argv = list(base)
    if option in argv:
        i = argv.index(option)
        del argv[i:i + 2]
    return argv + [option] + list(values)


def add_number_probes(b: Builder):
    ints_bad = [("-1", "-1"), ("nan", "nan"), ("inf", "inf"), ("1e309", "1e309"),
                ("2^31", "2147483648"), ("2^63", "9223372036854775808"),
                ("2^64", "18446744073709551616"), ("word", "abc"), ("empty", ""),
                ("fraction", "1.5"), ("trailing-space", "3 "), ("double-dash", "--"),
                ("minus-inf", "-inf")]
    threads = ints_bad + [("99999", "99999"), ("1025", "1025"), ("2^31-1", "2147483647")]
    positive = ints_bad + [("zero", "0"), ("minus-zero", "-0")]
    odd_threads = [("1024", "1024"), ("hex", "0x2"), ("exponent", "1e1"), ("leading-space", " 2")]

    cmd_threads = {
        "run": ["run", W, "--repeat", "1"],
        "measure": ["measure", W, "--no-db", "--repeat", "1"],
        "tune": ["tune", W, "--trials", "1", "--db", "t.db"],
        "bench": ["bench", W, "--db", "good.db", "--rounds", "1", "--repeat", "1"],
        "run-model": ["run-model", "tiny.onnx", "--repeat", "1"],
        "run-model-so": ["run-model", "tiny.so", "--repeat", "1"],
        "tune-all": ["tune-all", "tasks.txt", "--trials", "1", "--db", "t.db"],
        "compile": ["compile", "conv.onnx", "-o", "out.so", "--trials", "0"],
    }
    files_for = {
        "bench": {"good.db": f_copy("good.db")},
        "run-model": {"tiny.onnx": f_copy("tiny.onnx")},
        "run-model-so": {"tiny.so": f_copy("tiny.so")},
        "tune-all": {"tasks.txt": f_bytes(f"a {W}\n".encode())},
        "compile": {"conv.onnx": f_copy("conv.onnx")},
    }
    for cmd, base in cmd_threads.items():
        for label, value in threads:
            b.add(f"{cmd}/threads/{label}", with_option(base, "--threads", [value]),
                  files=files_for.get(cmd, {}))
        for label, value in odd_threads:
            slow = cmd in ("tune", "tune-all")
            b.add(f"{cmd}/odd-threads/{label}", with_option(base, "--threads", [value]),
                  files=files_for.get(cmd, {}), expect=EITHER, slow=slow,
                  timeout=120 if slow else 60)

    options = {
        # command: [(option, bad values, base argv)]
        "run": [("--repeat", positive),
                ("--seed", [x for x in ints_bad if x[0] not in ("2^31", "2^63")]
                 + [("2^64+1", "18446744073709551617")])],
        "measure": [("--repeat", positive), ("--number", positive),
                    ("--min-repeat-ms", ints_bad[:1] + [("nan", "nan"), ("word", "abc"),
                                                        ("empty", ""), ("-inf", "-inf")]),
                    ("--timeout", ints_bad[:1] + [("nan", "nan"), ("zero", "0"), ("word", "x"),
                                                  ("empty", ""), ("-1e309", "-1e309")]),
                    ("--build-timeout", [("-1", "-1"), ("nan", "nan"), ("zero", "0"),
                                         ("word", "x"), ("-inf", "-inf")])],
        "tune": [("--trials", positive), ("--batch", positive),
                 ("--retime", [("-1", "-1"), ("1001", "1001"), ("nan", "nan"), ("2^63",
                                                                                 "9223372036854775808")]),
                 ("--retime-rounds", [("zero", "0"), ("-1", "-1"), ("1001", "1001"),
                                      ("word", "x")]),
                 ("--transfer-n0", [("zero", "0"), ("-1", "-1"), ("nan", "nan"), ("word", "x")]),
                 ("--transfer-epsilon", [("-0.1", "-0.1"), ("1.1", "1.1"), ("word", "x"),
                                         ("1e309", "1e309")]),
                 ("--seed", [("-1", "-1"), ("2^64", "18446744073709551616"), ("word", "x")]),
                 ("--tuner", [("unknown", "bogus"), ("empty", "")]),
                 ("--features", [("unknown", "bogus")]),
                 ("--transfer", [("unknown", "maybe")])],
        "tune-all": [("--trials", positive), ("--batch", positive),
                     ("--task-early-stop", [("-1", "-1"), ("nan", "nan"), ("word", "x"),
                                            ("2^63", "9223372036854775808")]),
                     ("--retime", [("1001", "1001"), ("-1", "-1")]),
                     ("--seed", [("-1", "-1"), ("word", "x")]),
                     ("--tuner", [("unknown", "bogus")])],
        "bench": [("--repeat", positive), ("--rounds", positive)],
        "db list": [("--limit", [("-1", "-1"), ("nan", "nan"), ("word", "x"), ("empty", ""),
                                 ("2^63", "9223372036854775808"), ("1e309", "1e309")])],
        "run-model": [("--repeat", positive), ("--seed", [("-1", "-1"), ("word", "x"),
                                                          ("2^64", "18446744073709551616")]),
                      ("--layout", [("unknown", "nhwc"), ("empty", "")]),
                      ("--conv-algorithm", [("unknown", "winograd2")])],
        "compile": [("--trials", ints_bad), ("--layout", [("unknown", "nhwc")]),
                    ("--conv-algorithm", [("unknown", "fft")]),
                    ("--task-early-stop", [("-1", "-1")])],
    }
    bases = dict(cmd_threads)
    bases["db list"] = ["db", "list", "--db", "good.db"]
    files_for["db list"] = {"good.db": f_copy("good.db")}
    for cmd, opts in options.items():
        for option, values in opts:
            for label, value in values:
                b.add(f"{cmd}/{option.lstrip('-')}/{label}",
                      with_option(bases[cmd], option, [value]),
                      files=files_for.get(cmd, {}))
    # Values that are odd but within range: accepted (0) or refused in one line (2).
    odd = [
        ("measure", "--timeout", "1e309"), ("measure", "--timeout", "inf"),
        ("measure", "--build-timeout", "1e309"), ("measure", "--min-repeat-ms", "0"),
        ("run", "--seed", "18446744073709551615"), ("tune", "--seed", "9223372036854775808"),
        ("tune", "--transfer-epsilon", "nan"), ("tune", "--transfer-n0", "1e309"),
        ("tune", "--transfer-n0", "inf"), ("tune", "--batch", "2147483647"),
        ("db list", "--limit", "9223372036854775807"), ("run-model", "--seed", "0"),
        ("bench", "--rounds", "2147483648"),
    ]
    # Within range but past what can be met: a measurement that fails (1) is a documented answer.
    for option, value in (("--timeout", "1e-300"), ("--min-repeat-ms", "1e309"),
                          ("--build-timeout", "1e-300")):
        b.add(f"measure/odd-{option.lstrip('-')}/{value}",
              with_option(bases["measure"], option, [value]), expect=frozenset({0, 1, 2}))
    for cmd, option, value in odd:
        slow = cmd in ("tune",)
        b.add(f"{cmd}/odd-{option.lstrip('-')}/{value}", with_option(bases[cmd], option, [value]),
              files=files_for.get(cmd, {}), expect=EITHER, slow=slow,
              note="a value in range but odd", timeout=120 if slow else 60)

    # --cpus of measure: CPUs this process may not run on, or not numbers
    ncpu = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    for label, values in [("99", ["99"]), ("-1", ["-1"]), ("word", ["a"]), ("empty", [""]),
                          ("1e309", ["1e309"]), ("2^63", ["9223372036854775808"]),
                          ("one-bad-of-two", ["0", "99"]), ("ncpu", [str(ncpu)]),
                          ("1024", ["1024"]), ("fraction", ["0.5"]), ("2^31", ["2147483648"])]:
        b.add(f"measure/cpus/{label}", ["measure", W, "--no-db", "--repeat", "1", "--cpus"]
              + values)
    b.add("measure/cpus/duplicate", ["measure", W, "--no-db", "--repeat", "1", "--cpus", "0",
                                     "0"], expect=EITHER)


def add_cli_probes(b: Builder):
    """Argument syntax: missing, unknown, repeated, conflicting."""
    cases = [
        ("no-arguments", []),
        ("unknown-command", ["frobnicate"]),
        ("unknown-option", ["--frobnicate"]),
        ("dash", ["-"]),
        ("empty-command", [""]),
        ("newline-command", ["run\nrun"]),
        ("run-no-workload", ["run"]),
        ("run-extra-positional", ["run", W, "extra"]),
        ("run-strategy-no-value", ["run", W, "--strategy"]),
        ("run-unknown-option", ["run", W, "--frobnicate"]),
        ("run-threads-equals-word", ["run", W, "--threads=abc"]),
        ("ops-extra", ["ops", "extra"]),
        ("ops-unknown-option", ["ops", "--frobnicate"]),
        ("db-no-subcommand", ["db"]),
        ("db-unknown-subcommand", ["db", "frobnicate"]),
        ("db-best-no-workload", ["db", "best"]),
        ("db-import-no-file", ["db", "import"]),
        ("db-list-two-dbs", ["db", "list", "--db", "a.db", "--db", "b.db"]),
        ("db-export-two-files", ["db", "export", "a.jsonl", "b.jsonl"]),
        ("measure-no-workload", ["measure"]),
        ("tune-no-workload", ["tune"]),
        ("bench-no-workload", ["bench"]),
        ("tune-all-nothing", ["tune-all"]),
        ("tune-all-unknown-model", ["tune-all", "--model", "resnet9000"]),
        ("tune-all-file-and-model", ["tune-all", "t.txt", "--model", "resnet18-convs"]),
        ("run-model-no-model", ["run-model"]),
        ("compile-no-model", ["compile"]),
        ("compile-two-models", ["compile", "a.onnx", "b.onnx"]),
        ("10000-arguments", ["run", W] + ["x"] * 10000),
        ("non-utf8-argument", [b"run", b"matmul:M=\xff\xfe,N=8,K=8"]),
        ("non-utf8-command", [b"\xff\xfe"]),
        ("help-then-garbage", ["run", "--help", "--frobnicate"]),
    ]
    for label, args in cases:
        expect = EITHER if label == "help-then-garbage" else REFUSE
        b.add(f"{(args[0] if args and isinstance(args[0], str) and args[0] in KNOWN_COMMANDS else 'top')}"
              f"/syntax/{label}", args, expect=expect)
    b.add("ops/plain", ["ops"], expect=OK)
    b.add("ops/graph", ["ops", "--graph"], expect=OK)
    b.add("top/help", ["--help"], expect=OK)
    b.add("run/flag-twice", ["run", W, "--json", "--json", "--repeat", "1"], expect=EITHER)
    b.add("run/isa-unknown", ["run", W], env={"TESSERA_ISA": "bogus"})
    b.add("run/isa-empty", ["run", W, "--repeat", "1"], env={"TESSERA_ISA": ""}, expect=EITHER)


def records_db_variants(fx: Path):
    """Damaged and foreign records DBs: (label, maker, expect for reading commands)."""
    good = (fx / "good.db").read_bytes()
    v = []
    for label, data in [("empty", b""), ("text", b"not a database\n"), ("random-bytes", GARBAGE),
                        ("sqlite-header-only", b"SQLite format 3\0" + b"\0" * 84),
                        ("sqlite-header-garbage", b"SQLite format 3\0" + GARBAGE),
                        ("truncated-99", good[:99]), ("truncated-1-page", good[:4096]),
                        ("truncated-half", good[: len(good) // 2]),
                        ("truncated-last-byte", good[:-1]), ("jsonl", b'{"workload": 1}\n')]:
        # One byte short of its last page: SQLite's own check passes, reading it is as right
        # as refusing it.
        v.append((label, f_bytes(data), EITHER if label == "truncated-last-byte" else REFUSE))
    # Bit flips: SQLite may or may not notice one in unused space; never a crash or a change.
    for offset in (16, 18, 21, 24, 28, 44, 56, 60, 100, 101, 105, 4096, 4096 + 8, 8192 + 100,
                   len(good) - 100):
        if offset < len(good):
            data = bytearray(good)
            data[offset] ^= 0xFF
            v.append((f"bitflip-{offset}", f_bytes(bytes(data)), EITHER))
    for label in ("foreign", "foreign-with-rows", "newer-schema", "other-application-id",
                  "damaged-rows", "damaged-pick", "schema-1"):
        if (fx / f"{label}.db").exists():
            expect = EITHER if label in ("damaged-rows", "damaged-pick", "schema-1") else REFUSE
            v.append((label, f_copy(f"{label}.db"), expect))
    v.append(("directory", f_dir, REFUSE))
    v.append(("fifo", f_fifo, REFUSE))
    return v


def add_db_probes(b: Builder, fx: Path):
    variants = records_db_variants(fx)
    readers = {
        "db list": lambda p: ["db", "list", "--db", p],
        "db best": lambda p: ["db", "best", W, "--db", p],
        "db export": lambda p: ["db", "export", "--db", p],
        "db stats": lambda p: ["db", "stats", "--db", p],
        "bench": lambda p: ["bench", W, "--db", p, "--rounds", "1", "--repeat", "1"],
    }
    writers = {
        "db import": lambda p: ["db", "import", "good.jsonl", "--db", p],
        "measure": lambda p: ["measure", W, "--db", p, "--repeat", "1"],
        "tune": lambda p: ["tune", W, "--trials", "1", "--db", p, "--retime", "0"],
        "tune-all": lambda p: ["tune-all", "tasks.txt", "--trials", "1", "--db", p, "--retime",
                               "0"],
        "run-model": lambda p: ["run-model", "tiny.onnx", "--db", p, "--repeat", "1"],
        "compile": lambda p: ["compile", "conv.onnx", "--trials", "1", "--db", p, "--retime",
                              "0"],
        "compile -o": lambda p: ["compile", "conv.onnx", "-o", "out.so", "--trials", "0", "--db",
                                 p],
    }
    common = {"good.jsonl": f_copy("good.jsonl"), "tasks.txt": f_bytes(f"{W}\n".encode()),
              "tiny.onnx": f_copy("tiny.onnx"), "conv.onnx": f_copy("conv.onnx")}
    for label, maker, expect in variants:
        fifo = label == "fifo"
        for cmd, argv in list(readers.items()) + list(writers.items()):
            writes = cmd in writers
            e = expect
            if label == "empty" and writes:
                e = EITHER  # what SQLite itself creates before the first write
            if label in ("damaged-rows", "damaged-pick", "schema-1"):
                # One bad row is skipped, never fatal (issue 30); a DB without a usable record of
                # W is refused by bench (2) and answered 1 by db best.
                e = frozenset({0, 1}) if cmd == "db best" else OK
            elif e == EITHER and cmd == "db best":
                e = frozenset({0, 1, 2})
            slow = cmd in ("tune", "tune-all", "compile") and e != REFUSE
            b.add(f"{cmd}/db-file/{label}", argv("x.db"), files=dict(common, **{"x.db": maker}),
                  expect=e, mutable_db=["x.db"] if writes and e != REFUSE else (),
                  volatile=["x.db-wal", "x.db-shm"],
                  timeout=20 if fifo else (120 if slow else 60), slow=slow)
    # Paths that keep nothing or lead nowhere
    for label, path, expect in [("empty-path", "", REFUSE), ("memory", ":memory:", REFUSE),
                                ("uri", "file:x.db", REFUSE), ("uri-memory", "file::memory:",
                                                               REFUSE),
                                ("missing", "missing.db", REFUSE),
                                ("missing-folder", "nope/x.db", REFUSE),
                                ("name-too-long", LONG_NAME + ".db", REFUSE),
                                ("newline-name", NAME_WITH_NEWLINE + ".db", REFUSE)]:
        for cmd, argv in list(readers.items()) + list(writers.items()):
            e = expect
            if label in ("missing", "newline-name") and cmd in writers:
                e = EITHER  # a writer creates a missing DB
            if label in ("missing", "missing-folder") and cmd in ("run-model", "compile -o"):
                e = EITHER  # they only read records: no DB, no records
            if label == "empty-path" and cmd == "run-model":
                e = EITHER  # --db '' is run-model's default: no records DB
            slow = cmd in ("tune", "tune-all", "compile") and e != REFUSE
            b.add(f"{cmd}/db-path/{label}", argv(path), files=dict(common), expect=e,
                  slow=slow, timeout=120 if slow else 60)
    # A records DB behind a symbolic link, a hard link, and one named like an option
    for cmd, argv in readers.items():
        e = frozenset({0, 1}) if cmd == "db best" else OK
        b.add(f"{cmd}/db-path/symlink", argv("link.db"),
              files={"good.db": f_copy("good.db"), "link.db": f_symlink("good.db")}, expect=e)
        b.add(f"{cmd}/db-path/dash-name", argv("-x.db"), files={"-x.db": f_copy("good.db")},
              expect=frozenset({0, 1, 2}))
    for label in ("null", "zero", "full"):
        files = dict(common)
        path = dev(label, files)
        for cmd, argv in list(readers.items()) + list(writers.items()):
            b.add(f"{cmd}/db-path/dev-{label}", argv(path), files=dict(files),
                  **({"timeout": 30, "rlimit_as": 4 * GIB} if label == "zero" else {}))
    # A healthy DB in a read-only folder is not "corrupt"; reading it may work or be refused.
    for cmd, argv in readers.items():
        b.add(f"{cmd}/db-path/readonly-folder", argv("ro/good.db"),
              files={"ro": f_readonly_dir([("good.db", f_copy("good.db"))])},
              expect=EITHER, forbid="corrupt")
    for cmd in ("db import", "measure"):
        b.add(f"{cmd}/db-path/readonly-folder", writers[cmd]("ro/good.db"),
              files=dict(common, ro=f_readonly_dir([("good.db", f_copy("good.db"))])),
              expect=REFUSE, forbid="corrupt")
    # WAL and SHM files beside a healthy DB: SQLite rewrites or drops them (an invalid WAL holds
    # nothing committed), the DB itself must keep every result.
    for cmd, argv in list(readers.items()) + [("db import", writers["db import"]),
                                              ("measure", writers["measure"])]:
        e = frozenset({0, 2}) if cmd != "db best" else frozenset({0, 1, 2})
        for side, data in (("wal", GARBAGE), ("shm", GARBAGE[:4096])):
            b.add(f"{cmd}/db-file/garbage-{side}", argv("x.db"),
                  files=dict(common, **{"x.db": f_copy("good.db"), "x.db-" + side: f_bytes(data)}),
                  expect=e, mutable_db=["x.db"] if cmd in writers else (),
                  volatile=["x.db-wal", "x.db-shm"])
    # Healthy DB: these succeed (controls: the checks themselves work)
    b.add("db list/db-file/good", ["db", "list", "--db", "good.db"],
          files={"good.db": f_copy("good.db")}, expect=OK)
    b.add("db best/db-file/good", ["db", "best", W, "--db", "good.db"],
          files={"good.db": f_copy("good.db")}, expect=OK)
    b.add("db best/db-file/symlink", ["db", "best", W, "--db", "link.db"],
          files={"good.db": f_copy("good.db"), "link.db": f_symlink("good.db")}, expect=OK)
    b.add("db best/no-record", ["db", "best", "matmul:M=9,N=9,K=9", "--db", "good.db"],
          files={"good.db": f_copy("good.db")}, expect=frozenset({1}),
          note="documented: exit 1 when there is no record")
    b.add("bench/no-record", ["bench", "matmul:M=9,N=9,K=9", "--db", "good.db"],
          files={"good.db": f_copy("good.db")})
    b.add("bench/default-db-missing", ["bench", W])
    b.add("bench/good", ["bench", W, "--db", "good.db", "--rounds", "1", "--repeat", "1"],
          files={"good.db": f_copy("good.db")}, expect=OK)
    b.add("bench/damaged-strategy", ["bench", W, "--db", "x.db", "--rounds", "1"],
          files={"x.db": f_copy("bad-strategy.db")},
          note="the fastest record's strategy does not parse")
    b.add("tune/default-db-is-a-folder", ["tune", W, "--trials", "1"],
          files={"tessera.db": f_dir})
    b.add("measure/default-db-is-text", ["measure", W], files={"tessera.db": f_bytes(b"x\n")})


def add_import_probes(b: Builder, fx: Path):
    good = json.loads((fx / "good.jsonl").read_text().splitlines()[0])

    def line(**changes):
        j = json.loads(json.dumps(good))
        for k, v in changes.items():
            if v is DELETE:
                j.pop(k, None)
            else:
                j[k] = v
        return json.dumps(j)

    rows = [
        ("not-json", "{"), ("garbage", "garbage"), ("array", "[1, 2]"), ("null", "null"),
        ("string", '"record"'), ("number", "42"), ("empty-object", "{}"),
        ("median-0", line(median=0)), ("median-negative", line(median=-1)),
        ("median-1e309", line(median=1e309) if False else
         json.dumps(good).replace('"median": ' + json.dumps(good["median"]), '"median": 1e309')),
        ("median-string", line(median="fast")), ("median-null", line(median=None)),
        ("flops-negative", line(flops=-1)), ("flops-string", line(flops="many")),
        ("error-kind-unknown", line(error="bogus")), ("workload-empty", line(workload="")),
        ("workload-garbage", line(workload="garbage")),
        ("workload-unknown-op", line(workload="nosuchop:M=8")),
        ("workload-too-large", line(workload="matmul:M=1048576,N=1048576,K=1")),
        ("workload-newline", line(workload="matmul:M=8,N=8,K=8\n")),
        ("workload-number", line(workload=8)),
        ("repeats-not-list", line(repeats="fast")), ("repeats-strings", line(repeats=["a"])),
        ("target-not-object", line(target=[])), ("isa-not-list", line(target=dict(
            good["target"], isa="avx"))),
        ("cores-2^63", json.dumps(good).replace('"cores": %d' % good["target"]["cores"],
                                                '"cores": 9223372036854775808')),
        ("cores-negative", line(target=dict(good["target"], cores=-5))),
        ("timestamp-1e30", line(timestamp_ms=1e30)),
        ("timestamp-string", line(timestamp_ms="now")),
        ("number-negative", line(number=-5)),
        ("schema-version-huge", line(schema_version=2**40)),
        ("deep-nesting", line(message="x")[:-1] + ', "deep": ' + "[" * 100000 + "]" * 100000
         + "}"),
        ("invalid-utf8", None), ("nul-inside", None), ("bom", None),
    ]
    for field in list(good.keys()):
        rows.append((f"missing-{field}", line(**{field: DELETE})))
    content = {}
    for label, text in rows:
        if text is None:
            continue
        content[label] = (text + "\n").encode()
    content["invalid-utf8"] = line(message="x").encode().replace(b'"x"', b'"\xff\xfe"') + b"\n"
    content["nul-inside"] = line(message="x").encode().replace(b'"x"', b'"\0"') + b"\n"
    content["bom"] = b"\xef\xbb\xbf" + (json.dumps(good) + "\n").encode()
    good_line = (json.dumps(good) + "\n").encode()
    for label, data in content.items():
        # Into a fresh DB, and after a good row into good.db: all or nothing.
        # Odd values of fields nothing depends on, an unknown extra field, a byte-order mark:
        # accepting them is as right as refusing them.
        expect = EITHER if label in ("invalid-utf8", "nul-inside", "timestamp-1e30",
                                     "schema-version-huge", "cores-negative", "cores-2^63",
                                     "number-negative", "deep-nesting", "bom") else REFUSE
        b.add(f"db import/row/{label}", ["db", "import", "in.jsonl", "--db", "new.db"],
              files={"in.jsonl": f_bytes(data)}, expect=expect)
        b.add(f"db import/row-after-good/{label}", ["db", "import", "in.jsonl", "--db", "good.db"],
              files={"in.jsonl": f_bytes(good_line + data), "good.db": f_copy("good.db")},
              expect=expect, mutable_db=["good.db"])
    # Whole files
    big_message = line(message="m" * (8 << 20))
    for label, data, expect, kw in [
        ("crlf", good_line.replace(b"\n", b"\r\n"), EITHER, {}),
        ("no-final-newline", good_line[:-1], OK, {}),
        ("blank-lines", b"\n\n  \n" + good_line + b"\n\n", OK, {}),
        ("5000-duplicates", good_line * 5000, OK, {"slow": True}),
        ("8-MB-row", (big_message + "\n").encode(), EITHER, {}),
        ("truncated-row", good_line[: len(good_line) // 2], REFUSE, {}),
        ("one-line-40-MB", b"[" * (40 << 20), REFUSE, {"rlimit_as": 4 * GIB}),
        ("strategy-garbage", (line(strategy="((((") + "\n").encode(), EITHER, {}),
    ]:
        b.add(f"db import/file/{label}", ["db", "import", "in.jsonl", "--db", "new.db"],
              files={"in.jsonl": f_bytes(data)}, expect=expect, **kw)
    for label, files, path, kw in generic_file_variants(".jsonl"):
        expect = REFUSE
        if label in ("empty", "dev-null"):
            expect = EITHER  # nothing to import
        b.add(f"db import/file-path/{label}", ["db", "import", path, "--db", "good.db"],
              files=dict(files, **{"good.db": f_copy("good.db")}), expect=expect,
              mutable_db=["good.db"] if expect != REFUSE else (), **kw)
    b.add("db import/own-db", ["db", "import", "good.db", "--db", "good.db"],
          files={"good.db": f_copy("good.db")})
    b.add("db import/good", ["db", "import", "good.jsonl", "--db", "new.db"],
          files={"good.jsonl": f_copy("good.jsonl")}, expect=OK)


class _Delete:
    pass


DELETE = _Delete()


def output_targets(ext, inputs, kind_other):
    """(label, files, path, expect, extra) for an output argument; `inputs` maps the command's
    input files to their fixtures, `kind_other` is a fixture of a different file kind."""
    first = next(iter(inputs))
    t = [
        ("same-as-input", {}, first, REFUSE, {}),
        ("same-as-input-dot-slash", {}, "./" + first, REFUSE, {}),
        ("same-as-input-via-folder", {"sub": f_dir}, "sub/../" + first, REFUSE, {}),
        ("same-as-input-absolute", {}, "@ABS@/" + first, REFUSE, {}),
        ("symlink-to-input", {"link" + ext: f_symlink(first)}, "link" + ext, REFUSE, {}),
        ("hardlink-to-input", {"hard" + ext: f_hardlink(first)}, "hard" + ext, REFUSE, {}),
        ("directory", {"d" + ext: f_dir}, "d" + ext, REFUSE, {}),
        ("directory-trailing-slash", {"d": f_dir}, "d/", REFUSE, {}),
        ("fifo", {"f" + ext: f_fifo}, "f" + ext, REFUSE, {"timeout": 20}),
        ("missing-folder", {}, "nope/out" + ext, REFUSE, {}),
        ("proc", {}, "/proc/tessera-probe" + ext, REFUSE, {}),
        ("readonly-folder", {"ro": f_readonly_dir()}, "ro/out" + ext, REFUSE, {}),
        ("other-kind", {"other" + ext: f_copy(kind_other)}, "other" + ext, REFUSE, {}),
        ("text-file", {"t" + ext: f_bytes(b"keep me\n")}, "t" + ext, REFUSE, {}),
        ("records-db", {"r" + ext: f_copy("good.db")}, "r" + ext, REFUSE, {}),
        ("name-too-long", {}, LONG_NAME + ext, REFUSE, {}),
        ("full-disk", {}, "out" + ext, REFUSE, {"rlimit_fsize": 64}),
        ("empty-path", {}, "", REFUSE, {}),
    ]
    for name in ("full", "null"):
        files = {}
        path = dev(name, files)
        t.append((f"dev-{name}", files, path, REFUSE, {}))
    return t


def add_output_probes(b: Builder):
    # compile -o
    inputs = {"tiny.onnx": f_copy("tiny.onnx")}
    for label, files, path, expect, kw in output_targets(".so", inputs, "good.jsonl"):
        if label == "records-db":
            continue
        args = ["compile", "tiny.onnx", "-o", path, "--trials", "0"]
        e = expect
        if label == "full-disk":
            e = frozenset({1, 2})  # the linker cannot write: a failed build (1) or bad input (2)
        b.add(f"compile/output/{label}", args, files=dict(inputs, **files), expect=e, **kw)
    b.add("compile/output/same-as-db", ["compile", "tiny.onnx", "-o", "good.db", "--trials",
                                        "0", "--db", "good.db"],
          files={"tiny.onnx": f_copy("tiny.onnx"), "good.db": f_copy("good.db")})
    b.add("compile/output/existing-library", ["compile", "tiny.onnx", "-o", "old.so",
                                              "--trials", "0"],
          files={"tiny.onnx": f_copy("tiny.onnx"), "old.so": f_copy("tiny.so")}, expect=OK)
    # The library replaced by a new one must still be a library: expected to change.
    b.probes[-1].note = "replacing a model library with a model library is allowed"
    b.probes[-1].mutable_db = ["old.so"]
    b.add("compile/output/empty-file", ["compile", "tiny.onnx", "-o", "e.so", "--trials", "0"],
          files={"tiny.onnx": f_copy("tiny.onnx"), "e.so": f_bytes(b"")}, expect=OK)
    b.probes[-1].mutable_db = ["e.so"]
    b.add("compile/output/trials-with-empty-path", ["compile", "conv.onnx", "-o", "", "--trials",
                                                    "1", "--db", "t.db"],
          files={"conv.onnx": f_copy("conv.onnx")}, note="-o '' names no file", timeout=120)
    # run-model --output, for a model.onnx and a model.so
    for model in ("tiny.onnx", "tiny.so"):
        inputs = {model: f_copy(model), "in.npy": f_copy("in.npy")}
        for label, files, path, expect, kw in output_targets(".npy", inputs, "tiny.so" if
                                                             model == "tiny.onnx" else
                                                             "good.jsonl"):
            args = ["run-model", model, "--input", "in.npy", "--output", path, "--repeat", "1"]
            e = expect
            if label == "full-disk" and model.endswith(".onnx"):
                e = frozenset({1, 2})  # its kernels cannot be built either: 1 or 2
            b.add(f"run-model/output-{model.split('.')[1]}/{label}", args,
                  files=dict(inputs, **files), expect=e, **kw)
        b.add(f"run-model/output-{model.split('.')[1]}/same-as-npy-input",
              ["run-model", model, "--input", "in.npy", "--output", "in.npy"],
              files=dict(inputs))
        b.add(f"run-model/output-{model.split('.')[1]}/existing-npy",
              ["run-model", model, "--input", "in.npy", "--output", "old.npy", "--repeat", "1"],
              files=dict(inputs, **{"old.npy": f_copy("in.npy")}), expect=OK)
        b.probes[-1].mutable_db = ["old.npy"]
    b.add("run-model/output-onnx/same-as-db", ["run-model", "tiny.onnx", "--db", "good.db",
                                               "--output", "good.db"],
          files={"tiny.onnx": f_copy("tiny.onnx"), "good.db": f_copy("good.db")})
    # db export FILE
    inputs = {"good.db": f_copy("good.db")}
    for label, files, path, expect, kw in output_targets(".jsonl", inputs, "tiny.so"):
        if label == "records-db":
            continue
        args = ["db", "export", path, "--db", "good.db"]
        if label == "empty-path":
            expect = EITHER  # FILE '' may mean standard output, as no FILE does
        b.add(f"db export/output/{label}", args, files=dict(inputs, **files), expect=expect,
              **kw)
    b.add("db export/output/existing-jsonl", ["db", "export", "old.jsonl", "--db", "good.db"],
          files={"good.db": f_copy("good.db"), "old.jsonl": f_copy("good.jsonl")}, expect=OK)
    b.probes[-1].mutable_db = ["old.jsonl"]
    b.add("db export/output/dash-is-stdout", ["db", "export", "-", "--db", "good.db"],
          files={"good.db": f_copy("good.db")}, expect=OK)


def add_model_probes(b: Builder):
    """Model files for run-model, compile and compile --list-tasks."""
    users = {
        "run-model": lambda p: ["run-model", p, "--repeat", "1"],
        "compile": lambda p: ["compile", p, "--list-tasks"],
        "compile -o": lambda p: ["compile", p, "-o", "out.so", "--trials", "0"],
    }
    for label, files, path, kw in generic_file_variants(".onnx"):
        for cmd, argv in users.items():
            b.add(f"{cmd}/model-path/{label}", argv(path), files=dict(files), **kw)
    tiny = relu_model()
    conv = conv_model()
    crafted = []
    for cut in (1, 2, 5, 10, 20, 40, 60, 83 if len(tiny) > 83 else len(tiny) - 1):
        if cut < len(tiny):
            crafted.append((f"tiny-truncated-{cut}", tiny[:cut], REFUSE))
    for cut in (len(conv) // 4, len(conv) // 2, len(conv) - 10, len(conv) - 1):
        crafted.append((f"conv-truncated-{cut}", conv[:cut], REFUSE))
    rng = random.Random(5)
    for k in range(12):
        data = bytearray(conv)
        at = rng.randrange(len(data))
        data[at] ^= 1 << rng.randrange(8)
        crafted.append((f"conv-bitflip-{k}-at-{at}", bytes(data), EITHER))
    x14 = onnx_value("x", FLOAT, (1, 4))
    y14 = onnx_value("y", FLOAT, (1, 4))
    relu = onnx_node("Relu", ["x"], ["y"], "relu0")
    g = onnx_graph
    crafted += [
        ("no-opset", onnx_model(g([relu], [x14], [y14]), opset=None), REFUSE),
        ("opset-0", onnx_model(g([relu], [x14], [y14]), opset=0), REFUSE),
        ("opset-huge", onnx_model(g([relu], [x14], [y14]), opset=2**62), EITHER),
        ("opset-negative", onnx_model(g([relu], [x14], [y14]), opset=-1), EITHER),
        ("opset-other-domain-only", onnx_model(g([relu], [x14], [y14]), domain="com.x"), REFUSE),
        ("empty-graph", onnx_model(b""), REFUSE),
        ("no-nodes", onnx_model(g([], [x14], [y14])), REFUSE),
        ("no-outputs", onnx_model(g([relu], [x14], [])), REFUSE),
        ("no-inputs", onnx_model(g([relu], [], [y14])), REFUSE),
        ("two-inputs", onnx_model(g([onnx_node("Add", ["x", "x2"], ["y"])],
                                    [x14, onnx_value("x2")], [y14])), EITHER),
        ("output-not-computed", onnx_model(g([relu], [x14], [onnx_value("nothing")])), REFUSE),
        ("input-of-node-missing", onnx_model(g([onnx_node("Relu", ["ghost"], ["y"])], [x14],
                                               [y14])), REFUSE),
        ("cycle", onnx_model(g([onnx_node("Add", ["x", "b"], ["a"]),
                                onnx_node("Relu", ["a"], ["b"])], [x14],
                               [onnx_value("b")])), REFUSE),
        ("self-loop", onnx_model(g([onnx_node("Relu", ["y"], ["y"])], [x14], [y14])), REFUSE),
        ("two-writers", onnx_model(g([relu, onnx_node("Relu", ["x"], ["y"], "relu1")], [x14],
                                     [y14])), EITHER),
        ("unknown-op", onnx_model(g([onnx_node("FooBar", ["x"], ["y"])], [x14], [y14])), REFUSE),
        ("foreign-domain", onnx_model(g([onnx_node("Relu", ["x"], ["y"], domain="com.ms")],
                                        [x14], [y14])), REFUSE),
        ("op-name-empty", onnx_model(g([onnx_node("", ["x"], ["y"])], [x14], [y14])), REFUSE),
        ("input-dynamic-dim", relu_model(shape=("batch", 4)), REFUSE),
        ("input-dim-0", relu_model(shape=(0, 4)), REFUSE),
        ("input-dim-negative", relu_model(shape=(-5, 4)), REFUSE),
        ("input-no-shape", relu_model(shape=None), REFUSE),
        ("input-rank-0", relu_model(shape=()), EITHER),
        ("input-rank-64", relu_model(shape=(1,) * 64), EITHER),
        ("input-string", relu_model(elem=STRING), REFUSE),
        ("input-double", relu_model(elem=DOUBLE), REFUSE),
        ("input-int-into-relu", relu_model(elem=INT64), REFUSE),
        ("input-2^31-elements", relu_model(shape=(65536, 32768)), REFUSE),
        ("input-2^62-dims", relu_model(shape=(2**62, 2**62)), REFUSE),
        ("input-2^63-1", relu_model(shape=(2**63 - 1,)), REFUSE),
        ("init-raw-short", one_node_model("Add", ["x", "c"], initializers=[
            onnx_tensor("c", [1, 4], raw=b"\0" * 7)]), REFUSE),
        ("init-floats-short", one_node_model("Add", ["x", "c"], initializers=[
            onnx_tensor("c", [1, 4], floats=[1.0])]), REFUSE),
        ("init-dtype-string", one_node_model("Add", ["x", "c"], initializers=[
            onnx_tensor("c", [1, 4], raw=b"\0" * 16, dtype=STRING)]), REFUSE),
        ("init-dtype-99", one_node_model("Add", ["x", "c"], initializers=[
            onnx_tensor("c", [1, 4], raw=b"\0" * 16, dtype=99)]), REFUSE),
        ("init-dims-negative", one_node_model("Add", ["x", "c"], initializers=[
            onnx_tensor("c", [-1, -1], floats=[1.0])]), REFUSE),
        ("init-dims-wrap-to-0", one_node_model("Add", ["x", "c"], initializers=[
            onnx_tensor("c", [2**32, 2**32], raw=b"")]), REFUSE),
        ("init-dims-wrap-reduce", one_node_model(
            "ReduceSum", ["c"], [attr_int("keepdims", 0)], initializers=[
                onnx_tensor("c", [2**32, 2**32], raw=b"")], y_shape=()), REFUSE),
        ("init-dims-wrap-gather", onnx_model(g(
            [onnx_node("Gather", ["c", "ids"], ["y"])], [onnx_value("ids", INT64, (1, 3))],
            [onnx_value("y", FLOAT, (1, 3, 4))],
            [onnx_tensor("c", [2**32, 2**32, 4], raw=b"")])), REFUSE),
        ("external-absolute", one_node_model("Add", ["x", "c"], initializers=[
            onnx_tensor("c", [1, 4], external=[("location", "/etc/passwd")])]), REFUSE),
        ("external-dotdot", one_node_model("Add", ["x", "c"], initializers=[
            onnx_tensor("c", [1, 4], external=[("location", "../w.bin")])]), REFUSE),
        ("external-missing", one_node_model("Add", ["x", "c"], initializers=[
            onnx_tensor("c", [1, 4], external=[("location", "w.bin")])]), REFUSE),
        ("external-no-location", one_node_model("Add", ["x", "c"], initializers=[
            onnx_tensor("c", [1, 4], external=[("offset", "0")])]), REFUSE),
        ("external-offset-word", one_node_model("Add", ["x", "c"], initializers=[
            onnx_tensor("c", [1, 4], external=[("location", "w.bin"), ("offset", "abc")])]),
         REFUSE),
        ("external-offset-2^63", one_node_model("Add", ["x", "c"], initializers=[
            onnx_tensor("c", [1, 4], external=[("location", "w.bin"),
                                               ("offset", "9223372036854775807"),
                                               ("length", "16")])]), REFUSE),
        ("conv-weights-wrong-rank", one_node_model("Conv", ["x", "w"], initializers=[
            onnx_tensor("w", [8, 4], floats=[0.0] * 32)], x_shape=(1, 4, 8, 8),
            y_shape=(1, 8, 8, 8)), REFUSE),
        ("conv-group-0", one_node_model("Conv", ["x", "w"], [attr_int("group", 0)],
                                        [onnx_tensor("w", [8, 4, 3, 3], floats=[0.0] * 288)],
                                        x_shape=(1, 4, 8, 8), y_shape=(1, 8, 6, 6)), REFUSE),
        ("conv-stride-0", one_node_model("Conv", ["x", "w"], [attr_ints("strides", [0, 0])],
                                         [onnx_tensor("w", [8, 4, 3, 3], floats=[0.0] * 288)],
                                         x_shape=(1, 4, 8, 8), y_shape=(1, 8, 6, 6)), REFUSE),
        ("conv-pads-negative", one_node_model("Conv", ["x", "w"],
                                              [attr_ints("pads", [-5, -5, -5, -5])],
                                              [onnx_tensor("w", [8, 4, 3, 3],
                                                           floats=[0.0] * 288)],
                                              x_shape=(1, 4, 8, 8), y_shape=(1, 8, 6, 6)),
         REFUSE),
        ("conv-pads-2^40", one_node_model("Conv", ["x", "w"],
                                          [attr_ints("pads", [2**40] * 4)],
                                          [onnx_tensor("w", [8, 4, 3, 3], floats=[0.0] * 288)],
                                          x_shape=(1, 4, 8, 8), y_shape=(1, 8, 6, 6)), REFUSE),
        ("conv-kernel-larger", one_node_model("Conv", ["x", "w"], initializers=[
            onnx_tensor("w", [8, 4, 9, 9], floats=[0.0] * (8 * 4 * 81))], x_shape=(1, 4, 8, 8),
            y_shape=(1, 8, 1, 1)), REFUSE),
        ("conv-dilations-huge", one_node_model("Conv", ["x", "w"],
                                               [attr_ints("dilations", [2**40, 2**40])],
                                               [onnx_tensor("w", [8, 4, 3, 3],
                                                            floats=[0.0] * 288)],
                                               x_shape=(1, 4, 8, 8), y_shape=(1, 8, 6, 6)),
         REFUSE),
        ("conv-channels-mismatch", one_node_model("Conv", ["x", "w"], initializers=[
            onnx_tensor("w", [8, 5, 3, 3], floats=[0.0] * 360)], x_shape=(1, 4, 8, 8),
            y_shape=(1, 8, 6, 6)), REFUSE),
        ("conv-weights-are-input", onnx_model(g(
            [onnx_node("Conv", ["x", "x"], ["y"])], [onnx_value("x", FLOAT, (1, 4, 8, 8))],
            [onnx_value("y", FLOAT, (1, 1, 1, 1))])), EITHER),  # weights computed: valid
        ("gemm-mismatch", one_node_model("Gemm", ["x", "w"], initializers=[
            onnx_tensor("w", [5, 3], floats=[0.0] * 15)]), REFUSE),
        ("matmul-rank-0", one_node_model("MatMul", ["x", "w"], initializers=[
            onnx_tensor("w", [], floats=[1.0])]), REFUSE),
        ("reshape-huge", one_node_model("Reshape", ["x", "s"], initializers=[
            onnx_tensor("s", [2], dtype=INT64, ints=[2**40, 2**40])]), REFUSE),
        ("reshape-two-minus-one", one_node_model("Reshape", ["x", "s"], initializers=[
            onnx_tensor("s", [2], dtype=INT64, ints=[-1, -1])]), REFUSE),
        ("reshape-wrong-count", one_node_model("Reshape", ["x", "s"], initializers=[
            onnx_tensor("s", [2], dtype=INT64, ints=[3, 3])]), REFUSE),
        ("transpose-bad-perm", one_node_model("Transpose", ["x"], [attr_ints("perm", [0, 0])]),
         REFUSE),
        ("transpose-perm-99", one_node_model("Transpose", ["x"], [attr_ints("perm", [99, 0])]),
         REFUSE),
        ("concat-axis-99", one_node_model("Concat", ["x", "x"], [attr_int("axis", 99)]), REFUSE),
        ("concat-axis-min", one_node_model("Concat", ["x", "x"], [attr_int("axis", -2**63)]),
         REFUSE),
        ("softmax-axis-99", one_node_model("Softmax", ["x"], [attr_int("axis", 99)]), REFUSE),
        ("flatten-axis-99", one_node_model("Flatten", ["x"], [attr_int("axis", 99)]), REFUSE),
        ("slice-huge", one_node_model("Slice", ["x", "s", "e"], initializers=[
            onnx_tensor("s", [1], dtype=INT64, ints=[-2**63]),
            onnx_tensor("e", [1], dtype=INT64, ints=[2**63 - 1])]), EITHER),
        ("pad-2^40", one_node_model("Pad", ["x", "p"], initializers=[
            onnx_tensor("p", [4], dtype=INT64, ints=[0, 2**40, 0, 2**40])]), REFUSE),
        ("pad-negative-past", one_node_model("Pad", ["x", "p"], initializers=[
            onnx_tensor("p", [4], dtype=INT64, ints=[0, -9, 0, 0])]), REFUSE),
        ("tile-2^40", one_node_model("Tile", ["x", "r"], initializers=[
            onnx_tensor("r", [2], dtype=INT64, ints=[2**40, 2**40])]), REFUSE),
        ("expand-huge", one_node_model("Expand", ["x", "s"], initializers=[
            onnx_tensor("s", [3], dtype=INT64, ints=[2**31, 1, 4])]), REFUSE),
        ("gather-index-out-of-range", onnx_model(g(
            [onnx_node("Gather", ["x", "i"], ["y"], attrs=[attr_int("axis", 1)])], [x14], [y14],
            [onnx_tensor("i", [1], dtype=INT64, ints=[99])])), REFUSE),
        ("gather-int-input-to-relu", onnx_model(g(
            [onnx_node("Relu", ["ids"], ["y"])], [onnx_value("ids", INT64, (1, 3))],
            [onnx_value("y", FLOAT, (1, 3))])), REFUSE),
        ("constant-of-shape-2^40", onnx_model(g(
            [onnx_node("ConstantOfShape", ["s"], ["c"]), onnx_node("Add", ["x", "c"], ["y"])],
            [x14], [y14], [onnx_tensor("s", [2], dtype=INT64, ints=[2**20, 2**20])])), REFUSE),
        ("range-huge", onnx_model(g(
            [onnx_node("Range", ["a", "b", "d"], ["r"]), onnx_node("Add", ["x", "r"], ["y"])],
            [x14], [y14], [onnx_tensor("a", [], floats=[0.0]),
                           onnx_tensor("b", [], floats=[1e30]),
                           onnx_tensor("d", [], floats=[1e-30])])), REFUSE),
        ("range-step-0", onnx_model(g(
            [onnx_node("Range", ["a", "b", "d"], ["r"]), onnx_node("Add", ["x", "r"], ["y"])],
            [x14], [y14], [onnx_tensor("a", [], floats=[0.0]), onnx_tensor("b", [], floats=[4.0]),
                           onnx_tensor("d", [], floats=[0.0])])), REFUSE),
        ("lstm-hidden-0", onnx_model(g(
            [onnx_node("LSTM", ["x", "w", "r"], ["y"], attrs=[attr_int("hidden_size", 0)])],
            [onnx_value("x", FLOAT, (2, 1, 4))], [onnx_value("y")],
            [onnx_tensor("w", [1, 0, 4], raw=b""), onnx_tensor("r", [1, 0, 0], raw=b"")])),
         REFUSE),
        ("attribute-graph", one_node_model("Relu", ["x"], [attr_graph("body")]), REFUSE),
        ("attribute-wrong-type", one_node_model("Softmax", ["x"], [attr_float("axis", 1.5)]),
         REFUSE),
        ("constant-without-value", onnx_model(g(
            [onnx_node("Constant", [], ["c"]), onnx_node("Add", ["x", "c"], ["y"])], [x14],
            [y14])), REFUSE),
        ("20000-relus", onnx_model(g(
            [onnx_node("Relu", ["x" if i == 0 else f"v{i}"], [f"v{i + 1}" if i < 19999 else "y"])
             for i in range(20000)], [x14], [y14])), EITHER),
        ("deep-protobuf-nesting", deep_model(3000), REFUSE),
        ("huge-length-prefix", b"\x3a\xff\xff\xff\xff\x0f", REFUSE),
    ]
    for label, data, expect in crafted:
        slow = label == "20000-relus"
        for cmd, argv in users.items():
            if slow and cmd != "compile":
                continue
            files = {"m.onnx": f_bytes(data)}
            if label.startswith("external-") and "missing" not in label:
                files["w.bin"] = f_bytes(b"\0" * 16)
            b.add(f"{cmd}/model/{label}", argv("m.onnx"), files=files, expect=expect,
                  slow=slow, timeout=120 if slow else 60)
    # External data that never ends or never opens
    for label, maker, kw in [("external-fifo", f_fifo, {"timeout": 20}),
                             ("external-dev-zero", f_symlink("/dev/zero"),
                              {"timeout": 30, "rlimit_as": 4 * GIB}),
                             ("external-directory", f_dir, {})]:
        data = one_node_model("Add", ["x", "c"], initializers=[
            onnx_tensor("c", [1, 4], external=[("location", "w.bin")])])
        for cmd, argv in users.items():
            b.add(f"{cmd}/model/{label}", argv("m.onnx"),
                  files={"m.onnx": f_bytes(data), "w.bin": maker}, **kw)
    # Valid models: controls
    b.add("run-model/model/good-onnx", ["run-model", "tiny.onnx", "--repeat", "1"],
          files={"tiny.onnx": f_copy("tiny.onnx")}, expect=OK)
    b.add("compile/model/no-library-operators", ["compile", "m.onnx", "--trials", "1"],
          files={"m.onnx": f_bytes(one_node_model("Identity", ["x"]))})
    b.add("compile/model/trials-0-without-output", ["compile", "conv.onnx", "--trials", "0"],
          files={"conv.onnx": f_copy("conv.onnx")})
    b.add("compile/model/library-as-model", ["compile", "tiny.so", "--list-tasks"],
          files={"tiny.so": f_copy("tiny.so")})
    b.add("compile/model/int-input", ["compile", "ids.onnx", "-o", "ids.so", "--trials", "0"],
          files={"ids.onnx": f_copy("ids.onnx")}, expect=EITHER)


def add_npy_probes(b: Builder):
    """--input of run-model, for a model.onnx and a model.so taking float [1, 4]."""
    hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4), }"
    body = struct.pack("<4f", 1, -2, 3, -4)
    a, c = overflowing_shape()
    cases = [
        ("bad-magic", b"\x93NUMPX" + npy(hdr, body)[6:], REFUSE),
        ("version-4", npy(hdr, body, major=4), REFUSE),
        ("version-0", npy(hdr, body, major=0), REFUSE),
        ("version-2", npy(hdr, body, major=2), EITHER),
        ("truncated-magic", b"\x93NUM", REFUSE),
        ("truncated-header", npy(hdr, body)[:30], REFUSE),
        ("header-len-65535", npy(hdr, body, header_len=65535), REFUSE),
        ("header-len-2^32-1", npy(hdr, body, major=2, header_len=2**32 - 1), REFUSE),
        ("header-len-0", npy(hdr, body, header_len=0), REFUSE),
        ("no-descr", npy("{'fortran_order': False, 'shape': (1, 4), }", body), REFUSE),
        ("no-shape", npy("{'descr': '<f4', 'fortran_order': False, }", body), REFUSE),
        ("no-fortran-order", npy("{'descr': '<f4', 'shape': (1, 4), }", body), REFUSE),
        ("fortran-order", npy(hdr.replace("False", "True"), body), REFUSE),
        ("big-endian", npy(hdr.replace("<f4", ">f4"), body), REFUSE),
        ("float16", npy(hdr.replace("<f4", "<f2"), body[:8]), REFUSE),
        ("bool", npy(hdr.replace("<f4", "|b1"), body[:4]), REFUSE),
        ("complex", npy(hdr.replace("<f4", "<c8"), body * 2), REFUSE),
        ("object", npy(hdr.replace("<f4", "|O"), body), REFUSE),
        ("structured", npy(hdr.replace("'<f4'", "[('a', '<f4')]"), body), REFUSE),
        ("int32-into-float-model", npy_f4((1, 4), [1, 2, 3, 4], "<i4"), REFUSE),
        ("int64-into-float-model", npy_f4((1, 4), [1, 2, 3, 4], "<i8"), REFUSE),
        ("float64", npy_f4((1, 4), [1, 2, 3, 4], "<f8"), EITHER),
        ("wrong-shape", npy_f4((4, 1)), REFUSE),
        ("wrong-rank", npy_f4((4,)), REFUSE),
        ("scalar", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", body[:4]),
         REFUSE),
        ("zero-size", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4), }", b""),
         REFUSE),
        ("data-short", npy(hdr, body[:12]), REFUSE),
        ("data-long", npy(hdr, body + b"\0" * 4), REFUSE),
        ("no-data", npy(hdr, b""), REFUSE),
        ("dim-13-digits", npy(hdr.replace("(1, 4)", "(1, 4000000000000)"), body), REFUSE),
        ("dim-30-digits", npy(hdr.replace("(1, 4)", "(1, " + "9" * 30 + ")"), body), REFUSE),
        ("shape-2^40", npy(hdr.replace("(1, 4)", "(1048576, 1048576)"), body), REFUSE),
        ("shape-product-wraps", npy(hdr.replace("(1, 4)", f"({a}, {c})"), body[:4]), REFUSE),
        ("shape-product-wraps-2", npy(hdr.replace("(1, 4)", "(999999999999, 999999999999, "
                                                  "999999999999)"), body), REFUSE),
        ("shape-negative", npy(hdr.replace("(1, 4)", "(1, -4)"), body), REFUSE),
        ("shape-words", npy(hdr.replace("(1, 4)", "(one, four)"), body), REFUSE),
        ("shape-unclosed", npy(hdr.replace("(1, 4)", "(1, 4"), body), REFUSE),
        ("shape-nested", npy(hdr.replace("(1, 4)", "((1, 4), (4,))"), body), REFUSE),
        ("shape-1000-ones", npy(hdr.replace("(1, 4)", "(" + "1, " * 998 + "1, 4)"), body),
         REFUSE),
        ("header-not-dict", npy("['<f4', False, (1, 4)]", body), REFUSE),
        ("header-garbage", npy("\xff\xfe garbage", body), REFUSE),
        ("nan-values", npy(hdr, struct.pack("<4f", float("nan"), float("inf"), -float("inf"),
                                            0.0)), EITHER),
    ]
    for model in ("tiny.onnx", "tiny.so"):
        kind = model.split(".")[1]
        for label, data, expect in cases:
            b.add(f"run-model/npy-{kind}/{label}", ["run-model", model, "--input", "x.npy",
                                                    "--repeat", "1"],
                  files={model: f_copy(model), "x.npy": f_bytes(data)}, expect=expect)
        for label, files, path, kw in generic_file_variants(".npy"):
            b.add(f"run-model/npy-{kind}-path/{label}", ["run-model", model, "--input", path,
                                                         "--repeat", "1"],
                  files=dict(files, **{model: f_copy(model)}),
                  expect=EITHER if label == "empty-name" else REFUSE, **kw)
    # integer ids for an embedding model
    for label, data, expect in [
        ("float-into-ids", npy_f4((1, 3), [1, 2, 3]), REFUSE),
        ("ids-out-of-range", npy_f4((1, 3), [1, 2, 10**12], "<i8"), REFUSE),
        ("ids-negative", npy_f4((1, 3), [-1, -2, -3], "<i8"), EITHER),  # ONNX: from the end
        ("ids-below-minus-size", npy_f4((1, 3), [-11, 0, 0], "<i8"), REFUSE),
        ("ids-2^62", npy_f4((1, 3), [2**62, 0, 0], "<i8"), REFUSE),
        ("ids-int32", npy_f4((1, 3), [1, 2, 3], "<i4"), EITHER),
        ("ids-good", npy_f4((1, 3), [1, 2, 3], "<i8"), OK),
    ]:
        b.add(f"run-model/npy-ids/{label}", ["run-model", "ids.onnx", "--input", "x.npy",
                                             "--repeat", "1"],
              files={"ids.onnx": f_copy("ids.onnx"), "x.npy": f_bytes(data)}, expect=expect)
        b.add(f"run-model/npy-ids-so/{label}", ["run-model", "ids.so", "--input", "x.npy",
                                                "--repeat", "1"],
              files={"ids.so": f_copy("ids.so"), "x.npy": f_bytes(data)}, expect=expect)


def seal(data):
    h = 14695981039346656037
    for byte in data:
        h = ((h ^ byte) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return data + b"TSRSEAL1" + struct.pack("<QQ", len(data), h)


def add_library_probes(b: Builder, fx: Path):
    """model.so for run-model: damaged, foreign, forged."""
    lib = (fx / "tiny.so").read_bytes()
    image = lib[:-24]
    cases = [
        ("truncated-half", lib[: len(lib) // 2], REFUSE),
        ("truncated-seal", lib[:-1], REFUSE),
        ("truncated-64", lib[:64], REFUSE),
        ("seal-only", lib[-24:], REFUSE),
        ("no-seal", image, REFUSE),
        ("seal-length-wrong", image + b"TSRSEAL1" + struct.pack("<QQ", len(image) + 1, 0),
         REFUSE),
        ("seal-length-huge", image + b"TSRSEAL1" + struct.pack("<QQ", 2**64 - 1, 0), REFUSE),
        ("text", b"#!/bin/sh\necho pwned\n", REFUSE),
        ("sealed-text", seal(b"not an ELF file at all\n"), REFUSE),
        ("sealed-empty", seal(b""), REFUSE),
        ("sealed-elf-header-only", seal(image[:64]), REFUSE),
        # A forged seal (a file made to pass the checksum): the seal guards against damage, but
        # loading must still not crash on a truncated image.
        ("sealed-truncated-half", seal(image[: len(image) // 2]), REFUSE),
    ]
    rng = random.Random(11)
    for k in range(10):
        data = bytearray(lib)
        at = rng.randrange(len(image))
        data[at] ^= 1 << rng.randrange(8)
        cases.append((f"bitflip-{k}-at-{at}", bytes(data), REFUSE))
    libm = next((p for p in ("/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6",
                             "/lib64/libm.so.6", "/usr/lib/libm.so.6") if os.path.exists(p)), None)
    if libm:
        cases.append(("sealed-foreign-library", seal(Path(libm).read_bytes()), REFUSE))
    for label, data, expect in cases:
        b.add(f"run-model/library/{label}", ["run-model", "m.so", "--repeat", "1"],
              files={"m.so": f_bytes(data)}, expect=expect)
        b.add(f"run-model/library-path/{label}", ["run-model", "./m.so", "--repeat", "1"],
              files={"m.so": f_bytes(data)}, expect=expect)
    for label, files, path, kw in generic_file_variants(".so"):
        b.add(f"run-model/library-file/{label}", ["run-model", path, "--repeat", "1"],
              files=dict(files), **kw)
    for option in (["--check"], ["--profile"], ["--db", "good.db"], ["--layout", "nchw"],
                   ["--conv-algorithm", "direct"]):
        b.add(f"run-model/library-option/{option[0].lstrip('-')}",
              ["run-model", "tiny.so"] + option,
              files={"tiny.so": f_copy("tiny.so"), "good.db": f_copy("good.db")})
    b.add("run-model/library/good", ["run-model", "tiny.so", "--repeat", "1"],
          files={"tiny.so": f_copy("tiny.so")}, expect=OK)
    b.add("run-model/library/good-absolute", ["run-model", "@ABS@/tiny.so", "--repeat", "1"],
          files={"tiny.so": f_copy("tiny.so")}, expect=OK)
    b.add("run-model/library/good-fixed-threads", ["run-model", "tiny.so", "--fixed-threads",
                                                   "--threads", "1", "--repeat", "1"],
          files={"tiny.so": f_copy("tiny.so")}, expect=OK)


def add_task_list_probes(b: Builder):
    for label, files, path, kw in generic_file_variants(".txt"):
        b.add(f"tune-all/file-path/{label}", ["tune-all", path, "--trials", "1", "--db", "t.db"],
              files=dict(files), **kw)
    for label, text in [
        ("only-comments", "# nothing here\n   # nor here\n"),
        ("three-words", f"a b {W}\n"),
        ("bad-line-1000", f"{W}\n" * 999 + "matmul:M=0,N=8,K=8\n"),
        ("name-without-workload", "conv\n"),
        ("binary", GARBAGE.decode("latin-1")),
        ("nul-in-line", f"a {W}\0junk\n"),
        ("workload-too-large", "a matmul:M=1048576,N=1048576,K=1\n"),
    ]:
        b.add(f"tune-all/file/{label}", ["tune-all", "t.txt", "--trials", "1", "--db", "t.db"],
              files={"t.txt": f_bytes(text.encode("latin-1"))})
    b.add("tune-all/file/crlf", ["tune-all", "t.txt", "--trials", "1", "--db", "t.db",
                                 "--retime", "0"],
          files={"t.txt": f_bytes(f"a {W}\r\nb {W}\r\n".encode())}, expect=EITHER, slow=True,
          timeout=120)
    b.add("tune-all/file/50000-lines", ["tune-all", "t.txt", "--trials", "1", "--db", "t.db",
                                        "--retime", "0"],
          files={"t.txt": f_bytes(f"{W}\n".encode() * 50000)}, expect=EITHER, slow=True,
          timeout=120)


def add_signal_probes(b: Builder):
    """SIGTERM in the middle of work: the command dies of the signal, leaves no temporary
    folder, and the records DB keeps every committed row (runtime/cleanup.h, record_db.cpp)."""
    for label, args, after in [
        ("tune", ["tune", "matmul:M=64,N=64,K=64", "--trials", "200", "--db", "good.db"], 2.5),
        ("tune-all", ["tune-all", "t.txt", "--trials", "200", "--db", "good.db"], 2.5),
        ("compile", ["compile", "conv.onnx", "--trials", "200", "--db", "good.db"], 2.5),
        ("run-unroll", ["run", "matmul:M=128,N=128,K=128", "-s",
                        "unroll(k) ; unroll(j) ; unroll(i)"], 3.0),
    ]:
        b.add(f"{args[0]}/signal/sigterm-{label}", args,
              files={"good.db": f_copy("good.db"), "t.txt": f_bytes(f"{W}\n{W64}\n".encode()),
                     "conv.onnx": f_copy("conv.onnx")},
              expect=frozenset({-signal.SIGTERM}), mutable_db=["good.db"], signal_after=after,
              slow=True, note="SIGTERM after %.1f s" % after)


def add_pretrain_probes(b: Builder):
    # pretrain --db: what is not a records DB (a healthy one with records is good.db)
    for label, files, path, kw in generic_file_variants(".db"):
        b.add(f"pretrain/db-file/{label}", ["pretrain", "--db", path, "-o", "m.json"],
              files=files, **kw)
    b.add("pretrain/db-file/random-bytes-beside-good", ["pretrain", "--db", "good.db", "--db",
                                                        "r.db", "-o", "m.json"],
          files={"good.db": f_copy("good.db"), "r.db": f_bytes(GARBAGE)})
    b.add("pretrain/no-db", ["pretrain", "-o", "m.json"])
    b.add("pretrain/no-output", ["pretrain", "--db", "good.db"],
          files={"good.db": f_copy("good.db")})
    b.add("pretrain/features/knob", ["pretrain", "--db", "good.db", "-o", "m.json",
                                     "--features", "knob"], files={"good.db": f_copy("good.db")})
    b.add("pretrain/plain", ["pretrain", "--db", "good.db", "-o", "m.json"],
          files={"good.db": f_copy("good.db")}, expect=OK)
    # pretrain -o
    inputs = {"good.db": f_copy("good.db")}
    for label, files, path, expect, kw in output_targets(".json", inputs, "good.jsonl"):
        b.add(f"pretrain/output/{label}", ["pretrain", "--db", "good.db", "-o", path],
              files=dict(inputs, **files), expect=expect, **kw)
    b.add("pretrain/output/existing-cost-model", ["pretrain", "--db", "good.db", "-o", "old.json"],
          files={"good.db": f_copy("good.db"),
                 "old.json": f_bytes(b'{"format":"tessera-cost-model","version":1}\n')},
          expect=OK)
    b.probes[-1].mutable_db = ["old.json"]
    b.probes[-1].note = "replacing a cost model with a cost model is allowed"
    # tune --pretrained FILE: anything but a cost model of this tessera
    argv = ["tune", W, "--trials", "1", "--retime", "0", "--pretrained"]
    for label, files, path, kw in generic_file_variants(".json"):
        b.add(f"tune/pretrained-file/{label}", argv + [path], files=files, **kw)
    for label, data in [
            ("records-db", None),
            ("jsonl-export", None),
            ("format-only", b'{"format":"tessera-cost-model","version":1}'),
            ("newer-version", b'{"format":"tessera-cost-model","version":99}'),
            ("knob-features", b'{"format":"tessera-cost-model","version":1,"features":"knob"}'),
            ("no-trees", b'{"format":"tessera-cost-model","version":1,"features":"relation",'
                         b'"objective":"rank:pairwise","target":"x","rows":1,"workloads":[],'
                         b'"model":{}}'),
            ("deep-nesting", b'{"format":"tessera-cost-model","version":1,"model":' +
             b"[" * 100000 + b"]" * 100000 + b"}")]:
        fixture = {"records-db": f_copy("good.db"), "jsonl-export": f_copy("good.jsonl")}.get(
            label, f_bytes(data) if data is not None else None)
        b.add(f"tune/pretrained-file/{label}", argv + ["m.json"], files={"m.json": fixture})


def all_probes(fx: Path) -> List[Probe]:
    b = Builder()
    add_cli_probes(b)
    add_workload_probes(b)
    add_strategy_probes(b)
    add_number_probes(b)
    add_db_probes(b, fx)
    add_import_probes(b, fx)
    add_output_probes(b)
    add_model_probes(b)
    add_npy_probes(b)
    add_library_probes(b, fx)
    add_task_list_probes(b)
    add_pretrain_probes(b)
    add_signal_probes(b)
    return b.probes


# The --quick subset for CI: a fixed list covering every command and every kind of input (names
# are regexes; each picks the first probe it matches). Chosen for coverage, not for passing.
QUICK = [
    r"top/syntax/no-arguments$", r"top/syntax/unknown-command$", r"ops/plain$",
    r"run/workload/empty$", r"run/workload/conv-product-overflow$", r"run/workload/2\^63$",
    r"run/workload/trailing-newline$", r"run/strategy/nested-50000-parens$",
    r"run/strategy/repeat-4-deep$", r"run/strategy/pack-2\^30$",
    r"run/strategy-file-path/directory$", r"run/threads/99999$", r"run/odd-strategy/split-2\^31$",
    r"measure/workload/unknown-op$", r"measure/strategy/split-0$", r"measure/cpus/99$",
    r"measure/timeout/nan$", r"measure/db-file/truncated-half$",
    r"tune/workload/relu-2\^32$", r"tune/trials/zero$", r"tune/db-path/memory$",
    r"tune/db-file/foreign$",
    r"tune-all/file-path/directory$", r"tune-all/workload/missing-key$",
    r"tune-all/file/three-words$",
    r"bench/workload/nan$", r"bench/no-record$", r"bench/db-file/random-bytes$",
    r"db list/db-file/text$", r"db list/limit/-1$", r"db best/db-file/newer-schema$",
    r"db best/db-file/damaged-rows$", r"db export/output/same-as-input$",
    r"db export/output/dev-full$", r"db export/output/full-disk$",
    r"db stats/db-file/sqlite-header-garbage$", r"db import/row/median-0$",
    r"db import/row-after-good/workload-unknown-op$", r"db import/file-path/directory$",
    r"db import/own-db$", r"db import/row/deep-nesting$",
    r"run-model/model-path/random-bytes$", r"run-model/model/input-2\^31-elements$",
    r"run-model/model/external-dotdot$", r"run-model/model/cycle$",
    r"run-model/npy-onnx/shape-product-wraps$", r"run-model/npy-onnx/big-endian$",
    r"run-model/npy-so/dim-30-digits$", r"run-model/library/truncated-half$",
    r"run-model/library/bitflip-0-", r"run-model/library/sealed-foreign-library$",
    r"run-model/library-option/check$", r"run-model/output-onnx/same-as-input$",
    r"run-model/output-so/readonly-folder$", r"run-model/output-so/dev-full$",
    r"run-model/output-so/full-disk$", r"run-model/threads/1025$",
    r"compile/output/same-as-input$", r"compile/output/dev-full$",
    r"compile/output/other-kind$", r"compile/model/init-dims-wrap-to-0$",
    r"compile -o/model/no-opset$", r"compile/model/library-as-model$", r"compile/trials/-1$",
    r"pretrain/db-file/random-bytes$", r"pretrain/output/same-as-input$",
    r"pretrain/output/other-kind$", r"pretrain/output/dev-full$",
    r"tune/pretrained-file/text$", r"tune/pretrained-file/no-trees$",
]


def quick_subset(probes: List[Probe]) -> List[Probe]:
    chosen = []
    for pattern in QUICK:
        for p in probes:
            if re.search(pattern, p.name) and all(p is not c for c in chosen):
                chosen.append(p)
                break
    order = {id(p): i for i, p in enumerate(probes)}
    return sorted(chosen, key=lambda p: order[id(p)])


# ---------------------------------------------------------------------------------------------
# Fixtures


def run_fixture(tessera, args, cwd):
    r = subprocess.run([tessera] + args, cwd=cwd, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    if r.returncode != 0:
        raise RuntimeError("fixture: tessera %s exited %d: %s" % (
            " ".join(args), r.returncode, r.stderr.decode(errors="replace").strip()[:500]))
    return r


def build_fixtures(tessera, fx: Path):
    (fx / "tiny.onnx").write_bytes(relu_model())
    (fx / "conv.onnx").write_bytes(conv_model())
    (fx / "ids.onnx").write_bytes(ids_model())
    (fx / "in.npy").write_bytes(npy_f4((1, 4), [1, -2, 3, -4]))
    run_fixture(tessera, ["compile", "tiny.onnx", "-o", "tiny.so", "--trials", "0"], fx)
    run_fixture(tessera, ["compile", "ids.onnx", "-o", "ids.so", "--trials", "0"], fx)
    run_fixture(tessera, ["measure", W, "--db", "good.db", "--repeat", "3"], fx)
    run_fixture(tessera, ["measure", W, "-s", "split(i, 4)", "--db", "good.db", "--repeat", "3"],
                fx)
    run_fixture(tessera, ["db", "export", "good.jsonl", "--db", "good.db"], fx)
    for f in fx.glob("good.db-*"):
        f.unlink()

    def edit(name, sql, source="good.db"):
        shutil.copyfile(fx / source, fx / name)
        con = sqlite3.connect(str(fx / name))
        con.executescript(sql)
        con.commit()
        con.execute("PRAGMA journal_mode = DELETE")
        con.close()

    row = ("INSERT INTO results(key, config_id, target_id, error_kind, error_message, repeats, "
           "number, mean, median, std, build_seconds, run_seconds, measured_at_ms, "
           "tessera_version, schema_version) SELECT key || '{tag}', config_id, target_id, "
           "{kind}, error_message, {repeats}, number, mean, {median}, std, build_seconds, "
           "run_seconds, measured_at_ms + 1, tessera_version, schema_version FROM results "
           "WHERE id = 1;")
    edit("damaged-rows.db", "".join([
        row.format(tag="a", kind="error_kind", repeats="'not json'", median="median"),
        row.format(tag="b", kind="error_kind", repeats="repeats", median="0"),
        row.format(tag="c", kind="error_kind", repeats="repeats", median="-1"),
        row.format(tag="d", kind="error_kind", repeats="repeats", median="'fast'"),
        row.format(tag="e", kind="'bogus'", repeats="repeats", median="median"),
        row.format(tag="f", kind="error_kind", repeats="'[1e999]'", median="1e-300"),
        "INSERT INTO workloads(key, op, shape, dtype, flops) VALUES ('garbage', 'garbage', "
        "'not json', 'f32', -1);",
        "INSERT INTO configs(key, workload_id, strategy) SELECT 'gc', id, '((((' FROM workloads "
        "WHERE key = 'garbage';",
        "INSERT INTO results(key, config_id, target_id, error_kind, error_message, repeats, "
        "number, mean, median, std, build_seconds, run_seconds, measured_at_ms, "
        "tessera_version, schema_version) SELECT 'gr', c.id, r.target_id, 'ok', '', '[1e-9]', "
        "1, 1e-9, 1e-9, 0, 0, 0, 0, 'x', 2 FROM configs c, results r WHERE c.key = 'gc' AND "
        "r.id = 1;",
    ]))
    edit("damaged-pick.db",
         "INSERT INTO picks(workload_id, target_id, config_id, median, rounds, candidates, "
         "picked_at_ms, tessera_version) SELECT c.workload_id, r.target_id, c.id, -1, 3, "
         "'garbage', 9999999999999, 'x' FROM results r JOIN configs c ON r.config_id = c.id "
         "WHERE r.id = 1;")
    edit("bad-strategy.db",
         "UPDATE configs SET strategy = '((((' ; UPDATE results SET median = 1e-12;")
    edit("newer-schema.db", "PRAGMA user_version = 99;")
    edit("other-application-id.db", "PRAGMA application_id = 12345;")
    edit("schema-1.db", "DROP TABLE picks; PRAGMA user_version = 1;")
    for name, sql in [("foreign.db", "CREATE TABLE foo(x);"),
                      ("foreign-with-rows.db",
                       "CREATE TABLE results(x); INSERT INTO results VALUES (1), (2);")]:
        con = sqlite3.connect(str(fx / name))
        con.executescript(sql)
        con.commit()
        con.close()
    for f in fx.glob("*.db-*"):
        f.unlink()


# ---------------------------------------------------------------------------------------------
# Running and checking


@dataclasses.dataclass
class Outcome:
    probe: Probe
    rc: Optional[int]
    seconds: float
    stderr: str
    failures: List[str]
    argv: List[str]

    @property
    def passed(self):
        return not self.failures

    @property
    def klass(self):
        if not self.failures:
            return "pass"
        return self.failures[0].split(":")[0]


FAILURE_ORDER = ["crash", "hang", "destroyed", "changed", "exit-code", "multi-line", "message",
                 "litter"]


def snapshot(folder: Path, skip: Path):
    """What each file is: kind and content hash (regular files), link target, device number."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        d = Path(dirpath)
        if d == skip:
            dirnames[:] = []
            continue
        for name in dirnames + filenames:
            p = d / name
            if p == skip:
                continue
            rel = str(p.relative_to(folder))
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISREG(st.st_mode):
                h = hashlib.sha256()
                with open(p, "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        h.update(chunk)
                out[rel] = ("file", h.hexdigest())
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", None)
            elif stat.S_ISFIFO(st.st_mode):
                out[rel] = ("fifo", None)
            elif stat.S_ISCHR(st.st_mode):
                out[rel] = ("chr", st.st_rdev)
            else:
                out[rel] = ("other", st.st_mode)
    return out


def db_result_keys(path: Path):
    """Result keys of a records DB and its integrity, read from a copy (never the file)."""
    with tempfile.TemporaryDirectory(prefix="tessera-probe-db-") as t:
        copy = Path(t) / "copy.db"
        shutil.copyfile(path, copy)
        for suffix in ("-wal",):
            side = Path(str(path) + suffix)
            if side.exists():
                shutil.copyfile(side, Path(str(copy) + suffix))
        try:
            con = sqlite3.connect(str(copy))
            check = con.execute("PRAGMA integrity_check").fetchone()[0]
            keys = {r[0] for r in con.execute("SELECT key FROM results")}
            con.close()
            return check, keys
        except sqlite3.Error as e:
            return "unreadable: %s" % e, set()


REAL_DEVICES = ("/dev/null", "/dev/full", "/dev/zero")


def device_state():
    out = {}
    for d in REAL_DEVICES:
        try:
            st = os.lstat(d)
            out[d] = (stat.S_ISCHR(st.st_mode), st.st_rdev)
        except OSError:
            out[d] = None
    return out


DEVICES_BEFORE = device_state()
TEMP_OUTPUT = re.compile(r"(^|/)\.[^/]+\.[A-Za-z0-9]{6}$")


def limits(probe: Probe):
    def pre():
        os.setsid()
        if probe.rlimit_as:
            import resource
            resource.setrlimit(resource.RLIMIT_AS, (probe.rlimit_as, probe.rlimit_as))
        if probe.rlimit_fsize is not None:
            import resource
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (probe.rlimit_fsize, probe.rlimit_fsize))
        if probe.as_nobody:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
    return pre


def survivors(tmp: Path):
    """Processes (pid, command line) whose environment has TMPDIR=tmp: started by a probe."""
    marker = b"TMPDIR=" + str(tmp).encode() + b"\0"
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % entry, "rb") as f:
                if marker not in f.read() + b"\0":
                    continue
            with open("/proc/%s/cmdline" % entry, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
            with open("/proc/%s/stat" % entry, "rb") as f:
                if f.read().split(b") ")[-1][:1] == b"Z":
                    continue  # a zombie: dead, waiting to be reaped
            found.append((int(entry), cmd))
        except OSError:
            continue
    return found


def kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_probe(tessera: str, probe: Probe, fx: Path, base: Path, index: int,
              keep_failed: bool) -> Outcome:
    folder = base / ("p%05d" % index)
    folder.mkdir()
    tmp = folder / "tmp"
    tmp.mkdir()
    for name, maker in probe.files.items():
        maker(folder / name, fx)
    env = dict(os.environ)
    env.update(probe.env)
    env["TMPDIR"] = str(tmp)
    args = []
    for a in probe.args:
        if isinstance(a, str) and "@ABS@" in a:
            a = a.replace("@ABS@", str(folder))
        args.append(a)
    argv = [tessera] + args
    nobody = probe.as_nobody or (IS_ROOT and any(
        getattr(m, "__qualname__", "").startswith("f_readonly_dir") for m in probe.files.values()))
    if nobody:
        probe = dataclasses.replace(probe, as_nobody=True)
        for dirpath, dirnames, filenames in os.walk(folder):
            for n in [dirpath] + [os.path.join(dirpath, x) for x in dirnames + filenames]:
                os.lchown(n, NOBODY, NOBODY)
        base.chmod(0o755)
    before = snapshot(folder, tmp)
    # Healthy records DBs the command may write: checked by their rows, not their bytes.
    dbs_before = {}
    for name in probe.mutable_db:
        p = folder / name
        if p.is_file() and p.read_bytes()[:16] == b"SQLite format 3\0":
            check, keys = db_result_keys(p)
            if check == "ok":
                dbs_before[name] = (check, keys)
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=folder, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=limits(probe))
    failures = []
    timer = None
    if probe.signal_after:
        timer = threading.Timer(probe.signal_after, lambda: proc.send_signal(signal.SIGTERM))
        timer.start()
    try:
        out, err = proc.communicate(timeout=probe.timeout)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        exited = proc.poll() is not None
        kill_group(proc)
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            out, err = b"", b"(its output stayed open: a process it started still runs)"
        if exited:
            rc = proc.returncode
            failures.append("litter: it exited, but a process it started still held its output "
                            "%g s later" % probe.timeout)
        else:
            rc = None
            failures.append("hang: still running after %g s (killed)" % probe.timeout)
    finally:
        if timer:
            timer.cancel()
    seconds = time.monotonic() - start
    # What it started must not outlive it: every process whose environment holds this probe's
    # $TMPDIR (compilers, workers, whatever they start) is gone within a few seconds.
    left = survivors(tmp)
    deadline = time.monotonic() + 5
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = survivors(tmp)
    if left:
        failures.append("litter: %d process(es) it started outlived it: %s" % (
            len(left), "; ".join("%d %s" % (pid, cmd[:80]) for pid, cmd in left[:3])))
        for pid, _ in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    stderr = err.decode("utf-8", "replace")
    if rc is not None:
        if rc not in probe.expect:
            if rc < 0:
                failures.append("crash: killed by signal %d (%s)" % (
                    -rc, signal.Signals(-rc).name if -rc in signal.valid_signals() else "?"))
            elif rc >= 128:
                failures.append("crash: exit code %d (a signal or a loader failure)" % rc)
            else:
                failures.append("exit-code: %d, expected %s" % (
                    rc, " or ".join(str(e) for e in sorted(probe.expect))))
        if rc == 2 or (rc > 0 and rc not in probe.expect):
            text = stderr[:-1] if stderr.endswith("\n") else stderr
            lines = text.split("\n")
            if len(lines) != 1 or not text.strip():
                failures.append("multi-line: %d lines on stderr" % (
                    len(lines) if text.strip() else 0))
            elif not lines[0].startswith("tessera: error: "):
                failures.append("multi-line: the line does not start with 'tessera: error: '")
        if probe.forbid and re.search(probe.forbid, stderr):
            failures.append("message: stderr matches %r" % probe.forbid)
    # Files
    for dirpath, dirnames, filenames in os.walk(folder):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            try:
                st = os.lstat(p)
                if stat.S_ISDIR(st.st_mode) and not (st.st_mode & 0o200):
                    os.chmod(p, 0o755)
            except OSError:
                pass
    after = snapshot(folder, tmp)
    for rel, what in before.items():
        now = after.get(rel)
        top = rel.split("/")[0]
        if now == what or top in probe.volatile or top in dbs_before:
            continue  # a healthy records DB is checked below, by its rows
        if top in probe.mutable_db and (rc in probe.mutable_on or
                                        (rc is not None and probe.signal_after)):
            continue
        if now is None:
            failures.append("destroyed: %s is gone" % rel)
        elif now[0] != what[0]:
            failures.append("destroyed: %s was a %s, is now a %s" % (rel, what[0], now[0]))
        else:
            failures.append("destroyed: %s changed" % rel)
    for name, (check, keys) in dbs_before.items():
        p = folder / name
        if not p.exists():
            failures.append("destroyed: records DB %s is gone" % name)
            continue
        if p.read_bytes()[:16] != b"SQLite format 3\0":
            failures.append("destroyed: records DB %s is no longer an SQLite file" % name)
            continue
        check2, keys2 = db_result_keys(p)
        if check2 != "ok":
            failures.append("destroyed: records DB %s fails its integrity check: %s" % (
                name, check2[:100]))
        if not keys <= keys2:
            failures.append("destroyed: records DB %s lost %d of its results" % (
                name, len(keys - keys2)))
        if probe.all_or_nothing and rc != 0 and keys2 != keys:
            failures.append("changed: a refused import added %d results to %s (all or nothing)"
                            % (len(keys2 - keys), name))
    for rel in after:
        if rel not in before and TEMP_OUTPUT.search(rel):
            failures.append("litter: temporary output %s left behind" % rel)
    left = sorted(os.listdir(tmp)) if tmp.exists() else []
    if left:
        failures.append("litter: $TMPDIR holds %s" % ", ".join(left[:5]))
    if device_state() != DEVICES_BEFORE:
        failures.append("destroyed: a device node under /dev changed")
    failures.sort(key=lambda f: FAILURE_ORDER.index(f.split(":")[0]))
    shown = [a.decode("utf-8", "replace") if isinstance(a, bytes) else a for a in args]
    if not failures or not keep_failed:
        shutil.rmtree(folder, ignore_errors=True)
    return Outcome(probe, rc, seconds, stderr, failures, shown)


# ---------------------------------------------------------------------------------------------
# Reports


def shell_quote(a):
    if len(a) > 200:
        a = a[:120] + "...(%d chars)" % len(a)
    if re.fullmatch(r"[A-Za-z0-9_@%+=:,./-]+", a):
        return a
    return "'" + a.replace("'", "'\\''").replace("\n", "\\n") + "'"


def command_line(o: Outcome):
    env = ["%s=%s" % (k, shell_quote(v)) for k, v in o.probe.env.items()]
    extra = []
    if o.probe.rlimit_fsize is not None:
        extra.append("(ulimit -f: %d bytes)" % o.probe.rlimit_fsize)
    if o.probe.as_nobody:
        extra.append("(as nobody)")
    return " ".join(env + ["tessera"] + [shell_quote(a) for a in o.argv] + extra)


def first_lines(text, n=3, width=300):
    lines = text.rstrip("\n").split("\n") if text.strip() else []
    out = [l if len(l) <= width else l[:width] + "..." for l in lines[:n]]
    if len(lines) > n:
        out.append("... (%d lines)" % len(lines))
    return out


def summary_rows(outcomes: List[Outcome]):
    by_cmd: Dict[str, Dict[str, int]] = {}
    for o in outcomes:
        row = by_cmd.setdefault(o.probe.command, {})
        row["probes"] = row.get("probes", 0) + 1
        answer = "timeout" if o.rc is None else ("exit %d" % o.rc if o.rc >= 0 else
                                                 "signal %d" % -o.rc)
        row[answer] = row.get(answer, 0) + 1
        row[o.klass] = row.get(o.klass, 0) + 1
    return by_cmd


def write_report(path: Path, outcomes: List[Outcome], seconds: float, tessera: str):
    if path.suffix == ".csv":
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["probe", "command", "expected", "exit", "seconds", "class", "failures",
                        "command_line", "stderr"])
            for o in outcomes:
                w.writerow([o.probe.name, o.probe.command,
                            "|".join(str(e) for e in sorted(o.probe.expect)),
                            "timeout" if o.rc is None else o.rc, "%.2f" % o.seconds, o.klass,
                            "; ".join(o.failures), command_line(o),
                            "\n".join(first_lines(o.stderr, 5))])
        return
    by_cmd = summary_rows(outcomes)
    columns = ["exit 0", "exit 1", "exit 2"]
    other = sorted({k for r in by_cmd.values() for k in r if k.startswith(("exit ", "signal",
                                                                          "timeout"))}
                   - set(columns))
    classes = ["pass"] + FAILURE_ORDER
    failed = [o for o in outcomes if not o.passed]
    out = io.StringIO()
    out.write("# tessera bad-input probes\n\n")
    out.write("`python3 tests/probe/bad_inputs.py` with %s: %d probes in %.0f s, %d passed, "
              "%d failed.\n\n" % (tessera, len(outcomes), seconds, len(outcomes) - len(failed),
                                  len(failed)))
    out.write("| command | probes | " + " | ".join(columns + other) + " | " +
              " | ".join(classes) + " |\n")
    out.write("|---" * (2 + len(columns) + len(other) + len(classes)) + "|\n")
    total: Dict[str, int] = {}
    for cmd in sorted(by_cmd):
        r = by_cmd[cmd]
        for k, v in r.items():
            total[k] = total.get(k, 0) + v
        out.write("| %s | %d | " % (cmd, r["probes"]) +
                  " | ".join(str(r.get(c, 0)) for c in columns + other) + " | " +
                  " | ".join(str(r.get(c, 0)) for c in classes) + " |\n")
    out.write("| **all** | %d | " % total.get("probes", 0) +
              " | ".join(str(total.get(c, 0)) for c in columns + other) + " | " +
              " | ".join(str(total.get(c, 0)) for c in classes) + " |\n\n")
    out.write("Classes, in order: pass; crash (killed by a signal, or exit code 128 and above); "
              "hang (ran past its time limit); destroyed (an input changed or vanished, a device "
              "node replaced, a records DB lost rows or integrity); changed (a refused `db "
              "import` added rows); exit-code (not an exit code the probe allows); multi-line (a "
              "refusal that is not one `tessera: error:` line); message (a forbidden word, e.g. a "
              "healthy DB called corrupt); litter (temporary files or processes left behind). A "
              "failing probe counts under its first class.\n\n")
    if failed:
        out.write("## Failing probes\n\n")
        for o in failed:
            out.write("### %s\n\n" % o.probe.name)
            out.write("- command: `%s`\n" % command_line(o).replace("`", "'"))
            out.write("- exit: %s (expected %s)%s\n" % (
                "timeout" if o.rc is None else o.rc,
                " or ".join(str(e) for e in sorted(o.probe.expect)),
                "; " + o.probe.note if o.probe.note else ""))
            out.write("- failures: %s\n" % "; ".join(o.failures))
            lines = first_lines(o.stderr)
            if lines:
                out.write("- stderr:\n\n```\n%s\n```\n" % "\n".join(lines))
            out.write("\n")
    path.write_text(out.getvalue())


# ---------------------------------------------------------------------------------------------


def main():
    # A terminated run (ctest's timeout) still removes its folders.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tessera", default=None, help="the tessera binary (default: build/tessera "
                                                   "of this repository)")
    ap.add_argument("--quick", action="store_true", help="a fixed subset of %d probes (CI)"
                    % len(QUICK))
    ap.add_argument("--jobs", type=int, default=1, help="probes at a time (default 1)")
    ap.add_argument("--report", type=Path, action="append", default=[],
                    help="write a summary: Markdown, or CSV (one row per probe) for *.csv; "
                         "may be given twice")
    ap.add_argument("--only", help="only probes whose name matches this regex")
    ap.add_argument("--list", action="store_true", help="list the probes and exit")
    ap.add_argument("--keep-failed", action="store_true",
                    help="keep the folders of failing probes (printed)")
    ap.add_argument("--verbose", action="store_true", help="a line for every probe")
    args = ap.parse_args()
    if args.jobs < 1:
        ap.error("--jobs must be at least 1")
    tessera = args.tessera or str(ROOT / "build" / "tessera")
    tessera = str(Path(tessera).resolve())
    if not args.list and not os.access(tessera, os.X_OK):
        ap.error("no tessera binary at %s (build it, or pass --tessera)" % tessera)

    base = Path(tempfile.mkdtemp(prefix="tessera-probes-"))
    base.chmod(0o755)
    fx = base / "fixtures"
    fx.mkdir()
    fx.chmod(0o755)
    started = time.monotonic()
    try:
        if not args.list or os.access(tessera, os.X_OK):
            try:
                build_fixtures(tessera, fx)
            except (RuntimeError, subprocess.TimeoutExpired, sqlite3.Error, OSError) as e:
                print("bad_inputs: cannot build the fixtures: %s" % e, file=sys.stderr)
                return 1
        else:
            # Names only, without a binary: stand-ins for the fixtures the generators read (the
            # DB variants made from good.db are missing, so the list is a little shorter).
            (fx / "good.jsonl").write_text(json.dumps({
                "workload": W, "strategy": "id", "dtype": "f32", "flops": 1.0, "target": {
                    "cpu_model": "", "isa": [], "cores": 1, "compiler": "", "flags": ""},
                "error": "ok", "message": "", "repeats": [1.0], "number": 1, "mean": 1.0,
                "median": 1.0, "std": 0.0, "build_seconds": 0.0, "run_seconds": 0.0,
                "timestamp_ms": 0, "tessera_version": "", "schema_version": 2}) + "\n")
            (fx / "good.db").write_bytes(b"SQLite format 3\0" + b"\0" * 8192)
            (fx / "tiny.so").write_bytes(seal(b"\x7fELF" + b"\0" * 200))
        probes = all_probes(fx)
        if args.quick:
            probes = quick_subset(probes)
        if args.only:
            probes = [p for p in probes if re.search(args.only, p.name)]
        if args.list:
            for p in probes:
                print("%-60s expect %s" % (p.name, "|".join(str(e) for e in sorted(p.expect))))
            print("%d probes" % len(probes))
            return 0
        total = len(probes)
        print("bad_inputs: %d probes with %s (%s)" % (
            total, tessera, "quick" if args.quick else "full"), flush=True)
        outcomes: List[Optional[Outcome]] = [None] * total
        done = 0
        lock = threading.Lock()

        def one(i):
            return i, run_probe(tessera, probes[i], fx, base, i, args.keep_failed)

        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for i, o in pool.map(one, range(total)) if args.jobs == 1 else (
                    f.result() for f in concurrent.futures.as_completed(
                        [pool.submit(one, i) for i in range(total)])):
                with lock:
                    outcomes[i] = o
                    done += 1
                    if not o.passed:
                        print("[%d/%d] FAIL %s: %s\n    %s" % (
                            done, total, o.probe.name, "; ".join(o.failures), command_line(o)),
                              flush=True)
                        for l in first_lines(o.stderr):
                            print("    | " + l, flush=True)
                    elif args.verbose:
                        print("[%d/%d] pass %s (exit %s, %.2f s)" % (
                            done, total, o.probe.name, o.rc, o.seconds), flush=True)
                    if done % 25 == 0 or done == total:
                        print("[%d/%d] probes done, %.0f s" % (
                            done, total, time.monotonic() - started), flush=True)
        results = [o for o in outcomes if o is not None]
        seconds = time.monotonic() - started
        failed = [o for o in results if not o.passed]
        classes: Dict[str, int] = {}
        answers: Dict[str, int] = {}
        for o in results:
            classes[o.klass] = classes.get(o.klass, 0) + 1
            key = "timeout" if o.rc is None else "exit %d" % o.rc
            answers[key] = answers.get(key, 0) + 1
        print("bad_inputs: %d probes in %.0f s: %s; %s" % (
            total, seconds, ", ".join("%s %d" % kv for kv in sorted(answers.items())),
            ", ".join("%s %d" % kv for kv in sorted(classes.items()))))
        for report in args.report:
            write_report(report, results, seconds, tessera)
            print("bad_inputs: report in %s" % report)
        if args.keep_failed and failed:
            print("bad_inputs: folders of failing probes kept under %s" % base)
        return 1 if failed else 0
    finally:
        if not (args.keep_failed and any(base.glob("p*"))):
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
