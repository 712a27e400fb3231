"""Whole models: ONNX in, a compiled model out, run on numpy arrays, saved as a library."""

from __future__ import annotations

import json
import os
from typing import NamedTuple

import numpy as np

from . import _tessera
from ._tessera import Error
from .tuning import Progress, _run, _worker


class Value(NamedTuple):
    name: str
    shape: list[int]
    dtype: str  # float32, or int64 for token ids


class _Runs:
    """Calling a model: inputs by position or name, outputs as new arrays."""

    inputs: list[Value]
    outputs: list[Value]

    def _prepare(self, args, kwargs) -> list[np.ndarray]:
        if kwargs:
            if args:
                raise Error("give a model's inputs by position or by name, not both")
            missing = [v.name for v in self.inputs if v.name not in kwargs]
            unknown = sorted(set(kwargs) - {v.name for v in self.inputs})
            if missing or unknown:
                raise Error(f"model inputs are {[v.name for v in self.inputs]}; "
                            f"missing {missing}, unknown {unknown}")
            args = [kwargs[v.name] for v in self.inputs]
        if len(args) != len(self.inputs):
            raise Error(f"the model takes {len(self.inputs)} inputs, given {len(args)}")
        return [np.ascontiguousarray(a, np.int64 if v.dtype == "int64" else np.float32)
                for a, v in zip(args, self.inputs)]

    def __call__(self, *args: np.ndarray, **kwargs: np.ndarray):
        """The model's outputs for these inputs: one array, or a tuple for several."""
        inputs = self._prepare(args, kwargs)
        outputs = [np.empty(v.shape, np.float32) for v in self.outputs]
        self._native.run(inputs, outputs)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)


class Model(_Runs):
    """A model compiled in this process."""

    def __init__(self, native, graph, source: str):
        self._native = native
        self.inputs = [Value(*v) for v in graph.inputs]
        self.outputs = [Value(*v) for v in graph.outputs]
        self.source = source

    @property
    def kernels(self) -> list[dict]:
        """Each distinct kernel: its workload, where its schedule came from (db, default,
        fixed, plain), the strategy, and how many steps run it."""
        return [dict(workload=w, schedule=s, strategy=t, uses=u)
                for w, s, t, u in self._native.kernels]

    def profile(self, repeat: int = 10) -> list[float]:
        """Milliseconds per run of each kernel (``kernels`` order)."""
        return self._native.profile(repeat)

    def save(self, path: str | os.PathLike) -> None:
        """Writes the model as one shared object, the same ``tessera compile -o`` writes:
        ``tessera run-model`` runs it, ``load`` and the C interface load it."""
        self._native.save(os.fspath(path))

    def __repr__(self) -> str:
        return f"<Model {self.source or '(bytes)'}: {len(self.kernels)} kernels>"


class LoadedModel(_Runs):
    """A model library written by ``Model.save`` or ``tessera compile -o``."""

    def __init__(self, native, path: str):
        self._native = native
        self.inputs = [Value(*v) for v in native.inputs]
        self.outputs = [Value(*v) for v in native.outputs]
        self.path = path

    @property
    def description(self) -> dict:
        """Source model, target, kernels and where their schedules came from."""
        return json.loads(self._native.description)

    def __repr__(self) -> str:
        return f"<LoadedModel {self.path}>"


def _import(model):
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        return _tessera.import_onnx(path), path
    if isinstance(model, (bytes, bytearray)):
        return _tessera.import_onnx_bytes(bytes(model)), ""
    if hasattr(model, "SerializeToString"):  # an onnx.ModelProto
        return _tessera.import_onnx_bytes(model.SerializeToString()), ""
    raise Error("a model is a path to an ONNX file, its bytes, or an onnx.ModelProto")


def compile(model, *, trials: int = 0, db: str | os.PathLike | None = None, threads: int = 0,
            layout: str = "nchwc", conv_algorithm: str = "auto", tuner: str = "xgb",
            seed: int = 0, pretrained: str = "", scheduler: str = "predicted",
            progress: Progress = True) -> Model:
    """Compiles an ONNX model (a path, bytes or an ``onnx.ModelProto``).

    Each library operator runs the records DB's best configuration for this machine where
    ``db`` has one, else its default; ``trials`` > 0 first tunes the model's operators as one
    task list into ``db`` (``scheduler`` as for :func:`tune_all`). As ``tessera compile`` does,
    a tuned kernel that runs slower inside the model than its default is replaced by the
    default.
    """
    if layout not in ("nchwc", "nchw"):
        raise Error(f"layout must be nchwc or nchw, not {layout!r}")
    if conv_algorithm not in ("auto", "direct"):
        raise Error(f"conv_algorithm must be auto or direct, not {conv_algorithm!r}")
    graph, source = _import(model)
    graph.run_passes(layout == "nchwc", conv_algorithm == "auto")
    db_path = "" if db is None else os.fspath(db)
    if trials > 0:
        if not db_path:
            raise Error("tuning a model needs a records DB: compile(..., trials=N, db='tessera.db')")
        workloads = list(dict.fromkeys(graph.library_workloads()))
        if workloads:
            _run(progress, "compile", lambda report: _tessera.tune_all(
                workloads, trials, db_path, tuner, threads, seed, pretrained, scheduler, _worker(),
                report))
    native = _tessera.compile_graph(graph, db_path, threads, True, source)
    return Model(native, graph, source)


def load(path: str | os.PathLike) -> LoadedModel:
    """Loads a model library (``Model.save``, ``tessera compile -o``)."""
    path = os.fspath(path)
    if "/" not in path:
        path = "./" + path  # a bare name would be searched on the loader's path
    return LoadedModel(_tessera.ModelLibrary.load(path), path)
