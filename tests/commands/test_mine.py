"""`infoxlm mine` end to end on a tiny model: LASER's lines, every input format, resume after Ctrl-C, bad input."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from infoxlm.cli import main
from infoxlm.commands import mine as mine_command
from infoxlm.eval import margin, mining

from conftest import TINY_TEXT
from laser_mining import laser_mine_lines

# Nine distinct sentences a side: each of the tiny texts' sentences joined with each.
DE = [f"{a} {b}" for a in TINY_TEXT["de"] for b in TINY_TEXT["de"]]
EN = [f"{a} {b}" for a in TINY_TEXT["en"] for b in TINY_TEXT["en"]]


@pytest.fixture
def corpora(tmp_path):
    (tmp_path / "de.txt").write_text("\n".join(DE + ["", DE[0]]) + "\n", encoding="utf-8")  # a blank and a repeat
    (tmp_path / "en.txt").write_text("\n".join(EN) + "\n", encoding="utf-8")
    return tmp_path


def mine(model, work, *extra, output="mined.tsv", src="de.txt", tgt="en.txt"):
    return main(["mine", "--model", str(model), "--src", str(work / src), "--tgt", str(work / tgt),
                 "--output", str(work / output), "--no-progress", "--device", "cpu", *extra])


def test_the_choices_written_in_the_parser_are_the_modules():
    assert mine_command.MARGIN_NAMES == margin.MARGINS and mine_command.STRATEGY_NAMES == margin.STRATEGIES
    assert mine_command.BACKEND_NAMES == margin.BACKENDS and mine_command.DEFAULT_THRESHOLD == mining.DEFAULT_THRESHOLD


def test_the_tsv_is_lasers_mining_of_the_saved_vectors(tiny_model_dir, corpora, capsys):
    assert mine(tiny_model_dir, corpora, "--threshold", "0", "--keep-embeddings") == 0
    out = capsys.readouterr().out
    assert "from 9 × 9 distinct sentences" in out and "1 blank line skipped, 1 repeated line mined once" in out
    lines = (corpora / "mined.tsv").read_text(encoding="utf-8").splitlines()
    saved = corpora / "mined.tsv.embeddings"
    x, y = (np.fromfile(saved / f"{side}.vectors", dtype=np.float16).reshape(9, -1) for side in ("src", "tgt"))
    laser = laser_mine_lines(x, y, DE, EN, 0.0)
    assert [line.split("\t")[1:] for line in lines] == [line.split("\t")[1:] for line in laser] and lines
    np.testing.assert_allclose([float(l.split("\t")[0]) for l in lines], [float(l.split("\t")[0]) for l in laser], rtol=2e-6)
    assert json.loads((saved / "src.json").read_text())["dtype"] == "float16"


def test_the_vectors_go_once_the_tsv_is_written_and_kept_ones_are_reused(tiny_model_dir, corpora, monkeypatch, capsys):
    assert mine(tiny_model_dir, corpora, "--threshold", "0") == 0
    assert not (corpora / "mined.tsv.embeddings").exists()
    assert mine(tiny_model_dir, corpora, "--keep-embeddings", "--embeddings", str(corpora / "vec"), output="kept.tsv") == 0
    # A second threshold from the kept vectors: nothing is embedded (no encoder is even loaded).
    monkeypatch.setattr("infoxlm.embedding.load_for_inference", lambda *a, **k: pytest.fail("embedded again"))
    assert mine(tiny_model_dir, corpora, "--threshold", "0", "--embeddings", str(corpora / "vec"), output="again.tsv") == 0
    assert "all 9 sentences' vectors found" in capsys.readouterr().err
    assert (corpora / "again.tsv").read_bytes() == (corpora / "mined.tsv").read_bytes()


def test_a_run_directory_mines_with_its_checkpoint_and_contrast_layer(tiny_run, corpora, capsys):
    assert mine(tiny_run, corpora, "--threshold", "0") == 0
    assert "(run directory, checkpoint step 2), layer 2 (the contrast layer" in capsys.readouterr().out
    assert (corpora / "mined.tsv").read_text(encoding="utf-8").count("\n") > 0


def test_json_lines_and_compressed_text_mine_as_the_text_file(tiny_model_dir, corpora):
    (corpora / "de.jsonl").write_text("".join(json.dumps({"satz": s}) + "\n" for s in DE), encoding="utf-8")
    (corpora / "en.txt.gz").write_bytes(gzip.compress((corpora / "en.txt").read_bytes()))
    assert mine(tiny_model_dir, corpora, "--threshold", "0") == 0
    assert mine(tiny_model_dir, corpora, "--threshold", "0", "--field", "satz", src="de.jsonl", tgt="en.txt.gz",
                output="records.tsv") == 0
    assert (corpora / "records.tsv").read_bytes() == (corpora / "mined.tsv").read_bytes()


def test_a_run_stopped_half_way_resumes_and_writes_the_same_file(tiny_model_dir, corpora, monkeypatch, capsys):
    assert mine(tiny_model_dir, corpora, "--save-every", "2", "--threshold", "0", output="whole.tsv") == 0
    calls, embed = [], mining.embed_layers

    def stopped_at_the_third_piece(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return embed(*args, **kwargs)

    monkeypatch.setattr(mining, "embed_layers", stopped_at_the_third_piece)
    assert mine(tiny_model_dir, corpora, "--save-every", "2", "--threshold", "0") == 130
    assert "stopped with 4 of 9 sentences of" in capsys.readouterr().err and not (corpora / "mined.tsv").exists()
    assert (corpora / "mined.tsv.embeddings" / "src.vectors").stat().st_size > 0
    monkeypatch.setattr(mining, "embed_layers", embed)
    assert mine(tiny_model_dir, corpora, "--save-every", "2", "--threshold", "0") == 0
    assert "resuming after 4 of 9 sentences" in capsys.readouterr().err
    assert (corpora / "mined.tsv").read_bytes() == (corpora / "whole.tsv").read_bytes()


@pytest.mark.slow  # real processes and a real SIGINT
def test_a_real_ctrl_c_half_way_then_the_same_command_gives_the_same_bytes(tiny_model_dir, tmp_path):
    rng = np.random.default_rng(0)
    words = {lang: " ".join(TINY_TEXT[lang]).split() for lang in ("de", "en")}
    for lang in ("de", "en"):  # 400 distinct sentences a side: 40 pieces, a piece in a fraction of a second
        lines = {" ".join(rng.choice(words[lang], 8)) for _ in range(500)}
        (tmp_path / f"{lang}.txt").write_text("\n".join(sorted(lines)[:400]) + "\n", encoding="utf-8")
    argv = [sys.executable, "-m", "infoxlm", "mine", "--model", str(tiny_model_dir), "--src", "de.txt", "--tgt", "en.txt",
            "--save-every", "10", "--batch-size", "2", "--device", "cpu", "--no-progress", "--keep-embeddings"]
    whole = subprocess.run([*argv, "--output", "whole.tsv"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert whole.returncode == 0, whole.stderr[-2000:]
    proc = subprocess.Popen([*argv, "--output", "mined.tsv"], cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    vectors = tmp_path / "mined.tsv.embeddings" / "src.vectors"
    deadline = time.time() + 120
    while time.time() < deadline and not (vectors.is_file() and vectors.stat().st_size > 0):
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "the same command resumes" in err, err[-2000:]
    assert not (tmp_path / "mined.tsv").exists()
    again = subprocess.run([*argv, "--output", "mined.tsv"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "resuming after" in again.stderr, again.stderr[-2000:]
    assert (tmp_path / "mined.tsv").read_bytes() == (tmp_path / "whole.tsv").read_bytes()
    for side in ("src", "tgt"):
        kept = tmp_path / "whole.tsv.embeddings" / f"{side}.vectors"
        assert (tmp_path / "mined.tsv.embeddings" / f"{side}.vectors").read_bytes() == kept.read_bytes()


@pytest.mark.parametrize(("setup", "args", "message"), [
    (lambda w: (w / "empty.txt").write_text(""), ["--src", "empty.txt"], "empty.txt: no sentence to mine (it is empty)"),
    (lambda w: None, ["--tgt", "de.txt"], "--src and --tgt both name"),
    (lambda w: None, ["--field", "text"], "--field names a field of record inputs"),
    (lambda w: (w / "bad.txt").write_bytes(b"ok\n\xc3\x28\n"), ["--tgt", "bad.txt"], "bad.txt:2: invalid UTF-8 at byte 1"),
    (lambda w: (w / "vec").mkdir() or (w / "vec" / "mine.txt").write_text("x"), ["--embeddings", "vec"], "not vectors of infoxlm mine"),
    (lambda w: (w / "out").mkdir(), ["--output", "out"], "out"),
    (lambda w: None, ["--threshold", "inf"], "not a finite number"),
])
def test_bad_input_is_one_line_and_writes_nothing(tiny_model_dir, corpora, monkeypatch, capsys, setup, args, message):
    setup(corpora)
    monkeypatch.chdir(corpora)
    before = sorted(os.listdir(corpora))
    argv = ["mine", "--model", str(tiny_model_dir), "--src", "de.txt", "--tgt", "en.txt", "--output", "mined.tsv",
            "--no-progress", *args]
    try:
        status = main(argv)
    except SystemExit as exit_:  # argparse's own refusals
        status = exit_.code
    err = capsys.readouterr().err.strip()
    assert status not in (0, None) and message in err and len(err.splitlines()) == 1, err
    assert sorted(os.listdir(corpora)) == before
