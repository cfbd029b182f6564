"""Tests for infoxlm.corpus.shards and the part readers of text_files: which lines a shard reads.

Every line of the input must belong to exactly one shard, whatever the files, their
compression, line endings and block size; what a shard records about its document ends is
checked here, the merge of shards in test_merge.py.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest

from infoxlm.cli import main as infoxlm_main
from infoxlm.corpus.prepare import prepare_monolingual
from infoxlm.corpus.shards import check_shard, parse_shard, plan_aligned_shard, plan_shard
from infoxlm.corpus.text_files import iter_line_blocks
from infoxlm.errors import DataError


def _lines(rng: random.Random, n: int) -> list[str]:
    return ["".join(rng.choice("ab \r") for _ in range(rng.randint(0, 12))) for _ in range(n)]


def _read(path: Path, block_bytes: int = 7, **part) -> list[str | None]:
    return [line for block in iter_line_blocks(path, block_bytes, **part) for line in block.lines]


def test_parse_shard_takes_i_of_n():
    assert parse_shard("0/1") == (0, 1) and parse_shard(" 4/5 ") == (4, 5)
    for text in ("2/2", "1", "a/b", "-1/2", "1/0", "1/2/3"):
        with pytest.raises(DataError, match=r"^--shard .*expected I/N") as info:
            parse_shard(text)
        assert "\n" not in str(info.value)
    with pytest.raises(DataError, match="out of range"):
        check_shard((3, 3))


@pytest.mark.parametrize("final_newline", [True, False])
def test_byte_and_line_ranges_read_every_line_once(tmp_path, final_newline):
    rng = random.Random(0)
    lines = _lines(rng, 120)
    data = ("\ufeff" + "\n".join(lines) + ("\n" if final_newline else "")).encode()
    (tmp_path / "a.txt").write_bytes(data)
    (tmp_path / "a.txt.gz").write_bytes(gzip.compress(data))
    whole = _read(tmp_path / "a.txt")
    assert len(whole) == 120 and whole[0] == lines[0].rstrip("\r")
    starts = [0] + [i + 1 for i, byte in enumerate(data) if byte == ord("\n") and i + 1 < len(data)] + [len(data)]
    for block_bytes in (3, 7, 1 << 20):
        for cuts in ([0, 120], [0, 1, 50, 119, 120], [0, 60, 60, 120]):
            for name in ("a.txt", "a.txt.gz"):
                by_lines = [_read(tmp_path / name, block_bytes, line_range=(a, b)) for a, b in zip(cuts, cuts[1:])]
                assert sum(by_lines, []) == whole
            by_bytes = [
                _read(tmp_path / "a.txt", block_bytes, byte_range=(starts[a], starts[b])) for a, b in zip(cuts, cuts[1:])
            ]
            assert sum(by_bytes, []) == whole
    assert _read(tmp_path / "a.txt.gz", line_range=(100, None)) == whole[100:]
    assert _read(tmp_path / "a.txt", line_range=(200, None)) == []
    blocks = list(iter_line_blocks(tmp_path / "a.txt.gz", 7, line_range=(30, 40)))
    assert blocks[0].first_line == 31 and blocks[0].origin == 0
    with pytest.raises(ValueError, match="uncompressed"):
        _read(tmp_path / "a.txt.gz", byte_range=(0, 10))


def test_errors_in_a_part_name_the_line(tmp_path):
    path = tmp_path / "de.txt"
    path.write_bytes(b"eins\nzwei\ndrei\nvi\xffer\n")
    with pytest.raises(DataError, match=r"^\S+de\.txt: line 2 from byte 10: invalid UTF-8 at byte 3 \(0xff\)"):
        _read(path, byte_range=(10, len(path.read_bytes())))
    with pytest.raises(DataError, match=r"^\S+de\.txt:4: invalid UTF-8 at byte 3"):
        _read(path, line_range=(2, None))
    assert _read(path, line_range=(0, 3)) == ["eins", "zwei", "drei"]  # the bad line is another shard's


def test_files_are_split_into_runs_balanced_by_bytes(tmp_path):
    sizes = [50, 10, 10, 10, 300, 20, 20, 80]
    paths = []
    for i, size in enumerate(sizes):
        paths.append(tmp_path / f"{i}.txt")
        paths[-1].write_bytes(b"x" * (size - 1) + b"\n")
    for count in range(1, len(paths) + 1):
        plans = [plan_shard(paths, (i, count)) for i in range(count)]
        runs = [[part.path for part in plan.parts] for plan in plans]
        assert sum(runs, []) == paths and all(runs)  # in order, each file once, no part empty
        assert all(plan.split == "files" and all(part.whole for part in plan.parts) for plan in plans)
    runs = [[int(part.path.stem) for part in plan_shard(paths, (i, 3)).parts] for i in range(3)]
    assert runs == [[0, 1, 2, 3], [4], [5, 6, 7]]


def test_fewer_files_than_shards_split_at_line_starts(tmp_path):
    rng = random.Random(1)
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("\n".join(_lines(rng, 40)) + "\n")
    b.write_text("\n".join(_lines(rng, 30)))
    whole = _read(a) + _read(b)
    for count in (3, 4, 7):
        read = []
        for i in range(count):
            plan = plan_shard([a, b], (i, count))
            assert plan.split == "bytes"
            for part in plan.parts:
                data = part.path.read_bytes()
                if part.byte_range:
                    start, stop = part.byte_range
                    assert start == 0 or data[start - 1 : start] == b"\n"  # a line start
                    assert stop == len(data) or data[stop - 1 : stop] == b"\n"
                read += _read(part.path, **part.read_options())
        assert read == whole

    gz = tmp_path / "b.txt.gz"
    gz.write_bytes(gzip.compress(b.read_bytes()))
    plans = [plan_shard([a, gz], (i, 5)) for i in range(5)]
    assert {plan.split for plan in plans} == {"lines"}
    assert sum((_read(part.path, **part.read_options()) for plan in plans for part in plan.parts), []) == whole

    en, de = tmp_path / "en.txt", tmp_path / "de.txt.gz"
    en.write_text("\n".join(map(str, range(10))) + "\n")
    de.write_bytes(gzip.compress(en.read_bytes()))
    ranges = [plan_aligned_shard(en, de, (i, 3)).parts[0].line_range for i in range(3)]
    assert ranges == [(0, 3), (3, 6), (6, None)]
    assert [p.line_range for p in plan_aligned_shard(en, de, (1, 3)).parts] == [(3, 6), (3, 6)]


def test_a_shard_records_whether_its_documents_go_on(tmp_path, tiny_model_dir):
    from conftest import TINY_TEXT

    # One document of 12 lines: both boundaries of 3 shards fall inside it.
    ru = tmp_path / "ru.txt"
    ru.write_text("\n".join(TINY_TEXT["ru"] * 4) + "\n", encoding="utf-8")
    shards = []
    for i in range(3):
        result = prepare_monolingual("ru", [ru], tiny_model_dir, tmp_path / f"part{i}", shard=(i, 3), show_progress=False)
        shards.append(result.meta["shard"])
        assert result.meta["counts"]["documents"] == 1  # each shard closes what it holds
    assert [(s["opens_document"], s["closes_document"]) for s in shards] == [(True, False), (False, False), (False, True)]
    assert [s["index"] for s in shards] == [0, 1, 2] and {s["split"] for s in shards} == {"bytes"}
    assert len({s["input_fingerprint"] for s in shards}) == 1
    assert shards[1]["parts"][0]["path"] == str(ru.resolve()) and len(shards[1]["parts"][0]["bytes"]) == 2

    # Run again: each shard is up to date in its own store; another shard must not replace it.
    again = prepare_monolingual("ru", [ru], tiny_model_dir, tmp_path / "part1", shard=(1, 3), show_progress=False)
    assert again.up_to_date
    with pytest.raises(DataError, match=r"part1/mono/ru: holds shard 1/3 of this input; expected shard 2/3 in a store"):
        prepare_monolingual("ru", [ru], tiny_model_dir, tmp_path / "part1", shard=(2, 3), show_progress=False)
    whole = prepare_monolingual("ru", [ru], tiny_model_dir, tmp_path / "part1", show_progress=False)
    assert not whole.up_to_date and "shard" not in whole.meta  # the whole input may replace it


def test_shard_on_the_command_line_and_with_dedup(tmp_path, tiny_model_dir, capsys):
    from conftest import TINY_TEXT

    ru = tmp_path / "ru.txt"
    ru.write_text("\n".join(TINY_TEXT["ru"]) + "\n", encoding="utf-8")
    args = ["prepare", "mono", "--lang", "ru", "--input", str(ru), "--tokenizer", str(tiny_model_dir), "--no-progress"]
    assert infoxlm_main(args + ["--shard", "1/2", "--output", str(tmp_path / "part1")]) == 0
    meta = json.loads((tmp_path / "part1/mono/ru/meta.json").read_text())
    assert (meta["shard"]["index"], meta["shard"]["count"]) == (1, 2)
    assert "shard 1/2" in capsys.readouterr().out

    assert infoxlm_main(args + ["--shard", "0/2", "--dedup", "--output", str(tmp_path / "dedup")]) == 1
    err = capsys.readouterr().err.strip()
    assert "--dedup cannot be combined with --shard" in err and len(err.splitlines()) == 1
    assert infoxlm_main(args + ["--shard", "2/2", "--output", str(tmp_path / "bad")]) == 1
    assert "--shard 2/2 is out of range" in capsys.readouterr().err
    assert not (tmp_path / "dedup").exists() and not (tmp_path / "bad").exists()
    records = tmp_path / "ru.jsonl"
    records.write_text('{"text": "Кошка спит."}\n', encoding="utf-8")
    code = infoxlm_main(args[:4] + ["--input", str(records), *args[6:], "--shard", "0/2", "--output", str(tmp_path / "rec")])
    err = capsys.readouterr().err.strip()
    assert code == 1 and "ru.jsonl: a jsonl input cannot be prepared in shards" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "rec").exists()

    help_text = _help(["prepare", "mono", "--help"], capsys)
    assert "--shard I/N" in help_text and "SLURM_ARRAY_TASK_ID" in help_text


def _help(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit):
        infoxlm_main(argv)
    return " ".join(capsys.readouterr().out.split())
