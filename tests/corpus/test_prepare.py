"""Tests for infoxlm.corpus.prepare, infoxlm.commands.prepare and store_report: text -> token store -> text.

Round trips use XLM-R's real 250,002-piece tokenizer (it covers every script); command-line
runs use the small tokenizer of the shared ``tiny_model_dir`` fixture, which loads fast. The
bad-input cases run the real ``infoxlm`` command in subprocesses, all started at once.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import shutil
import subprocess
import sys
import unicodedata
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import zstandard

from infoxlm.cli import main as infoxlm_main
from infoxlm.corpus.cleaning import clean_text
from infoxlm.corpus.prepare import prepare_monolingual, prepare_parallel
from infoxlm.corpus.prepare_job import PREPARE_VERSION
from infoxlm.data.sampling import language_probabilities
from infoxlm.corpus.store_writer import CorpusWriter, create_or_open_store
from infoxlm.data.corpus_lock import PARTIAL_PREFIX, corpus_lock, partial_corpus_dirs
from infoxlm.data.store import StoreError, TokenStore
from infoxlm.corpus.store_report import store_report
from infoxlm.errors import DataError
from infoxlm.tokenizer import Tokenizer

# One sentence per script; each decodes back to itself under XLM-R's tokenizer.
SCRIPTS = [
    "Über den Wolken muss die Freiheit wohl grenzenlos sein.",
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "猫睡在温暖的沙发上。",
    "اللغة العربية من أكثر اللغات انتشارا في العالم.",
    "हिंदी भारत की एक प्रमुख भाषा है।",
    "Η Αθήνα είναι η πρωτεύουσα της Ελλάδας.",
    "東京は日本の首都です。",
    "서울은 한국의 수도입니다.",
    "Tiếng Việt có nhiều dấu thanh điệu khác nhau.",
    "שלום עולם, מה שלומך?",
]
# The same text as it may arrive: decomposed (NFD), with tabs, controls and invisible marks.
RAW = [
    unicodedata.normalize("NFD", SCRIPTS[0]),
    SCRIPTS[1].replace(" ", "\t", 1),
    SCRIPTS[2] + "\x00",
    "\u200f" + SCRIPTS[3],
    SCRIPTS[4],
    "",
    SCRIPTS[5].replace("Αθήνα", "Αθή\u00adνα"),
    unicodedata.normalize("NFD", SCRIPTS[6]),
    unicodedata.normalize("NFD", SCRIPTS[7]),
    "   ",
    unicodedata.normalize("NFD", SCRIPTS[8]),
    SCRIPTS[9] + "\r",
]

COMPRESS = {
    "": lambda data: data,
    ".gz": gzip.compress,
    ".xz": lzma.compress,
    ".bz2": bz2.compress,
    ".zst": lambda data: zstandard.ZstdCompressor().compress(data),
}


@pytest.fixture(scope="session")
def xlmr():
    pytest.importorskip("semantra_multilingual")
    import semantra_multilingual

    return Tokenizer.from_pretrained(Path(semantra_multilingual.__file__).parent / "assets" / "multilingual-e5-small")


def write_text(path: Path, lines: list[str], final_newline: bool = True) -> Path:
    data = ("\n".join(lines) + ("\n" if final_newline else "")).encode("utf-8")
    path.write_bytes(COMPRESS[path.suffix if path.suffix in COMPRESS else ""](data))
    return path


def decoded_lines(tokenizer: Tokenizer, sequences) -> list[str]:
    return [tokenizer.decode(sequences[i].tolist()) for i in range(len(sequences))]


# --------------------------------------------------------------------------------------
# Round trips and counts
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", list(COMPRESS))
def test_round_trip_text_store_text(tmp_path, xlmr, suffix):
    path = write_text(tmp_path / f"mixed.txt{suffix}", RAW)
    result = prepare_monolingual("de", [path], xlmr, tmp_path / "store", show_progress=False)
    corpus = TokenStore.open(tmp_path / "store").mono["de"]
    expected = [clean_text(line) for line in RAW if clean_text(line)]
    assert expected == SCRIPTS  # what cleaning promises: NFC, no controls, no invisible marks
    assert decoded_lines(xlmr, corpus.lines) == SCRIPTS
    # The stored ids are exactly the tokenizer's.
    assert [corpus.text(i).tolist() for i in range(corpus.num_lines)] == xlmr.encode_batch(
        SCRIPTS, add_special_tokens=False
    )
    meta = result.meta
    assert meta["counts"] == {
        "lines": 10,
        "documents": 3,  # blank lines at 6 and 10 split the file
        "tokens": corpus.num_tokens,
        "unk_tokens": 0,  # XLM-R's vocabulary covers every script
        "blank_lines": 2,  # they end documents: no text is lost there
        "input_lines": len(RAW),
    }
    assert meta["skipped"] == {"empty": 0, "invalid_utf8": 0, "no_tokens": 0}
    assert meta["changed"] == {"nfc": 4, "control_characters": 4, "split_long": 0}  # "\r\n" is a line break
    assert meta["sources"][0]["bytes"] == path.stat().st_size and meta["sources"][0]["kept"] == 10
    assert meta["tokenizer"] == xlmr.identity() and meta["language_name"] == "German"
    assert TokenStore.open(tmp_path / "store").info["tokenizer"] == xlmr.identity()


def test_documents_end_at_blank_lines_and_at_file_ends(tmp_path, xlmr):
    first = write_text(tmp_path / "a.txt", ["eins", "zwei", "", "", "drei", "\x00", "vier", "\u200b"])
    second = write_text(tmp_path / "b.txt", ["fünf", "", "sechs"], final_newline=False)
    prepare_monolingual("de", [first, second], xlmr, tmp_path / "store", show_progress=False)
    corpus = TokenStore.open(tmp_path / "store").mono["de"]
    assert decoded_lines(xlmr, corpus.lines) == ["eins", "zwei", "drei", "vier", "fünf", "sechs"]
    # Documents: [eins zwei] [drei] [vier] [fünf] [sechs]; a line that cleans to nothing is blank.
    assert corpus.doc_offsets.tolist() == [0, 2, 3, 4, 5, 6]
    # Blank lines separate documents; lines whose text cleaning removed ("\x00", "\u200b") are skipped.
    assert corpus.meta["counts"]["blank_lines"] == 3 and corpus.meta["skipped"]["empty"] == 2
    assert corpus.meta["changed"]["control_characters"] == 2
    assert [s["kept"] for s in corpus.meta["sources"]] == [4, 2]


def test_document_separators_are_counted_as_documents_not_as_skipped_lines(tmp_path, tiny_model_dir, capsys):
    from conftest import TINY_TEXT

    documents = [f"{TINY_TEXT['de'][i % 3]}\n{TINY_TEXT['de'][(i + 1) % 3]}" for i in range(80)]
    path = tmp_path / "de.txt"
    path.write_text("\n\n".join(documents) + "\n", encoding="utf-8")  # 79 blank lines between 80 documents
    args = ["prepare", "mono", "--lang", "de", "--input", str(path), "--tokenizer", str(tiny_model_dir), "--no-progress"]
    assert infoxlm_main([*args, "--output", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("de: 160 lines in 80 documents, ") and "skipped" not in out, out
    meta = TokenStore.open(tmp_path / "a").mono["de"].meta
    assert meta["counts"]["blank_lines"] == 79 and meta["skipped"]["empty"] == 0
    # A line that held only invisible characters lost its text: that is skipped (and ends a document).
    path.write_text("\n\n".join(documents[:2]) + "\n\u200b\u200e\n" + documents[2] + "\n", encoding="utf-8")
    assert infoxlm_main([*args, "--output", str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("de: 6 lines in 3 documents, ") and "(skipped empty 1)" in out, out


def test_small_blocks_give_the_same_store(tmp_path, xlmr):
    path = write_text(tmp_path / "de.txt", RAW * 3)
    prepare_monolingual("de", [path], xlmr, tmp_path / "big", show_progress=False)
    prepare_monolingual("de", [path], xlmr, tmp_path / "small", show_progress=False, block_bytes=50)
    for name in ("tokens.u32", "lines.i64", "docs.i64"):
        assert (tmp_path / "big/mono/de" / name).read_bytes() == (tmp_path / "small/mono/de" / name).read_bytes()


def test_long_lines_are_split_in_mono_and_truncated_in_parallel(tmp_path, xlmr):
    long_line = SCRIPTS[0] + " " + SCRIPTS[8]
    full = xlmr.encode(long_line, add_special_tokens=False)
    assert len(full) > 8
    path = write_text(tmp_path / "de.txt", ["kurz", long_line])
    result = prepare_monolingual("de", [path], xlmr, tmp_path / "store", max_line_tokens=8, show_progress=False)
    corpus = TokenStore.open(tmp_path / "store").mono["de"]
    lengths = [len(corpus.text(i)) for i in range(corpus.num_lines)]
    assert lengths[1:] == [8] * (len(full) // 8) + ([len(full) % 8] if len(full) % 8 else [])
    assert np.concatenate([corpus.text(i) for i in range(1, corpus.num_lines)]).tolist() == full
    assert corpus.doc_offsets.tolist() == [0, corpus.num_lines]  # still one document
    assert result.meta["changed"]["split_long"] == 1

    en = write_text(tmp_path / "en.txt", ["short", long_line])
    de = write_text(tmp_path / "de2.txt", ["kurz", "lang"])
    result = prepare_parallel(
        "en-de", xlmr, tmp_path / "store", src=en, tgt=de, max_line_tokens=8, show_progress=False
    )
    pair = TokenStore.open(tmp_path / "store").parallel["en-de"]
    assert pair.src[1].tolist() == full[:8]
    assert result.meta["changed"]["truncated_long"] == 1


def test_languages_and_pairs_share_one_store(tmp_path, xlmr):
    store = tmp_path / "store"
    prepare_monolingual("de", [write_text(tmp_path / "de.txt", [SCRIPTS[0]])], xlmr, store, show_progress=False)
    prepare_monolingual("rus", [write_text(tmp_path / "ru.txt.gz", [SCRIPTS[1]])], xlmr, store, show_progress=False)
    en = write_text(tmp_path / "en.txt", ["Hello world.", "", "How are you?", "Fine."])
    de = write_text(tmp_path / "de.txt.zst", ["Hallo Welt.", "leer", "Wie geht es dir?", ""])
    result = prepare_parallel("en-de", xlmr, store, src=en, tgt=de, show_progress=False)
    assert result.meta["skipped"]["empty"] == 2  # a pair with an empty side is skipped
    tsv = write_text(tmp_path / "en-zh.tsv", ["Hello.\t你好。", "Thank you.\t谢谢。", ""])
    prepare_parallel("en-zh-Hans", xlmr, store, tsv=tsv, show_progress=False)

    opened = TokenStore.open(store)
    assert sorted(opened.mono) == ["de", "ru"]  # rus is spelled ru
    assert sorted(opened.parallel) == ["en-de", "en-zh-Hans"]
    pair = opened.parallel["en-de"]
    assert decoded_lines(xlmr, pair.src) == ["Hello world.", "How are you?"]
    assert decoded_lines(xlmr, pair.tgt) == ["Hallo Welt.", "Wie geht es dir?"]
    zh = opened.parallel["en-zh-Hans"]
    assert zh.languages == ("en", "zh-Hans") and decoded_lines(xlmr, zh.tgt) == ["你好。", "谢谢。"]
    assert zh.meta["counts"]["pairs"] == 2 and zh.meta["skipped"]["empty"] == 1
    opened.verify(check_token_ids=True)
    assert Tokenizer.from_pretrained(store / "tokenizer").fingerprint == xlmr.fingerprint  # travels with the store
    # meta.json records each tokens file's largest id (training compares it with the vocabulary).
    for corpus, files in [(c, [c.lines]) for c in opened.mono.values()] + [(c, [c.src, c.tgt]) for c in opened.parallel.values()]:
        recorded = {f.tokens_path.name: int(np.asarray(f.tokens).max()) for f in files}
        assert corpus.meta["max_token_id"] == recorded, corpus.path
    assert result.meta["max_token_id"] == opened.parallel["en-de"].meta["max_token_id"]  # what prepare returns


def test_skip_invalid_counts_instead_of_stopping(tmp_path, xlmr):
    path = tmp_path / "de.txt"
    path.write_bytes(b"gut\nschle\xcfcht\nauch gut\n")
    with pytest.raises(DataError, match=r"de\.txt:2: invalid UTF-8 at byte 6"):
        prepare_monolingual("de", [path], xlmr, tmp_path / "store", show_progress=False)
    result = prepare_monolingual("de", [path], xlmr, tmp_path / "store", skip_invalid=True, show_progress=False)
    assert result.meta["skipped"]["invalid_utf8"] == 1 and result.meta["counts"]["lines"] == 2
    assert result.meta["options"]["skip_invalid"] is True

    en = write_text(tmp_path / "en.txt", ["one", "two", "three"])
    de = tmp_path / "de2.txt"
    de.write_bytes(b"eins\n\xff\ndrei\n")
    result = prepare_parallel("en-de", xlmr, tmp_path / "store", src=en, tgt=de, skip_invalid=True, show_progress=False)
    assert result.meta["counts"]["pairs"] == 2 and result.meta["skipped"]["invalid_utf8"] == 1


# --------------------------------------------------------------------------------------
# Command line: up to date, --force, inspect
# --------------------------------------------------------------------------------------


def test_up_to_date_and_force(tmp_path, tiny_model_dir, capsys):
    de = write_text(tmp_path / "de.txt", ["Die Katze schläft auf dem warmen Sofa.", "", "Wir gingen zur alten Brücke."])
    args = ["prepare", "mono", "--lang", "de", "--input", str(de), "--tokenizer", str(tiny_model_dir)]
    args += ["--output", str(tmp_path / "store"), "--no-progress"]
    meta_path = tmp_path / "store/mono/de/meta.json"

    assert infoxlm_main(args) == 0
    assert capsys.readouterr().out.startswith("de: 2 lines in 2 documents, ")
    first = json.loads(meta_path.read_text())

    assert infoxlm_main(args) == 0
    assert capsys.readouterr().out.strip() == "de: up to date"
    assert json.loads(meta_path.read_text()) == first  # nothing was rewritten

    assert infoxlm_main(args + ["--force"]) == 0
    assert "up to date" not in capsys.readouterr().out
    assert json.loads(meta_path.read_text())["input_fingerprint"] == first["input_fingerprint"]

    assert infoxlm_main(args + ["--max-line-tokens", "100"]) == 0  # another option: redo
    assert "up to date" not in capsys.readouterr().out
    assert infoxlm_main(args + ["--max-line-tokens", "100"]) == 0
    assert capsys.readouterr().out.strip() == "de: up to date"

    with open(de, "a", encoding="utf-8") as handle:  # another input: redo
        handle.write("Öffne die Datei.\n")
    os.utime(de, ns=(first["sources"][0]["mtime_ns"] + 10**9,) * 2)
    assert infoxlm_main(args + ["--max-line-tokens", "100"]) == 0
    assert capsys.readouterr().out.startswith("de: 3 lines")

    # A damaged corpus is never "up to date".
    tokens = tmp_path / "store/mono/de/tokens.u32"
    tokens.write_bytes(tokens.read_bytes()[:-4])
    assert infoxlm_main(args + ["--max-line-tokens", "100"]) == 0
    assert capsys.readouterr().out.startswith("de: 3 lines")


def test_progress_bar_counts_bytes_on_stderr(tmp_path, tiny_model_dir, capsys):
    de = write_text(tmp_path / "de.txt", ["Die Katze schläft."] * 20)
    args = ["prepare", "mono", "--lang", "de", "--input", str(de), "--tokenizer", str(tiny_model_dir), "--output"]
    assert infoxlm_main(args + [str(tmp_path / "a")]) == 0
    err = capsys.readouterr().err
    assert "de: 100%" in err and "B/s" in err and "tokens" in err
    assert infoxlm_main(args + [str(tmp_path / "b"), "--no-progress"]) == 0
    assert capsys.readouterr().err == ""


@pytest.fixture
def small_store(tmp_path, tiny_model_dir):
    from conftest import TINY_TEXT

    store = tmp_path / "store"
    for language in ("de", "ru", "zh"):
        path = write_text(tmp_path / f"{language}.txt", TINY_TEXT[language] * (3 if language == "de" else 1))
        prepare_monolingual(language, [path], tiny_model_dir, store, show_progress=False)
    en = write_text(tmp_path / "en.txt", TINY_TEXT["en"])
    prepare_parallel("en-ru", tiny_model_dir, store, src=en, tgt=tmp_path / "ru.txt", show_progress=False)
    return store


def test_inspect_prints_counts_and_the_probabilities_of_the_sampling_unit(small_store, capsys):
    assert infoxlm_main(["prepare", "inspect", str(small_store)]) == 0
    out = capsys.readouterr().out
    assert "Monolingual corpora: sampling p_l ∝ (n_l/n)^0.7, n counted in lines" in out
    assert "Parallel corpora: sampling p_l ∝ (n_l/n)^0.7, n counted in pairs" in out
    store = TokenStore.open(small_store)
    lines = {language: corpus.num_lines for language, corpus in store.mono.items()}
    probabilities = language_probabilities(lines, 0.7)
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("  ")}
    for language, corpus in store.mono.items():
        n_lines, documents, n, p = rows[language][1:5]
        assert (n_lines, documents, n) == (f"{corpus.num_lines:,}", f"{corpus.num_documents:,}", f"{corpus.num_tokens:,}")
        assert float(p) == pytest.approx(probabilities[language], abs=5e-5)
    assert rows["en-ru"][1:4] == ["3", f"{store.parallel['en-ru'].num_tokens:,}", "1.0000"]

    argv = ["prepare", "inspect", str(small_store), "--json", "--alpha", "0.3", "--sampling-unit", "tokens"]
    assert infoxlm_main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    tokens = {language: corpus.num_tokens for language, corpus in store.mono.items()}
    assert tokens != lines and report["sampling_unit"] == "tokens"
    expected = language_probabilities(tokens, 0.3)
    assert {k: v["probability"] for k, v in report["mono"].items()} == pytest.approx(expected)
    assert report["mono"]["de"]["skipped"] == {"empty": 0, "invalid_utf8": 0, "no_tokens": 0}
    assert report["parallel"]["en-ru"]["pairs"] == 3 and report["alpha"] == 0.3


def test_inspect_reports_the_share_of_short_mmlm_blocks(tmp_path, capsys):
    """Blocks under half a block are drawn as often as full ones: inspect counts them."""
    from training_stores import write_mono, write_store

    store = write_store(tmp_path / "store")
    (store / "tokenizer").mkdir()
    rng = np.random.default_rng(0)
    write_mono(store, "de", [[rng.integers(4, 999, 20).tolist() for _ in range(100)]])  # 21 tokens a line
    # Lines of 100 and 450 tokens (101 and 452 with their </s>): no two fit one 512-token block.
    write_mono(store, "fr", [[rng.integers(4, 999, n).tolist() for n in (100, 450)] for _ in range(10)])
    report = store_report(store)
    assert report["block_size"] == 512
    assert (report["mono"]["de"]["blocks"], report["mono"]["de"]["short_blocks"]) == (5, 1)  # 24, 24, 24, 24, 4 lines
    assert (report["mono"]["fr"]["blocks"], report["mono"]["fr"]["short_blocks"]) == (20, 10)  # 102 and 453 tokens
    assert infoxlm_main(["prepare", "inspect", str(store)]) == 0
    out = capsys.readouterr().out
    assert "MMLM blocks of 512 tokens, short: under 256" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("  ")}
    assert rows["lang"][5:7] == ["blocks", "short"] and rows["fr"][5:8] == ["20", "50.0", "%"]
    # For a run's data.block_size: 1024-token blocks hold a 100- and a 450-token line together.
    assert infoxlm_main(["prepare", "inspect", str(store), "--block-size", "1024", "--json"]) == 0
    wide = json.loads(capsys.readouterr().out)
    assert wide["block_size"] == 1024 and wide["mono"]["fr"]["short_blocks"] == 0 < wide["mono"]["fr"]["blocks"] < 20
    assert infoxlm_main(["prepare", "inspect", str(store), "--block-size", "2"]) == 1
    assert capsys.readouterr().err.strip() == "infoxlm: error: block size 2 is invalid; expected an integer >= 3 (<s>, a token, </s>)"


def test_inspect_exit_codes(small_store, tmp_path, capsys):
    def inspect(*extra) -> tuple[int, str]:
        code = infoxlm_main(["prepare", "inspect", *map(str, extra)])
        return code, capsys.readouterr().err.strip()

    assert inspect(small_store)[0] == 0
    assert inspect(small_store, "--check-token-ids")[0] == 0
    code, err = inspect(small_store, "--alpha", "0")
    assert code == 1 and "alpha=0.0 is invalid" in err

    code, err = inspect(tmp_path / "nowhere")
    assert code == 1 and "not a token store (no store.json)" in err
    empty = tmp_path / "empty"
    create_or_open_store(empty, TokenStore.open(small_store).info["tokenizer"])
    code, err = inspect(empty)
    assert code == 1 and "holds no corpus yet" in err

    leftover = small_store / "mono" / f"{PARTIAL_PREFIX}fr-999999999"
    leftover.mkdir()
    code, err = inspect(small_store)
    assert code == 1 and err.startswith("infoxlm: error: ") and "interrupted or failed prepare" in err
    shutil.rmtree(leftover)

    lines = small_store / "mono" / "ru" / "lines.i64"
    lines.write_bytes(lines.read_bytes()[:-8])  # truncated: offsets no longer reach the last token
    code, err = inspect(small_store)
    assert code == 1 and "damaged" in err and len(err.splitlines()) == 1


def test_an_interrupted_prepare_leaves_no_corpus(tmp_path, tiny_model_dir, monkeypatch):
    from conftest import TINY_TEXT

    store = tmp_path / "store"
    de = write_text(tmp_path / "de.txt", TINY_TEXT["de"])
    prepare_monolingual("de", [de], tiny_model_dir, store, show_progress=False)
    before = (store / "mono/de/tokens.u32").read_bytes()

    original = CorpusWriter.append
    calls = []

    def interrupted(self, *args):
        calls.append(args[0])
        if len(calls) == 3:  # after lines.i64 and tokens.u32 got their first data
            raise KeyboardInterrupt
        return original(self, *args)

    monkeypatch.setattr(CorpusWriter, "append", interrupted)
    with pytest.raises(KeyboardInterrupt):
        prepare_monolingual("de", [de], tiny_model_dir, store, force=True, show_progress=False)
    calls.clear()
    with pytest.raises(KeyboardInterrupt):  # a brand-new store is removed again
        prepare_monolingual("ru", [write_text(tmp_path / "ru.txt", TINY_TEXT["ru"])], tiny_model_dir,
                            tmp_path / "new", show_progress=False)  # fmt: skip
    monkeypatch.setattr(CorpusWriter, "append", original)
    assert partial_corpus_dirs(store) == [] and not (tmp_path / "new").exists()
    assert (store / "mono/de/tokens.u32").read_bytes() == before
    assert store_report(store)["mono"]["de"]["lines"] == 3

    # A process killed outright leaves its partial directory: inspect refuses the store
    # until the next prepare removes it.
    killed = store / "mono" / f"{PARTIAL_PREFIX}ru-999999999"
    killed.mkdir()
    (killed / "tokens.u32").write_bytes(b"\0" * 8)
    with pytest.raises(StoreError, match="interrupted"):
        store_report(store)
    prepare_monolingual("de", [de], tiny_model_dir, store, show_progress=False)  # up to date, yet cleans up
    assert partial_corpus_dirs(store) == []
    assert sorted(store_report(store)["mono"]) == ["de"]


def test_tokenizers_parallelism_is_switched_on(tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.delenv("TOKENIZERS_PARALLELISM", raising=False)
    prepare_monolingual("de", [write_text(tmp_path / "de.txt", ["Hallo"])], tiny_model_dir, tmp_path / "s",
                        show_progress=False)  # fmt: skip
    assert os.environ["TOKENIZERS_PARALLELISM"] == "true"


def test_api_argument_errors(tmp_path, tiny_model_dir):
    de = write_text(tmp_path / "de.txt", ["Hallo"])
    with pytest.raises(DataError, match="max_line_tokens=0 is invalid"):
        prepare_monolingual("de", [de], tiny_model_dir, tmp_path / "s", max_line_tokens=0)
    with pytest.raises(DataError, match="either --tsv or --src"):
        prepare_parallel("en-de", tiny_model_dir, tmp_path / "s", src=de, tgt=de, tsv=de)
    with pytest.raises(DataError, match="needs --src and --tgt"):
        prepare_parallel("en-de", tiny_model_dir, tmp_path / "s", src=de)
    assert not (tmp_path / "s").exists()
    assert PREPARE_VERSION >= 1


# --------------------------------------------------------------------------------------
# Bad input through the real command, each in its own process (all started together)
# --------------------------------------------------------------------------------------

BAD_INPUT = {
    # name: (expected stderr pieces, whether the store existed before)
    "line_counts_differ": (["en.txt has 3 lines but", "de.txt has 2"], False),
    "invalid_utf8_mono": (["de.txt:2: invalid UTF-8 at byte 6 (0xcf)"], False),
    "invalid_utf8_parallel_existing_store": (["de.txt:3: invalid UTF-8 at byte 1 (0xff)"], True),
    "invalid_utf8_zst": (["de.txt.zst:2: invalid UTF-8 at byte 1 (0xff)"], False),
    "empty_file": (["de.txt: no non-empty line"], False),
    "empty_parallel_side": (["de.txt: no non-empty line"], False),
    "missing_file": (["missing.txt: no such file"], False),
    "unknown_language": (["language 'xx' is not known"], False),
    "pair_without_english": (["language pair 'de-fr' has no English side", "--allow-non-english-pair"], False),
    "tokenizer_mismatch": (["written with tokenizer", "use the store's tokenizer or a new --output"], True),
    "tsv_three_columns": (["pairs.tsv:2: 3 tab-separated columns; expected 2"], False),
    "tsv_one_column": (["pairs.tsv:1: 1 tab-separated columns; expected 2"], False),
}


def _bad_input_case(name: str, root: Path, tokenizer: Path) -> list[str]:
    """Write the inputs of one case under ``root`` and return the command's arguments."""
    from conftest import TINY_TEXT

    root.mkdir()
    store = root / "store"
    out = ["--tokenizer", str(tokenizer), "--output", str(store), "--no-progress"]
    en = write_text(root / "en.txt", TINY_TEXT["en"])
    de = root / "de.txt"
    if BAD_INPUT[name][1]:  # a store holding one corpus already
        prepare_monolingual("en", [en], tokenizer, store, show_progress=False)
    if name == "line_counts_differ":
        write_text(de, TINY_TEXT["de"][:2])
        return ["parallel", "--pair", "en-de", "--src", str(en), "--tgt", str(de), *out]
    if name == "invalid_utf8_mono":
        de.write_bytes(b"gut\nschle\xcfcht\n")
        return ["mono", "--lang", "de", "--input", str(de), *out]
    if name == "invalid_utf8_parallel_existing_store":
        de.write_bytes(b"eins\nzwei\n\xff drei\n")
        return ["parallel", "--pair", "en-de", "--src", str(en), "--tgt", str(de), *out]
    if name == "invalid_utf8_zst":
        zst = root / "de.txt.zst"
        zst.write_bytes(zstandard.ZstdCompressor().compress(b"gut\n\xff\n"))
        return ["mono", "--lang", "de", "--input", str(zst), *out]
    if name == "empty_file":
        de.write_text("\n   \n\n")
        return ["mono", "--lang", "de", "--input", str(en), str(de), *out]
    if name == "empty_parallel_side":
        de.write_text("\n\n\n")
        return ["parallel", "--pair", "en-de", "--src", str(en), "--tgt", str(de), *out]
    if name == "missing_file":
        return ["mono", "--lang", "de", "--input", str(root / "missing.txt"), *out]
    if name == "unknown_language":
        return ["mono", "--lang", "xx", "--input", str(en), *out]
    if name == "pair_without_english":
        write_text(de, TINY_TEXT["de"])
        return ["parallel", "--pair", "de-fr", "--src", str(de), "--tgt", str(de), *out]
    if name == "tokenizer_mismatch":
        other = root / "other-tokenizer"
        other.mkdir()
        (other / "tokenizer.json").write_text((tokenizer / "tokenizer.json").read_text() + "\n")
        return ["mono", "--lang", "de", "--input", str(en), "--tokenizer", str(other), "--output", str(store)]
    if name == "tsv_three_columns":
        write_text(root / "pairs.tsv", ["Hello\tHallo", "Cat\tKatze\textra"])
        return ["parallel", "--pair", "en-de", "--tsv", str(root / "pairs.tsv"), *out]
    if name == "tsv_one_column":
        write_text(root / "pairs.tsv", ["Hello Hallo"])
        return ["parallel", "--pair", "en-de", "--tsv", str(root / "pairs.tsv"), *out]
    raise AssertionError(name)


