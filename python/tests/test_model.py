"""Whole models from Python against onnxruntime, in process and saved as a library."""

import numpy as np
import pytest

import tessera
from conftest import onnxruntime_run, relative_error


def test_compile_run_save_load(small_resnet, tmp_path):
    path, shape = small_resnet
    model = tessera.compile(path)
    assert [v.shape for v in model.inputs] == [shape]
    x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
    y = model(x)
    expected = onnxruntime_run(path, [x])[0]
    assert y.shape == expected.shape
    assert relative_error(y, expected) < 1e-4
    assert relative_error(model(input=x), expected) < 1e-4  # by name
    assert all(k["schedule"] in ("default", "fixed", "plain") for k in model.kernels)

    library = tmp_path / "model.so"
    model.save(library)
    loaded = tessera.load(library)
    assert relative_error(loaded(x), expected) < 1e-4
    assert loaded.description["kernels"]


def test_compile_from_a_model_proto(small_resnet):
    import onnx

    path, shape = small_resnet
    model = tessera.compile(onnx.load(path), layout="nchw", conv_algorithm="direct")
    x = np.ones(shape, np.float32)
    assert relative_error(model(x), onnxruntime_run(path, [x])[0]) < 1e-4


def test_token_ids_in(tmp_path):
    import onnx
    from compare_onnxruntime import recurrent_lm

    proto, shape = recurrent_lm()
    path = str(tmp_path / "lm.onnx")
    onnx.save(proto, path)
    model = tessera.compile(path)
    assert model.inputs[0].dtype == "int64"
    ids = np.array([[3, -1, 7, 49, 0, 12]], np.int64)
    assert relative_error(model(ids), onnxruntime_run(path, [ids])[0]) < 1e-4


def test_bad_models_and_outputs(small_resnet, tmp_path):
    path, shape = small_resnet
    with pytest.raises(tessera.Error, match="cannot|no such|not"):
        tessera.compile(str(tmp_path / "missing.onnx"))
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not a model")
    with pytest.raises(tessera.Error):
        tessera.compile(broken)
    model = tessera.compile(path, layout="nchw", conv_algorithm="direct")
    with pytest.raises(tessera.Error, match="shape"):
        model(np.ones((1, 3, 8, 8), np.float32))
    before = open(path, "rb").read()
    with pytest.raises(tessera.Error):
        model.save(path)  # never over its own input
    assert open(path, "rb").read() == before
    with pytest.raises(tessera.Error):
        tessera.load(broken)
    with pytest.raises(tessera.Error, match="records DB"):
        tessera.compile(path, trials=4)


def test_compile_tunes_into_the_db_first(small_resnet, tmp_path):
    path, shape = small_resnet
    db = tmp_path / "model.db"
    updates = []
    model = tessera.compile(path, trials=8, db=db, threads=1, progress=updates.append)
    assert updates and updates[-1]["trials_total"] == 8
    records = tessera.Records(db).list()
    assert len(records) >= 8
    x = np.random.default_rng(2).standard_normal(shape, dtype=np.float32)
    assert relative_error(model(x), onnxruntime_run(path, [x])[0]) < 1e-4
    # Each kernel ran the DB's best or, where that was slower in the model, its default.
    assert {k["schedule"] for k in model.kernels} <= {"db", "default", "fixed", "plain"}
