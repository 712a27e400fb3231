"""Every Python example of the repository's Markdown (the README, docs/guide/python.md, any
other page that gains one) runs, in order, in a fresh folder that holds a ResNet-18 with random
weights as resnet18.onnx."""

import glob
import os
import re

import pytest

from compare_onnxruntime import resnet18  # on the path conftest sets
from conftest import ROOT


def documents_with_python():
    """Every Markdown file of the repository with a Python example (build folders aside)."""
    found = []
    for path in sorted(glob.glob(os.path.join(ROOT, "**", "*.md"), recursive=True)):
        relative = os.path.relpath(path, ROOT)
        if relative.split(os.sep)[0].startswith(("build", ".")):
            continue
        if "```python" in open(path, encoding="utf-8").read():
            found.append(relative)
    return found


DOCUMENTS = documents_with_python()


def python_blocks(path):
    text = open(os.path.join(ROOT, path), encoding="utf-8").read()
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_the_readme_and_the_guide_are_among_them():
    assert {"README.md", os.path.join("docs", "guide", "python.md")} <= set(DOCUMENTS)


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