@pytest.fixture(scope="module")
def bad_input_runs(tmp_path_factory, tiny_model_dir):
    root = tmp_path_factory.mktemp("bad-input")
    commands = {name: _bad_input_case(name, root / name, tiny_model_dir) for name in BAD_INPUT}

    def run(name):
        return subprocess.run(
            [sys.executable, "-m", "infoxlm.cli", "prepare", *commands[name]], capture_output=True, timeout=120
        )

    with ThreadPoolExecutor(max_workers=6) as pool:
        results = dict(zip(commands, pool.map(run, commands)))
    return root, results


@pytest.mark.slow
@pytest.mark.parametrize("name", list(BAD_INPUT))
def test_bad_input_is_one_line_and_leaves_nothing_behind(bad_input_runs, name):
    root, results = bad_input_runs
    result = results[name]
    err = result.stderr.decode()
    assert result.returncode == 1, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("infoxlm: error: "), err
    assert "Traceback" not in err
    for piece in BAD_INPUT[name][0]:
        assert piece in err
    store = root / name / "store"
    if BAD_INPUT[name][1]:  # the existing store keeps exactly its one intact corpus
        assert partial_corpus_dirs(store) == []
        assert sorted(store_report(store)["mono"]) == ["en"] and not (store / "parallel").exists()
    else:  # a store this command would have created does not exist
        assert not store.exists()


