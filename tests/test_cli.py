"""The `infoxlm` command as a user runs it: real subprocesses, exit codes, one-line errors."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from infoxlm import embed

from conftest import TINY_TEXT


def run(*args, stdin: bytes = b"", cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "infoxlm.cli", *args], input=stdin, capture_output=True, cwd=cwd, timeout=300
    )


# Calls the command's main as `infoxlm` would for each argument list, then prints which heavy
# modules the process holds: help, the version and an argument error must load none of them.
_IMPORT_PROBE = """
import sys
from infoxlm.cli import main
for argv in (["--version"], ["--help"], ["pretrain", "--help"], ["pretrain", "--preset", "nope"],
             ["prepare", "show", "--help"], ["bench", "--size", "huge"], ["tokenizer", "train", "--help"],
             ["pretrain", "--preset", "test", "--steps", "10"], ["pretrain", "--data", "s", "--output", "r"]):
    try:
        main(argv)
    except SystemExit:
        pass
print(sorted(m for m in ("torch", "torch._dynamo", "transformers") if m in sys.modules))
"""


def test_help_version_and_argument_errors_import_no_torch():
    result = subprocess.run([sys.executable, "-c", _IMPORT_PROBE], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "[]"  # after the help texts
    assert "invalid choice: 'nope'" in result.stderr and "invalid choice: 'huge'" in result.stderr
    assert "did you mean --max-steps?" in result.stderr
    assert "required: --preset" in result.stderr


@pytest.mark.parametrize(("argv", "message"), [
    (["pretrain", "--preset", "test", "--steps", "10", "--data", "s", "--output", "r"],
     "infoxlm pretrain: error: unrecognized arguments: --steps 10; did you mean --max-steps? (see infoxlm pretrain --help)"),
    (["eval", "tatoeba", "--model", "m", "--data", "d", "--output", "o.json", "--layers=all"],
     "infoxlm eval tatoeba: error: unrecognized arguments: --layers=all; did you mean --layer? (see infoxlm eval tatoeba --help)"),
    (["pretrain", "--preset", "test", "--ouput", "r"],
     "infoxlm pretrain: error: unrecognized arguments: --ouput r; did you mean --output? (see infoxlm pretrain --help)"),
    (["pretrain", "--preset", "test", "--lr", "3"], "infoxlm pretrain: error: unrecognized arguments: --lr 3 (see infoxlm pretrain --help)"),
    (["pretrian"], "did you mean 'pretrain'? (see infoxlm --help)"),
    (["pretrain", "--preset", "bse"], "(choose from 'base', 'demo', 'demo-checkpoint', 'demo-multiway', 'demo-quick', 'large', 'paper-demo', 'paper-demo-quick', 'scratch-base', 'test', 'xl', 'xxl'); did you mean 'base'?"),
])
def test_a_mistyped_flag_or_choice_gets_the_nearest_valid_one(argv, message, capsys):
    """The subcommand's parser reports its own unknown flags (argparse would have the top-level
    parser say it, knowing none of them), with the nearest of its options."""
    from infoxlm.cli import main

    with pytest.raises(SystemExit) as ended:
        main(argv)
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and message in err, err


@pytest.mark.parametrize("extra", [["--data", "s", "--output", "r"], ["--print-config"]])
def test_pretrain_without_a_preset_lists_the_presets(extra, capsys):
    """Forgetting --preset used to run the full base recipe (150,000 steps of 2,048 examples per
    objective), hours a step on a CPU: now it is an error on one line that names every preset
    with what it is for and where it runs."""
    from infoxlm.cli import main
    from infoxlm.cli_args import PRESET_NAMES

    with pytest.raises(SystemExit) as ended:
        main(["pretrain", *extra])
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "the following arguments are required: --preset" in err, err
    for name in PRESET_NAMES:
        assert f" {name} (" in err, name
    assert "test (seconds on a CPU" in err and "base (continues XLM-R base, needs --init" in err


@pytest.mark.slow  # a real `infoxlm` subprocess
def test_a_reader_that_closes_the_pipe_ends_the_command_quietly():
    """`infoxlm … | head`: the command ends as Unix tools end (status 141, nothing on stderr),
    not with 'infoxlm: error: broken pipe'."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone before the first write
    try:
        result = subprocess.run([sys.executable, "-m", "infoxlm", "pretrain", "--preset", "test", "--print-config"],
                                stdout=write_end, stderr=subprocess.PIPE, timeout=300)
    finally:
        os.close(write_end)
    assert (result.returncode, result.stderr.decode()) == (141, "")


