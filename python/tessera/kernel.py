"""Kernels: a loop program compiled to C, loaded, and called on numpy arrays."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from . import _tessera
from ._tessera import Error, Timing
from ._tessera.te import Program


class Kernel:
    """A compiled loop program. Call it with its inputs to get new outputs (inputs of another
    dtype or order are converted), or with inputs and outputs to write the outputs in place:
    then every array must be C-contiguous, of the kernel's dtype and shape, and no output may
    overlap another array (nothing is copied)."""

    def __init__(self, native: _tessera.Kernel):
        self._native = native
        program = native.program
        self._inputs = [(shape, np.dtype(dtype)) for _, shape, dtype in program.inputs]
        self._outputs = [(shape, np.dtype(dtype)) for _, shape, dtype in program.outputs]
        self._n_all = len(self._inputs) + len(self._outputs)

    @property
    def program(self) -> Program:
        return self._native.program

    @property
    def source(self) -> str:
        """The generated C."""
        return self._native.source

    def _arguments(self, arrays: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
        if len(arrays) == self._n_all:
            return tuple(arrays)  # in place: the C++ side checks them and converts nothing
        if len(arrays) != len(self._inputs):
            raise Error(f"kernel {self.program.name} takes {len(self._inputs)} inputs "
                        f"(and optionally {len(self._outputs)} outputs), given {len(arrays)} "
                        "arrays")
        inputs = [np.ascontiguousarray(a, dtype) for a, (_, dtype) in zip(arrays, self._inputs)]
        return (*inputs, *(np.empty(shape, dtype) for shape, dtype in self._outputs))

    def __call__(self, *arrays: np.ndarray):
        arguments = self._arguments(arrays)
        self._native.run(*arguments)
        outputs = arguments[len(self._inputs):]
        return outputs[0] if len(outputs) == 1 else outputs

    def time(self, *arrays: np.ndarray, repeat: int = 5, min_repeat_ms: float = 100) -> Timing:
        """Seconds per call on these arrays: ``repeat`` repeats of calls back to back, each
        repeat at least ``min_repeat_ms`` long (as ``tessera run`` times)."""
        return self._native.time(*self._arguments(arrays), repeat=repeat,
                                 min_repeat_ms=min_repeat_ms)

    def __repr__(self) -> str:
        return f"<Kernel {self.program.name}>"


def build(program: Program) -> Kernel:
    """Compiles ``program`` (C through the system compiler) and loads it."""
    return Kernel(_tessera.build(program))


class Operator:
    """A library operator at one workload, e.g. ``operator("matmul:M=64,N=64,K=64")``: its
    plain loop program, its FLOPs and its naive reference."""

    def __init__(self, workload: str):
        self.workload = _tessera.canonical_workload(workload)
        self._native = _tessera.operator(workload)

    @property
    def program(self) -> Program:
        return self._native.program

    @property
    def flops(self) -> float:
        return self._native.flops

    def reference(self, *inputs: np.ndarray):
        """The operator's outputs computed naively in float64."""
        program = self.program
        args = [np.ascontiguousarray(a, np.float64) for a in inputs]
        if len(args) != len(program.inputs):
            raise Error(f"{self.workload} takes {len(program.inputs)} inputs, given {len(args)}")
        outputs = [np.empty(shape, np.float64) for _, shape, _ in program.outputs]
        self._native.reference(args + outputs)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def random_inputs(self, seed: int = 0) -> list[np.ndarray]:
        """Inputs of the right shapes, uniform in [-1, 1)."""
        rng = np.random.default_rng(seed)
        return [rng.uniform(-1, 1, shape).astype(dtype) for _, shape, dtype in self.program.inputs]

    def __repr__(self) -> str:
        return f"<Operator {self.workload}>"


def operator(workload: str) -> Operator:
    return Operator(workload)


def set_num_threads(n: int) -> None:
    """OpenMP threads of kernels run in this process (1 to 1024)."""
    if not 1 <= n <= 1024:
        raise Error(f"threads must be 1 to 1024, given {n}")
    _tessera.set_num_threads(n)


num_threads = _tessera.num_threads
