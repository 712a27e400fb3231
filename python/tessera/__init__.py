"""tessera: a tensor compiler that learns to optimize tensor programs.

Operators are index expressions (:mod:`tessera.te`), schedules are strategies
(:mod:`tessera.strategy`), kernels are built and called on numpy arrays (:func:`build`),
tuned with a learned cost model into a records DB (:func:`tune`), and whole ONNX models
compile to one library (:func:`compile`, :func:`load`).
"""

from . import _tessera, strategy, te
from ._tessera import Error, TuneResult, Timing
from .kernel import Kernel, Operator, build, num_threads, operator, set_num_threads
from .model import LoadedModel, Model, Value, compile, load
from .strategy import StrategyFailed, apply
from .te import lower
from .tuning import Records, target_key, tune, tune_all

__version__ = _tessera.__version__

__all__ = [
    "Error", "Kernel", "LoadedModel", "Model", "Operator", "Records", "StrategyFailed",
    "Timing", "TuneResult", "Value", "apply", "build", "compile", "load", "lower",
    "num_threads", "operator", "set_num_threads", "strategy", "target_key", "te", "tune",
    "tune_all",
]
