"""Shared fixtures: ONNX models built with the `onnx` package (tests/graph's builders) and a
ResNet-18 with random weights for the README's example."""

import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "graph"))


def resnet18():
    """torchvision's ResNet-18 as its legacy export lays it out (Conv, BatchNormalization,
    Relu, MaxPool, Add, GlobalAveragePool, Flatten, Gemm), with seeded random weights."""
    from compare_onnxruntime import Builder

    b = Builder(18)

    def conv_bn(x, c_in, c_out, k, stride, pad):
        return b.bn(b.conv(x, c_in, c_out, k, stride, pad, bias=False), c_out)

    def block(x, c_in, c_out, stride):
        h = b.op("Relu", [conv_bn(x, c_in, c_out, 3, stride, 1)])
        h = conv_bn(h, c_out, c_out, 3, 1, 1)
        shortcut = x if stride == 1 and c_in == c_out else conv_bn(x, c_in, c_out, 1, stride, 0)
        return b.op("Relu", [b.op("Add", [h, shortcut])])

    h = b.op("Relu", [conv_bn("input", 3, 64, 7, 2, 3)])
    h = b.op("MaxPool", [h], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c = 64
    for c_out, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        h = block(h, c, c_out, stride)
        h = block(h, c_out, c_out, 1)
        c = c_out
    h = b.op("Flatten", [b.op("GlobalAveragePool", [h])], axis=1)
    return b.model("resnet18", [1, 3, 224, 224], b.gemm(h, 512, 1000))


@pytest.fixture(scope="session")
def small_resnet(tmp_path_factory):
    """A ResNet-style model (two blocks) as a file, with its input shape."""
    import onnx
    from compare_onnxruntime import resnet

    model, shape = resnet()
    path = tmp_path_factory.mktemp("models") / "resnet_block.onnx"
    onnx.save(model, str(path))
    return str(path), shape


def relative_error(got, expected):
    return float(np.max(np.abs(got - expected)) / max(np.max(np.abs(expected)), 1e-30))


def onnxruntime_run(path, inputs):
    import onnxruntime as ort

    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feed = {i.name: x for i, x in zip(sess.get_inputs(), inputs)}
    return sess.run(None, feed)
