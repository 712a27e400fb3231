"""Tuning from Python into a records DB, and the records read back."""

import json

import pytest

import tessera

WORKLOAD = "matmul:M=32,N=32,K=32"


def test_tune_records_and_progress(tmp_path):
    db = tmp_path / "t.db"
    updates = []
    result = tessera.tune(WORKLOAD, trials=8, db=db, threads=1, seed=1,
                          progress=updates.append)
    assert result.trials == 8 and result.best_gflops > 0
    assert updates and updates[-1]["trials_total"] == 8
    assert max(u["trials_done"] for u in updates) == 8
    records = tessera.Records(db)
    listed = records.list(WORKLOAD)
    assert len(listed) >= 8 and all(r["workload"] == WORKLOAD for r in listed)
    best = records.best(WORKLOAD)
    assert best is not None and best["strategy"]
    out = tmp_path / "records.jsonl"
    assert records.export(out) == len(records.list())
    assert json.loads(out.read_text().splitlines()[0])["workload"] == WORKLOAD
    with pytest.raises(tessera.Error):
        records.export(db)  # never over the DB
    assert records.best("matmul:M=8,N=8,K=8") is None


def test_bad_tuning_input(tmp_path):
    with pytest.raises(tessera.Error, match="no file"):
        tessera.tune(WORKLOAD, trials=4, db=":memory:", progress=False)
    with pytest.raises(tessera.Error):
        tessera.tune("matmul:M=0", trials=4, db=tmp_path / "x.db", progress=False)
    with pytest.raises(tessera.Error, match="trials"):
        tessera.tune(WORKLOAD, trials=0, db=tmp_path / "x.db", progress=False)


def test_early_stop(tmp_path):
    result = tessera.tune(WORKLOAD, trials=64, db=tmp_path / "e.db", tuner="random", threads=1,
                          early_stop=1, batch_size=1, progress=False)
    assert result.stopped_early and result.trials < 64


def test_treegru_tuner_from_python(tmp_path):
    # The TreeGRU's network is a library the module opens on the first fit (batches of 4: the
    # model is fitted after the first one).
    result = tessera.tune(WORKLOAD, trials=8, db=tmp_path / "g.db", tuner="treegru", threads=1,
                          seed=2, batch_size=4, progress=False)
    assert result.trials == 8 and result.best_gflops > 0
