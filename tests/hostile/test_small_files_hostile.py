"""Hostile small files where infoxlm expects a JSON file of a model, run, store or checkpoint:
JSON nested 100,000 deep, a link to /dev/zero, a named pipe. Each reader refuses it within
seconds in one line naming the file (or, where the file only tells something optional, reads
on without it); none ends in a RecursionError, a MemoryError or a hang."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
import torch

from hostile_files import DEEP_JSON, HOSTILE, nested, within

from infoxlm.cli import main
from infoxlm.data.store import MonoCorpus, ParallelCorpus, TokenStore
from infoxlm.errors import InfoXLMError
from infoxlm.file_lock import LockHolder, NotALockFile, exclusive_lock, lock_if_free
from infoxlm.eval.mlqa_data import read_json, read_squad
from infoxlm.eval.report import gather
from infoxlm.model.config import EncoderConfig
from infoxlm.model.hub import read_contrast_layer, read_weight_shapes
from infoxlm.outputs import enclosing_store_or_run
from infoxlm.tokenizer import Tokenizer
from infoxlm.train.checkpoint import CheckpointCorrupt, save_checkpoint, state_json, verify_checkpoint
from infoxlm.train.config import load_config_file
from infoxlm.train.continuation import recorded_contrast_layer
from infoxlm.train.model_source import resolve_model
from infoxlm.train.resume import STORE_IDENTITY_FILE, checkpoint_store_identity

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="named pipes, /dev/zero and flock")
fcntl = pytest.importorskip("fcntl")


def _write(path: Path, value: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def _run(tmp: Path) -> Path:
    """A run directory as far as its small files go: config.json and one listed checkpoint."""
    run = tmp / "run"
    _write(run / "config.json", {"optim": {}, "run": {}, "contrast": {"layer": 2}})
    (run / "checkpoints" / "step-00000001").mkdir(parents=True)
    (run / "checkpoints" / "step-00000001" / ".metadata").touch()
    return run


def _run_with_checkpoint(tmp: Path) -> Path:
    """A run directory whose one checkpoint holds its config (contrast layer 2) and no tensor."""
    run = tmp / "run"
    _write(run / "config.json", {"optim": {}, "run": {}, "contrast": {"layer": 2}})
    save_checkpoint(run, 1, {"step": 1, "config": json.dumps({"contrast": {"layer": 2}})})
    return run


def _sentence_transformers(tmp: Path) -> Path:
    model = tmp / "st"
    _write(model / "modules.json", [{"type": "sentence_transformers.models.Transformer", "path": ""},
                                    {"type": "sentence_transformers.models.Pooling", "path": "1_Pooling"}])
    _write(model / "1_Pooling" / "config.json", {"pooling_mode_mean_tokens": True})
    return model


# Each reader: (the file it reads, the call that reads it) in a directory made for it.
Setup = Callable[[Path], tuple[Path, Callable[[], Any]]]
REFUSING: dict[str, Setup] = {
    "model config.json": lambda tmp: (tmp / "config.json", lambda: EncoderConfig.load(tmp)),
    "store.json": lambda tmp: (tmp / "store.json", lambda: TokenStore.open(tmp)),
    "mono corpus meta.json": lambda tmp: (tmp / "de" / "meta.json", lambda: MonoCorpus.open(tmp / "de")),
    "parallel corpus meta.json": lambda tmp: (tmp / "de-en" / "meta.json", lambda: ParallelCorpus.open(tmp / "de-en")),
    "--config FILE": lambda tmp: (tmp / "c.json", lambda: load_config_file(tmp / "c.json")),
    "results.json": lambda tmp: (tmp / "results.json", lambda: gather([tmp])),
    "modules.json": lambda tmp: (_sentence_transformers(tmp) / "modules.json", lambda: resolve_model(tmp / "st")),
    "Pooling config": lambda tmp: (_sentence_transformers(tmp) / "1_Pooling" / "config.json", lambda: resolve_model(tmp / "st")),
    "tokenizer.json": lambda tmp: (tmp / "tokenizer.json", lambda: Tokenizer.from_pretrained(tmp)),
    "safetensors shard index": lambda tmp: (tmp / "model.safetensors.index.json", lambda: read_weight_shapes(tmp)),
    "SQuAD data": lambda tmp: (tmp / "dev.json", lambda: read_squad(tmp / "dev.json")),
    "MLQA predictions": lambda tmp: (tmp / "pred.json", lambda: read_json(tmp / "pred.json", "a prediction file")),
    "store_identity.json": lambda tmp: (tmp / STORE_IDENTITY_FILE, lambda: checkpoint_store_identity({}, tmp, tmp / "step")),
}
# Readers of a file that only tells something optional: without it they go on.
IGNORING: dict[str, tuple[Setup, Any]] = {
    # --init takes a run's layer from its checkpoint: config.json is not asked, whatever it is.
    "run config.json, for the contrast layer": (
        lambda tmp: (_run_with_checkpoint(tmp) / "config.json", lambda: recorded_contrast_layer(tmp / "run")), 2,
    ),
    "run config.json, for where outputs go": (lambda tmp: (_run(tmp) / "config.json", lambda: enclosing_store_or_run(tmp / "run" / "out")), None),
    "model config.json, for the contrast layer": (lambda tmp: (tmp / "config.json", lambda: read_contrast_layer(tmp)), None),
}


@pytest.mark.parametrize("hostile", sorted(HOSTILE))
@pytest.mark.parametrize("reader", sorted(REFUSING))
def test_a_hostile_file_is_refused_in_one_line_naming_it(tmp_path, reader, hostile):
    target, read = REFUSING[reader](tmp_path)
    target.parent.mkdir(parents=True, exist_ok=True)
    HOSTILE[hostile](target)
    with within(10), pytest.raises(InfoXLMError) as caught:
        read()
    message = str(caught.value)
    assert message.startswith(str(target)) and len(message.splitlines()) == 1, message


@pytest.mark.parametrize("hostile", sorted(HOSTILE))
@pytest.mark.parametrize("reader", sorted(IGNORING))
def test_a_hostile_optional_file_is_read_as_absent(tmp_path, reader, hostile):
    setup, absent = IGNORING[reader]
    target, read = setup(tmp_path)
    HOSTILE[hostile](target)
    with within(10):
        assert read() == absent


@pytest.mark.parametrize("hostile", sorted(HOSTILE))
def test_a_hostile_digest_list_is_named_as_the_damage(tmp_path, hostile):
    checkpoint = save_checkpoint(tmp_path, 1, {"step": 1, "w": torch.ones(2)})
    HOSTILE[hostile](checkpoint / "digests.json")
    with within(10), pytest.raises(CheckpointCorrupt, match=rf"^{checkpoint / 'digests.json'}: "):
        verify_checkpoint(checkpoint)


def test_a_held_lock_whose_record_nests_deep_names_no_holder(tmp_path):
    path = tmp_path / "lock"
    nested(path)
    with open(path, "rb") as holder:
        fcntl.flock(holder, fcntl.LOCK_EX)  # held by another open file: its record is read
        with within(10), lock_if_free(path) as found:
            assert found == LockHolder()


def test_a_lock_file_of_deep_json_is_not_a_lock_file(tmp_path):
    path = tmp_path / "lock"
    nested(path)
    with within(10), pytest.raises(NotALockFile, match=rf"^{path}: holds something other than a lock's record"):
        with exclusive_lock(path):
            pass
    assert path.read_text() == DEEP_JSON  # nothing written over it


@pytest.mark.parametrize("key", ["config", "encoder_config", "store_identity"])
def test_a_checkpoint_entry_of_deep_json_is_named(tmp_path, key):
    with pytest.raises(CheckpointCorrupt, match=rf"^{tmp_path}/{key}: invalid JSON \(nested deeper than 100 levels\)"):
        state_json({key: DEEP_JSON}, key, tmp_path)
    with pytest.raises(CheckpointCorrupt, match=rf"^{tmp_path}: its {key} is a JSON list; expected an object$"):
        state_json({key: "[1]"}, key, tmp_path)


def _one_line_failure(capsys, *argv: str) -> str:
    with within(60):
        code = main([str(a) for a in argv])
    err = capsys.readouterr().err.strip()
    assert code == 1 and "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize("hostile", sorted(HOSTILE))
def test_commands_print_one_line_for_a_hostile_file(tmp_path, capsys, hostile):
    (tmp_path / "finetuned").mkdir()
    for name in ("finetuned/results.json", "c.json", "pred.json", "data.json"):
        HOSTILE[hostile](tmp_path / name)
    results = tmp_path / "finetuned" / "results.json"
    assert f"{results}: " in _one_line_failure(capsys, "report", results.parent, "--output", tmp_path / "out")
    err = _one_line_failure(capsys, "pretrain", "--preset", "test", "--config", tmp_path / "c.json", "--data", tmp_path,
                            "--output", tmp_path / "run")
    assert f"{tmp_path / 'c.json'}: " in err
    err = _one_line_failure(capsys, "eval", "mlqa-score", "--data", tmp_path / "data.json", "--predictions", tmp_path / "pred.json", "--lang", "de")
    assert f"{tmp_path / 'data.json'}: " in err
