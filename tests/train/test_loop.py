"""The pre-training engine end to end: learning, a golden loss curve, exact resume after
SIGKILL, two processes equal one, the non-finite stop, and refusal to clobber a run."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from infoxlm.train.checkpoint import latest_checkpoint, list_checkpoints
from infoxlm.train.config import ConfigError, apply_overrides
from infoxlm.train.errors import TrainingError
from infoxlm.train.export import export
from infoxlm.train.loop import pretrain
from infoxlm.train.presets import preset

from local_ports import free_port
from training_stores import write_mono, write_parallel, write_store

GOLDEN = Path(__file__).parent / "golden_loss_curve.json"
VOCAB = 200


def structured_store(root: Path, seed: int = 0) -> Path:
    """Learnable synthetic text: documents repeat a few 'sentences'; a 'translation' maps each
    token through a fixed dictionary, so both masked LM and contrast have something to learn.
    Another ``seed``: other sentences, the same dictionary (held-out data of the same kind)."""
    rng = np.random.default_rng(seed)
    write_store(root, vocab_size=VOCAB)
    sentences = [rng.integers(4, 100, rng.integers(5, 15)).tolist() for _ in range(30)]
    dictionary = {t: 100 + (t * 7) % 99 for t in range(4, 100)}  # ids 4…99 → 100…198
    for lang, offset in (("en", 0), ("de", 1)):
        docs = [[sentences[(i * 3 + j + offset) % 30] for j in range(4)] for i in range(40)]
        write_mono(root, lang, docs)
    write_parallel(root, "en-de", [(s, [dictionary[t] for t in s]) for s in sentences])
    write_parallel(root, "en-fr", [(s, [dictionary[t] for t in reversed(s)]) for s in sentences])
    return root


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return structured_store(tmp_path_factory.mktemp("engine") / "store")


def quiet(fn, *args, **kwargs):
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*args, **kwargs)


def losses(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


GOLDEN_OVERRIDES = [
    "optim.max_steps=60",
    "optim.lr=5e-3",
    "optim.warmup_steps=5",
    "data.mmlm_batch_size=16",
    "data.tlm_batch_size=16",
    "data.xlco_batch_size=8",
]


def test_loss_falls_and_follows_the_golden_curve(store, tmp_path):
    cfg = apply_overrides(preset("test"), GOLDEN_OVERRIDES)
    run = quiet(pretrain, cfg, store, tmp_path / "run", progress=False)
    rows = losses(run)
    assert len(rows) == 60
    mean = lambda key, part: float(np.mean([r[key] for r in part]))  # noqa: E731
    assert mean("loss/mmlm", rows[-5:]) < mean("loss/mmlm", rows[:5]) - 0.4
    assert mean("loss/tlm", rows[-5:]) < mean("loss/tlm", rows[:5]) - 0.03
    # The toy contrast is solved within a few steps and then spikes whenever the queue turns
    # over (keys of an older encoder): its typical loss, not a 5-step window, is what falls.
    assert float(np.median([r["loss/xlco"] for r in rows[5:]])) < rows[0]["loss/xlco"] - 0.5
    curve = [[r["loss/mmlm"], r["loss/tlm"], r["loss/xlco"]] for r in rows]
    if os.environ.get("INFOXLM_UPDATE_GOLDEN"):  # after a deliberate change of the numerics
        GOLDEN.write_text(json.dumps({"preset": "test", "overrides": GOLDEN_OVERRIDES, "losses": curve}, indent=1) + "\n")
    golden = json.loads(GOLDEN.read_text())
    assert golden["overrides"] == GOLDEN_OVERRIDES
    np.testing.assert_allclose(curve, golden["losses"], rtol=1e-3, atol=1e-3)
    saved = json.loads((run / "config.json").read_text())
    assert saved["optim"]["max_steps"] == 60 and saved["data"]["seed"] == 0  # the resolved config
    if importlib.util.find_spec("tensorboard") is not None:
        assert any((run / "tensorboard").glob("events.out.tfevents.*"))


def test_export_loads_in_transformers(store, tmp_path, transformers):
    cfg = apply_overrides(preset("test"), ["optim.max_steps=3"])
    run = quiet(pretrain, cfg, store, tmp_path / "run", progress=False)
    out = export(run, tmp_path / "hf")
    model, info = transformers.XLMRobertaForMaskedLM.from_pretrained(out, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert model.config.vocab_size == VOCAB
    assert model.config.infoxlm_contrast_layer == cfg.contrast.layer  # `eval tatoeba` reads it


def _cli(*args, **kwargs):
    return [sys.executable, "-m", "infoxlm", *args]


@pytest.mark.slow
def test_resume_after_sigkill_is_bit_exact(store, tmp_path):
    common = ["pretrain", "--preset", "test", "--data", str(store), "--max-steps", "24", "--save-every", "2", "--no-progress",
              "--set", "model.dropout=0.1"]
    subprocess.run(_cli(*common, "--output", str(tmp_path / "straight")), check=True, capture_output=True, timeout=300)

    killed = tmp_path / "killed"
    proc = subprocess.Popen(_cli(*common, "--output", str(killed)), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and not any(step >= 8 for step, _ in list_checkpoints(killed)):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert 0 < list_checkpoints(killed)[-1][0] < 24, "the kill should land mid-run"
    subprocess.run(_cli(*common, "--output", str(killed)), check=True, capture_output=True, timeout=300)

    a = load_file(export(tmp_path / "straight", tmp_path / "a") / "model.safetensors")
    b = load_file(export(killed, tmp_path / "b") / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.slow
def test_two_processes_match_one(store, tmp_path):
    common = ["pretrain", "--preset", "test", "--data", str(store), "--max-steps", "8", "--no-progress"]
    subprocess.run(_cli(*common, "--output", str(tmp_path / "one")), check=True, capture_output=True, timeout=300)
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m", "infoxlm"]
    result = subprocess.run([*torchrun, *common, "--output", str(tmp_path / "two")], capture_output=True, timeout=300)
    # A rank's own error comes first in stderr, torchrun's summary last: show both.
    stderr = result.stderr.decode()
    assert result.returncode == 0, stderr[:3000] + "\n…\n" + stderr[-1500:]
    a = load_file(export(tmp_path / "one", tmp_path / "a") / "model.safetensors")
    b = load_file(export(tmp_path / "two", tmp_path / "b") / "model.safetensors")
    assert max((a[k] - b[k]).abs().max().item() for k in a) < 1e-4


@pytest.mark.slow
def test_two_nodes_over_loopback_match_one_process(store, tmp_path):
    """torchrun --nnodes 2, one process per "node", both on this machine: what a multi-node
    launch (scripts/slurm/pretrain.sbatch) does, with the rendezvous on 127.0.0.1."""
    common = ["pretrain", "--preset", "test", "--data", str(store), "--max-steps", "8", "--no-progress"]
    subprocess.run(_cli(*common, "--output", str(tmp_path / "one")), check=True, capture_output=True, timeout=300)
    port = free_port()
    nodes = [
        subprocess.Popen(
            [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc_per_node", "1",
             "--node_rank", str(rank), "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{port}",
             "-m", "infoxlm", *common, "--output", str(tmp_path / "two")],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        for rank in (0, 1)
    ]
    errors = [node.communicate(timeout=300)[1].decode() for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], "\n".join(e[-1500:] for e in errors)
    a = load_file(export(tmp_path / "one", tmp_path / "a") / "model.safetensors")
    b = load_file(export(tmp_path / "two", tmp_path / "b") / "model.safetensors")
    assert max((a[k] - b[k]).abs().max().item() for k in a) < 1e-4


def test_non_finite_loss_stops_with_the_last_good_checkpoint(store, tmp_path):
    cfg = apply_overrides(preset("test"), ["optim.max_steps=10", "run.save_every=1", "optim.lr=1e30", "optim.warmup_steps=1"])
    with pytest.raises(TrainingError, match=r"step \d+: the \w+ loss is not finite"):
        quiet(pretrain, cfg, store, tmp_path / "run", progress=False)
    assert latest_checkpoint(tmp_path / "run") is not None


@pytest.mark.slow
def test_refuses_to_clobber_a_run_with_another_config(store, tmp_path):
    common = ["pretrain", "--preset", "test", "--data", str(store), "--output", str(tmp_path / "run"), "--max-steps", "2", "--no-progress"]
    subprocess.run(_cli(*common), check=True, capture_output=True, timeout=300)
    result = subprocess.run(_cli(*common, "--set", "optim.lr=0.5"), capture_output=True, timeout=300)
    assert result.returncode == 1
    err = result.stderr.decode().strip()
    assert "holds a run with a different config" in err and "optim.lr" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize(
    "flags, present, absent",
    [
        (["--no-xlco"], {"loss/mmlm", "loss/tlm"}, {"loss/xlco", "momentum"}),
        (["--no-tlm", "--no-mmlm"], {"loss/xlco"}, {"loss/mmlm", "loss/tlm"}),
        (["--no-mixup", "--no-momentum"], {"loss/mmlm", "loss/tlm", "loss/xlco"}, {"momentum"}),
        (["--contrast-layer", "2", "--set", "objectives.normaliser=joint"], {"loss/xlco", "momentum"}, set()),
    ],
)
def test_every_ablation_runs(store, tmp_path, flags, present, absent):
    from infoxlm.cli import build_parser
    from infoxlm.commands.pretrain import resolved_config

    args = build_parser().parse_args(
        ["pretrain", "--preset", "test", "--data", str(store), "--output", str(tmp_path / "run"), "--max-steps", "3", *flags]
    )
    run = quiet(pretrain, resolved_config(args), store, tmp_path / "run", progress=False)
    logged = set(losses(run)[-1])
    assert present <= logged and not (absent & logged)


@pytest.mark.parametrize(
    "override, message",
    [("contrast.pooling=max", "contrast.pooling='max': expected one of cls, mean"), ("contrast.temperature=0", "contrast.temperature=0")],
)
def test_bad_contrast_settings_are_named(override, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        apply_overrides(preset("test"), ["optim.max_steps=1", override])


def test_a_contrast_layer_above_the_encoder_is_named(store, tmp_path):
    cfg = apply_overrides(preset("test"), ["optim.max_steps=1", "contrast.layer=9"])
    with pytest.raises(TrainingError, match=re.escape("contrast.layer=9: the encoder has layers 1 … 2")):
        quiet(pretrain, cfg, store, tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("key_warmup, first_momentum", [("copy", 1.0), ("momentum", 0.0)])
def test_xlco_joins_after_the_key_encoder_warm_up(store, tmp_path, key_warmup, first_momentum):
    cfg = apply_overrides(
        preset("test"),
        ["optim.max_steps=4", "contrast.start_step=2", "contrast.momentum_schedule=inverse_sqrt", f"contrast.key_warmup={key_warmup}"],
    )
    rows = losses(quiet(pretrain, cfg, store, tmp_path / "run", progress=False))
    assert ["loss/xlco" in r for r in rows] == [False, False, True, True]
    # copy: frozen (m = 1) during the warm-up; momentum: inverse_sqrt from step 0 (m = 0 there).
    assert rows[0]["momentum"] == first_momentum and rows[3]["momentum"] == pytest.approx(1 - 4**-0.51)
    # The queue was pre-filled with real keys before XLCO's first step, and stays full.
    from infoxlm.train.checkpoint import load_checkpoint

    queue = load_checkpoint(latest_checkpoint(tmp_path / "run"))["contrast"]
    assert int(queue["queue_filled"]) == cfg.contrast.queue_size == queue["queue"].shape[0]


def _key_and_query(trainer) -> list[tuple[torch.Tensor, torch.Tensor]]:
    query = dict(trainer.encoder.named_parameters())
    return [(p, query[n]) for n, p in trainer.model.contrast.key_encoder.named_parameters() if not n.startswith(("lm_head.", "pooler."))]


def test_the_key_encoder_is_frozen_during_the_warm_up_then_copied(store, tmp_path):
    """contrast.key_warmup=copy (the authors' code): no momentum update before start_step, a
    copy of the query encoder just before XLCO's first step."""
    from infoxlm.train.loop import Trainer

    # momentum 1: the update after XLCO's first step leaves the key encoder where the copy put it.
    cfg = apply_overrides(preset("test"), ["optim.max_steps=3", "contrast.start_step=2", "contrast.momentum=1.0"])
    trainer = quiet(Trainer, cfg, store, tmp_path / "run", progress=False)
    initial = [k.detach().clone() for k, _ in _key_and_query(trainer)]
    for _ in range(2):
        quiet(trainer.train_step)
        trainer.step += 1
    pairs = _key_and_query(trainer)
    assert all(torch.equal(k, k0) for (k, _), k0 in zip(pairs, initial))  # frozen
    assert not all(torch.equal(k, q) for k, q in pairs)  # while the query encoder moved
    query_before = [q.detach().clone() for _, q in pairs]
    quiet(trainer.train_step)
    assert all(torch.equal(k, q0) for (k, _), q0 in zip(_key_and_query(trainer), query_before))  # copied


@pytest.mark.slow
def test_continues_from_an_exported_checkpoint(store, tmp_path):
    first = quiet(pretrain, apply_overrides(preset("test"), ["optim.max_steps=3"]), store, tmp_path / "a", progress=False)
    init = export(first, tmp_path / "init")
    cfg = apply_overrides(preset("test"), ["optim.max_steps=2", f"model.init={init}"])
    second = quiet(pretrain, cfg, store, tmp_path / "b", progress=False)
    assert losses(second)[0]["loss/mmlm"] < losses(first)[0]["loss/mmlm"]


def test_a_run_with_schedules_resumes_exactly_across_their_boundaries(store, tmp_path):
    from infoxlm.train.stopping import RunStopped

    cfg = apply_overrides(preset("test"), [
        "optim.max_steps=6", "optim.warmup_steps=1", "optim.schedule=wsd", "optim.decay_fraction=0.5",
        "data.mask_schedule=0:0.15,3:0.4", "data.alpha_schedule=0:0.7,3:0.3", "data.language_starts=fr:3",
    ])  # fmt: skip
    straight = quiet(pretrain, cfg, store, tmp_path / "straight", progress=False)
    with pytest.raises(RunStopped):
        quiet(pretrain, cfg, store, tmp_path / "stopped", progress=False, stop_at=3)
    resumed = quiet(pretrain, cfg, store, tmp_path / "stopped", progress=False)
    a = load_file(export(straight, tmp_path / "a") / "model.safetensors")
    b = load_file(export(resumed, tmp_path / "b") / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    rows = losses(straight)
    assert [r["loss/tlm"] for r in losses(resumed)] == [r["loss/tlm"] for r in rows]
    # Warm-up for 1 step, the peak held, then the last half of the 6 steps falling to 0.
    assert [round(r["lr"] / cfg.optim.lr, 3) for r in rows] == [1.0, 1.0, 1.0, 1.0, 0.667, 0.333]


def test_multiway_pairs_train_and_show_as_translation_pairs_between_two_other_languages(tiny_model_dir, tmp_path, capsys):
    from conftest import TINY_TEXT

    from infoxlm.cli import main
    from infoxlm.corpus.prepare import prepare_parallel

    # en-de, en-ru and en-zh translate the same English lines: a multi-parallel store.
    files = {lang: tmp_path / f"{lang}.txt" for lang in TINY_TEXT}
    for lang, path in files.items():
        path.write_text("\n".join(TINY_TEXT[lang]) + "\n", encoding="utf-8")
    for lang in ("de", "ru", "zh"):
        prepare_parallel(f"en-{lang}", tiny_model_dir.parent / "tokenizer", tmp_path / "store", src=files["en"],
                         tgt=files[lang], show_progress=False)  # fmt: skip
    assert main(["prepare", "show", str(tmp_path / "store"), "--objective", "xlco", "--preset", "test", "--examples", "4",
                 "--set", "data.pairs=multiway", "--set", "data.multiway_share=1"]) == 0  # fmt: skip
    shown = capsys.readouterr().out
    assert re.search(r"en-(de|ru|zh) pair \d+ via en to en-(de|ru|zh) pair \d+ \((de|ru|zh)→(de|ru|zh)\)", shown), shown
    assert main(["pretrain", "--preset", "test", "--data", str(tmp_path / "store"), "--output", str(tmp_path / "run"),
                 "--max-steps", "3", "--no-progress", "--set", "data.pairs=multiway", "--set", "data.mmlm_batch_size=0"]) == 0  # fmt: skip
    assert len(losses(tmp_path / "run")) == 3
    assert json.loads((tmp_path / "run" / "config.json").read_text())["data"]["pairs"] == "multiway"
