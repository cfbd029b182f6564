"""Tests for infoxlm.corpus.merge (``infoxlm prepare merge``): shards joined into one corpus.

The acceptance: ``inspect --json`` of the merged shards equals that of one prepare of the
whole input (checksums over token ids and line and document offsets, lines, documents,
tokens, skipped lines), also where documents go on across shard boundaries. Every run goes
through ``infoxlm.cli.main`` in-process with the small tokenizer of ``tiny_model_dir``.
"""

from __future__ import annotations

import gzip
import json
import random
import re
from pathlib import Path

import numpy as np
import pytest

from infoxlm.cli import main as infoxlm_main
from infoxlm import train_tokenizer
from infoxlm.tokenizer import Tokenizer

WORDS = "Кошка спит на тёплом диване Откройте файл и сохраните его Мы пошли к старому мосту".split()


def _documents(seed: int, count: int) -> list[str]:
    """Lines of ``count`` documents of 1-12 lines, blank lines between them, and now and then a
    line that cleans to nothing (a boundary too) or has no text."""
    rng = random.Random(seed)
    lines: list[str] = []
    for _ in range(count):
        lines += [" ".join(rng.choices(WORDS, k=rng.randint(1, 9))) for _ in range(rng.randint(1, 12))]
        lines.append(rng.choice(["", "", "\u200b", "   "]))
    return lines


def _write(path: Path, lines: list[str]) -> Path:
    data = ("\n".join(lines) + "\n").encode("utf-8")
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = infoxlm_main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err.strip()


def _inspect(capsys, store: Path) -> dict:
    code, out, err = _run(capsys, "prepare", "inspect", store, "--json")
    assert code == 0, err
    report = json.loads(out)
    del report["store"]
    return report


def _mono(tokenizer: Path, lang: str, inputs: list[Path], output: Path, *extra) -> list[str]:
    return ["prepare", "mono", "--lang", lang, "--input", *inputs, "--tokenizer", tokenizer, "--output", output,
            "--no-progress", *extra]  # fmt: skip


def _shard_and_merge(capsys, tmp_path: Path, command, count: int) -> Path:
    """Run ``command(output, *extra)`` once per shard, then merge the shards (given in reverse)."""
    parts = [tmp_path / f"part{i}" for i in range(count)]
    for i, part in enumerate(parts):
        code, out, err = _run(capsys, *command(part, "--shard", f"{i}/{count}"))
        assert code == 0, err
    code, out, err = _run(capsys, "prepare", "merge", tmp_path / "merged", *reversed(parts), "--no-progress")
    assert code == 0, err
    return tmp_path / "merged"


def test_two_shards_merge_into_what_one_prepare_writes(tmp_path, tiny_model_dir, capsys):
    ru = _write(tmp_path / "ru.txt", _documents(0, 30))
    whole = tmp_path / "whole"
    assert _run(capsys, *_mono(tiny_model_dir, "ru", [ru], whole))[0] == 0
    merged = _shard_and_merge(capsys, tmp_path, lambda out, *extra: _mono(tiny_model_dir, "ru", [ru], out, *extra), 2)
    assert _inspect(capsys, merged) == _inspect(capsys, whole)

    meta = json.loads((merged / "mono/ru/meta.json").read_text())
    single = json.loads((whole / "mono/ru/meta.json").read_text())
    for key in ("counts", "skipped", "changed", "options", "input_fingerprint", "tokenizer", "max_token_id"):
        assert meta[key] == single[key], key
    # The largest id of the merged file, which the shards' records bound (training trusts it).
    largest = int(np.fromfile(merged / "mono/ru/tokens.u32", dtype="<u4").max())
    shards = [json.loads((tmp_path / f"part{i}/mono/ru/meta.json").read_text())["max_token_id"] for i in range(2)]
    assert meta["max_token_id"] == {"tokens.u32": largest} and max(s["tokens.u32"] for s in shards) == largest
    assert meta["merged_from"]["shards"] == 2 and "shard" not in meta
    # The merged corpus is the one prepare of the whole input would write: up to date.
    code, out, _ = _run(capsys, *_mono(tiny_model_dir, "ru", [ru], merged))
    assert code == 0 and out.strip() == "ru: up to date"
    assert Tokenizer.from_pretrained(merged / "tokenizer").fingerprint == Tokenizer.from_pretrained(whole / "tokenizer").fingerprint


