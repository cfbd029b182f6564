"""Mistakes a user makes with `infoxlm export`, `embed`, `eval tatoeba` and `finetune`, and
hostile model directories: each ends with one line on stderr, a non-zero exit status, no
traceback, and nothing left behind."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from infoxlm.cli import main

from training_stores import random_documents, random_pairs, write_mono, write_parallel, write_store

pytestmark = pytest.mark.slow  # end-to-end runs and subprocesses


def cli(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "infoxlm", *args], input=stdin, capture_output=True, timeout=300)


def one_line_error(result: subprocess.CompletedProcess) -> str:
    """The single stderr line of a failed command."""
    err = result.stderr.decode().strip()
    assert result.returncode != 0, err
    assert "Traceback" not in err, err
    assert len(err.splitlines()) == 1, err
    return err


def fails(capsys, *argv: str) -> str:
    """Run the command in this process; it must fail with one line on stderr (argparse's too)."""
    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = exit_.code
    err = capsys.readouterr().err
    err = "\n".join(line for line in err.splitlines() if line and "%|" not in line)  # progress bars
    assert code not in (0, None), err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


def listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A 2-step `infoxlm pretrain --preset test` run on a synthetic store."""
    root = tmp_path_factory.mktemp("hostile-run")
    rng = np.random.default_rng(0)
    store = write_store(root / "store")
    for lang in ("en", "de"):
        write_mono(store, lang, random_documents(rng, 20))
    write_parallel(store, "en-de", random_pairs(rng, 30))
    result = cli("pretrain", "--preset", "test", "--data", str(store), "--max-steps", "2", "--no-progress",
                 "--output", str(root / "run"))
    assert result.returncode == 0, result.stderr.decode()
    return root / "run"


# --- export ------------------------------------------------------------------------------------


def test_export_into_its_own_run_directory_is_refused_and_changes_nothing(run_dir):
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    err = one_line_error(cli("export", str(run_dir), str(run_dir)))
    assert "is the run directory" in err
    assert {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == before


def test_export_inside_or_above_the_run_is_refused_even_with_overwrite(run_dir, capsys):
    assert "inside the run directory" in fails(capsys, "export", str(run_dir), str(run_dir / "checkpoints"), "--overwrite")
    assert "holds the run directory" in fails(capsys, "export", str(run_dir), str(run_dir.parent), "--overwrite")
    assert (run_dir / "config.json").is_file() and any((run_dir / "checkpoints").iterdir())


def test_export_refuses_a_foreign_non_empty_directory_unless_overwrite(run_dir, tmp_path, capsys):
    out = tmp_path / "notes"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    err = fails(capsys, "export", str(run_dir), str(out))
    assert "not empty" in err and "--overwrite" in err
    assert listing(out) == ["mine.txt"]
    assert main(["export", str(run_dir), str(out), "--overwrite"]) == 0
    assert (out / "model.safetensors").is_file() and not (out / "mine.txt").exists()


def test_export_replaces_an_earlier_export_and_leaves_no_temporary(run_dir, tmp_path):
    out = tmp_path / "hf"
    assert main(["export", str(run_dir), str(out)]) == 0
    assert main(["export", str(run_dir), str(out)]) == 0  # an export is an export's to replace
    assert listing(tmp_path) == ["hf"] + [f"hf/{name}" for name in listing(out)]


def test_export_to_a_file_or_under_a_file_is_refused(run_dir, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert "is a file" in fails(capsys, "export", str(run_dir), str(blocker))
    assert "is a file" in fails(capsys, "export", str(run_dir), str(blocker / "hf"))
    assert blocker.read_text() == "x" and listing(tmp_path) == ["file"]


def test_a_failed_export_leaves_nothing(run_dir, tmp_path, capsys, monkeypatch):
    import safetensors.torch

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(args[1]))

    monkeypatch.setattr(safetensors.torch, "save_file", no_space)
    monkeypatch.setattr("infoxlm.model.hub.save_file", no_space)
    assert "no space left on device" in fails(capsys, "export", str(run_dir), str(tmp_path / "hf"))
    assert listing(tmp_path) == []


# --- embed -------------------------------------------------------------------------------------


def test_embed_layer_out_of_range_is_named_before_loading_weights(tiny_model_dir, tmp_path, capsys, monkeypatch):
    import infoxlm.model.hub

    monkeypatch.setattr(infoxlm.model.hub, "read_checkpoint_tensors", lambda *a, **k: pytest.fail("weights read"))
    (tmp_path / "in.txt").write_text("hello\n")
    common = ["embed", "--model", str(tiny_model_dir), "--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / "v.npy")]
    err = fails(capsys, *common, "--layer", "99")
    assert "99" in err and "0 (embedding output) … 2" in err and "config.json" in err
    assert "-1" in fails(capsys, *common, "--layer", "-1")
    assert listing(tmp_path) == ["in.txt"]


def test_embed_layer_99_from_the_command_line(tiny_model_dir, tmp_path):
    err = one_line_error(cli("embed", "--model", str(tiny_model_dir), "--layer", "99", stdin=b"hello\n"))
    assert err.startswith("infoxlm: error: --layer 99")


@pytest.mark.parametrize("flag", ["--batch-size", "--max-length"])
@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_embed_sizes_must_be_positive_integers(tiny_model_dir, capsys, flag, value):
    err = fails(capsys, "embed", "--model", str(tiny_model_dir), flag, value)
    assert flag in err and "positive integer" in err


def test_embed_input_missing_or_a_directory(tiny_model_dir, tmp_path, capsys):
    assert "no such file" in fails(capsys, "embed", "--model", str(tiny_model_dir), "--input", str(tmp_path / "nope.txt"),
                                   "--output", str(tmp_path / "v.npy"))
    assert "is a directory" in fails(capsys, "embed", "--model", str(tiny_model_dir), "--input", str(tmp_path),
                                     "--output", str(tmp_path / "v.npy"))
    assert listing(tmp_path) == []


def test_embed_output_that_is_a_directory_is_refused_before_work_and_leaves_nothing(tiny_model_dir, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("hello\n")
    out = tmp_path / "out"
    out.mkdir()
    err = fails(capsys, "embed", "--model", str(tiny_model_dir), "--input", str(src), "--output", str(out))
    assert f"{out}: is a directory" in err
    assert listing(tmp_path) == ["in.txt", "out"]
    blocker = tmp_path / "in.txt"
    assert "is a file" in fails(capsys, "embed", "--model", str(tiny_model_dir), "--input", str(src),
                                "--output", str(blocker / "v.npy"))


def test_embed_that_fails_while_writing_leaves_no_temporary(tiny_model_dir, tmp_path, capsys, monkeypatch):
    src = tmp_path / "in.txt"
    src.write_text("hello\n")

    def denied(file, arr, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "v.npy"))

    monkeypatch.setattr(np, "save", denied)
    err = fails(capsys, "embed", "--model", str(tiny_model_dir), "--input", str(src), "--output", str(tmp_path / "v.npy"))
    assert err == f"infoxlm: error: {tmp_path / 'v.npy'}: permission denied"
    assert listing(tmp_path) == ["in.txt"]


# --- eval tatoeba --------------------------------------------------------------------------------


def test_eval_output_that_is_a_directory_is_refused_up_front(tiny_model_dir, tatoeba, tmp_path, capsys, monkeypatch):
    import infoxlm.eval.tatoeba

    monkeypatch.setattr(infoxlm.eval.tatoeba, "evaluate_tatoeba", lambda *a, **k: pytest.fail("evaluated first"))
    out = tmp_path / "out"
    out.mkdir()
    assert f"{out}: is a directory" in fails(capsys, "eval", "tatoeba", "--model", str(tiny_model_dir),
                                              "--data", str(tatoeba), "--output", str(out))
    # --layer all also writes OUT.png: a directory there is refused as well.
    (tmp_path / "t.png").mkdir()
    assert "t.png: is a directory" in fails(capsys, "eval", "tatoeba", "--model", str(tiny_model_dir), "--data",
                                            str(tatoeba), "--layer", "all", "--output", str(tmp_path / "t.json"))
    assert "is a file" in fails(capsys, "eval", "tatoeba", "--model", str(tiny_model_dir), "--data", str(tatoeba),
                                "--output", str(tatoeba / "tatoeba.deu-eng.deu" / "t.json"))


def test_eval_batch_size_and_layer_are_checked_up_front(tiny_model_dir, tatoeba, tmp_path, capsys):
    out = str(tmp_path / "t.json")
    assert "positive integer" in fails(capsys, "eval", "tatoeba", "--model", str(tiny_model_dir), "--data", str(tatoeba),
                                       "--batch-size", "0", "--output", out)
    assert "--layer 7" in fails(capsys, "eval", "tatoeba", "--model", str(tiny_model_dir), "--data", str(tatoeba),
                                "--layer", "7", "--output", out)
    assert not Path(out).exists()


def test_eval_write_failure_leaves_no_partial_file(tiny_model_dir, tatoeba, tmp_path, capsys, monkeypatch):
    import os

    real_replace = os.replace

    def denied(src, dst):
        raise PermissionError(errno.EACCES, "Permission denied", str(dst))

    monkeypatch.setattr(os, "replace", denied)
    err = fails(capsys, "eval", "tatoeba", "--model", str(tiny_model_dir), "--data", str(tatoeba), "--no-progress",
                "--output", str(tmp_path / "res" / "t.json"))
    monkeypatch.setattr(os, "replace", real_replace)
    assert "permission denied" in err
    assert not any(p.name.startswith(".t.json") or p.name == "t.json" for p in tmp_path.rglob("*"))


# --- finetune ------------------------------------------------------------------------------------


@pytest.mark.parametrize("task", ["xnli", "mlqa"])
def test_finetune_output_that_is_or_lies_under_a_file(tiny_model_dir, tmp_path, capsys, task):
    blocker = tmp_path / "results.txt"
    blocker.write_text("x")
    extra = ["--setting", "cross-lingual-transfer"] if task == "xnli" else ["--train", str(tmp_path / "train.json")]
    for out in (blocker, blocker / "run"):
        err = fails(capsys, "finetune", task, "--model", str(tiny_model_dir), "--data", str(tmp_path), *extra,
                    "--output", str(out))
        assert "is a file" in err
    assert listing(tmp_path) == ["results.txt"]


def test_finetune_refuses_a_foreign_non_empty_directory(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_text("x")
    err = fails(capsys, "finetune", "xnli", "--model", str(tiny_model_dir), "--data", str(tmp_path),
                "--setting", "cross-lingual-transfer", "--output", str(out))
    assert "not empty" in err


@pytest.mark.parametrize("flag", ["--batch-size", "--seeds", "--max-length", "--eval-every", "--max-steps"])
def test_finetune_counts_must_be_positive(tiny_model_dir, tmp_path, capsys, flag):
    err = fails(capsys, "finetune", "xnli", "--model", str(tiny_model_dir), "--data", str(tmp_path),
                "--setting", "cross-lingual-transfer", "--output", str(tmp_path / "run"), flag, "0")
    assert flag in err and "positive integer" in err


# --- model config.json ---------------------------------------------------------------------------


def model_with(tmp_path: Path, source: Path, **changes) -> Path:
    """A copy of the model directory ``source`` with config.json fields changed."""
    model = tmp_path / "model"
    shutil.copytree(source, model)
    fields = json.loads((model / "config.json").read_text())
    fields.update(changes)
    (model / "config.json").write_text(json.dumps(fields))
    return model


def test_hidden_size_of_a_billion_is_one_line_without_allocating(tiny_model_dir, tmp_path):
    model = model_with(tmp_path, tiny_model_dir, hidden_size=10**9, num_attention_heads=1)
    result = cli("embed", "--model", str(model), "--output", str(tmp_path / "v.npy"), stdin=b"hello\n")
    err = one_line_error(result)
    assert f"{model / 'config.json'}: hidden_size is 1000000000" in err and "parameters" in err
    assert not (tmp_path / "v.npy").exists()


def test_a_tokenizer_regex_that_backtracks_is_one_line_naming_the_file(tiny_model_dir, tmp_path):
    """Rust's panic report (a backtrace under RUST_BACKTRACE=1) and pyo3's PanicException
    traceback were what the user got."""
    model = Path(shutil.copytree(tiny_model_dir, tmp_path / "model"))
    fields = json.loads((model / "tokenizer.json").read_text())
    split = {"type": "Split", "pattern": {"Regex": "(a|aa)+c"}, "behavior": "Isolated", "invert": False}
    fields["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [split, fields["pre_tokenizer"]]}
    (model / "tokenizer.json").write_text(json.dumps(fields))
    (tmp_path / "in.txt").write_text("hallo\n" + "a" * 60 + "\n")
    env = {**os.environ, "RUST_BACKTRACE": "1"}
    for argv in (["embed", "--model", model, "--input", tmp_path / "in.txt", "--output", tmp_path / "v.npy"],
                 ["prepare", "mono", "--lang", "en", "--input", tmp_path / "in.txt", "--tokenizer", model,
                  "--output", tmp_path / "store", "--no-progress"]):
        result = subprocess.run([sys.executable, "-m", "infoxlm", *map(str, argv)], capture_output=True, timeout=300, env=env)
        err = one_line_error(result)
        assert f"{model / 'tokenizer.json'}: the tokenizers library panicked while encoding (Onig: " in err, err
    assert not (tmp_path / "v.npy").exists() and not (tmp_path / "store").exists()


def test_sizes_that_disagree_with_the_weights_are_refused_before_allocating(tiny_model_dir, tmp_path):
    # Every field is within its bound, but the encoder would hold 1.8e10 parameters (68.7 GB in
    # fp32); its weights file holds a vocabulary of about a hundred pieces. A wrapper process
    # reports the command's peak memory (its child's).
    model = model_with(tmp_path, tiny_model_dir, vocab_size=16_777_216, hidden_size=1024)
    wrapper = (
        "import resource, subprocess, sys; "
        "r = subprocess.run([sys.executable, '-m', 'infoxlm', *sys.argv[1:]], input=b'hello\\n'); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(r.returncode)"
    )
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", wrapper, "embed", "--model", str(model), "--output",
                             str(tmp_path / "v.npy")], capture_output=True, timeout=300)
    seconds = time.monotonic() - started
    err = one_line_error(result)
    assert f"{model / 'model.safetensors'}: tensor 'lm_head.bias' has shape (" in err, err
    assert f"{model / 'config.json'} implies (16777216" in err, err
    peak_mb = int(result.stdout.decode().split()[-1]) / 1024  # ru_maxrss is in kB on Linux
    assert peak_mb < 800 and seconds < 60, (peak_mb, seconds)
    assert not (tmp_path / "v.npy").exists()


def embed_peak_mb(model: Path, sentences: Path, output: Path) -> tuple[float, str]:
    """Peak resident memory (MB) of `infoxlm embed` on ``sentences``, and its closing line."""
    wrapper = (
        "import resource, subprocess, sys; "
        "r = subprocess.run([sys.executable, '-m', 'infoxlm', *sys.argv[1:]], capture_output=True); "
        "sys.stderr.buffer.write(r.stderr); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
        "sys.exit(r.returncode)"
    )
    args = ["embed", "--model", str(model), "--device", "cpu", "--input", str(sentences), "--output", str(output)]
    result = subprocess.run([sys.executable, "-c", wrapper, *args], capture_output=True, timeout=300)
    assert result.returncode == 0, result.stderr.decode()
    return int(result.stdout.decode().split()[-1]) / 1024, result.stderr.decode().strip().splitlines()[-1]


def test_a_50_mb_line_embeds_in_the_memory_of_a_short_one(tiny_model_dir, tmp_path):
    words = ["Die", "Katze", "schläft", "auf", "dem", "warmen", "Sofa."]
    giant = " ".join(words[i % 7] for i in range(8_000_000)).encode()[:50_000_000]
    (tmp_path / "giant.txt").write_bytes(giant + b"\n")
    (tmp_path / "start.txt").write_bytes(giant[: 64 * 512] + b"\n")
    (tmp_path / "short.txt").write_bytes(b"Die Katze schl\xc3\xa4ft.\n")
    peak, said = embed_peak_mb(tiny_model_dir, tmp_path / "giant.txt", tmp_path / "giant.npy")
    short, _ = embed_peak_mb(tiny_model_dir, tmp_path / "short.txt", tmp_path / "short.npy")
    assert peak < short + 200, (peak, short)  # read and tokenized whole: 9 GB
    assert said.endswith("; 1 line longer than 32,768 characters cut to that many before tokenizing"), said
    embed_peak_mb(tiny_model_dir, tmp_path / "start.txt", tmp_path / "start.npy")
    assert np.array_equal(np.load(tmp_path / "giant.npy"), np.load(tmp_path / "start.npy"))

@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"num_hidden_layers": 0}, "num_hidden_layers is 0: expected a positive integer"),
        ({"num_hidden_layers": True}, "num_hidden_layers is true: expected a positive integer"),
        ({"num_attention_heads": "12"}, "num_attention_heads is \"12\": expected a positive integer"),
        ({"vocab_size": None}, "vocab_size is null: expected a positive integer"),
        ({"hidden_size": 62}, "hidden_size is 62: expected a multiple of num_attention_heads (4)"),
        ({"layer_norm_eps": "tiny"}, "layer_norm_eps is \"tiny\": expected a positive number"),
        ({"hidden_dropout_prob": 1.5}, "hidden_dropout_prob is 1.5: expected a number in [0, 1)"),
        ({"pad_token_id": 5000}, "pad_token_id is 5000: expected an id in 0 … "),
        ({"num_hidden_layers": 100000}, "num_hidden_layers is 100000"),
    ],
)
def test_bad_model_config_fields_are_named(tiny_model_dir, tmp_path, capsys, changes, expected):
    model = model_with(tmp_path, tiny_model_dir, **changes)
    err = fails(capsys, "embed", "--model", str(model), "--output", str(tmp_path / "v.npy"))
    assert f"{model / 'config.json'}: " in err and expected in err


def test_a_pickled_checkpoint_with_code_is_refused_with_the_reason(tiny_model_dir, tmp_path, capsys):
    import torch
    from safetensors.torch import load_file

    model = model_with(tmp_path, tiny_model_dir)
    state = load_file(model / "model.safetensors")
    (model / "model.safetensors").unlink()
    torch.save({"state": state, "hook": print}, model / "pytorch_model.bin")  # pickles a reference to print
    (tmp_path / "in.txt").write_text("hello\n")
    err = fails(capsys, "embed", "--model", str(model), "--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / "v.npy"))
    assert "weights_only" not in err
    assert "would run code" in err and "safetensors" in err and "(it names print)" in err


# --- the other commands that write a directory ---------------------------------------------------


def test_every_command_that_writes_a_directory_checks_it_first(tiny_model_dir, run_dir, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("x")
    store = run_dir.parent / "store"
    commands = {
        "pretrain": ["pretrain", "--preset", "test", "--data", str(store), "--no-progress", "--output"],
        "report": ["report", str(tmp_path), "--output"],
        "tokenizer": ["tokenizer", "train", "--input", str(blocker), "--vocab-size", "100", "--output"],
        "demo": ["demo", "--quick", "--no-progress", "--output"],
    }
    for name, argv in commands.items():
        assert "is a file" in fails(capsys, *argv, str(blocker)), name
        assert "is a file" in fails(capsys, *argv, str(blocker / "sub")), name
        assert "not empty" in fails(capsys, *argv, str(foreign)), name
    assert "is the token store" in fails(capsys, *commands["pretrain"], str(store))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "foreign"] and listing(foreign) == ["thesis.tex"]
