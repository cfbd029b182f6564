"""Tests for infoxlm.corpus.unknown_tokens through ``prepare`` and ``prepare inspect``: text the
tokenizer does not cover is reported as a ``<unk>`` rate, with a warning above 1 %."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infoxlm.cli import main as infoxlm_main
from infoxlm.data.store import TokenStore
from infoxlm.corpus.unknown_tokens import count_unk, format_unk_rates, unk_rates, unk_warnings
from infoxlm.tokenizer_training import train_tokenizer

EN = ["The cat sleeps on the warm sofa.", "Open the file and save it.", "We walked to the old bridge."]
DE = ["Die Katze schläft auf dem warmen Sofa.", "Öffne die Datei und speichere sie.", "Wir gingen zur alten Brücke."]
ZH = ["猫睡在温暖的沙发上。", "打开文件并保存。", "我们走到了那座旧桥。"]


@pytest.fixture(scope="module")
def latin_tokenizer(tmp_path_factory) -> Path:
    """A tokenizer that never saw a Chinese character."""
    root = tmp_path_factory.mktemp("latin")
    (root / "en.txt").write_text("\n".join(EN * 5) + "\n", encoding="utf-8")
    (root / "de.txt").write_text("\n".join(DE * 5) + "\n", encoding="utf-8")
    train_tokenizer([root / "en.txt", root / "de.txt"], root / "tok", vocab_size=120)
    return root / "tok"


def run(capsys, *args) -> tuple[int, str, str]:
    code = infoxlm_main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_parallel_side_the_tokenizer_does_not_cover_is_reported_and_warned(tmp_path, latin_tokenizer, capsys):
    en, zh, store = write(tmp_path / "en.txt", EN), write(tmp_path / "zh.txt", ZH), tmp_path / "store"
    code, out, err = run(capsys, "prepare", "parallel", "--pair", "en-zh", "--src", en, "--tgt", zh,
                         "--tokenizer", latin_tokenizer, "--output", store, "--no-progress")  # fmt: skip
    assert code == 0, err
    corpus = TokenStore.open(store).parallel["en-zh"]
    unk = count_unk(corpus.tgt.tokens)
    assert unk > 0 and count_unk(corpus.src.tokens) == 0
    counts = corpus.meta["counts"]
    assert (counts["src_unk_tokens"], counts["tgt_unk_tokens"]) == (0, unk)
    rate = 100 * unk / corpus.tgt.num_tokens
    assert f", <unk> en 0.00 %, zh {rate:.2f} % -> " in out
    assert err.count("\n") == 1, err  # one warning, on stderr
    assert err.startswith(f"warning: en-zh: {rate:.2f} % of the tokens of its zh side are <unk> ({unk:,} of ")
    assert "expected a tokenizer that covers zh" in err

    # Prepared again: up to date, and still warned.
    code, out, err = run(capsys, "prepare", "parallel", "--pair", "en-zh", "--src", en, "--tgt", zh,
                         "--tokenizer", latin_tokenizer, "--output", store, "--no-progress")  # fmt: skip
    assert code == 0 and out.strip() == "en-zh: up to date" and err.startswith("warning: en-zh: ")


def test_monolingual_rates_and_inspect(tmp_path, latin_tokenizer, capsys):
    store = tmp_path / "store"
    for language, lines in (("en", EN), ("zh", ZH)):
        code, out, err = run(capsys, "prepare", "mono", "--lang", language, "--input", write(tmp_path / f"{language}.txt", lines),
                             "--tokenizer", latin_tokenizer, "--output", store, "--no-progress")  # fmt: skip
        assert code == 0 and (", <unk> 0.00 % -> " in out) == (language == "en"), out
        assert bool(err) == (language == "zh"), err
    zh = TokenStore.open(store).mono["zh"]
    assert zh.meta["counts"]["unk_tokens"] == count_unk(zh.lines.tokens) > 0
    rate = zh.meta["counts"]["unk_tokens"] / zh.num_tokens

    code, out, err = run(capsys, "prepare", "inspect", store)
    assert code == 0
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    assert "<unk>" in rows["lang"] and f"{100 * rate:.2f} %" in rows["zh"] and "0.00 %" in rows["en"]
    assert err.count("\n") == 1 and err.startswith("warning: zh: ")
    code, out, err = run(capsys, "prepare", "inspect", store, "--json")
    report = json.loads(out)
    assert report["mono"]["zh"]["unk_rate"] == pytest.approx(rate) and report["mono"]["en"]["unk_rate"] == 0.0
    assert report["mono"]["zh"]["unk_tokens"] == zh.meta["counts"]["unk_tokens"]
    assert err.startswith("warning: zh: ")


def test_a_store_prepared_before_the_count_says_n_a(tmp_path, latin_tokenizer, capsys):
    store = tmp_path / "store"
    zh = write(tmp_path / "zh.txt", ZH)
    assert run(capsys, "prepare", "mono", "--lang", "zh", "--input", zh, "--tokenizer", latin_tokenizer,
               "--output", store, "--no-progress")[0] == 0  # fmt: skip
    meta_path = store / "mono" / "zh" / "meta.json"
    meta = json.loads(meta_path.read_text())
    del meta["counts"]["unk_tokens"]
    meta_path.write_text(json.dumps(meta))
    code, out, err = run(capsys, "prepare", "inspect", store)
    assert code == 0 and err == ""
    assert [line for line in out.splitlines() if line.startswith("  zh")][0].split()[-2] == "n/a"
    code, out, _ = run(capsys, "prepare", "inspect", store, "--json")
    assert json.loads(out)["mono"]["zh"]["unk_rate"] is None


def test_threshold_and_formatting():
    meta = {"kind": "mono", "language": "sw", "counts": {"tokens": 1000, "unk_tokens": 10}}
    assert [(r.language, r.unk, r.rate) for r in unk_rates(meta)] == [("sw", 10, 0.01)]
    assert unk_warnings("sw", unk_rates(meta)) == []  # 1 % is not above 1 %
    meta["counts"]["unk_tokens"] = 11
    assert unk_warnings("sw", unk_rates(meta))[0].startswith("warning: sw: 1.10 % of the tokens are <unk> (11 of 1,000)")
    assert unk_rates({"kind": "mono", "language": "sw", "counts": {"tokens": 0, "unk_tokens": 0}})[0].rate == 0.0
    assert format_unk_rates({"sw": 0.0123}) == "1.23 %" and format_unk_rates({"sw": None}) == "n/a"
    assert format_unk_rates({"en": 0.0, "zh": None}) == "en 0.00 %, zh n/a"