@pytest.mark.parametrize("count", [3, 5])
def test_documents_that_cross_shard_boundaries_are_joined(tmp_path, tiny_model_dir, capsys, count):
    # Long documents (no blank line for 40 lines): most shard boundaries fall inside one.
    lines = [" ".join(random.Random(i).choices(WORDS, k=5)) for i in range(200)]
    for i in range(0, 200, 40):
        lines[i] = ""
    ru = _write(tmp_path / "ru.txt", lines)
    whole = tmp_path / "whole"
    assert _run(capsys, *_mono(tiny_model_dir, "ru", [ru], whole, "--max-line-tokens", "4"))[0] == 0
    merged = _shard_and_merge(
        capsys, tmp_path, lambda out, *extra: _mono(tiny_model_dir, "ru", [ru], out, "--max-line-tokens", "4", *extra), count
    )
    shards = [json.loads((tmp_path / f"part{i}/mono/ru/meta.json").read_text())["shard"] for i in range(count)]
    assert sum(not shard["opens_document"] for shard in shards) >= count - 2  # boundaries inside documents
    report = _inspect(capsys, merged)
    assert report == _inspect(capsys, whole)
    assert report["mono"]["ru"]["documents"] == 5


def test_many_files_and_compressed_files(tmp_path, tiny_model_dir, capsys):
    files = [_write(tmp_path / f"ru{i}.txt{'.gz' if i % 3 == 0 else ''}", _documents(i, 1 + i % 4)) for i in range(7)]
    whole = tmp_path / "whole"
    assert _run(capsys, *_mono(tiny_model_dir, "ru", files, whole))[0] == 0
    expected = _inspect(capsys, whole)
    for count, inputs in ((4, files), (6, files[:2])):  # by file; by lines (fewer files, one compressed)
        root = tmp_path / f"n{count}"
        root.mkdir()
        if inputs is not files:
            assert _run(capsys, *_mono(tiny_model_dir, "ru", inputs, root / "whole"))[0] == 0
            expected = _inspect(capsys, root / "whole")
        merged = _shard_and_merge(capsys, root, lambda out, *extra: _mono(tiny_model_dir, "ru", inputs, out, *extra), count)
        assert _inspect(capsys, merged) == expected


def test_parallel_tsv_and_two_files(tmp_path, tiny_model_dir, capsys):
    from conftest import TINY_TEXT

    rng = random.Random(3)
    pairs = [(rng.choice(TINY_TEXT["en"]), rng.choice(TINY_TEXT["ru"])) for _ in range(40)]
    pairs[7] = ("", "Кошка спит.")  # skipped: an empty side
    en = _write(tmp_path / "en.txt.gz", [src for src, _ in pairs])
    ru = _write(tmp_path / "ru.txt", [tgt for _, tgt in pairs])
    tsv = _write(tmp_path / "en-ru.tsv", [f"{src}\t{tgt}" for src, tgt in pairs])

    def parallel(out, *extra):
        return ["prepare", "parallel", "--tokenizer", tiny_model_dir, "--output", out, "--no-progress", *extra]

    whole = tmp_path / "whole"
    assert _run(capsys, *parallel(whole, "--pair", "en-ru", "--src", en, "--tgt", ru))[0] == 0
    assert _run(capsys, *parallel(whole, "--pair", "en-de", "--tsv", tsv))[0] == 0
    parts = [tmp_path / f"part{i}" for i in range(3)]
    for i, part in enumerate(parts):
        assert _run(capsys, *parallel(part, "--pair", "en-ru", "--src", en, "--tgt", ru, "--shard", f"{i}/3"))[0] == 0
        assert _run(capsys, *parallel(part, "--pair", "en-de", "--tsv", tsv, "--shard", f"{i}/3"))[0] == 0
    code, out, err = _run(capsys, "prepare", "merge", tmp_path / "merged", *parts, "--no-progress")
    assert code == 0, err
    assert "en-ru: 39 pairs" in out and "(from 3 shards)" in out
    report = _inspect(capsys, tmp_path / "merged")
    assert report == _inspect(capsys, whole) and report["parallel"]["en-ru"]["skipped"]["empty"] == 1
    for pair in ("en-ru", "en-de"):
        recorded = json.loads((tmp_path / "merged/parallel" / pair / "meta.json").read_text())["max_token_id"]
        assert recorded == json.loads((whole / "parallel" / pair / "meta.json").read_text())["max_token_id"]
        for side in ("src", "tgt"):
            ids = np.fromfile(tmp_path / "merged/parallel" / pair / f"{side}.tokens.u32", dtype="<u4")
            assert recorded[f"{side}.tokens.u32"] == int(ids.max())


