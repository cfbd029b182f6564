"""xsim: LASER's error rate on the same vectors, Flores-200's layout, aligned files, the command."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from infoxlm import Encoder, Tokenizer
from infoxlm.cli import main
from infoxlm.errors import EvalDataError
from infoxlm.eval.margin import MarginOptions
from infoxlm.eval.xsim import evaluate_xsim, load_flores, read_aligned, xsim_errors

from mining_files import write_flores


def _laser_xsim(x, y, trg_lines, k=4, margin="ratio"):
    """LASER's source/xsim.py (calculate_error with eval_text) written out: full n × n cosines."""
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    y = y / np.linalg.norm(y, axis=1, keepdims=True)
    sims = x @ y.T
    fwd = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    bwd = np.argsort(-sims.T, axis=1, kind="stable")[:, :k]
    fwd_mean = np.take_along_axis(sims, fwd, 1).mean(1)
    bwd_mean = np.take_along_axis(sims.T, bwd, 1).mean(1)
    errors = 0
    for i in range(len(x)):
        scores = []
        for j in fwd[i]:
            a, b = sims[i, j], (fwd_mean[i] + bwd_mean[j]) / 2
            scores.append(a / b if margin == "ratio" else a - b if margin == "distance" else a)
        errors += trg_lines[fwd[i][int(np.argmax(scores))]] != trg_lines[i]
    return errors


@pytest.mark.parametrize("margin", ["ratio", "distance", "absolute"])
def test_the_error_counts_are_lasers_on_the_same_vectors(margin):
    rng = np.random.default_rng(1)
    n, d = 200, 24
    en = rng.standard_normal((n, d))
    de = en + 1.1 * rng.standard_normal((n, d))  # noisy enough that some are missed
    de_lines, en_lines = [f"d{i}" for i in range(n)], [f"e{i}" for i in range(n)]
    en_lines[5] = en_lines[9]  # a repeated target line counts as found whichever copy is retrieved
    options = MarginOptions(k=4, margin=margin)
    to_en, to_de = xsim_errors(torch.tensor(de), torch.tensor(en), de_lines, en_lines, options)
    assert to_en == _laser_xsim(de, en, en_lines, margin=margin)
    assert to_de == _laser_xsim(en, de, de_lines, margin=margin)
    assert 10 < to_en < n - 10  # a set where the margin matters


def test_flores_is_read_as_shipped_against_english_or_another_target(tmp_path):
    data = write_flores(tmp_path / "flores200_dataset", n=12)
    target, sources = load_flores(data, "devtest", ["deu_Latn", "fra_Latn"])
    assert target.name == "eng_Latn" and [s.name for s in sources] == ["deu_Latn", "fra_Latn"]
    assert len(target.lines) == 12 and target.path == data / "devtest" / "eng_Latn.devtest"
    target, sources = load_flores(data, "dev", None, "fra_Latn")
    assert target.name == "fra_Latn" and [s.name for s in sources] == ["deu_Latn", "eng_Latn", "rus_Cyrl", "zho_Hans"]


def test_every_bad_input_is_named(tmp_path):
    data = write_flores(tmp_path / "flores200_dataset", n=12)
    (data / "devtest" / "fra_Latn.devtest").write_text("one\ntwo\n")
    with pytest.raises(EvalDataError, match=r"fra_Latn.devtest has 2 lines but .*eng_Latn.devtest has 12; expected line-aligned"):
        load_flores(data, "devtest", ["deu_Latn", "fra_Latn"])
    with pytest.raises(EvalDataError, match=r"devtest/xxx_Latn.devtest: missing; expected a Flores-200 code"):
        load_flores(data, "devtest", ["xxx_Latn"])
    with pytest.raises(EvalDataError, match=r"--split 'test': expected one of dev, devtest"):
        load_flores(data, "test", None)
    with pytest.raises(EvalDataError, match=r"--langs eng_Latn: is the target"):
        load_flores(data, "dev", ["eng_Latn"])
    (data / "dev" / "deu_Latn.dev").write_bytes(b"")
    with pytest.raises(EvalDataError, match=r"deu_Latn.dev: empty; expected one sentence a line"):
        load_flores(data, "dev", ["deu_Latn"])
    (tmp_path / "bad.txt").write_bytes(b"gut\ngr\xfc\xdf\n")
    with pytest.raises(EvalDataError, match=r"bad.txt:2: invalid UTF-8"):
        read_aligned(tmp_path / "bad.txt")
    with pytest.raises(EvalDataError, match=r"empty/dev: no \{lang\}.dev files; expected Flores-200 as shipped"):
        load_flores(tmp_path / "empty", "dev", None)


