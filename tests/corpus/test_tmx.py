"""Tests for infoxlm.corpus.tmx: translation pairs from TMX files, alone and through ``prepare``."""

from __future__ import annotations

import gzip
import json
import tracemalloc
from pathlib import Path

import pytest

from infoxlm.cli import main as infoxlm_main
from infoxlm.corpus.prepare import prepare_parallel
from infoxlm.corpus.tmx import primary_language, read_tmx_pairs
from infoxlm.errors import DataError

EN = ["The cat sleeps on the warm sofa.", "Open the file and save it.", "We walked to the old bridge."]
DE = ["Die Katze schläft auf dem warmen Sofa.", "Öffne die Datei und speichere sie.", "Wir gingen zur alten Brücke."]


def unit(*variants: tuple[str, str], lang_attribute: str = "xml:lang") -> str:
    tuvs = "".join(f'<tuv {lang_attribute}="{lang}"><seg>{seg}</seg></tuv>' for lang, seg in variants)
    return f"<tu>{tuvs}</tu>"


def tmx_text(units: list[str]) -> str:
    body = "\n".join(units)
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<tmx version="1.4">\n<header srclang="en"/>\n<body>\n{body}\n</body>\n</tmx>\n'


def pairs(path: Path, src: str = "en", tgt: str = "de", block_bytes: int = 1 << 20) -> list[tuple[str, str]]:
    return [pair for block in read_tmx_pairs(path, src, tgt, block_bytes) for pair in zip(block.src, block.tgt)]


def test_languages_match_by_primary_subtag_in_any_case():
    assert [primary_language(tag) for tag in ("en", "EN-us", "en_GB", "eng", "de-CH", "zh-Hant", "qqq-x")] == [
        "en", "en", "en", "en", "de", "zh", "qqq"
    ]  # fmt: skip


def test_units_give_pairs_by_language_not_by_order(tmp_path):
    units = [
        unit(("en-US", EN[0]), ("DE", DE[0])),
        unit(("de-DE", DE[1]), ("en-GB", EN[1])),  # the target first
        unit(("eng", EN[2]), ("fr", "Nous avons marché."), ("deu", DE[2]), lang_attribute="lang"),  # TMX 1.1
        unit(("en", "Only English.")),  # no German: an empty side, skipped by prepare
        unit(("en", 'A <bpt i="1">&lt;b&gt;</bpt>bold<ept i="1">&lt;/b&gt;</ept> <hi>word</hi>.'),
             ("de", "Ein\nfettes Wort.")),  # fmt: skip
    ]
    path = tmp_path / "en-de.tmx"
    path.write_text(tmx_text(units), encoding="utf-8")
    expected = [*zip(EN, DE), ("Only English.", ""), ("A bold word.", "Ein fettes Wort.")]
    assert pairs(path) == expected
    assert pairs(path, block_bytes=10) == expected  # a block per unit or two
    assert pairs(path, "de", "en") == [(tgt, src) for src, tgt in expected]


def test_tmx_gives_the_store_of_two_files(tmp_path, tiny_model_dir, capsys):
    (tmp_path / "en.txt").write_text("\n".join(EN + ["Only English."]) + "\n", encoding="utf-8")
    (tmp_path / "de.txt").write_text("\n".join(DE + [""]) + "\n", encoding="utf-8")
    text = tmx_text([unit(("en", e), ("de", d)) for e, d in zip(EN, DE)] + [unit(("en", "Only English."))])
    (tmp_path / "en-de.tmx").write_text(text, encoding="utf-8")
    (tmp_path / "en-de.tmx.gz").write_bytes(gzip.compress(text.encode()))
    runs = {
        "two files": ["--src", tmp_path / "en.txt", "--tgt", tmp_path / "de.txt"],
        "tmx": ["--tmx", tmp_path / "en-de.tmx"],
        "tmx.gz": ["--tmx", tmp_path / "en-de.tmx.gz"],
        "input": ["--input", tmp_path / "en-de.tmx"],
    }
    reports = {}
    for name, inputs in runs.items():
        store = tmp_path / f"S_{name}"
        args = ["prepare", "parallel", "--pair", "en-de", *inputs, "--tokenizer", tiny_model_dir, "--output", store]
        assert infoxlm_main([str(a) for a in args] + ["--no-progress"]) == 0
        assert capsys.readouterr().out.startswith("en-de: 3 pairs, ")
        meta = json.loads((store / "parallel/en-de/meta.json").read_text())
        assert meta["skipped"]["empty"] == 1
        assert infoxlm_main(["prepare", "inspect", str(store), "--json"]) == 0
        report = json.loads(capsys.readouterr().out)["parallel"]["en-de"]
        reports[name] = (report["checksum"], report["pairs"], report["tokens"])
    assert all(report == reports["two files"] for report in reports.values()), reports
    assert meta["format"] == "tmx"


