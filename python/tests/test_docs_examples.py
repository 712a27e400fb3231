"""Every Python example of the README and the Python guide runs, in order, in a fresh folder
that holds a ResNet-18 with random weights as resnet18.onnx."""

import os
import re

import pytest

from conftest import ROOT, resnet18

DOCUMENTS = ["README.md", "docs/guide/python.md"]


def python_blocks(path):
    text = open(os.path.join(ROOT, path), encoding="utf-8").read()
    return re.findall(r"```python\n(.*?)```", text, re.S)


@pytest.mark.parametrize("document", DOCUMENTS)
def test_examples_run(document, tmp_path, monkeypatch):
    import onnx

    blocks = python_blocks(document)
    assert blocks, f"{document} has no Python example"
    monkeypatch.chdir(tmp_path)
    if any("resnet18.onnx" in b for b in blocks):
        onnx.save(resnet18(), "resnet18.onnx")
    namespace = {"__name__": "__doc_example__"}
    for i, block in enumerate(blocks):
        exec(compile(block, f"{document} example {i + 1}", "exec"), namespace)