@pytest.mark.skipif(sys.platform == "win32", reason="corpus locks need fcntl")
def test_a_prepare_waits_for_another_prepare_of_the_same_corpus(tmp_path, xlmr):
    """Two jobs preparing one corpus of a shared store: the second waits, then finds it done."""
    path = write_text(tmp_path / "de.txt", SCRIPTS)
    store = tmp_path / "store"
    prepare_monolingual("fr", [path], xlmr, store, show_progress=False)  # the store exists
    with ThreadPoolExecutor(max_workers=2) as pool:
        with corpus_lock(store, "mono", "de"):  # another job is preparing "de" right now
            waiting = pool.submit(prepare_monolingual, "de", [path], xlmr, store, show_progress=False)
            other = pool.submit(prepare_monolingual, "en", [path], xlmr, store, show_progress=False)
            assert other.result(timeout=60).up_to_date is False  # another corpus is not held up
            assert not waiting.done() and not (store / "mono" / "de").exists()
        first = waiting.result(timeout=60)
        again = pool.submit(prepare_monolingual, "de", [path], xlmr, store, show_progress=False).result(timeout=60)
    assert first.up_to_date is False and again.up_to_date is True
    assert sorted(TokenStore.open(store).mono) == ["de", "en", "fr"]


def test_inspect_json_checksums_the_token_stream(tmp_path, tiny_model_dir, capsys):
    from conftest import TINY_TEXT

    lines = TINY_TEXT["de"] + [""] + TINY_TEXT["de"][:2]
    reports = {}
    for name in ("de.txt", "de.txt.gz", "de.txt.zst"):
        path = write_text(tmp_path / name, lines)
        prepare_monolingual("de", [path], tiny_model_dir, tmp_path / name.replace(".", "-"), show_progress=False,
                            block_bytes=16)  # fmt: skip
        assert infoxlm_main(["prepare", "inspect", str(tmp_path / name.replace(".", "-")), "--json"]) == 0
        reports[name] = json.loads(capsys.readouterr().out)["mono"]["de"]
    first = reports["de.txt"]
    assert first["checksum"].startswith("sha256:") and len(first["checksum"]) == 7 + 64
    assert all(report == first for report in reports.values())

    # Another line, or the same lines in other documents, give another checksum.
    other = write_text(tmp_path / "other.txt", TINY_TEXT["de"] + TINY_TEXT["de"][:2])
    prepare_monolingual("de", [other], tiny_model_dir, tmp_path / "other", show_progress=False)
    report = store_report(tmp_path / "other", checksums=True)["mono"]["de"]
    assert report["tokens"] == first["tokens"] and report["checksum"] != first["checksum"]


