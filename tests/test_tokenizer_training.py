"""Tests for infoxlm.tokenizer_training's inputs: records (JSON Lines, Parquet, save_to_disk)
are read as ``prepare`` reads them, so a vocabulary never learns the JSON around the text.

The vocabulary itself (layout, sampling, determinism, parity) is tested in test_tokenizer.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from infoxlm.cli import main as infoxlm_main
from infoxlm.errors import TokenizerError
from infoxlm.special_tokens import UNK_ID
from infoxlm.tokenizer import Tokenizer
from infoxlm.tokenizer_training import language_from_filename, train_tokenizer

RUSSIAN = "абвгдеёжзийклмнопрстуфхцчшщъыьэюя"
TRAIN_KW = dict(vocab_size=300, max_sentences=1000, seed=0)


def russian_lines(count: int = 300, seed: int = 0) -> list[str]:
    """Word-structured random text, with a blank line now and then (a document end)."""
    rng = np.random.default_rng(seed)
    words = ["".join(rng.choice(list(RUSSIAN), size=rng.integers(2, 8))) for _ in range(150)]
    lines = [" ".join(rng.choice(words, size=rng.integers(3, 10))) + "." for _ in range(count)]
    return [line if i % 25 else "" for i, line in enumerate(lines)]


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def pieces(directory: Path) -> list[str]:
    model = json.loads((directory / "tokenizer.json").read_text(encoding="utf-8"))["model"]
    return [piece for piece, _ in model["vocab"]]


def test_jsonl_is_read_as_records_and_equals_the_same_text(tmp_path, capsys):
    lines = russian_lines()
    (tmp_path / "ru.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    records = [{"id": i, "text": line, "url": f"https://example.org/{i}"} for i, line in enumerate(lines)]
    jsonl = write_jsonl(tmp_path / "mono.ru.jsonl", records)
    common = ["--vocab-size", "300", "--max-sentences", "1000", "--no-progress"]
    assert infoxlm_main(["tokenizer", "train", "--input", str(tmp_path / "ru.txt"), "--output",
                         str(tmp_path / "from_text"), *common]) == 0  # fmt: skip
    assert infoxlm_main(["tokenizer", "train", "--lang-input", f"ru={jsonl}", "--output",
                         str(tmp_path / "from_jsonl"), *common]) == 0  # fmt: skip
    assert "ru p=1.000 lines=288" in capsys.readouterr().out  # 12 blank lines are no text
    learned = pieces(tmp_path / "from_jsonl")
    assert not [p for p in learned if any(c in p for c in '{}":')], "JSON syntax was learned as text"
    assert learned == pieces(tmp_path / "from_text")
    assert (tmp_path / "from_jsonl" / "tokenizer.json").read_bytes() == (
        tmp_path / "from_text" / "tokenizer.json"
    ).read_bytes()


def test_parquet_and_saved_dataset_read_the_named_field(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    datasets = pytest.importorskip("datasets")
    datasets.disable_progress_bars()
    lines = russian_lines(seed=1)
    (tmp_path / "ru.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    pq.write_table(pa.table({"n": list(range(len(lines))), "content": lines}), tmp_path / "ru.parquet")
    datasets.Dataset.from_dict({"content": lines}).save_to_disk(str(tmp_path / "saved"))
    text = train_tokenizer({"ru": tmp_path / "ru.txt"}, tmp_path / "t", **TRAIN_KW)
    for name, spec in (("parquet", tmp_path / "ru.parquet"), ("saved", tmp_path / "saved")):
        trained = train_tokenizer({"ru": spec}, tmp_path / name, field="content", **TRAIN_KW)
        assert pieces(tmp_path / name) == pieces(tmp_path / "t"), name
        assert trained.training_report.line_counts == text.training_report.line_counts
        assert trained.training_report.files == {"ru": [str(spec)]}
        assert trained.training_report.record_fields == {"field": "content"}


def test_record_input_errors_are_one_line(tmp_path, capsys):
    lines = russian_lines(20)
    text = tmp_path / "ru.txt"
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    jsonl = write_jsonl(tmp_path / "ru.jsonl", [{"body": line} for line in lines])
    with pytest.raises(TokenizerError, match=r"--field names a field of record inputs .*ru\.txt is a text file"):
        train_tokenizer([text], tmp_path / "a", field="text", **TRAIN_KW)
    # The default field is "text", as for prepare; the message names the file, line and fields.
    code = infoxlm_main(["tokenizer", "train", "--input", str(jsonl), "--output", str(tmp_path / "b"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1, err
    assert f"{jsonl}:1: no field 'text'; its fields are 'body'" in err
    bad = tmp_path / "bad.ru.jsonl"
    bad.write_text('{"text": "да"}\n{"text": 7}\n', encoding="utf-8")
    with pytest.raises(TokenizerError, match=r"bad\.ru\.jsonl:2: field 'text' is a number \(7\); expected a string"):
        train_tokenizer([bad], tmp_path / "c", **TRAIN_KW)
    with pytest.raises(TokenizerError, match=r"nope\.jsonl: no such file"):
        train_tokenizer({"ru": tmp_path / "nope.jsonl"}, tmp_path / "d", **TRAIN_KW)


@pytest.mark.parametrize(
    "name, code",
    [("mono.ru.jsonl", "ru"), ("train.de.jsonl.zst", "de"), ("wiki.zh-Hans.parquet", "zh-Hans"), ("fr.txt", "fr")],
)
def test_language_from_record_file_names(name, code):
    assert language_from_filename(name) == code


# --- lines longer than SentencePiece's limit ------------------------------------------------

GREEK = "αβγδεζηθικλμνξοπρστυφχψωάέήίόύώ"


def sentences(alphabet: str, count: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    words = ["".join(rng.choice(list(alphabet), size=rng.integers(2, 9))) for _ in range(200)]
    return [" ".join(rng.choice(words, size=rng.integers(5, 15))) + "." for _ in range(count)]


def paragraphs(alphabet: str, count: int, seed: int, size: int = 4500) -> list[str]:
    """``count`` lines of whole sentences, each just over ``size`` bytes (the layout of corpora
    that keep a paragraph to a line)."""
    lines, current = [], ""
    for sentence in sentences(alphabet, 100 * count, seed):
        current = f"{current} {sentence}".strip()
        if len(current.encode("utf-8")) > size:
            lines.append(current)
            current = ""
            if len(lines) == count:
                return lines
    raise AssertionError("not enough text")


def unk_rate(directory: Path, lines: list[str]) -> float:
    tokenizer = Tokenizer.from_pretrained(directory)
    ids = np.concatenate([tokenizer.encode(line, add_special_tokens=False) for line in lines])
    return float(np.mean(ids == UNK_ID))


def test_paragraphs_longer_than_sentencepiece_takes_are_cut_and_their_language_kept(tmp_path, capsys):
    greek, english = paragraphs(GREEK, 12, seed=1), sentences("abcdefghijklmnopqrstuvwxyz", 300, seed=2)
    assert min(len(line.encode("utf-8")) for line in greek) > 4192  # SentencePiece would skip them all
    (tmp_path / "el.txt").write_text("\n".join(greek) + "\n", encoding="utf-8")
    (tmp_path / "en.txt").write_text("\n".join(english) + "\n", encoding="utf-8")
    code = infoxlm_main(["tokenizer", "train", "--input", str(tmp_path / "en.txt"), str(tmp_path / "el.txt"),
                         "--output", str(tmp_path / "tok"), "--vocab-size", "400", "--no-progress"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    assert any(set(piece) & set(GREEK) for piece in pieces(tmp_path / "tok"))
    assert unk_rate(tmp_path / "tok", greek) < 0.01 and unk_rate(tmp_path / "tok", english) < 0.01
    assert "el p=0.276 lines=12 sampled=86 cut=12; en p=0.724 lines=300 sampled=226" in out, out
    assert err == (f"warning: {tmp_path / 'el.txt'}: 12 of 12 el lines are longer than SentencePiece's 4,192-byte "
                   "limit; each was cut at sentence ends (else between words) into pieces under it\n")  # fmt: skip
    report = json.loads((tmp_path / "tok" / "training_report.json").read_text(encoding="utf-8"))
    assert report["cut_lines"] == {"el": 12, "en": 0}


def test_only_long_lines_train_a_vocabulary(tmp_path):
    greek = paragraphs(GREEK, 6, seed=3, size=9000)
    (tmp_path / "el.txt").write_text("\n".join(greek) + "\n", encoding="utf-8")
    trained = train_tokenizer([tmp_path / "el.txt"], tmp_path / "tok", **TRAIN_KW)
    assert trained.training_report.cut_lines == {"el": 6}
    assert unk_rate(tmp_path / "tok", greek) < 0.01
