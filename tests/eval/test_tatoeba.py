"""Tatoeba retrieval: the LASER file format, both directions, layer-wise output."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from infoxlm import Encoder, Tokenizer
from infoxlm.eval.retrieval import retrieval_accuracy
from infoxlm.eval.tatoeba import EvalDataError, evaluate_tatoeba, load_pairs, resolve_languages

from conftest import TINY_TEXT


def write_laser(folder, code, xx, en):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"tatoeba.{code}-eng.{code}").write_text("\n".join(xx) + "\n", encoding="utf-8")
    (folder / f"tatoeba.{code}-eng.eng").write_text("\n".join(en) + "\n", encoding="utf-8")


def test_retrieval_accuracy_by_hand():
    en = np.eye(4, dtype=np.float32)
    xx = en.copy()
    xx[3] = en[2] * 2  # sentence 3 lands on sentence 2 (cosine ignores the scale)
    scores = retrieval_accuracy(xx, en)
    assert scores == {"xx2en": 75.0, "en2xx": 75.0}
    xx[3] = [0, 0, 0.9, 1.0]  # nearer to en[3] than to en[2], but en[2] now prefers xx[2] still
    assert retrieval_accuracy(xx, en)["xx2en"] == 100.0


def test_identical_sentences_are_found_at_every_layer(tiny_model_dir, tmp_path):
    sentences = [s for lines in TINY_TEXT.values() for s in lines]
    write_laser(tmp_path, "deu", sentences, sentences)
    encoder, tokenizer = Encoder.from_pretrained(tiny_model_dir), Tokenizer.from_pretrained(tiny_model_dir)
    result = evaluate_tatoeba(encoder, tokenizer, str(tmp_path), ["deu"], [0, 1, 2])
    for k in (0, 1, 2):
        assert result["layers"][k]["languages"]["deu"] == {"xx2en": 100.0, "en2xx": 100.0, "n": 12}


def test_languages_presets_and_codes(tmp_path):
    write_laser(tmp_path, "deu", ["a"], ["b"])
    write_laser(tmp_path, "swh", ["c"], ["d"])
    assert resolve_languages(None, str(tmp_path)) == ["deu", "swh"]
    assert resolve_languages(["paper14"], str(tmp_path))[:3] == ["ara", "bul", "deu"]
    assert len(resolve_languages(["xtreme36"], str(tmp_path))) == 36
    assert resolve_languages(["zh", "fa", "deu"], str(tmp_path)) == ["cmn", "pes", "deu"]


def test_bad_files_are_named(tmp_path):
    write_laser(tmp_path, "deu", ["a", "b"], ["a"])
    with pytest.raises(EvalDataError, match=r"tatoeba.deu-eng.deu has 2 lines but .*tatoeba.deu-eng.eng has 1"):
        load_pairs(str(tmp_path), "deu")
    with pytest.raises(EvalDataError, match="tatoeba.fra-eng.fra: missing"):
        load_pairs(str(tmp_path), "fra")
    (tmp_path / "tatoeba.deu-eng.eng").write_bytes(b"a\nb\xfe\n")
    with pytest.raises(EvalDataError, match=r"tatoeba.deu-eng.eng:2: invalid UTF-8"):
        load_pairs(str(tmp_path), "deu")


def test_command_writes_json_and_the_layerwise_png(tiny_model_dir, tmp_path):
    write_laser(tmp_path / "data", "deu", TINY_TEXT["de"], TINY_TEXT["en"])
    write_laser(tmp_path / "data", "rus", TINY_TEXT["ru"], TINY_TEXT["en"])
    base = [sys.executable, "-m", "infoxlm", "eval", "tatoeba", "--model", str(tiny_model_dir), "--data", str(tmp_path / "data"), "--no-progress"]
    one = subprocess.run([*base, "--layer", "1", "--output", str(tmp_path / "one.json")], capture_output=True, timeout=120)
    assert one.returncode == 0, one.stderr.decode()
    block = json.loads((tmp_path / "one.json").read_text())
    assert block["layer"] == 1 and block["pooling"] == "mean" and set(block["languages"]) == {"deu", "rus"}
    assert block["languages"]["deu"]["n"] == 3
    assert block["average"]["xx2en"] == pytest.approx((block["languages"]["deu"]["xx2en"] + block["languages"]["rus"]["xx2en"]) / 2)
    every = subprocess.run([*base, "--layer", "all", "--output", str(tmp_path / "all.json")], capture_output=True, timeout=120)
    assert every.returncode == 0, every.stderr.decode()
    layers = json.loads((tmp_path / "all.json").read_text())["layers"]
    assert set(layers) == {"0", "1", "2"}
    assert (tmp_path / "all.png").read_bytes()[:4] == b"\x89PNG"
    bad = subprocess.run([*base, "--layer", "9", "--output", str(tmp_path / "x.json")], capture_output=True, timeout=120)
    assert bad.returncode == 1 and b"--layer 9" in bad.stderr
