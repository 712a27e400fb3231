"""Tensor expressions, as TVM's ``te``: placeholders, computes and reductions.

A compute's body is a Python function of one loop variable per output dimension; the
loops of the lowered program take the function's parameter names::

    A = te.placeholder((64, 64), name="A")
    B = te.placeholder((64, 64), name="B")
    k = te.reduce_axis(64, "k")
    C = te.compute((64, 64), lambda i, j: te.sum(A[i, k] * B[k, j], [k]), name="C")
"""

from __future__ import annotations

import inspect
from typing import Callable, Sequence

from ._tessera import te as _te

Expr = _te.Expr
Var = _te.Var
IterVar = _te.IterVar
Tensor = _te.Tensor
Program = _te.Program

reduce_axis = _te.reduce_axis
sum = _te.sum  # noqa: A001 - te's reduction, as in TVM
max = _te.max  # noqa: A001
min = _te.min  # noqa: A001
maximum = _te.maximum
minimum = _te.minimum
exp = _te.exp
log = _te.log
sqrt = _te.sqrt
tanh = _te.tanh
sigmoid = _te.sigmoid
erf = _te.erf
select = _te.select
eq = _te.eq
ne = _te.ne


def cast(dtype: str, value) -> Expr:
    """``value`` converted to ``dtype`` (bool, int32, float32, float64)."""
    return _te.cast(dtype, value)


def placeholder(shape: Sequence[int], name: str, dtype: str = "float32") -> Tensor:
    """An input tensor of the given shape."""
    return _te.placeholder(list(shape), name, dtype)


def _parameter_names(body: Callable, count: int) -> list[str]:
    try:
        params = list(inspect.signature(body).parameters.values())
    except (TypeError, ValueError):  # a builtin or a callable without a signature
        return []
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return names if len(names) == count else []


def compute(shape: Sequence[int], body: Callable[..., object], name: str,
            axis_names: Sequence[str] | None = None) -> Tensor:
    """A tensor whose element at each index is ``body(*index)``.

    The loops are named after ``axis_names``, else after ``body``'s parameters, else
    i, j, k, ...
    """
    shape = list(shape)
    names = list(axis_names) if axis_names is not None else _parameter_names(body, len(shape))
    return _te.compute(shape, body, name, names)


def lower(name: str, tensors: Sequence[Tensor]) -> Program:
    """The loop program computing the compute tensors of ``tensors`` from its placeholders.

    Placeholders become the kernel's inputs and computes its outputs, in the order given.
    """
    return _te.lower(name, list(tensors))


parse_program = _te.parse_program
