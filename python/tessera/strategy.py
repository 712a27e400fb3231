"""Strategies over loop programs (Elevate): rules, combinators and their composition.

A strategy is a value. ``a >> b`` runs ``a`` then ``b`` (``a ; b``), ``a | b`` runs ``b`` where
``a`` does not apply (``a <+ b``). A Python function that returns a strategy is a strategy
of your own::

    def tile(x, y, fx, fy):
        return split(x, fx) >> split(y, fy) >> reorder([f"{x}.outer", f"{y}.outer",
                                                        f"{x}.inner", f"{y}.inner"])

``apply(s, program)`` returns the rewritten program or raises :class:`StrategyFailed` with
the reason. ``rule(name, fn)`` makes a rule of a Python function from Program to Program
(or None where it does not apply).
"""

from __future__ import annotations

from typing import Callable, Sequence

from ._tessera import Error
from ._tessera import strategy as _s
from ._tessera import te as _te

Strategy = _s.Strategy


class StrategyFailed(Error):
    """A strategy did not apply. ``kind`` is ``not_applicable`` or ``internal_error``."""

    def __init__(self, reason: str, kind: str):
        super().__init__(reason)
        self.reason = reason
        self.kind = kind


def apply(strategy: Strategy, program: _te.Program) -> _te.Program:
    """The program rewritten by ``strategy``; raises StrategyFailed where it does not apply."""
    ok, result, kind, reason = _s.apply(strategy, program)
    if not ok:
        raise StrategyFailed(reason, kind)
    return result


def parse(text: str) -> Strategy:
    """A strategy from its text form, e.g. ``"split(i, 32) ; vectorize(i.inner)"``."""
    return _s.parse(text)


def rule(name: str, fn: Callable[[_te.Program], _te.Program | None]) -> Strategy:
    """A rule whose step is ``fn``: the rewritten program, or None where it does not apply."""
    return _s.rule(name, fn)


def seq(*steps: Strategy) -> Strategy:
    """The steps one after another; ``seq()`` is ``id``."""
    return _s.seq(list(steps))


def reorder(*loops: str | Sequence[str]) -> Strategy:
    """The loops of one nest in this order: ``reorder("j", "i")`` or ``reorder(["j", "i"])``."""
    if len(loops) == 1 and not isinstance(loops[0], str):
        loops = tuple(loops[0])
    return _s.reorder(list(loops))


# Traversals (Elevate's all, one, some and those derived from them) over the program's
# statements: build a StmtStrategy, e.g. ``s.top_down(s.is_loop("j") >> s.unroll_loop_here())``,
# and run it on a program with ``body(...)``.
StmtStrategy = _s.StmtStrategy
body = _s.body
stmt_id = _s.stmt_id
stmt_try = _s.stmt_try
stmt_repeat = _s.stmt_repeat
all = _s.all  # noqa: A001 - Elevate's name
one = _s.one
some = _s.some
top_down = _s.top_down
bottom_up = _s.bottom_up
all_top_down = _s.all_top_down
all_bottom_up = _s.all_bottom_up
try_all = _s.try_all
normalize = _s.normalize
position = _s.position
is_loop = _s.is_loop
unroll_loop_here = _s.unroll_loop_here
vectorize_loop_here = _s.vectorize_loop_here
inline_unit_loop = _s.inline_unit_loop

named = _s.named
id = _s.id  # noqa: A001 - Elevate's name
fail = _s.fail
lchoice = _s.lchoice
try_ = _s.try_
repeat = _s.repeat
repeat_n = _s.repeat_n
split = _s.split
fuse = _s.fuse
vectorize = _s.vectorize
unroll = _s.unroll
parallel = _s.parallel
compute_at = _s.compute_at
reverse_compute_at = _s.reverse_compute_at
rfactor = _s.rfactor
compute_inline = _s.compute_inline
cache_write = _s.cache_write
cache_read = _s.cache_read
gather = _s.gather
drop_init = _s.drop_init
fuse_write_back = _s.fuse_write_back
merge_dims = _s.merge_dims
pack = _s.pack
prefetch = _s.prefetch
prefetch_next = _s.prefetch_next
reverse = _s.reverse
tile = _s.tile
tile_nd = _s.tile_nd
permute = _s.permute
