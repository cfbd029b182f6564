"""Tests for infoxlm.train.validation: held-out losses and retrieval while pre-training, logged
every run.eval_every steps, without changing what the run trains."""

from __future__ import annotations

import contextlib
import io
import json

import pytest
import torch
from safetensors.torch import load_file
from test_loop import structured_store

from infoxlm.cli import main
from infoxlm.data.store import TokenStore
from infoxlm.train.config import apply_overrides
from infoxlm.train.export import export
from infoxlm.train.loop import pretrain
from infoxlm.train.presets import preset
from infoxlm.train.stopping import RunStopped
from infoxlm.train.validation import Validation

from training_stores import write_store

VAL_KEYS = ("val/mmlm", "val/tlm", "val/retrieval_xx2en", "val/retrieval_en2xx", "val/retrieval_xx2en/de")


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("validation")
    return structured_store(root / "store"), structured_store(root / "held-out", seed=1)


def test_pretrain_logs_validation_every_eval_every_steps(stores, tmp_path, capsys):
    """The acceptance call: val/mmlm, val/tlm and val/retrieval_xx2en at steps 5, 10, 15, 20."""
    store, held_out = stores
    run = tmp_path / "R"
    assert main(["pretrain", "--preset", "test", "--data", str(store), "--output", str(run), "--max-steps", "20",
                 "--validation", str(held_out), "--set", "run.eval_every=5", "--no-progress"]) == 0
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "val/mmlm" in r] == [5, 10, 15, 20]
    for row in (r for r in rows if r["step"] % 5 == 0):
        assert all(key in row for key in VAL_KEYS), row.keys()
        assert 0.0 <= row["val/retrieval_xx2en"] <= 100.0 and row["val/mmlm"] > 0
    assert not any(k.startswith("val/") for r in rows if r["step"] % 5 for k in r)
    out = capsys.readouterr().out
    assert f"  held out  {held_out}: MMLM 64 blocks, TLM 64 pairs, retrieval xx→en at layer 1 (de 30, fr 30 pairs)" in out
    assert "step 5/20: " in out and "val mmlm " in out and "val xx→en " in out


def test_validation_changes_nothing_the_run_trains_and_a_resume_stays_exact(stores, tmp_path):
    """Weights after 8 steps: without validation, and with it every 2 steps stopped at 3 and
    resumed, bit for bit the same (validation draws no random numbers, reads other data)."""
    store, held_out = stores
    cfg = lambda: apply_overrides(preset("test"), ["optim.max_steps=8", "model.dropout=0.1", "run.eval_every=2"])  # noqa: E731
    with contextlib.redirect_stdout(io.StringIO()):
        pretrain(cfg(), store, tmp_path / "plain", progress=False)
        with pytest.raises(RunStopped):
            pretrain(cfg(), store, tmp_path / "validated", progress=False, stop_at=3, validation=held_out)
        pretrain(cfg(), store, tmp_path / "validated", progress=False, validation=held_out)
    a = load_file(export(tmp_path / "plain", tmp_path / "a") / "model.safetensors")
    b = load_file(export(tmp_path / "validated", tmp_path / "b") / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    rows = [json.loads(line) for line in (tmp_path / "validated" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "val/tlm" in r] == [2, 4, 6, 8]


def test_the_held_out_examples_are_fixed_whatever_the_run_seed(stores):
    store, held_out = stores
    train = TokenStore.open(store)
    one = Validation(held_out, apply_overrides(preset("test"), ["run.seed=1"]), train)
    two = Validation(held_out, apply_overrides(preset("test"), ["run.seed=2"]), train)
    for a, b in zip(one.mmlm + one.tlm, two.mmlm + two.tlm):
        assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.targets, b.targets)
    assert sum(b.num_examples for b in one.mmlm) == 64 and set(one.pairs) == {"de", "fr"}
    assert one.pairs["de"][0][0].tolist() == list(TokenStore.open(held_out).parallel["en-de"].tgt[0])


def test_bad_validation_stores_are_refused_in_one_line(stores, tmp_path, capsys):
    store, _ = stores
    other = write_store(tmp_path / "other-tokenizer", vocab_size=200)
    info = json.loads((other / "store.json").read_text())
    info["tokenizer"]["fingerprint"] = "1" * 64
    (other / "store.json").write_text(json.dumps(info))
    argv = ["pretrain", "--preset", "test", "--data", str(store), "--output", str(tmp_path / "run"), "--max-steps", "2"]
    for validation, message in (
        (store, "is the training store (--data); expected held-out data"),
        (other, "tokenized with another tokenizer than --data"),
        (tmp_path / "missing", str(tmp_path / "missing")),
    ):
        assert main([*argv, "--validation", str(validation)]) == 1
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err, err
        assert not (tmp_path / "run").exists()  # a run that cannot start leaves nothing
