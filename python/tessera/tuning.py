"""Tuning into a records DB, and the records themselves."""

from __future__ import annotations

import json
import os
import sys
from typing import Callable, Sequence, Union

from . import _tessera
from ._tessera import Error, TuneResult

Progress = Union[bool, None, Callable[[dict], None]]


def _worker() -> str:
    """The measurement worker installed beside the module; "" for the build tree's own."""
    path = os.path.join(os.path.dirname(_tessera.__file__), "tessera_worker")
    return path if os.path.exists(path) else ""


class _ProgressBar:
    """tqdm where it is installed, else one line per update on stderr."""

    def __init__(self, what: str):
        self.what = what
        self.bar = None
        try:
            from tqdm.auto import tqdm
            self.tqdm = tqdm
        except ImportError:
            self.tqdm = None

    def __call__(self, p: dict) -> None:
        if p.get("retime_rounds"):
            text = f"re-timing {p['retime_round']}/{p['retime_rounds']}"
        else:
            text = (f"best {p['best_gflops']:.2f} GFLOP/s, ETA {p['eta_s']:.0f} s"
                    if "best_gflops" in p else f"{p.get('task', '')}")
        if self.tqdm is not None:
            if self.bar is None:
                self.bar = self.tqdm(total=p["trials_total"], desc=self.what, unit="trial")
            self.bar.n = p["trials_done"]
            self.bar.set_postfix_str(text)
            return
        print(f"{self.what}: {p['trials_done']}/{p['trials_total']} trials, {text}",
              file=sys.stderr)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _reporter(progress: Progress, what: str):
    if progress is True:
        return _ProgressBar(what)
    if progress is False or progress is None:
        return None
    if callable(progress):
        return progress
    raise Error("progress must be True, False, None or a callable taking a dict")


def _run(progress: Progress, what: str, fn):
    reporter = _reporter(progress, what)
    try:
        return fn(reporter)
    finally:
        if isinstance(reporter, _ProgressBar):
            reporter.close()


def tune(workload: str, trials: int = 64, db: str = "tessera.db", *, tuner: str = "xgb",
         threads: int = 0, seed: int = 0, pretrained: str = "", early_stop: int = 0,
         batch_size: int = 64, progress: Progress = True) -> TuneResult:
    """Tunes one workload (``"conv2d:N=1,C=64,..."``, see ``tessera ops``) for ``trials``
    measured configurations, appending every trial to the records DB ``db`` and resuming
    from the records it already holds. ``tuner``: xgb, xgb-reg, treegru, treegru-reg, ga, random or grid.
    ``batch_size`` configurations are measured between model updates; ``early_stop`` > 0
    ends the run after that many trials without a better best, checked after each batch
    (``result.stopped_early``). ``pretrained``: a cost model ``tessera pretrain`` wrote to
    start from; empty (the default): the model shipped for this machine's ISA when ``db``
    holds no record of this machine; ``"none"``: neither. ``progress``: True (a progress
    bar), False, or a callable taking a dict per batch."""
    return _run(progress, "tune", lambda report: _tessera.tune(
        workload, trials, os.fspath(db), tuner, threads, seed, pretrained, early_stop, batch_size,
        _worker(), report))


def tune_all(workloads: Sequence[str], trials: int = 256, db: str = "tessera.db", *,
             tuner: str = "xgb", threads: int = 0, seed: int = 0, pretrained: str = "",
             scheduler: str = "predicted", progress: Progress = True) -> list[TuneResult]:
    """Tunes a list of workloads under one budget of ``trials``, each batch going to the task
    whose cost model forecasts the most time saved (``scheduler="gradient"``: Ansor's gradient
    task scheduler), with transfer across them through ``db``;
    ``pretrained`` as for :func:`tune`."""
    return _run(progress, "tune-all", lambda report: _tessera.tune_all(
        list(workloads), trials, os.fspath(db), tuner, threads, seed, pretrained, scheduler,
        _worker(), report))


class Records:
    """A records DB (read only), as ``tessera db`` shows it. Records are dicts with the
    fields ``tessera db export`` writes."""

    def __init__(self, path: str | os.PathLike = "tessera.db"):
        self.path = os.fspath(path)

    def best(self, workload: str, any_target: bool = False) -> dict | None:
        """The fastest correct record of ``workload`` on this machine (or the standing pick
        of its last re-timing); None when there is none."""
        line = _tessera.db_best(self.path, workload, any_target)
        return None if line is None else json.loads(line)

    def list(self, workload: str | None = None, limit: int = -1,
             only_ok: bool = False) -> list[dict]:
        """Records, all machines; with a limit the most recent first."""
        return [json.loads(line) for line in
                _tessera.db_records(self.path, workload or "", limit, only_ok)]

    def export(self, path: str | os.PathLike) -> int:
        """Writes every record as JSON lines to a new file (never over the DB); returns how
        many."""
        return _tessera.db_export(self.path, os.fspath(path))

    def __repr__(self) -> str:
        return f"Records({self.path!r})"


target_key = _tessera.target_key
