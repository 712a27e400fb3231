#!/usr/bin/env python3
"""End-to-end check of `tessera run-model` against onnxruntime.

Builds small models with the `onnx` package and seeded random weights (an MLP, a DQN, a
ResNet-style net, MobileNet-v2-style blocks, one model with the remaining operators, Resize and
Upsample, attention masks), runs each
on the same random input with onnxruntime, with `tessera run-model model.onnx --json` and, compiled
by `tessera compile --trials 0 -o model.so`, with `tessera run-model model.so`; fails when a
maximum relative error (max |a - b| / max |b|) is above 1e-3. Prints the run times.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper


class Builder:
    """Nodes and initializers of one graph, with generated names."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.count = [], [], 0

    def name(self, prefix):
        self.count += 1
        return f"{prefix}{self.count}"

    def const(self, array, prefix="c"):
        name = self.name(prefix)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(self, *shape, scale=None):
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
        scale = scale or np.sqrt(2.0 / fan_in)
        return self.const((self.rng.standard_normal(shape) * scale).astype(np.float32), "w")

    def op(self, op_type, inputs, **attrs):
        out = self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def conv(self, x, c_in, c_out, k, stride=1, pad=0, group=1, bias=True):
        w = self.weight(c_out, c_in // group, k, k)
        inputs = [x, w]
        if bias:
            inputs.append(self.const((self.rng.standard_normal(c_out) * 0.1).astype(np.float32)))
        return self.op("Conv", inputs, kernel_shape=[k, k], strides=[stride, stride],
                       pads=[pad] * 4, group=group)

    def bn(self, x, c):
        r = self.rng
        params = [r.uniform(0.5, 1.5, c), r.standard_normal(c) * 0.1, r.standard_normal(c) * 0.1,
                  r.uniform(0.5, 1.5, c)]
        return self.op("BatchNormalization",
                       [x] + [self.const(p.astype(np.float32)) for p in params], epsilon=1e-5)

    def clip6(self, x):
        lo = self.const(np.array(0.0, dtype=np.float32))
        hi = self.const(np.array(6.0, dtype=np.float32))
        return self.op("Clip", [x, lo, hi])

    def gemm(self, x, n_in, n_out, trans_b=1):
        w = self.weight(n_out, n_in) if trans_b else self.weight(n_in, n_out, scale=np.sqrt(2 / n_in))
        b = self.const((self.rng.standard_normal(n_out) * 0.1).astype(np.float32))
        return self.op("Gemm", [x, w, b], transB=trans_b)

    def ints(self, values):
        return self.const(np.array(values, dtype=np.int64))

    def scalar(self, value):
        return self.const(np.array(value, dtype=np.float32))

    def model(self, name, input_shape, out, opset=13, input_type=TensorProto.FLOAT):
        graph = helper.make_graph(
            self.nodes, name,
            [helper.make_tensor_value_info("input", input_type, input_shape)],
            [helper.make_empty_tensor_value_info(out)], self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        # The output's type and shape come from ONNX's own shape inference.
        inferred = onnx.shape_inference.infer_shapes(m)
        info = [v for v in inferred.graph.value_info if v.name == out]
        m.graph.output[0].CopyFrom(info[0])
        onnx.checker.check_model(m)
        return m


def mlp():
    b = Builder(1)
    h = b.op("Relu", [b.gemm("input", 64, 128)])
    h = b.op("Relu", [b.gemm(h, 128, 64, trans_b=0)])
    return b.model("mlp", [8, 64], b.op("Softmax", [b.gemm(h, 64, 10)], axis=-1)), [8, 64]


def dqn():
    b = Builder(2)
    h = b.op("Relu", [b.conv("input", 4, 32, 8, stride=4)])
    h = b.op("Relu", [b.conv(h, 32, 64, 4, stride=2)])
    h = b.op("Relu", [b.conv(h, 64, 64, 3, stride=1)])
    h = b.op("Flatten", [h], axis=1)
    h = b.op("Relu", [b.gemm(h, 64 * 7 * 7, 512)])
    return b.model("dqn", [1, 4, 84, 84], b.gemm(h, 512, 6)), [1, 4, 84, 84]


def resnet():
    b = Builder(3)

    def block(x, c_in, c_out, stride):
        h = b.op("Relu", [b.bn(b.conv(x, c_in, c_out, 3, stride, 1, bias=False), c_out)])
        h = b.bn(b.conv(h, c_out, c_out, 3, 1, 1, bias=False), c_out)
        shortcut = x
        if stride != 1 or c_in != c_out:
            shortcut = b.bn(b.conv(x, c_in, c_out, 1, stride, 0, bias=False), c_out)
        return b.op("Relu", [b.op("Add", [h, shortcut])])

    h = b.op("Relu", [b.bn(b.conv("input", 3, 16, 3, 1, 1, bias=False), 16)])
    h = b.op("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])
    h = block(h, 16, 16, 1)
    h = block(h, 16, 32, 2)
    h = b.op("Flatten", [b.op("GlobalAveragePool", [h])])
    return b.model("resnet_block", [1, 3, 32, 32], b.gemm(h, 32, 10)), [1, 3, 32, 32]


def resnet18():
    """torchvision's resnet18: 7x7 stem, max pool, four stages of two basic blocks, 1000 classes
    (bench/models.py and the Python tests use it; main() does not)."""
    b = Builder(18)

    def conv_bn(x, c_in, c_out, k, stride, pad):
        return b.bn(b.conv(x, c_in, c_out, k, stride, pad, bias=False), c_out)

    def basic_block(x, c_in, c_out, stride):
        h = b.op("Relu", [conv_bn(x, c_in, c_out, 3, stride, 1)])
        h = conv_bn(h, c_out, c_out, 3, 1, 1)
        shortcut = x
        if stride != 1 or c_in != c_out:
            shortcut = conv_bn(x, c_in, c_out, 1, stride, 0)
        return b.op("Relu", [b.op("Add", [h, shortcut])])

    h = b.op("Relu", [conv_bn("input", 3, 64, 7, 2, 3)])
    h = b.op("MaxPool", [h], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c = 64
    for c_out, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        h = basic_block(h, c, c_out, stride)
        h = basic_block(h, c_out, c_out, 1)
        c = c_out
    h = b.op("Flatten", [b.op("GlobalAveragePool", [h])], axis=1)
    return b.model("resnet18", [1, 3, 224, 224], b.gemm(h, 512, 1000))


def mobilenet():
    b = Builder(4)

    def inverted_residual(x, c_in, c_out, expand, stride):
        c = c_in * expand
        h = b.clip6(b.bn(b.conv(x, c_in, c, 1, bias=False), c))
        h = b.clip6(b.bn(b.conv(h, c, c, 3, stride, 1, group=c, bias=False), c))
        h = b.bn(b.conv(h, c, c_out, 1, bias=False), c_out)
        return b.op("Add", [h, x]) if stride == 1 and c_in == c_out else h

    h = b.clip6(b.bn(b.conv("input", 3, 16, 3, 2, 1, bias=False), 16))
    h = inverted_residual(h, 16, 16, 4, 1)
    h = inverted_residual(h, 16, 24, 4, 2)
    h = inverted_residual(h, 24, 24, 4, 1)
    h = b.op("Flatten", [b.op("GlobalAveragePool", [h])])
    return b.model("mobilenet_v2_blocks", [1, 3, 32, 32], b.gemm(h, 24, 10)), [1, 3, 32, 32]


def misc():
    """AveragePool, Mul, Concat, Reshape, Transpose, MatMul and a lone BatchNormalization."""
    b = Builder(5)
    a = b.op("AveragePool", ["input"], kernel_shape=[2, 2], strides=[2, 2])
    scale = b.const(b.rng.uniform(0.5, 2.0, (1, 8, 1, 1)).astype(np.float32))
    a = b.op("Mul", [a, scale])
    m = b.bn(b.op("MaxPool", ["input"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), 8)
    h = b.op("Concat", [a, m], axis=1)
    h = b.op("Reshape", [h, b.const(np.array([1, 16, -1], dtype=np.int64))])
    h = b.op("Transpose", [h], perm=[0, 2, 1])
    h = b.op("MatMul", [h, b.weight(16, 12)])
    return b.model("misc_ops", [1, 8, 16, 16], b.op("Softmax", [h], axis=-1)), [1, 8, 16, 16]


def se_block():
    """MobileNet-v3 / EfficientNet: HardSwish, SiLU (Sigmoid * x), squeeze-excite with ReduceMean
    and HardSigmoid, a ceil_mode MaxPool that changes the shape."""
    b = Builder(6)
    h = b.conv("input", 3, 16, 3, 2, 1)
    h = b.op("HardSwish", [h])
    h = b.op("Mul", [h, b.op("Sigmoid", [h])])
    s = b.op("ReduceMean", [h], axes=[2, 3], keepdims=1)
    s = b.op("Relu", [b.conv(s, 16, 8, 1)])
    s = b.op("HardSigmoid", [b.conv(s, 8, 16, 1)], alpha=1.0 / 6, beta=0.5)
    h = b.op("Mul", [h, s])
    h = b.op("MaxPool", [h], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
    h = b.op("ReduceMean", [h], axes=[2, 3], keepdims=0)
    return b.model("se_block", [1, 3, 33, 33], b.gemm(h, 16, 10), opset=14), [1, 3, 33, 33]


def grouped():
    """RegNet's block: grouped 3x3 convolutions of 8 channels a group (blocked, in whole blocks),
    one of 4 a group (unblocked between blocked ones), squeeze-excite and a residual."""
    b = Builder(14)
    x = b.op("Relu", [b.bn(b.conv("input", 16, 32, 1), 32)])
    h = b.op("Relu", [b.bn(b.conv(x, 32, 32, 3, 2, 1, group=4, bias=False), 32)])
    s = b.op("ReduceMean", [h], axes=[2, 3], keepdims=1)
    s = b.op("Sigmoid", [b.conv(b.op("Relu", [b.conv(s, 32, 8, 1)]), 8, 32, 1)])
    h = b.op("Mul", [h, s])
    r = b.bn(b.conv(h, 32, 32, 3, 1, 1, group=2, bias=False), 32)
    h = b.op("Relu", [b.op("Add", [r, h])])
    h = b.op("Relu", [b.bn(b.conv(h, 32, 32, 3, 1, 1, group=8, bias=False), 32)])
    h = b.op("ReduceMean", [h], axes=[2, 3], keepdims=0)
    return b.model("grouped", [1, 16, 18, 18], b.gemm(h, 32, 10), opset=14), [1, 16, 18, 18]


def shuffle():
    """ShuffleNet-v2's units at 24 channels a branch: a downsampling unit of two branches, then
    units that halve the shuffled channels with Slices (the legacy exporter) and with a Split
    (the dynamo exporter); each joins its halves and shuffles them (Reshape, Transpose,
    Reshape)."""
    b = Builder(15)

    def branch(x, c_in, stride):
        h = b.op("Relu", [b.bn(b.conv(x, c_in, 24, 1), 24)])
        h = b.bn(b.conv(h, 24, 24, 3, stride, 1, group=24), 24)
        return b.op("Relu", [b.bn(b.conv(h, 24, 24, 1), 24)])

    def shuffled(first, second):
        h = b.op("Concat", [first, second], axis=1)
        h = b.op("Reshape", [h, b.ints([1, 2, 24, 8, 8])])
        h = b.op("Transpose", [h], perm=[0, 2, 1, 3, 4])
        return b.op("Reshape", [h, b.ints([1, 48, 8, 8])])

    x = b.op("Relu", [b.conv("input", 3, 24, 3, 2, 1)])
    down = b.bn(b.conv(x, 24, 24, 3, 2, 1, group=24), 24)
    h = shuffled(b.op("Relu", [b.bn(b.conv(down, 24, 24, 1), 24)]), branch(x, 24, 2))
    first = b.op("Slice", [h, b.ints([0]), b.ints([24]), b.ints([1])])
    second = b.op("Slice", [h, b.ints([24]), b.ints([48]), b.ints([1])])
    h = shuffled(first, branch(second, 24, 1))
    halves = [b.name("split"), b.name("split")]
    b.nodes.append(helper.make_node("Split", [h], halves, axis=1, num_outputs=2))
    h = shuffled(halves[0], branch(halves[1], 24, 1))
    h = b.op("ReduceMean", [b.op("Relu", [b.conv(h, 48, 64, 1)]), b.ints([2, 3])], keepdims=0)
    return b.model("shuffle", [1, 3, 32, 32], b.gemm(h, 64, 10), opset=18), [1, 3, 32, 32]


def encoder():
    """A BERT-style encoder layer at sequence 8: LayerNormalization, attention with Div, Softmax
    and shape arithmetic (Shape, Gather, Unsqueeze, Concat into Reshape), Gelu as Erf."""
    b = Builder(7)
    seq, dim, heads = 8, 32, 4
    x = "input"
    ln = b.op("LayerNormalization", [x, b.const(b.rng.uniform(0.5, 1.5, dim).astype(np.float32)),
                                     b.const((b.rng.standard_normal(dim) * 0.1).astype(np.float32))],
              axis=-1, epsilon=1e-5)

    def heads_of(t):
        # [1, seq, dim] -> [1, heads, seq, dim / heads], the shape read back with Shape + Gather.
        shape = b.op("Shape", [t])
        batch = b.op("Unsqueeze", [b.op("Gather", [shape, b.const(np.array(0, dtype=np.int64))],
                                        axis=0), b.ints([0])])
        target = b.op("Concat", [batch, b.ints([-1, heads, dim // heads])], axis=0)
        return b.op("Transpose", [b.op("Reshape", [t, target])], perm=[0, 2, 1, 3])

    qkv = b.op("MatMul", [ln, b.weight(dim, 3 * dim)])
    q, k, v = [b.name("part") for _ in range(3)]
    b.nodes.append(helper.make_node("Split", [qkv, b.ints([dim, dim, dim])], [q, k, v], axis=-1))
    scores = b.op("MatMul", [heads_of(q), b.op("Transpose", [heads_of(k)], perm=[0, 1, 3, 2])])
    scores = b.op("Div", [scores, b.scalar(np.sqrt(dim // heads))])
    attn = b.op("MatMul", [b.op("Softmax", [scores], axis=-1), heads_of(v)])
    attn = b.op("Reshape", [b.op("Transpose", [attn], perm=[0, 2, 1, 3]), b.ints([1, seq, dim])])
    h = b.op("Add", [x, b.op("MatMul", [attn, b.weight(dim, dim)])])
    ff = b.op("MatMul", [h, b.weight(dim, 4 * dim)])
    gelu = b.op("Mul", [b.op("Mul", [ff, b.op("Add", [b.op("Erf", [b.op(
        "Div", [ff, b.scalar(np.sqrt(2.0))])]), b.scalar(1.0)])]), b.scalar(0.5)])
    h = b.op("Add", [h, b.op("MatMul", [gelu, b.weight(4 * dim, dim)])])
    first = b.op("Squeeze", [b.op("Slice", [h, b.ints([0]), b.ints([1]), b.ints([1])]),
                             b.ints([1])])
    return b.model("encoder_layer", [1, seq, dim], first, opset=17), [1, seq, dim]


def long_attention():
    """Causal self-attention over 1024 positions in two heads (2M scores, what fuse_attention
    runs as one attention operator): the mask added to the scores, Softmax, the product with V."""
    b = Builder(21)
    seq, dim, heads = 1024, 32, 2
    x = "input"

    def heads_of(t):
        return b.op("Transpose", [b.op("Reshape", [t, b.ints([1, seq, heads, dim // heads])])],
                    perm=[0, 2, 1, 3])

    q, k, v = (heads_of(b.op("MatMul", [x, b.weight(dim, dim)])) for _ in range(3))
    scores = b.op("MatMul", [q, b.op("Transpose", [k], perm=[0, 1, 3, 2])])
    mask = np.triu(np.full((seq, seq), -1e9, dtype=np.float32), 1).reshape(1, 1, seq, seq)
    scores = b.op("Add", [b.op("Mul", [scores, b.scalar(0.25)]), b.const(mask)])
    attn = b.op("MatMul", [b.op("Softmax", [scores], axis=-1), v])
    out = b.op("Reshape", [b.op("Transpose", [attn], perm=[0, 2, 1, 3]), b.ints([1, seq, dim])])
    return b.model("long_attention", [1, seq, dim], out), [1, seq, dim]


def more_ops():
    """The rest of the table: Pad, Tile, Expand, Where, comparisons, Cast, Pow, Sqrt, Min/Max,
    reductions with and without keepdims, Softmax and LogSoftmax off the last axis, AveragePool
    that does not count its pads, LeakyRelu, Tanh, Exp, Neg, Abs."""
    b = Builder(8)
    x = b.op("Pad", ["input", b.ints([0, 0, 1, 2, 0, 0, 2, 1])], mode="constant")
    a = b.op("AveragePool", [x], kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 1, 1],
             count_include_pad=0)
    t = b.op("Tile", [a, b.ints([1, 1, 1, 2])])
    mask = b.op("Greater", [t, b.scalar(0.0)])
    t = b.op("Where", [mask, b.op("Sqrt", [b.op("Abs", [t])]),
                       b.op("LeakyRelu", [t], alpha=0.1)])
    t = b.op("Add", [t, b.op("Cast", [b.op("Cast", [b.op("Less", [t, b.scalar(-0.05)])],
                                          to=TensorProto.INT64)], to=TensorProto.FLOAT)])
    t = b.op("Max", [b.op("Min", [t, b.scalar(2.0)]), b.op("Neg", [b.op("Exp", [t])])])
    t = b.op("Pow", [b.op("Tanh", [t]), b.scalar(2.0)])
    s = b.op("Softmax", [t], axis=1)
    l = b.op("LogSoftmax", [t], axis=2)
    r = b.op("ReduceSum", [b.op("Mul", [s, l]), b.ints([1])], keepdims=0)
    r = b.op("Sub", [r, b.op("ReduceMax", [r], axes=[2], keepdims=1)])
    r = b.op("Add", [r, b.op("Expand", [b.op("ReduceMin", [r], axes=[1], keepdims=1),
                                          b.ints([1, 1, 1])])])
    return b.model("more_ops", [1, 4, 9, 8], r, opset=17), [1, 4, 9, 8]


def masks():
    """Attention masks as exporters write them: Trilu on run-time values (upper with k, lower)
    and on a constant, ScatterND (with and without a reduction) into a mask computed from
    constants, larger than import folds small values."""
    b = Builder(9)
    upper = b.op("Trilu", ["input", b.ints(2)], upper=1)
    lower = b.op("Trilu", ["input"], upper=0)
    base = b.op("ConstantOfShape", [b.ints([1, 1, 40, 120])],
                value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.5]))
    base = b.op("Add", [base, b.scalar(1.0)])  # 4800 elements: folded only on demand
    rows = b.const(np.array([[0, 0, 5], [0, 0, -3]], dtype=np.int64))
    mask = b.op("ScatterND", [base, rows, b.const(b.rng.standard_normal((2, 120)).astype(
        np.float32))])
    cells = b.const(np.array([[0, 0, 20, 7], [0, 0, 20, 7], [0, 0, 30, 2]], dtype=np.int64))
    mask = b.op("ScatterND", [mask, cells, b.const(np.array([3.0, -1.5, 2.0], np.float32))],
                reduction="add")
    mask = b.op("ScatterND", [mask, b.const(np.array([[0, 0, 9]], dtype=np.int64)),
                              b.const(np.full((1, 120), 1.25, np.float32))], reduction="max")
    mask = b.op("Trilu", [mask, b.ints(-1)], upper=0)
    out = b.op("Add", [b.op("Add", [upper, b.op("Mul", [lower, b.scalar(0.5)])]), mask])
    return b.model("masks", [1, 2, 40, 120], out, opset=18), [1, 2, 40, 120]


def exporter_extras():
    """What transformer and normalization exports add: T5's relative-position buckets folded
    at import (a Log divided by a float32 constant, truncated: distances 16 and 32 land on an
    integer only in float32), GatherND with batch dimensions on constants, a bool initializer,
    IsNaN and IsInf guards, ReduceL2 (cosine attention), ReduceL1 and ReduceSumSquare, Floor and
    Ceil, ScatterElements with repeated indices added (BEiT's position index)."""
    b = Builder(10)
    n = 40
    pos = np.arange(n)
    rel = b.const((pos[None, :] - pos[:, None]).astype(np.int64))
    dist = b.op("Abs", [rel])
    exact = b.op("Less", [dist, b.ints(8)])
    scaled = b.op("Div", [b.op("Log", [b.op("Div", [b.op("Cast", [dist], to=TensorProto.FLOAT),
                                                       b.scalar(8.0)])]),
                          b.scalar(np.float32(np.log(16.0)))])
    far = b.op("Min", [b.op("Add", [b.op("Cast", [b.op("Mul", [scaled, b.scalar(8.0)])],
                                         to=TensorProto.INT64), b.ints(8)]), b.ints(15)])
    bucket = b.op("Add", [b.op("Where", [exact, dist, far]),
                          b.const(((pos[None, :] > pos[:, None]) * 16).astype(np.int64))])
    table = b.const(b.rng.standard_normal((32, 4)).astype(np.float32))
    bias = b.op("Unsqueeze", [b.op("Transpose", [b.op("Gather", [table, bucket])],
                                   perm=[2, 0, 1]), b.ints([0])])
    x = b.op("Add", ["input", bias])
    rows = b.const(b.rng.integers(0, 5, (4, n, 1)).astype(np.int64))
    picked = b.op("GatherND", [b.const(b.rng.standard_normal((4, 5, n)).astype(np.float32)), rows],
                  batch_dims=1)
    x = b.op("Add", [x, b.op("Unsqueeze", [picked, b.ints([0])])])
    keep = b.const(b.rng.integers(0, 2, (n, n)).astype(np.bool_))
    x = b.op("Where", [keep, x, b.op("Mul", [x, b.scalar(0.5)])])
    root = b.op("Sqrt", [x])  # NaN where x < 0
    x = b.op("Add", [x, b.op("Where", [b.op("IsNaN", [root]), b.scalar(0.0), root])])
    inverse = b.op("Reciprocal", [b.op("Relu", [b.op("Sub", [x, b.scalar(0.25)])])])
    x = b.op("Where", [b.op("IsInf", [inverse]), b.scalar(-1.0), x])
    norm = b.op("ReduceL2", [x], axes=[3], keepdims=1)
    x = b.op("Div", [x, b.op("Max", [norm, b.scalar(1e-6)])])
    x = b.op("Add", [x, b.op("ReduceL1", [x], axes=[1], keepdims=1)])
    x = b.op("Sub", [x, b.op("ReduceSumSquare", [x], axes=[2, 3], keepdims=1)])
    x = b.op("Add", [x, b.op("Floor", [b.op("Mul", [x, b.scalar(3.0)])])])
    x = b.op("Sub", [x, b.op("Ceil", [b.op("Mul", [x, b.scalar(2.0)])])])
    table = b.op("ScatterElements", [b.const(np.zeros((n, n), np.float32)),
                                     b.const(b.rng.integers(0, n, (3, n)).astype(np.int64)),
                                     b.const(b.rng.standard_normal((3, n)).astype(np.float32))],
                 axis=0, reduction="add")
    x = b.op("Add", [x, table])
    return b.model("exporter_extras", [1, 4, n, n], x, opset=17), [1, 4, n, n]


def one_dimensional():
    """Audio front ends: Conv1d (strided, dilated, asymmetric pads; grouped with a weight
    computed from constants, as weight norm exports it), BatchNormalization, MaxPool and
    AveragePool over one axis, ConvTranspose1d, InstanceNormalization (and GroupNorm as torch
    writes it, between two Reshapes), GlobalAveragePool and GlobalMaxPool of rank 3."""
    b = Builder(11)
    x = b.op("Conv", ["input", b.weight(16, 8, 9), b.const(b.rng.standard_normal(16).astype(
        np.float32))], kernel_shape=[9], strides=[2], pads=[3, 2], dilations=[2])
    x = b.op("Relu", [b.bn(x, 16)])
    x = b.op("MaxPool", [x], kernel_shape=[3], strides=[2], pads=[1, 1])
    v = b.weight(16, 4, 5)
    norm = b.op("ReduceL2", [v], axes=[1, 2], keepdims=1)
    w = b.op("Mul", [v, b.op("Div", [b.const(b.rng.uniform(0.5, 1.5, (16, 1, 1)).astype(
        np.float32)), norm])])
    x = b.op("Conv", [x, w], kernel_shape=[5], pads=[2, 2], group=4)
    x = b.op("AveragePool", [x], kernel_shape=[4], strides=[3], pads=[1, 2], count_include_pad=0)
    x = b.op("InstanceNormalization", [x, b.const(b.rng.uniform(0.5, 1.5, 16).astype(np.float32)),
                                       b.const(b.rng.standard_normal(16).astype(np.float32))],
             epsilon=1e-5)
    g = b.op("Reshape", [x, b.ints([1, 4, -1])])
    g = b.op("InstanceNormalization", [g, b.const(np.ones(4, np.float32)),
                                       b.const(np.zeros(4, np.float32))])
    x = b.op("Reshape", [g, b.ints([1, 16, -1])])
    x = b.op("ConvTranspose", [x, b.weight(16, 8, 4)], strides=[2], pads=[1, 1])
    x = b.op("Add", [x, b.op("GlobalAveragePool", [x])])
    x = b.op("Sub", [x, b.op("GlobalMaxPool", [x])])
    return b.model("one_dimensional", [1, 8, 200], x, opset=17), [1, 8, 200]


def einsum():
    """Einsum as MaxViT and attention code write it: batched contractions (lowered to MatMul),
    an output in another order, a broadcast product, an implicit output; one operand's diagonal
    and a sum over letters (the kernel); then torch.chunk's slice bounds in integer division."""
    b = Builder(12)
    q = b.op("Mul", ["input", b.scalar(0.5)])
    k = b.op("Add", ["input", b.const(b.rng.standard_normal((1, 1, 6, 8)).astype(np.float32))])
    scores = b.op("Einsum", [q, k], equation="bhid,bhjd->bhij")
    p = b.op("Softmax", [scores], axis=-1)
    o = b.op("Einsum", [p, "input"], equation="bhij,bhjd->bihd")
    o = b.op("Einsum", [o, b.weight(8, 6)], equation="bihd,de->bihe")
    o = b.op("Einsum", [b.op("Einsum", [scores], equation="bhii->bhi"), o],
             equation="bhi,bihe->bihe")
    total = b.op("Einsum", [o], equation="bihe->be")
    o = b.op("Add", [o, b.op("Unsqueeze", [total, b.ints([1, 2])])])
    o = b.op("Add", [o, b.op("Einsum", [o, b.weight(6, 6)], equation="abcd,de")])
    width = b.op("Gather", [b.op("Shape", [o]), b.ints(3)])
    chunk = b.op("Div", [b.op("Add", [width, b.ints(2)]), b.ints(3)])  # (6 + 2) / 3 = 2
    end = b.op("Mul", [chunk, b.ints(2)])
    o = b.op("Slice", [o, b.op("Unsqueeze", [chunk, b.ints([0])]),
                       b.op("Unsqueeze", [end, b.ints([0])]), b.ints([3])])
    return b.model("einsum", [2, 3, 6, 8], o, opset=13), [2, 3, 6, 8]


def token_positions():
    """RoBERTa's embeddings: position ids counted at run time from the int64 tokens that are
    not padding (a comparison, Cast, CumSum, Mul, Add, an integer Div), read by a Gather and by
    GatherElements; a reversed exclusive CumSum of floats."""
    b = Builder(13)
    seq, vocab, embed = 12, 50, 8
    kept = b.op("Cast", [b.op("Greater", ["input", b.ints(-20)])], to=TensorProto.INT32)
    counted = b.op("Mul", [b.op("CumSum", [kept, b.ints(1)]), kept])
    positions = b.op("Add", [b.op("Cast", [counted], to=TensorProto.INT64), b.ints(1)])
    x = b.op("Gather", [b.weight(vocab, embed, scale=1.0), "input"])
    x = b.op("Add", [x, b.op("Gather", [b.weight(seq + 2, embed, scale=1.0), positions])])
    kinds = b.op("GatherElements", [b.const(b.rng.integers(0, 3, (2, seq + 2)).astype(np.int64)),
                                    positions], axis=1)
    x = b.op("Add", [x, b.op("Gather", [b.weight(3, embed, scale=1.0), kinds])])
    halves = b.op("Cast", [b.op("Div", [positions, b.ints(2)])], to=TensorProto.FLOAT)
    x = b.op("Add", [x, b.op("Unsqueeze", [halves, b.ints([2])])])
    x = b.op("Sub", [x, b.op("CumSum", [x, b.ints(-2)], exclusive=1, reverse=1)])
    return b.model("token_positions", [2, seq], x, opset=14,
                   input_type=TensorProto.INT64), [2, seq]


def dcgan():
    """The AutoTVM paper's DCGAN generator, scaled down: ConvTranspose (stride 2, pads 1),
    BatchNormalization and Relu between them, Tanh at the end."""
    b = Builder(9)
    h = b.op("ConvTranspose", ["input", b.weight(16, 32, 4, 4)], kernel_shape=[4, 4])
    h = b.op("Relu", [b.bn(h, 32)])
    h = b.op("ConvTranspose", [h, b.weight(32, 16, 4, 4)], kernel_shape=[4, 4], strides=[2, 2],
             pads=[1, 1, 1, 1])
    h = b.op("Relu", [b.bn(h, 16)])
    h = b.op("ConvTranspose", [h, b.weight(16, 3, 4, 4), b.const(np.zeros(3, np.float32))],
             kernel_shape=[4, 4], strides=[2, 2], pads=[1, 1, 1, 1])
    return b.model("dcgan_generator", [1, 16, 1, 1], b.op("Tanh", [h])), [1, 16, 1, 1]


def matmul_broadcast():
    """MatMul whose batch dimensions broadcast: [2, 1, 3, 4] x [3, 4, 5] (both sides grow),
    then a 2-D left operand against the batched result's transpose."""
    b = Builder(11)
    y = b.op("MatMul", ["input", b.weight(3, 4, 5)])
    y = b.op("MatMul", [b.weight(6, 5), b.op("Transpose", [y], perm=[0, 1, 3, 2])])
    return b.model("matmul_broadcast", [2, 1, 3, 4], y), [2, 1, 3, 4]


def recurrent_lm():
    """A language model in small: int64 token ids read by an embedding
    Gather, a bidirectional LSTM with biases and initial states whose three outputs are all read,
    then GRUs with and without linear_before_reset, one of them reversed."""
    b = Builder(10)
    seq, vocab, embed, hidden = 6, 50, 8, 5
    x = b.op("Transpose", [b.op("Gather", [b.weight(vocab, embed, scale=1.0), "input"])],
             perm=[1, 0, 2])
    states = [b.weight(2, 1, hidden, scale=0.5) for _ in range(2)]
    lstm_out = [b.name("lstm_y"), b.name("lstm_h"), b.name("lstm_c")]
    b.nodes.append(helper.make_node(
        "LSTM", [x, b.weight(2, 4 * hidden, embed), b.weight(2, 4 * hidden, hidden),
                 b.weight(2, 8 * hidden, scale=0.3), "", states[0], states[1]],
        lstm_out, hidden_size=hidden, direction="bidirectional"))
    y = b.op("Reshape", [b.op("Transpose", [lstm_out[0]], perm=[0, 2, 1, 3]),
                         b.ints([seq, 1, 2 * hidden])])
    last = b.op("Add", [b.op("Reshape", [lstm_out[1], b.ints([1, 1, 2 * hidden])]),
                        b.op("Reshape", [lstm_out[2], b.ints([1, 1, 2 * hidden])])])
    y = b.op("Add", [y, last])
    grus = []
    for lbr, direction in ((0, "reverse"), (1, "forward")):
        out = b.name("gru_y")
        b.nodes.append(helper.make_node(
            "GRU", [y, b.weight(1, 12, 2 * hidden), b.weight(1, 12, 4),
                    b.weight(1, 24, scale=0.3)], [out], hidden_size=4, direction=direction,
            linear_before_reset=lbr))
        grus.append(out)
    return b.model("recurrent_lm", [1, seq], b.op("Add", grus), opset=14,
                   input_type=TensorProto.INT64), [1, seq]


def resize():
    """Resize as exporters write it: nearest x2 (asymmetric, floor: torch's interpolate),
    bilinear to given sizes (pytorch_half_pixel), nearest at a fractional scale whose ties round
    up (round_prefer_ceil), and between convolutions."""
    b = Builder(12)
    empty = b.const(np.array([], dtype=np.float32))
    h = b.op("Relu", [b.conv("input", 3, 8, 3, pad=1)])
    h = b.op("Resize", [h, empty, b.const(np.array([1, 1, 2, 2], dtype=np.float32))],
             mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    h = b.conv(h, 8, 8, 3, pad=1)
    h = b.op("Resize", [h, empty, empty, b.ints([1, 8, 23, 17])], mode="linear",
             coordinate_transformation_mode="pytorch_half_pixel")
    h = b.op("Resize", [h, empty, b.const(np.array([1, 1, 0.5, 1.5], dtype=np.float32))],
             mode="nearest", nearest_mode="round_prefer_ceil")
    return b.model("resize", [1, 3, 10, 7], b.conv(h, 8, 4, 1)), [1, 3, 10, 7]


def upsample():
    """Upsample, the operator before Resize (opset 9): nearest and linear, asymmetric."""
    b = Builder(13)
    h = b.op("Upsample", ["input", b.const(np.array([1, 1, 2, 3], dtype=np.float32))],
             mode="nearest")
    h = b.op("Upsample", [h, b.const(np.array([1, 1, 1.5, 2], dtype=np.float32))],
             mode="linear")
    return b.model("upsample", [1, 2, 5, 4], b.op("Relu", [h]), opset=9), [1, 2, 5, 4]


def ort_run(path, x, threads, repeat):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    feed = {sess.get_inputs()[0].name: x}
    out = sess.run(None, feed)[0]
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        sess.run(None, feed)
        times.append(time.perf_counter() - start)
    return out, 1e3 * float(np.median(times))


def relative_error(got, expected):
    return float(np.max(np.abs(got - expected)) / max(float(np.max(np.abs(expected))), 1e-30))


def run_library(args, path, in_path, name):
    """Compiles the model into one shared object and runs that; returns (output, report)."""
    lib = os.path.join(args.workdir, name + ".so")
    out_path = os.path.join(args.workdir, name + ".so.out.npy")
    steps = [[args.tessera, "compile", path, "--trials", "0", "-o", lib],
             [args.tessera, "run-model", lib, "--input", in_path, "--output", out_path,
              "--threads", str(args.threads), "--repeat", "5", "--json"]]
    for cmd in steps:
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[1:3])}: exit {run.returncode}: {run.stderr.strip()}")
    return np.load(out_path), json.loads(run.stdout)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--tessera", required=True, help="path of the tessera binary")
    p.add_argument("--workdir", required=True, help="where the models and arrays are written")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--tolerance", type=float, default=1e-3)
    p.add_argument("--only", nargs="*", help="run these models only (by builder name)")
    args = p.parse_args()
    os.makedirs(args.workdir, exist_ok=True)

    failures = 0
    print(f"{'model':<22} {'max rel err':>12} {'.so err':>9} {'tessera ms':>11} {'.so ms':>8} "
          f"{'ort ms':>9}  kernels")
    for build in (mlp, dqn, resnet, mobilenet, misc, se_block, grouped, shuffle, encoder, more_ops,
                  dcgan, matmul_broadcast, recurrent_lm, resize, upsample, masks, exporter_extras,
                  one_dimensional, einsum, token_positions, long_attention):
        if args.only and build.__name__ not in args.only:
            continue
        model, shape = build()
        name = model.graph.name
        path = os.path.join(args.workdir, name + ".onnx")
        onnx.save(model, path)
        if model.graph.input[0].type.tensor_type.elem_type == TensorProto.INT64:
            x = np.random.default_rng(7).integers(-50, 50, shape).astype(np.int64)
        else:
            x = np.random.default_rng(7).uniform(-1, 1, shape).astype(np.float32)
        in_path = os.path.join(args.workdir, name + ".in.npy")
        out_path = os.path.join(args.workdir, name + ".out.npy")
        np.save(in_path, x)
        expected, ort_ms = ort_run(path, x, args.threads, args.repeat)
        cmd = [args.tessera, "run-model", path, "--input", in_path, "--output", out_path,
               "--threads", str(args.threads), "--repeat", "5", "--json"]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            print(f"{name:<22} FAILED: exit {run.returncode}: {run.stderr.strip()}")
            failures += 1
            continue
        report = json.loads(run.stdout)
        got = np.load(out_path)
        if got.shape != expected.shape:
            print(f"{name:<22} FAILED: shape {got.shape}, onnxruntime {expected.shape}")
            failures += 1
            continue
        err = relative_error(got, expected)
        try:
            lib_out, lib_report = run_library(args, path, in_path, name)
        except RuntimeError as e:
            print(f"{name:<22} FAILED: {e}")
            failures += 1
            continue
        lib_err = relative_error(lib_out, expected) if lib_out.shape == expected.shape else np.inf
        ok = err <= args.tolerance and lib_err <= args.tolerance
        failures += not ok
        if name == "long_attention" and not any(
                k["workload"].startswith("attention:") for k in report["kernels"]):
            print(f"{name:<22} FAILED: not run as one attention operator")
            ok = False
            failures += 1
        kernels = len(report["kernels"])
        print(f"{name:<22} {err:>12.2e} {lib_err:>9.2e} {report['ms_median']:>11.3f} "
              f"{lib_report['ms_median']:>8.3f} {ort_ms:>9.3f}  "
              f"{kernels} in {report['steps']} steps, {report['nodes_imported']} -> "
              f"{report['nodes']} nodes{'' if ok else '  FAILED'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
