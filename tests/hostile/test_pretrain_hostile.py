"""`infoxlm pretrain` / `export` against hostile input: every case ends with a non-zero exit and
one line (no traceback), loses nothing, saves nothing non-finite and leaves nothing behind; a
damaged checkpoint is named, and a resume passes over it to the previous one, saying so."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from infoxlm.cli import main
from infoxlm.train.checkpoint import (
    checkpoint_path,
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    save_checkpoint,
    verify_checkpoint,
)
from infoxlm.train.checkpoint_integrity import read_index

from damaged_checkpoints import MALFORMED_INDEX, flip_tensor_bytes, malform_index, payloads
from training_stores import build_store, write_mono


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile") / "store"
    build_store(root)
    return root


def non_finite_tensors(node, name=""):
    """Names of floating-point tensors holding NaN or inf in a nested state."""
    if isinstance(node, torch.Tensor):
        return [name] if node.is_floating_point() and not torch.isfinite(node).all() else []
    if isinstance(node, dict):
        return [n for k, v in node.items() for n in non_finite_tensors(v, f"{name}.{k}")]
    if isinstance(node, (list, tuple)):
        return [n for j, v in enumerate(node) for n in non_finite_tensors(v, f"{name}.{j}")]
    return []


def run_cli(capsys, *args) -> tuple[int, str]:
    """`infoxlm ARGS` in this process: (exit status, stderr)."""
    code = main([str(a) for a in args])
    return code, capsys.readouterr().err


def pretrain(capsys, store, output, *extra):
    return run_cli(capsys, "pretrain", "--preset", "test", "--data", store, "--output", output, "--no-progress", *extra)


def one_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("infoxlm: error: "), err
    assert "Traceback" not in err
    return lines[0]


def with_tokenizer_fingerprint(source: Path, target: Path, fingerprint: str, vocab_size: int | None = None) -> Path:
    """A copy of a store that says it was tokenized with another tokenizer."""
    shutil.copytree(source, target)
    info = json.loads((target / "store.json").read_text())
    info["tokenizer"]["fingerprint"] = fingerprint
    if vocab_size is not None:
        info["tokenizer"]["vocab_size"] = vocab_size
    (target / "store.json").write_text(json.dumps(info))
    return target


# --- 1. a diverging run ---------------------------------------------------------------------


def test_a_diverging_run_saves_and_exports_nothing_non_finite(capsys, store, tmp_path):
    run = tmp_path / "run"
    code, err = pretrain(capsys, store, run, "--save-every", "1", "--max-steps", "20", "--set", "optim.lr=1e3")
    line = one_line(err)
    assert code == 1 and "not finite" in line
    for _, checkpoint in list_checkpoints(run):
        assert non_finite_tensors(load_checkpoint(checkpoint)) == []
    # The message names a checkpoint that exists (or says there is none).
    if "last good checkpoint is " in line:
        assert Path(line.split("last good checkpoint is ", 1)[1].strip()).is_dir()
    else:
        assert "no checkpoint was saved" in line and latest_checkpoint(run) is None
    if latest_checkpoint(run) is not None:
        code, _ = run_cli(capsys, "export", run, tmp_path / "hf")
        from safetensors.torch import load_file

        assert code == 0 and all(torch.isfinite(t).all() for t in load_file(tmp_path / "hf" / "model.safetensors").values())


def test_export_refuses_a_checkpoint_with_non_finite_weights(capsys, store, tmp_path):
    run = tmp_path / "run"
    assert pretrain(capsys, store, run, "--max-steps", "1")[0] == 0
    state = load_checkpoint(latest_checkpoint(run))
    next(iter(state["model"].values())).view(-1)[0] = float("nan")
    save_checkpoint(run, 2, state)
    code, err = run_cli(capsys, "export", run, tmp_path / "hf")
    assert code == 1 and "non-finite" in one_line(err)
    assert not (tmp_path / "hf").exists()


# --- 2. a run resumed on another store --------------------------------------------------------


def test_resume_on_a_store_with_another_tokenizer_is_refused(capsys, store, tmp_path):
    run = tmp_path / "run"
    assert pretrain(capsys, store, run, "--max-steps", "2")[0] == 0
    before = sorted(p.name for p in (run / "checkpoints").iterdir())
    config = (run / "config.json").read_text()
    same_size = with_tokenizer_fingerprint(store, tmp_path / "same-size", "1" * 64)
    other_size = with_tokenizer_fingerprint(store, tmp_path / "other-size", "2" * 64, vocab_size=1200)
    for other in (same_size, other_size):
        for extra in ([], ["--allow-config-change"], ["--allow-config-change", "--allow-data-change"]):
            code, err = pretrain(capsys, other, run, "--max-steps", "4", *extra)
            assert code == 1 and "another tokenizer" in one_line(err)
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == before
    assert (run / "config.json").read_text() == config


def test_resume_on_a_store_with_another_language_needs_a_flag(capsys, store, tmp_path):
    run = tmp_path / "run"
    assert pretrain(capsys, store, run, "--max-steps", "4", "--save-every", "2")[0] == 0
    shutil.rmtree(latest_checkpoint(run))  # as if killed after step 2's checkpoint
    grown = tmp_path / "grown"
    shutil.copytree(store, grown)
    write_mono(grown, "fr", [[[5, 6, 7, 8]] * 3] * 4)
    code, err = pretrain(capsys, grown, run, "--max-steps", "4", "--save-every", "2")
    assert code == 1 and "added mono/fr" in one_line(err) and "--allow-data-change" in err
    assert latest_checkpoint(run).name == "step-00000002"
    code, err = pretrain(capsys, grown, run, "--max-steps", "4", "--save-every", "2", "--allow-data-change")
    assert code == 0, err
    assert latest_checkpoint(run).name == "step-00000004"


def test_init_with_another_tokenizer_is_refused(capsys, store, tmp_path):
    run = tmp_path / "first"
    assert pretrain(capsys, store, run, "--max-steps", "1")[0] == 0
    init = tmp_path / "init"
    assert run_cli(capsys, "export", run, init)[0] == 0
    # No tokenizer file in the model directory: accepted, with a warning.
    code, err = pretrain(capsys, store, tmp_path / "warned", "--max-steps", "1", "--init", init)
    assert code == 0 and "warning: --init" in err and "no tokenizer file" in err
    (init / "tokenizer.json").write_text('{"not": "the store tokenizer"}')
    code, err = pretrain(capsys, store, tmp_path / "refused", "--max-steps", "1", "--init", init)
    assert code == 1 and "is not the one" in one_line(err)
    assert not (tmp_path / "refused").exists()


def test_init_with_a_truncated_tokenizer_file_is_called_damaged(capsys, store, tmp_path, tiny_model_dir):
    run = tmp_path / "first"
    assert pretrain(capsys, store, run, "--max-steps", "1")[0] == 0
    init = tmp_path / "init"
    assert run_cli(capsys, "export", run, init)[0] == 0
    text = (tiny_model_dir / "tokenizer.json").read_bytes()
    (init / "tokenizer.json").write_bytes(text[: len(text) // 2])  # a copy cut short
    code, err = pretrain(capsys, store, tmp_path / "refused", "--max-steps", "1", "--init", init)
    assert code == 1 and re.match(rf"infoxlm: error: {re.escape(str(init / 'tokenizer.json'))}:\d+:\d+: damaged: invalid JSON \(", one_line(err)), err
    assert "is not the one" not in err and not (tmp_path / "refused").exists()


# --- 3. Ctrl-C ends the run within seconds -----------------------------------------------------


@pytest.mark.slow  # six real subprocesses, timed
def test_ctrl_c_ends_the_run_within_seconds(store, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2] / "src"), os.environ.get("PYTHONPATH", "")])}
    bound = 15.0  # seconds from SIGINT to exit, on a loaded 2-core machine
    # While starting (imports, set-up), then at varied times into training (config.json is
    # written once the run has been set up).
    for j, (after, delay) in enumerate((("start", 1.0), ("start", 3.0), ("train", 0.0), ("train", 0.4), ("train", 1.1), ("train", 2.3))):
        run = tmp_path / f"run{j}"
        proc = subprocess.Popen(
            [sys.executable, "-m", "infoxlm", "pretrain", "--preset", "test", "--data", str(store), "--output", str(run),
             "--no-progress", "--max-steps", "100000", "--save-every", "3"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
            # As from a terminal, also when the tests run as a background job (SIGINT ignored).
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        deadline = time.monotonic() + 120
        while after == "train" and not (run / "config.json").exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        try:
            _, err = proc.communicate(timeout=bound)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            pytest.fail(f"SIGINT {delay} s after {after}: still running {bound} s later")
        assert time.monotonic() - sent < bound
        # 130: infoxlm's own exit; −SIGINT: the default handler, before infoxlm installed its
        # latch. An interrupt in the middle of start-up's native imports can rarely end in
        # −SIGABRT from a library's teardown: the run still ended at once, which is what is
        # promised, and nothing of it is left half-written (checked below).
        # 0: during the steps (a quick start-up is training by then too), a Ctrl-C stops the run
        # after the step in progress, with a checkpoint (checked below).
        allowed = (130, -signal.SIGINT, 0) + ((-signal.SIGABRT,) if after == "start" else ())
        assert proc.returncode in allowed, err.decode()[-2000:]
        checkpoint = latest_checkpoint(run)
        if proc.returncode == 0:
            assert checkpoint is not None and "(Ctrl-C received)" in err.decode(), err.decode()[-2000:]
        if checkpoint is not None:
            load_checkpoint(checkpoint)  # complete and readable


# --- 4. a failed --allow-config-change resume ---------------------------------------------------


def test_a_failed_config_change_leaves_the_run_resumable(capsys, store, tmp_path):
    run = tmp_path / "run"
    original = ["--max-steps", "4", "--save-every", "2"]
    assert pretrain(capsys, store, run, *original, "--set", "optim.max_steps=2")[0] == 0
    # (the run stops at 2; its config says max_steps 2: resume with the same config below)
    config = (run / "config.json").read_text()
    for change in (["--set", "model.size=small"], ["--set", "contrast.queue_size=32"], ["--no-xlco"]):
        code, err = pretrain(capsys, store, run, *original, "--set", "optim.max_steps=2", *change, "--allow-config-change")
        assert code == 1 and "cannot" in one_line(err), err
        assert (run / "config.json").read_text() == config
    code, err = pretrain(capsys, store, run, *original, "--set", "optim.max_steps=2")
    assert code == 0, err
    # A change that can be applied is: a longer run with another learning rate.
    code, err = pretrain(capsys, store, run, *original, "--set", "optim.lr=5e-4", "--allow-config-change")
    assert code == 0, err
    assert latest_checkpoint(run).name == "step-00000004"
    assert json.loads((run / "config.json").read_text())["optim"]["lr"] == 5e-4


# --- 5. metrics.jsonl after a kill ----------------------------------------------------------------


def test_metrics_hold_each_step_once_after_a_resume(capsys, store, tmp_path):
    run = tmp_path / "run"
    assert pretrain(capsys, store, run, "--max-steps", "4", "--save-every", "2")[0] == 0
    # What a kill after step 4's log line but before its checkpoint leaves (plus a torn line).
    shutil.rmtree(latest_checkpoint(run))
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"step": 5, "loss/mm')
    assert pretrain(capsys, store, run, "--max-steps", "4", "--save-every", "2")[0] == 0
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4]


# --- 6. every config value is checked before anything starts -----------------------------------


@pytest.mark.parametrize(
    "flags, names",
    [
        (["--save-every", "0"], "run.save_every=0"),
        (["--save-every", "-1"], "run.save_every=-1"),
        (["--set", "optim.lr=-1"], "optim.lr=-1"),
        (["--set", "optim.lr=nan"], "optim.lr=nan"),
        (["--set", "optim.lr=null"], "optim.lr=null"),
        (["--set", "optim.lr=fast"], "optim.lr"),
        (["--set", "model.size=huge"], "model.size='huge'"),
        (["--set", "model.dropout=2"], "model.dropout=2"),
        (["--device", "banana"], "run.device='banana'"),
        (["--set", "contrast.momentum=1.5"], "contrast.momentum=1.5"),
        (["--set", "optim.warmup_steps=-10"], "optim.warmup_steps=-10"),
        (["--max-steps", "-1"], "optim.max_steps=-1"),
        (["--max-steps", "0"], "optim.max_steps=0"),
        (["--no-mmlm", "--no-tlm", "--no-xlco"], "all 0"),
        (["--set", "data.mmlm_batch_size=0", "--set", "data.tlm_batch_size=0", "--set", "data.xlco_batch_size=0"], "all 0"),
        (["--set", "contrast.temperature=0"], "contrast.temperature=0"),
        (["--set", "run.log_every=0"], "run.log_every=0"),
    ],
)
def test_bad_config_values_are_refused_in_one_line(capsys, store, tmp_path, flags, names):
    run = tmp_path / "run"
    code, err = pretrain(capsys, store, run, *flags)
    assert code == 1 and names in one_line(err)
    assert not run.exists()


@pytest.mark.parametrize("value", ['"fast"', "null", "[1]", "true"])
def test_a_config_file_with_a_non_number_where_a_number_belongs(capsys, store, tmp_path, value):
    path = tmp_path / "c.json"
    path.write_text('{"optim": {"lr": %s}}' % value)
    code, err = pretrain(capsys, store, tmp_path / "run", "--config", path)
    assert code == 1 and "optim.lr" in one_line(err)
    assert not (tmp_path / "run").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_cuda_is_refused(capsys, store, tmp_path):
    code, err = pretrain(capsys, store, tmp_path / "run", "--device", "cuda")
    assert code == 1 and "CUDA is not available" in one_line(err)
    assert not (tmp_path / "run").exists()


def test_an_output_that_is_a_file_or_under_one_is_refused(capsys, store, tmp_path):
    file = tmp_path / "file"
    file.write_text("x")
    for output in (file, file / "run"):
        code, err = pretrain(capsys, store, output, "--max-steps", "1")
        assert code == 1 and "is a file" in one_line(err)
    assert file.read_text() == "x"


def test_a_ctrl_c_that_library_code_swallows_still_ends_the_run(store, tmp_path, monkeypatch):
    """A KeyboardInterrupt raised inside a finalizer or callback is only printed by Python; the
    loop must still stop at the next step boundary. The first Ctrl-C during the steps is a stop
    request (no KeyboardInterrupt); the second, swallowed here, aborts the run at the end of the
    step, before anything is saved: the last checkpoint stays."""
    from infoxlm import interrupt
    from infoxlm.train import loop
    from infoxlm.train.config import apply_overrides
    from infoxlm.train.presets import preset

    real_step = loop.Trainer.train_step
    calls = []

    def step_then_swallowed_ctrl_c(self, *args, **kwargs):
        metrics = real_step(self, *args, **kwargs)
        calls.append(self.step)
        if self.step == 3:
            os.kill(os.getpid(), signal.SIGINT)  # the first: stop after this step
            time.sleep(0.5)
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(1)  # the handler runs here and raises
            except KeyboardInterrupt:
                pass  # … and library code swallows it
        return metrics

    monkeypatch.setattr(loop.Trainer, "train_step", step_then_swallowed_ctrl_c)
    monkeypatch.setattr(interrupt, "requested", False)
    cfg = apply_overrides(preset("test"), ["optim.max_steps=50", "run.save_every=2"])
    # As in a terminal (a background job starts with SIGINT ignored, and the latch leaves that alone).
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            loop.pretrain(cfg, store, tmp_path / "run", progress=False)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored
    finally:
        signal.signal(signal.SIGINT, before)
    assert calls == [0, 1, 2, 3]
    assert latest_checkpoint(tmp_path / "run").name == "step-00000002"  # step 4 aborted, not saved


def test_the_ctrl_c_latch_is_installed_for_the_command_only():
    from infoxlm import interrupt

    assert interrupt.started_as_command(["python", "-m", "infoxlm", "pretrain"])
    assert interrupt.started_as_command(["/venv/bin/python", "/venv/bin/infoxlm", "pretrain"])
    assert not interrupt.started_as_command(["python", "-m", "pytest", "tests"])
    assert not interrupt.started_as_command(["python", "my_script.py"])
    # Importing infoxlm as a library leaves Python's own handler in place.
    code = "import signal; h = signal.getsignal(signal.SIGINT); import infoxlm; print(signal.getsignal(signal.SIGINT) is h)"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.stdout.strip() == "True", out.stderr


def test_an_intermediate_export_of_non_finite_weights_stops_the_run(store, tmp_path):
    """run.export_every may fall between checkpoints: the export checks the weights too."""
    import contextlib
    import io

    from infoxlm.train.config import apply_overrides
    from infoxlm.train.loop import Trainer, TrainingError
    from infoxlm.train.presets import preset

    cfg = apply_overrides(preset("test"), ["optim.max_steps=2", "run.export_every=1"])
    with contextlib.redirect_stdout(io.StringIO()):
        trainer = Trainer(cfg, store, tmp_path / "run", progress=False)
    with torch.no_grad():
        next(trainer.encoder.parameters()).fill_(float("nan"))
    with pytest.raises(TrainingError, match="non-finite.*not exported"):
        trainer.export_model(tmp_path / "run" / "exports" / "step-1")
    assert not (tmp_path / "run" / "exports").exists()


# --- 7. a damaged or hostile checkpoint -----------------------------------------------------------


@pytest.mark.parametrize("digests", ["kept", "removed"])
def test_an_index_that_runs_code_is_refused_by_pretrain_and_export(capsys, store, tmp_path, digests):
    run, marker = tmp_path / "run", tmp_path / "ran"
    assert pretrain(capsys, store, run, "--max-steps", "2")[0] == 0
    checkpoint = latest_checkpoint(run)
    (checkpoint / ".metadata").write_bytes(payloads(marker)["dotted name"])
    if digests == "removed":  # as whoever made it would do; kept, the index's digest differs
        (checkpoint / "digests.json").unlink()
    # Kept, it differs in size from what digests.json recorded.
    expected = "names torch.distributed.checkpoint.filesystem.os.system" if digests == "removed" else ".metadata: truncated: "
    code, err = pretrain(capsys, store, run, "--max-steps", "4")
    assert code == 1 and expected in one_line(err)
    code, err = run_cli(capsys, "export", run, tmp_path / "hf")
    assert code == 1 and expected in one_line(err)
    assert not marker.exists() and not (tmp_path / "hf").exists()
    assert [p.name for p in (run / "checkpoints").iterdir()] == [checkpoint.name]


@pytest.mark.parametrize("field", ["storage_meta a string", "offset None", "offset 'abc'"])
def test_an_index_field_of_the_wrong_type_is_named_by_pretrain_and_export(capsys, store, tmp_path, field):
    run = tmp_path / "run"
    assert pretrain(capsys, store, run, "--max-steps", "2")[0] == 0
    checkpoint = latest_checkpoint(run)
    malform_index(checkpoint, MALFORMED_INDEX[field])
    named = f"infoxlm: error: {checkpoint / '.metadata'}: field storage_"
    code, err = pretrain(capsys, store, run, "--max-steps", "4")  # its one checkpoint: nothing older to resume
    assert code == 1 and one_line(err).startswith(named) and "; no older checkpoint is intact" in err
    code, err = run_cli(capsys, "export", run, tmp_path / "hf")
    assert code == 1 and one_line(err).startswith(named) and not (tmp_path / "hf").exists()


def _truncate(checkpoint: Path) -> Path:
    shard = checkpoint / "__0_0.distcp"
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    return shard


@pytest.mark.parametrize(
    "damage, digests, says",
    [(flip_tensor_bytes, True, "damaged: its SHA-256 is not the one"), (_truncate, True, "truncated: "), (_truncate, False, "truncated: ")],
    ids=["flipped bytes", "truncated", "truncated, written without digests"],
)
def test_a_damaged_newest_checkpoint_is_named_and_the_previous_one_resumes(capsys, store, tmp_path, damage, digests, says):
    run = tmp_path / "run"
    command = ["--max-steps", "4", "--save-every", "2"]
    assert pretrain(capsys, store, run, *command)[0] == 0
    if not digests:  # as an earlier infoxlm wrote them
        for _, checkpoint in list_checkpoints(run):
            (checkpoint / "digests.json").unlink()
    newest = latest_checkpoint(run)
    intact = load_checkpoint(newest)["model"]
    shard = damage(newest)
    code, err = run_cli(capsys, "export", run, tmp_path / "hf")
    line = one_line(err)
    assert code == 1 and line.startswith(f"infoxlm: error: {shard}: {says}")
    assert line.endswith("; the newest intact checkpoint is step-00000002 (--step 2)")
    assert run_cli(capsys, "export", run, tmp_path / "hf", "--step", "2")[0] == 0
    # The same command resumes from step 2, says why, and computes step 4 again exactly as before.
    code, err = pretrain(capsys, store, run, *command)
    assert code == 0, err
    warnings = [line for line in err.splitlines() if line.startswith(("warning:", "note:"))]
    assert warnings[0].startswith(f"warning: {shard}: {says}")
    assert warnings[0].endswith("; ignoring step-00000004, resuming from step-00000002")
    if not digests:
        assert warnings[1] == f"note: {checkpoint_path(run, 2)} has no digests.json (an earlier infoxlm wrote it): its files cannot be verified"
    assert len(warnings) == 1 + (not digests)
    again = load_checkpoint(checkpoint_path(run, 4))["model"]
    assert all(torch.equal(again[name], intact[name]) for name in intact)
    assert [s for s, _ in list_checkpoints(run)] == [2, 4]


def test_a_checkpoint_that_lost_its_index_is_said_to_be_ignored(capsys, store, tmp_path):
    run = tmp_path / "run"
    assert pretrain(capsys, store, run, "--max-steps", "2")[0] == 0
    (checkpoint_path(run, 2) / ".metadata").unlink()
    code, err = pretrain(capsys, store, run, "--max-steps", "2")
    assert code == 0, err
    expected = f"warning: {checkpoint_path(run, 2)}: incomplete (no .metadata index); ignoring step-00000002, starting from step 0"
    assert expected in err.splitlines()
    assert verify_checkpoint(checkpoint_path(run, 2)) is None  # written again, whole


def test_a_shard_damaged_past_what_the_checks_see_is_not_blamed_on_the_config(capsys, store, tmp_path):
    """Written without digests (an earlier release), a tensor's framing damaged: the load itself
    fails, and says the checkpoint is damaged, without torch's advice to load it unsafely."""
    run = tmp_path / "run"
    assert pretrain(capsys, store, run, "--max-steps", "2")[0] == 0
    checkpoint = latest_checkpoint(run)
    (checkpoint / "digests.json").unlink()
    where = max(read_index(checkpoint).storage_data.values(), key=lambda info: info.length)
    shard = checkpoint / where.relative_path
    data = bytearray(shard.read_bytes())
    data[where.offset : where.offset + 64] = bytes(64)  # the item's zip header
    shard.write_bytes(data)
    code, err = pretrain(capsys, store, run, "--max-steps", "2")
    note, error = err.splitlines()
    assert note == f"note: {checkpoint} has no digests.json (an earlier infoxlm wrote it): its files cannot be verified"
    line = one_line(error)
    assert code == 1 and line.startswith(f"infoxlm: error: {checkpoint}: cannot read checkpoint (damaged"), line
    assert "does not fit the model" not in line and "weights_only" not in line, line


@pytest.mark.parametrize("run_state", ["new", "trained"])
def test_a_run_lock_that_is_a_symbolic_link_is_refused_and_its_target_kept(capsys, store, tmp_path, run_state):
    """Anyone who may write into a shared run directory could point RUN/.lock at another user's
    file: the run's lock record would overwrite it."""
    precious = tmp_path / "precious"
    precious.write_text("a user's data\n")
    run = tmp_path / "run"
    if run_state == "trained":
        assert pretrain(capsys, store, run, "--max-steps", "1")[0] == 0
        (run / ".lock").unlink()
    else:
        run.mkdir()
    (run / ".lock").symlink_to(precious)
    code, err = pretrain(capsys, store, run, "--max-steps", "1")
    line = one_line(err)
    assert code == 1 and line.startswith(f"infoxlm: error: {run / '.lock'}: is a symbolic link (to {precious}), not a regular file; ")
    assert precious.read_text() == "a user's data\n" and (run / ".lock").is_symlink()