def test_dedup_drops_repeated_lines_and_counts_them(tmp_path, tiny_model_dir, capsys):
    from conftest import TINY_TEXT

    a, b, c = TINY_TEXT["de"]
    first = write_text(tmp_path / "one.txt", [a, b, a, "", a, c])
    second = write_text(tmp_path / "two.txt", [b, c])  # only lines seen before: not an error
    result = prepare_monolingual("de", [first, second], tiny_model_dir, tmp_path / "s", dedup=True,
                                 show_progress=False)  # fmt: skip
    assert result.meta["skipped"]["duplicate"] == 4 and result.meta["options"]["dedup"] is True
    corpus = TokenStore.open(tmp_path / "s").mono["de"]
    tokenizer = Tokenizer.from_pretrained(tiny_model_dir)
    assert decoded_lines(tokenizer, corpus.lines) == [a, b, c]
    assert corpus.num_documents == 2  # [a, b] and, after the blank line, [c]
    plain = prepare_monolingual("de", [first, second], tiny_model_dir, tmp_path / "p", show_progress=False)
    assert "duplicate" not in plain.meta["skipped"] and "dedup" not in plain.meta["options"]

    pairs = write_text(tmp_path / "p.tsv", [f"{a}\tx", f"{a}\ty", f"{a}\tx"])
    code = infoxlm_main(["prepare", "parallel", "--pair", "en-de", "--tsv", str(pairs), "--tokenizer",
                         str(tiny_model_dir), "--output", str(tmp_path / "q"), "--dedup", "--no-progress"])  # fmt: skip
    assert code == 0 and "skipped duplicate 1" in capsys.readouterr().out