def test_merge_copies_the_other_corpora(tmp_path, tiny_model_dir, capsys):
    from conftest import TINY_TEXT

    ru = _write(tmp_path / "ru.txt", _documents(5, 10))
    de = _write(tmp_path / "de.txt", TINY_TEXT["de"])
    en = _write(tmp_path / "en.txt", TINY_TEXT["en"])
    whole, other = tmp_path / "whole", tmp_path / "other"
    for store in (whole, other):
        assert _run(capsys, *_mono(tiny_model_dir, "de", [de], store))[0] == 0
        code, _, err = _run(capsys, "prepare", "parallel", "--pair", "en-de", "--src", en, "--tgt", de,
                            "--tokenizer", tiny_model_dir, "--output", store, "--no-progress")  # fmt: skip
        assert code == 0, err
    assert _run(capsys, *_mono(tiny_model_dir, "ru", [ru], whole))[0] == 0
    # Shard 1 of ru shares a store with de and en-de.
    assert _run(capsys, *_mono(tiny_model_dir, "ru", [ru], other, "--shard", "1/2"))[0] == 0
    assert _run(capsys, *_mono(tiny_model_dir, "ru", [ru], tmp_path / "part0", "--shard", "0/2"))[0] == 0
    code, out, err = _run(capsys, "prepare", "merge", tmp_path / "merged", tmp_path / "part0", other, "--no-progress")
    assert code == 0, err
    assert "de: 3 lines" in out and "(copied)" in out and "(from 2 shards)" in out
    assert _inspect(capsys, tmp_path / "merged") == _inspect(capsys, whole)


def test_shards_that_do_not_make_one_input_are_refused(tmp_path, tiny_model_dir, capsys):
    from conftest import TINY_TEXT

    ru = _write(tmp_path / "ru.txt", _documents(1, 12))
    other_ru = _write(tmp_path / "ru2.txt", _documents(2, 12))
    for i in range(3):
        assert _run(capsys, *_mono(tiny_model_dir, "ru", [ru], tmp_path / f"p{i}", "--shard", f"{i}/3"))[0] == 0
    assert _run(capsys, *_mono(tiny_model_dir, "ru", [ru], tmp_path / "copy1", "--shard", "1/3"))[0] == 0
    assert _run(capsys, *_mono(tiny_model_dir, "ru", [other_ru], tmp_path / "input", "--shard", "1/3"))[0] == 0
    assert _run(capsys, *_mono(tiny_model_dir, "ru", [ru], tmp_path / "option", "--shard", "1/3", "--max-line-tokens", "9"))[0] == 0
    assert _run(capsys, *_mono(tiny_model_dir, "ru", [ru], tmp_path / "count", "--shard", "1/2"))[0] == 0
    assert _run(capsys, *_mono(tiny_model_dir, "ru", [ru], tmp_path / "whole"))[0] == 0
    assert _run(capsys, *_mono(tiny_model_dir, "ru", [ru], tmp_path / "whole2"))[0] == 0
    # A store of another tokenizer: one learned from other text.
    corpus = _write(tmp_path / "tok.txt", TINY_TEXT["de"] * 5)
    other_tokenizer = train_tokenizer({"de": [corpus]}, tmp_path / "tok", vocab_size=140, show_progress=False)
    assert _run(capsys, *_mono(tmp_path / "tok", "ru", [ru], tmp_path / "foreign", "--shard", "1/3"))[0] == 0
    assert other_tokenizer.fingerprint != Tokenizer.from_pretrained(tiny_model_dir).fingerprint

    p0, p1, p2 = (tmp_path / f"p{i}" for i in range(3))
    cases = {
        "missing": ([p0, p2], r"mono/ru: shard 1 of 3 missing \(given: 0 in \S+p0, 2 in \S+p2\)"),
        "duplicate": ([p0, p1, tmp_path / "copy1", p2], r"mono/ru: shard 1/3 is in both \S+p1 and \S+copy1"),
        "tokenizer": ([p0, tmp_path / "foreign", p2], r"foreign: written with tokenizer .*expected stores of one tokenizer"),
        "input": ([p0, tmp_path / "input", p2], r"mono/ru: \S+p0 holds a shard of input \w+… but \S+input of input"),
        "options": ([p0, tmp_path / "option", p2], r"mono/ru: \S+p0 holds a shard of input .* \(other files, options"),
        "count": ([p0, tmp_path / "count", p2], r"mono/ru: \S+p0 holds shard 0/3 but \S+count shard 1/2"),
        "whole and shard": ([p0, tmp_path / "whole", p2], r"holds the whole corpus and \S+ a shard of it"),
        "two wholes": ([tmp_path / "whole", tmp_path / "whole2"], r"mono/ru: in both \S+whole and \S+whole2, not as shards"),
        "same store twice": ([p0, p1, p1, p2], r"p1: given twice"),
        "not a store": ([p0, tmp_path / "nowhere"], r"nowhere: not a token store"),
    }
    for name, (stores, message) in cases.items():
        code, _, err = _run(capsys, "prepare", "merge", tmp_path / "out", *stores, "--no-progress")
        assert code == 1, name
        assert len(err.splitlines()) == 1 and re.search(message, err), (name, err)
        assert not (tmp_path / "out").exists(), name

    # A corpus the output holds already; the output is kept as it was.
    code, _, err = _run(capsys, "prepare", "merge", tmp_path / "whole", p0, p1, p2, "--no-progress")
    assert code == 1 and "whole/mono/ru: exists" in err
    assert _inspect(capsys, tmp_path / "whole") == _inspect(capsys, tmp_path / "whole2")
    help_text = " ".join(_help(capsys, ["prepare", "merge", "--help"]).split())
    assert "without tokenizing again" in help_text and "all N shards" in help_text