def test_malformed_xml_names_the_line(tmp_path, tiny_model_dir, capsys):
    path = tmp_path / "en-de.tmx"
    path.write_text(tmx_text([unit(("en", EN[0]), ("de", DE[0])), "<tu><tuv xml:lang='en'><seg>Oops</tuv></tu>"]))
    with pytest.raises(DataError, match=r"en-de.tmx:6: malformed XML \(mismatched tag\); expected a TMX file"):
        pairs(path)
    args = ["prepare", "parallel", "--pair", "en-de", "--tmx", path, "--tokenizer", tiny_model_dir]
    assert infoxlm_main([str(a) for a in args] + ["--output", str(tmp_path / "s"), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "en-de.tmx:6: malformed XML" in err
    assert not (tmp_path / "s").exists()


def test_a_truncated_compressed_tmx_says_truncated(tmp_path):
    data = gzip.compress(tmx_text([unit(("en", EN[0]), ("de", DE[0]))] * 200).encode())
    path = tmp_path / "en-de.tmx.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(DataError, match="en-de.tmx.gz: truncated"):
        pairs(path)


def test_a_tmx_without_the_pair_languages_is_refused(tmp_path, tiny_model_dir, capsys):
    path = tmp_path / "en-fr.tmx"
    path.write_text(tmx_text([unit(("en", EN[0]), ("fr", "Le chat.")), unit(("EN-us", EN[1]), ("fr-CA", "Ouvre."))]))
    with pytest.raises(DataError, match=r"en-fr.tmx: no unit holds both en and de; its units hold EN-us, en, fr, fr-CA; "
                       "expected a TMX file whose units hold en and de segments$"):
        prepare_parallel("en-de", tiny_model_dir, tmp_path / "s", tmx=path, show_progress=False)
    assert not (tmp_path / "s").exists()
    path.write_text(tmx_text([]))
    args = ["prepare", "parallel", "--pair", "en-de", "--tmx", path, "--tokenizer", tiny_model_dir]
    assert infoxlm_main([str(a) for a in args] + ["--output", str(tmp_path / "s"), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.strip() == f"infoxlm: error: {path}: no translation unit (<tu>); expected a TMX file whose units hold en and de segments"
    assert not (tmp_path / "s").exists()


def test_memory_stays_flat_over_many_units(tmp_path):
    path = tmp_path / "big.tmx"
    with open(path, "w", encoding="utf-8") as handle:
        handle.write('<tmx version="1.4"><header/><body>\n')
        for i in range(5_000):
            handle.write(unit(("en", f"Sentence number {i}."), ("de", f"Satz Nummer {i}.")) + "\n")
        handle.write("</body></tmx>\n")
    tracemalloc.start()
    count = 0
    for block in read_tmx_pairs(path, "en", "de", block_bytes=4096):
        count += len(block.src)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert count == 5_000
    assert peak < 1_000_000, peak  # the whole tree would hold about 5 MB of elements


def test_a_tmx_whose_segments_are_only_inline_codes_says_so(tmp_path, tiny_model_dir, capsys):
    """It was called "no non-empty line; expected UTF-8 text, one sentence per line"."""
    codes = '<bpt i="1">&lt;b&gt;</bpt><ph x="2">{0}</ph><ept i="1">&lt;/b&gt;</ept>'
    path = tmp_path / "en-de.tmx"
    path.write_text(tmx_text([unit(("en", codes), ("de", codes)), unit(("en", EN[0]), ("de", codes)), unit(("en", EN[1]))]))
    args = ["prepare", "parallel", "--pair", "en-de", "--tmx", path, "--tokenizer", tiny_model_dir]
    assert infoxlm_main([str(a) for a in args] + ["--output", str(tmp_path / "s"), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.strip() == (
        f"infoxlm: error: {path}: no unit has text in both its en and de segments: every unit holding both (2 units) "
        "has one that holds only inline codes (<bpt>, <ept>, <it>, <ph>, <ut>: native markup, not text); "
        "expected segments with text"
    )
    assert not (tmp_path / "s").exists()
    path.write_text(tmx_text([unit(("en", codes), ("de", DE[0])), unit(("en", " "), ("de", DE[1]))]))
    with pytest.raises(DataError, match=r": 1 of the 2 units holding both has one that holds only inline codes .*, the others a blank one; "):
        pairs(path)
    path.write_text(tmx_text([unit(("en", ""), ("de", DE[0]))]))
    with pytest.raises(DataError, match=r"en-de.tmx: no unit has text in both its en and de segments: every unit holding both \(1 unit\) has a blank one; "):
        pairs(path)
