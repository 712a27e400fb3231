"""Bad input from Python: a tessera.Error (or TypeError for a wrong Python type) with one line,
never a crash, a hang or a file overwritten."""

import numpy as np
import pytest

import tessera
from tessera import strategy as s
from tessera import te


def constant(n=4):
    return te.lower("c", [te.compute((n,), lambda i: 1.0, name="B")])


ERRORS = {
    "negative extent": lambda: te.placeholder((-1, 4), name="A"),
    "zero extent": lambda: te.compute((0,), lambda i: 1.0, name="B"),
    "2^40 loop": lambda: tessera.build(te.lower("h", [te.compute((1 << 40,), lambda i: 1.0, name="B")])),
    "wrong index count": lambda: te.compute((4,), lambda i: te.placeholder((4, 4), name="A")[i], name="B"),
    "float index": lambda: te.compute((4,), lambda i: te.placeholder((4,), name="A")[1.5], name="B"),
    "int literal past int32": lambda: te.placeholder((4,), name="A")[2**40],
    "nothing to lower": lambda: te.lower("n", []),
    "no compute to lower": lambda: te.lower("n", [te.placeholder((4,), name="A")]),
    "unnamed tensor": lambda: te.compute((4,), lambda i: 1.0, name=""),
    "strategy nested 100000 deep": lambda: s.parse("(" * 100000 + "id" + ")" * 100000),
    "repeat_n past the budget": lambda: tessera.apply(s.repeat_n(s.id(), 2**31 - 1), constant()),
    "workload past 2^31 elements": lambda: tessera.operator(
        "conv2d:N=16,C=1048576,H=1048576,W=1048576,O=1,K=1,S=1048576,P=0"),
    "threads 0": lambda: tessera.set_num_threads(0),
    "missing records DB": lambda: tessera.Records("/nonexistent/x.db").list(),
    "records DB that is not one": lambda: tessera.Records("/etc/passwd").list(),
    "library that is a folder": lambda: tessera.load("/tmp"),
    "library that is not one": lambda: tessera.load("/etc/passwd"),
    "model that is a folder": lambda: tessera.compile("/tmp"),
    "tuning threads past 1024": lambda: tessera.tune("matmul:M=8,N=8,K=8", trials=1,
                                                     db="/nonexistent/never.db", threads=99999,
                                                     progress=False),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_refused_with_one_line(name):
    with pytest.raises(tessera.Error) as e:
        ERRORS[name]()
    assert str(e.value) and "\n" not in str(e.value)


def test_wrong_python_types_are_type_errors():
    with pytest.raises(TypeError):
        te.compute((4,), lambda i: "x", name="B")
    with pytest.raises(TypeError):
        s.split("i", 2**63)
    with pytest.raises(TypeError):
        tessera.tune("matmul:M=8,N=8,K=8", trials=1, db="/nonexistent/never.db", seed=-1, progress=False)


def test_a_constant_body_is_float32_and_a_python_exception_passes_through():
    assert te.compute((4,), lambda i: 1.0, name="B").dtype == "float32"
    with pytest.raises(ZeroDivisionError):
        te.compute((4,), lambda i: 1 / 0, name="B")


def test_refused_tuning_creates_no_db(tmp_path):
    db = tmp_path / "never.db"
    with pytest.raises(tessera.Error, match="unknown tuner"):
        tessera.tune("matmul:M=8,N=8,K=8", trials=1, db=db, tuner="junk", progress=False)
    with pytest.raises(tessera.Error, match="unknown tuner"):
        tessera.tune_all(["matmul:M=8,N=8,K=8"], trials=1, db=db, tuner="junk", progress=False)
    with pytest.raises(tessera.Error, match="unknown scheduler 'fastest'"):
        tessera.tune_all(["matmul:M=8,N=8,K=8"], trials=1, db=db, scheduler="fastest",
                         progress=False)
    assert not db.exists()


def test_outputs_never_overwrite_their_inputs(tmp_path):
    db = tmp_path / "r.db"
    tessera.tune("matmul:M=8,N=8,K=8", trials=2, db=db, threads=1, progress=False)
    before = db.read_bytes()
    with pytest.raises(tessera.Error, match="over an input"):
        tessera.Records(db).export(db)
    with pytest.raises(tessera.Error, match="not a regular file"):
        tessera.Records(db).export("/dev/full")
    assert db.read_bytes() == before
    kernel = tessera.build(constant())
    with pytest.raises(tessera.Error, match="C-contiguous"):
        kernel(np.empty(8, np.float32)[::2])