def _help(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit):
        infoxlm_main(argv)
    return capsys.readouterr().out


def test_an_empty_shard_is_merged(tmp_path, tiny_model_dir, capsys):
    # One line longer than a fifth of the file: the boundaries inside it give empty shards.
    lines = ["Кошка спит.", "Кошка " * 200, "Мы пошли.", "", "Откройте файл."]
    ru = _write(tmp_path / "ru.txt", lines)
    whole = tmp_path / "whole"
    assert _run(capsys, *_mono(tiny_model_dir, "ru", [ru], whole))[0] == 0
    merged = _shard_and_merge(capsys, tmp_path, lambda out, *extra: _mono(tiny_model_dir, "ru", [ru], out, *extra), 5)
    counts = [json.loads((tmp_path / f"part{i}/mono/ru/meta.json").read_text())["counts"]["lines"] for i in range(5)]
    assert 0 in counts
    assert _inspect(capsys, merged) == _inspect(capsys, whole)


def test_a_file_without_text_split_across_shards_is_refused_by_the_merge(tmp_path, tiny_model_dir, capsys):
    # b.txt is blank lines only: one prepare refuses it; each shard sees only a part of it.
    a = _write(tmp_path / "a.txt", ["Кошка спит."])
    b = _write(tmp_path / "b.txt", [" "] * 300)
    code, _, err = _run(capsys, *_mono(tiny_model_dir, "ru", [a, b], tmp_path / "whole"))
    assert code == 1 and "b.txt: no non-empty line" in err
    parts = [tmp_path / f"part{i}" for i in range(3)]
    for i, part in enumerate(parts):
        assert _run(capsys, *_mono(tiny_model_dir, "ru", [a, b], part, "--shard", f"{i}/3"))[0] == 0
    code, _, err = _run(capsys, "prepare", "merge", tmp_path / "out", *parts, "--no-progress")
    assert code == 1 and err.endswith("b.txt: no non-empty line; expected UTF-8 text, one sentence per line")
    assert not (tmp_path / "out").exists()  # the tokenizer copy, store.json and the corpus taken back


def test_an_interrupted_merge_leaves_nothing(tmp_path, tiny_model_dir, capsys, monkeypatch):
    from infoxlm.corpus import merge as merge_module

    ru = _write(tmp_path / "ru.txt", _documents(4, 10))
    for i in range(2):
        assert _run(capsys, *_mono(tiny_model_dir, "ru", [ru], tmp_path / f"part{i}", "--shard", f"{i}/2"))[0] == 0
    copy, calls = merge_module._copy, []

    def interrupted(*args):
        calls.append(args[1])
        if len(calls) == 3:  # part-way through the corpus
            raise KeyboardInterrupt
        copy(*args)

    monkeypatch.setattr(merge_module, "_copy", interrupted)
    with pytest.raises(KeyboardInterrupt):
        merge_module.merge_stores(tmp_path / "out", [tmp_path / "part0", tmp_path / "part1"], show_progress=False)
    assert not (tmp_path / "out").exists()


def test_a_merge_into_a_store_or_beside_foreign_files_is_refused_and_the_store_stays_usable(tmp_path, tiny_model_dir, capsys):
    """OUT inside one of the stores merged (or any store) would become a "corpus" of it and break it."""
    ru = _write(tmp_path / "ru.txt", _documents(3, 12))
    parts = [tmp_path / "part0", tmp_path / "part1"]
    for i, part in enumerate(parts):
        assert _run(capsys, *_mono(tiny_model_dir, "ru", [ru], part, "--shard", f"{i}/2"))[0] == 0
    before = _inspect(capsys, parts[0])
    for out, store in ((parts[0] / "mono" / "x", parts[0]), (parts[1] / "x", parts[1])):
        code, _, err = _run(capsys, "prepare", "merge", out, *parts, "--no-progress")
        assert code == 1 and len(err.splitlines()) == 1, err
        assert f"{out}: is inside the token store {store}; write outside it" in err
        assert not out.exists()
    assert _inspect(capsys, parts[0]) == before  # still usable
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("my files")
    code, _, err = _run(capsys, "prepare", "merge", mine, *parts, "--no-progress")
    assert code == 1 and err == f"infoxlm: error: {mine}: exists and is not empty, and infoxlm did not write it; choose another directory"
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
