"""Shared fixtures: ONNX models built with the `onnx` package (tests/graph's builders), among
them a ResNet-18 with random weights for the README's example."""

import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "graph"))


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