@pytest.mark.parametrize("header", ["en\tde", "Source\tTarget", "de\ten"])
def test_a_tsv_header_row_is_never_trained_on_as_a_pair(tmp_path, xlmr, header):
    tsv = write_text(tmp_path / "pairs.tsv", [header, "Hello.\tHallo.", "en\tde"])  # only line 1 can be a header
    pair = prepare_parallel("en-de", xlmr, tmp_path / "store", tsv=tsv, show_progress=False)
    assert pair.meta["counts"]["pairs"] == 2
    assert decoded_lines(xlmr, TokenStore.open(tmp_path / "store").parallel["en-de"].src) == ["Hello.", "en"]


@pytest.mark.parametrize("where", ["--input", "--src"])
def test_a_url_without_an_executor_is_refused_saying_what_reads_it(tmp_path, capsys, where):
    url = "s3://corpora/de.txt"
    if where == "--input":
        argv = ["prepare", "mono", "--lang", "de", "--input", url]
    else:
        argv = ["prepare", "parallel", "--pair", "en-de", "--src", url, "--tgt", "s3://corpora/en.txt"]
    code = infoxlm_main([*argv, "--tokenizer", str(tmp_path), "--output", str(tmp_path / "S")])
    err = capsys.readouterr().err.strip()
    assert code == 1 and err.startswith(f"infoxlm: error: {url}: a URL; expected a local file for {where}")
    assert "--executor local --tasks N" in err