def test_the_parsers_offer_the_registries_names():
    """The choices are written out in cli_args (their registries import torch); they must
    stay the registries' own names."""
    from infoxlm.bench.sizes import SIZES
    from infoxlm.cli_args import BENCH_SIZE_NAMES, OBJECTIVE_NAMES, PRESET_NAMES, PRESET_PURPOSES
    from infoxlm.data.pipeline import OBJECTIVES
    from infoxlm.train.presets import PRESETS

    assert PRESET_NAMES == tuple(sorted(PRESETS))
    assert sorted(PRESET_PURPOSES) == sorted(PRESETS)
    assert BENCH_SIZE_NAMES == tuple(SIZES)
    assert OBJECTIVE_NAMES == OBJECTIVES


@pytest.mark.slow  # a real `infoxlm` subprocess
def test_help_lists_only_working_commands():
    result = run("--help")
    assert result.returncode == 0
    out = result.stdout.decode()
    listed = set(re.findall(r"^ {4}(\w+)", out.split("commands:")[1], flags=re.M))
    assert listed == {
        "tokenizer", "prepare", "pretrain", "export", "eval", "mine", "finetune", "report", "embed", "bench", "demo"
    }


@pytest.mark.slow  # a real `infoxlm` subprocess
def test_embed_reads_stdin_and_writes_npy_to_stdout(tiny_model_dir):
    sentences = TINY_TEXT["de"] + TINY_TEXT["zh"]
    result = run("embed", "--model", str(tiny_model_dir), "--layer", "1", stdin="\n".join(sentences).encode() + b"\n")
    assert result.returncode == 0, result.stderr.decode()
    vectors = np.load(io.BytesIO(result.stdout))
    np.testing.assert_allclose(vectors, embed(tiny_model_dir, sentences, layer=1), atol=1e-6)
    assert "embedded 6 sentences" in result.stderr.decode()


@pytest.mark.slow  # a real `infoxlm` subprocess
def test_embed_writes_an_output_file(tiny_model_dir, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("eins\nzwei\n\ndrei\n", encoding="utf-8")
    result = run("embed", "--model", str(tiny_model_dir), "--input", str(src), "--output", str(tmp_path / "v.npy"))
    assert result.returncode == 0, result.stderr.decode()
    assert np.load(tmp_path / "v.npy").shape == (4, 64)  # the empty line keeps its row


@pytest.mark.slow  # a real `infoxlm` subprocess
def test_invalid_utf8_is_a_one_line_error_naming_the_line(tiny_model_dir, tmp_path):
    src = tmp_path / "bad.txt"
    src.write_bytes(b"fine\nbroken \xff here\n")
    result = run("embed", "--model", str(tiny_model_dir), "--input", str(src), "--output", str(tmp_path / "v.npy"))
    assert result.returncode == 1
    err = result.stderr.decode().strip()
    assert err == f"infoxlm: error: {src}:2: invalid UTF-8 at byte 8 (0xff); expected UTF-8 text"
    assert not (tmp_path / "v.npy").exists()


@pytest.mark.slow  # a real `infoxlm` subprocess
def test_a_bad_model_directory_is_a_one_line_error(tmp_path):
    result = run("embed", "--model", str(tmp_path), stdin=b"hello\n")
    assert result.returncode == 1
    err = result.stderr.decode().strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1
    assert "no config.json" in err


def test_file_system_errors_become_one_line_naming_the_path():
    from infoxlm.cli import describe_os_error

    assert describe_os_error(OSError(28, "No space left on device", "store/mono/de")) == (
        "no space left on device while writing store/mono/de"
    )
    assert describe_os_error(PermissionError(13, "Permission denied", "/srv/x")) == "/srv/x: permission denied"
    assert describe_os_error(OSError(18, "Invalid cross-device link", "a", None, "b")) == "a → b: invalid cross-device link"


@pytest.mark.slow  # a real `infoxlm` subprocess
def test_a_missing_input_file_is_a_one_line_error(tiny_model_dir, tmp_path):
    missing = tmp_path / "missing.txt"
    result = run("embed", "--model", str(tiny_model_dir), "--input", str(missing), "--output", str(tmp_path / "v.npy"))
    assert result.returncode == 1
    assert result.stderr.decode().strip() == f"infoxlm: error: {missing}: no such file; expected a UTF-8 text file"