def test_identical_lines_are_found_and_rates_are_per_language_and_averaged(tiny_model_dir, tmp_path):
    data = write_flores(tmp_path / "flores200_dataset", n=40)
    target, sources = load_flores(data, "devtest", ["deu_Latn", "fra_Latn"])
    encoder, tokenizer = Encoder.from_pretrained(tiny_model_dir), Tokenizer.from_pretrained(tiny_model_dir)
    blocks = evaluate_xsim(encoder, tokenizer, target, sources, [1, 2])
    copy = read_aligned(data / "devtest" / "eng_Latn.devtest", "copy")
    same = evaluate_xsim(encoder, tokenizer, target, [copy], [1])[1]["languages"]["copy"]
    assert same == {"xx2tgt": 0.0, "tgt2xx": 0.0, "n": 40}  # every line its own translation
    for k in (1, 2):
        scores = blocks[k]["languages"]
        assert set(scores) == {"deu_Latn", "fra_Latn"} and all(0 < s["xx2tgt"] < 100 for s in scores.values())
        assert blocks[k]["average"]["xx2tgt"] == pytest.approx((scores["deu_Latn"]["xx2tgt"] + scores["fra_Latn"]["xx2tgt"]) / 2)


def _xsim(*args):
    return subprocess.run([sys.executable, "-m", "infoxlm", "eval", "xsim", *map(str, args), "--no-progress"],
                          capture_output=True, text=True, timeout=300)


def test_the_command_on_flores_and_on_two_files(tiny_model_dir, tmp_path):
    data = write_flores(tmp_path / "flores200_dataset", n=40)
    run = _xsim("--model", tiny_model_dir, "--data", data, "--split", "devtest", "--langs", "deu_Latn,fra_Latn",
                "--output", tmp_path / "x.json")
    assert run.returncode == 0, run.stderr
    result = json.loads((tmp_path / "x.json").read_text())
    assert result["target"] == "eng_Latn" and result["margin"] == {"margin": "ratio", "k": 4}
    for lang, s in result["languages"].items():
        assert any(line.split()[:3] == [lang, f"{s['xx2tgt']:.2f}", f"{s['tgt2xx']:.2f}"] for line in run.stdout.splitlines())
    (tmp_path / "en.txt").write_bytes((data / "devtest" / "eng_Latn.devtest").read_bytes())
    (tmp_path / "de.txt").write_bytes((data / "devtest" / "deu_Latn.devtest").read_bytes())
    files = _xsim("--model", tiny_model_dir, "--src", tmp_path / "de.txt", "--tgt", tmp_path / "en.txt",
                  "--layer", "all", "--output", tmp_path / "f.json")
    assert files.returncode == 0, files.stderr
    layers = json.loads((tmp_path / "f.json").read_text())["layers"]
    assert layers["1"]["languages"]["de.txt"] == result["languages"]["deu_Latn"]  # the same files, the same rates
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(("args", "message"), [
    (["--src", "de.txt"], "--tgt missing; --src and --tgt name the two files"),
    (["--src", "de.txt", "--tgt", "en.txt", "--data", "x"], "expected either --data (Flores-200) or --src and --tgt"),
    ([], "expected either --data (Flores-200) or --src and --tgt"),
    (["--src", "de.txt", "--tgt", "short.txt"], "short.txt has 1 lines but de.txt has 2; expected line-aligned files"),
    (["--src", "de.txt", "--tgt", "empty.txt"], "empty.txt: empty; expected one sentence a line"),
    (["--src", "de.txt", "--tgt", "latin1.txt"], "latin1.txt:2: invalid UTF-8"),
])
def test_bad_files_get_one_line_and_nothing_is_written(tiny_model_dir, tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "de.txt").write_text("Hallo.\nJa.\n")
    (tmp_path / "short.txt").write_text("Hello.\n")
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "latin1.txt").write_bytes(b"Hello.\nGr\xfc\xdfe.\n")
    code = main(["eval", "xsim", "--model", str(tiny_model_dir), *args, "--output", "out/x.json"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1 and message in err, err
    assert not (tmp_path / "out").exists()
