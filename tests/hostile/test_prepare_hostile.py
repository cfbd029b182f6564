"""`infoxlm prepare` under hostile conditions: damaged input, a full disk, wrong paths.

The rule for every case: one line on stderr naming the file (and, for input, the line),
a non-zero exit, and nothing left on disk that the command created.
"""

from __future__ import annotations

import bz2
import errno
import gzip
import io
import json
import lzma
import os
import random
import re
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zstandard

from infoxlm.cli import main as infoxlm_main
from infoxlm.corpus import store_writer as store_writer_module
from infoxlm.data.corpus_lock import PARTIAL_PREFIX
from infoxlm.corpus import prepare_mono
from infoxlm.corpus.long_lines import cut_long_line
from infoxlm.corpus.prepare import prepare_monolingual, prepare_parallel
from infoxlm.data.store import TokenStore
from infoxlm.corpus.store_report import store_report
from infoxlm.errors import DataError, TokenizerError
from infoxlm.tokenizer import Tokenizer
from infoxlm.tokenizer_training import train_tokenizer

COMPRESS = {
    ".gz": gzip.compress,
    ".xz": lzma.compress,
    ".bz2": bz2.compress,
    ".zst": lambda data: zstandard.ZstdCompressor(level=1).compress(data),
}


def corpus_text(num_lines: int, seed: int = 0) -> bytes:
    """Lines of pseudo-words: compresses about 2.5:1, like real text."""
    rng = random.Random(seed)
    words = ["".join(rng.choice("abcdefghilmnorstuvwz") for _ in range(rng.randint(2, 9))) for _ in range(3000)]
    return "".join(" ".join(rng.choices(words, k=12)) + "\n" for _ in range(num_lines)).encode()


def run_cli(capsys, *args) -> tuple[int, list[str]]:
    code = infoxlm_main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.err.strip().splitlines()


def tree(path: Path) -> list[str]:
    """Every path under ``path``, relative, sorted (empty if it does not exist)."""
    if not path.exists():
        return []
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


# --------------------------------------------------------------------------------------
# 1. Truncated compressed input
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big_text() -> bytes:
    return corpus_text(110_000)  # ~5 MB of text; its .zst is ~2 MB, many zstd blocks


@pytest.mark.parametrize("suffix", list(COMPRESS))
def test_half_of_a_compressed_file_is_an_error_not_a_short_corpus(tmp_path, tiny_model_dir, capsys, big_text, suffix):
    data = COMPRESS[suffix](big_text)
    path = tmp_path / f"trunc.txt{suffix}"
    path.write_bytes(data[: len(data) // 2])
    store = tmp_path / "store"
    code, err = run_cli(capsys, "prepare", "mono", "--lang", "de", "--input", path,
                        "--tokenizer", tiny_model_dir, "--output", store, "--no-progress")  # fmt: skip
    assert code == 1 and len(err) == 1, err
    assert err[0].startswith(f"infoxlm: error: {path}: truncated"), err
    assert not store.exists()


@pytest.mark.parametrize("suffix", list(COMPRESS))
def test_a_truncated_one_block_file_says_truncated(tmp_path, tiny_model_dir, suffix):
    data = COMPRESS[suffix](corpus_text(40))
    path = tmp_path / f"small.txt{suffix}"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(DataError, match=rf"{path.name}: truncated"):
        prepare_monolingual("de", [path], tiny_model_dir, tmp_path / "store", show_progress=False)
    assert not (tmp_path / "store").exists()


def test_small_blocks_of_a_truncated_zst_fail_after_some_lines(tmp_path, tiny_model_dir):
    """Truncation found after blocks were already tokenized and written: nothing is kept."""
    data = COMPRESS[".zst"](corpus_text(20_000))
    path = tmp_path / "part.txt.zst"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(DataError, match=r"part\.txt\.zst: truncated: .* after line \d+"):
        prepare_monolingual("de", [path], tiny_model_dir, tmp_path / "s", show_progress=False, block_bytes=64 * 1024)
    assert not (tmp_path / "s").exists()


def test_concatenated_zst_frames_still_read_whole(tmp_path, tiny_model_dir):
    first, second = corpus_text(500, seed=1), corpus_text(700, seed=2)
    path = tmp_path / "two.txt.zst"
    path.write_bytes(COMPRESS[".zst"](first) + COMPRESS[".zst"](second))
    plain = tmp_path / "two.txt"
    plain.write_bytes(first + second)
    a = prepare_monolingual("de", [path], tiny_model_dir, tmp_path / "a", show_progress=False)
    b = prepare_monolingual("de", [plain], tiny_model_dir, tmp_path / "b", show_progress=False)
    assert a.meta["counts"] == b.meta["counts"] and a.meta["counts"]["lines"] == 1200


def test_tokenizer_training_and_parallel_input_say_truncated(tmp_path, tiny_model_dir):
    data = COMPRESS[".zst"](corpus_text(3000))
    cut = tmp_path / "de.txt.zst"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(TokenizerError, match=r"de\.txt\.zst: truncated"):
        train_tokenizer({"de": [cut]}, tmp_path / "tok", vocab_size=100, show_progress=False)
    whole = tmp_path / "en.txt"
    whole.write_bytes(corpus_text(3000))
    with pytest.raises(DataError, match=r"de\.txt\.zst: truncated"):
        prepare_parallel("en-de", tiny_model_dir, tmp_path / "p", src=whole, tgt=cut, show_progress=False)
    assert not (tmp_path / "p").exists()


def test_the_demo_corpus_loader_says_truncated(tmp_path, monkeypatch):
    from infoxlm.demo import corpus

    (tmp_path / "manifest.json").write_text("{}")
    data = gzip.compress(corpus_text(2000))
    (tmp_path / "mono.de.txt.gz").write_bytes(data[: len(data) // 2])
    monkeypatch.setattr(corpus, "corpus_dir", lambda: tmp_path)
    with pytest.raises(DataError, match=r"mono\.de\.txt\.gz: truncated"):
        corpus._read_lines("mono.de.txt.gz")


# --------------------------------------------------------------------------------------
# 2. A full disk
# --------------------------------------------------------------------------------------


@pytest.fixture
def tmpfs_3mb(tmp_path):
    """A 3 MB tmpfs, mounted for the test (needs root and a kernel that allows it)."""
    mount_point = tmp_path / "tmpfs"
    mount_point.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount_point)],
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or 'not permitted'})")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], check=False)


def fill(folder: Path) -> Path:
    """Write one file until the file system has no space left."""
    path = folder / "filler"
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError as err:
            assert err.errno == errno.ENOSPC
    return path


@pytest.mark.parametrize("left", ["nothing", "3 MB"])
def test_prepare_into_a_full_tmpfs(tmpfs_3mb, tmp_path, tiny_model_dir, capsys, left):
    """'nothing': the tmpfs is full before the command; '3 MB': it fills up half-way."""
    if left == "nothing":
        fill(tmpfs_3mb)
    before = tree(tmpfs_3mb)
    text = tmp_path / "de.txt"
    text.write_bytes(corpus_text(40_000))  # ~1.8 MB of text, ~8 MB of tokens with this tokenizer
    store = tmpfs_3mb / "store"
    code, err = run_cli(capsys, "prepare", "mono", "--lang", "de", "--input", text,
                        "--tokenizer", tiny_model_dir, "--output", store, "--no-progress")  # fmt: skip
    assert code == 1 and len(err) == 1, err
    assert err[0].startswith("infoxlm: error: no space left on device while writing "), err
    assert str(store) in err[0]
    assert tree(tmpfs_3mb) == before  # the store, its partial corpus and its tokenizer: all gone


_REAL_OPEN = io.open


class _FullDisk:
    """Files opened for writing under one directory take ``writes`` write calls in all, then
    fail as a full disk does: ``OSError(ENOSPC)`` from ``write``, without a file name."""

    def __init__(self, under: Path, writes: int):
        self.under, self.writes = str(under), writes

    def open(self, file, mode="r", *args, **kwargs):
        handle = _REAL_OPEN(file, mode, *args, **kwargs)
        if "r" in mode or not os.fspath(file).startswith(self.under):
            return handle
        disk = self

        class Handle:
            def __getattr__(self, name):
                return getattr(handle, name)

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                handle.close()

            def write(self, data):
                if disk.writes <= 0:
                    raise OSError(errno.ENOSPC, "No space left on device")
                disk.writes -= 1
                return handle.write(data)

        return Handle()


# Of the 10 writes of this prepare: 0 the tokenizer copy, 4 store.json, 6 tokens.u32, 9 meta.json.
@pytest.mark.parametrize("writes", [0, 4, 6, 9])
def test_enospc_anywhere_leaves_nothing_and_names_the_path(tmp_path, tiny_model_dir, capsys, monkeypatch, writes):
    """The tmpfs test on any machine: ENOSPC injected into the file writes under the store."""
    full = _FullDisk(tmp_path / "out", writes)
    monkeypatch.setattr(store_writer_module, "open", full.open, raising=False)
    monkeypatch.setattr("builtins.open", full.open)
    monkeypatch.setattr("io.open", full.open)
    text = tmp_path / "de.txt"
    text.write_bytes(corpus_text(20_000))
    store = tmp_path / "out" / "deep" / "store"
    code, err = run_cli(capsys, "prepare", "mono", "--lang", "de", "--input", text,
                        "--tokenizer", tiny_model_dir, "--output", store, "--no-progress")  # fmt: skip
    monkeypatch.undo()
    assert code == 1 and len(err) == 1, err
    assert err[0].startswith(f"infoxlm: error: no space left on device while writing {store}"), err
    assert not (tmp_path / "out").exists()  # the store and the parents the command made


def test_enospc_in_the_tokenizer_copy_keeps_an_existing_store_intact(tmp_path, tiny_model_dir, capsys, monkeypatch):
    """A store whose tokenizer copy is missing is incomplete: inspect says so, and the next
    prepare completes it (failing cleanly if the disk is still full)."""
    store = tmp_path / "store"
    de = tmp_path / "de.txt"
    de.write_bytes(corpus_text(200))
    prepare_monolingual("de", [de], tiny_model_dir, store, show_progress=False)
    import shutil

    shutil.rmtree(store / "tokenizer")  # as a store left by an older version after ENOSPC
    code, err = run_cli(capsys, "prepare", "inspect", store)
    assert code == 1 and len(err) == 1 and "incomplete: no tokenizer/" in err[0], err

    def no_space(self, path):
        Path(path).mkdir(parents=True, exist_ok=True)
        (Path(path) / "tokenizer.json").write_bytes(b"{")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Tokenizer, "save_pretrained", no_space)
    code, err = run_cli(capsys, "prepare", "mono", "--lang", "de", "--input", de,
                        "--tokenizer", tiny_model_dir, "--output", store, "--no-progress")  # fmt: skip
    assert code == 1 and len(err) == 1 and "no space left on device while writing" in err[0], err
    assert str(store / ".tokenizer-") in err[0]
    assert sorted(p.name for p in store.iterdir()) == [".locks", "mono", "store.json"]
    monkeypatch.undo()

    # Up to date, and complete again: the tokenizer copy is back.
    code, _ = run_cli(capsys, "prepare", "mono", "--lang", "de", "--input", de,
                      "--tokenizer", tiny_model_dir, "--output", store, "--no-progress")  # fmt: skip
    assert code == 0 and (store / "tokenizer" / "tokenizer.json").is_file()
    assert run_cli(capsys, "prepare", "inspect", store)[0] == 0


def test_a_new_store_gets_store_json_only_after_its_tokenizer(tmp_path, tiny_model_dir, monkeypatch):
    seen = []
    original = Tokenizer.save_pretrained

    def watch(self, path):
        seen.append((tmp_path / "s" / "store.json").exists())
        return original(self, path)

    monkeypatch.setattr(Tokenizer, "save_pretrained", watch)
    de = tmp_path / "de.txt"
    de.write_bytes(corpus_text(50))
    prepare_monolingual("de", [de], tiny_model_dir, tmp_path / "s", show_progress=False)
    assert seen == [False]


def test_a_failing_prepare_keeps_a_store_other_corpora_joined(tmp_path, tiny_model_dir, monkeypatch):
    """Two prepares into one new store: the first fails after the second finished."""
    store = tmp_path / "store"
    de, fr = tmp_path / "de.txt", tmp_path / "fr.txt"
    de.write_bytes(corpus_text(300, seed=3))
    fr.write_bytes(corpus_text(300, seed=4))
    original = prepare_mono._write_monolingual_blocks

    def other_prepare_meanwhile(job, writer, progress, encoded):
        if job.name == "fr":  # the other prepare writes normally
            return original(job, writer, progress, encoded)
        prepare_monolingual("fr", [fr], tiny_model_dir, store, show_progress=False)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(prepare_mono, "_write_monolingual_blocks", other_prepare_meanwhile)
    with pytest.raises(OSError) as caught:
        prepare_monolingual("de", [de], tiny_model_dir, store, show_progress=False)
    assert caught.value.filename == str(store)
    monkeypatch.setattr(prepare_mono, "_write_monolingual_blocks", original)
    assert sorted(store_report(store)["mono"]) == ["fr"]


# --------------------------------------------------------------------------------------
# 3. Memory: long lines are cut before they are tokenized
# --------------------------------------------------------------------------------------


def test_cut_long_line():
    assert cut_long_line("short", 10) == ["short"]
    text = " ".join(f"w{i:04d}" for i in range(1000))
    pieces = cut_long_line(text, 64)
    assert all(len(p) <= 64 for p in pieces) and " ".join(pieces) == text
    assert cut_long_line("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]
    marks = "e\u0301" * 20  # never a combining mark at the start of a piece
    assert all(not p[0] == "\u0301" for p in cut_long_line(marks, 7)) and "".join(cut_long_line(marks, 7)) == marks


def test_a_huge_line_is_tokenized_in_bounded_pieces(tmp_path, tiny_model_dir, monkeypatch):
    longest = []
    original = Tokenizer.encode_batch

    def encode_batch(self, texts, *args, **kwargs):
        longest.append(max(map(len, texts), default=0))
        return original(self, texts, *args, **kwargs)

    monkeypatch.setattr(Tokenizer, "encode_batch", encode_batch)
    line = corpus_text(3000).replace(b"\n", b" ").strip()  # one line of ~130k characters
    path = tmp_path / "one.txt"
    path.write_bytes(b"first line\n" + line + b"\nlast line\n\nnext document\n")
    result = prepare_monolingual("de", [path], tiny_model_dir, tmp_path / "s", max_line_tokens=64,
                                 show_progress=False, block_bytes=4096)  # fmt: skip
    assert max(longest) <= 16 * 64
    corpus = TokenStore.open(tmp_path / "s").mono["de"]
    assert corpus.num_documents == 2 and corpus.doc_offsets[1] == corpus.num_lines - 1
    assert result.meta["changed"]["split_long"] == 1 and result.meta["sources"][0]["kept"] == 4
    assert all(len(corpus.text(i)) <= 64 for i in range(corpus.num_lines))
    tokenizer = Tokenizer.from_pretrained(tiny_model_dir)
    middle = np.concatenate([corpus.text(i) for i in range(1, corpus.num_lines - 2)])
    assert tokenizer.decode(middle.tolist()).split() == line.decode().split()


def test_lines_under_the_limit_are_tokenized_whole(tmp_path, tiny_model_dir, monkeypatch):
    seen = []
    original = Tokenizer.encode_batch
    monkeypatch.setattr(Tokenizer, "encode_batch", lambda self, texts, *a, **k: seen.extend(texts) or original(self, texts, *a, **k))
    lines = [("word " * 200).strip(), "short"]
    path = tmp_path / "de.txt"
    path.write_text("\n".join(lines) + "\n")
    prepare_monolingual("de", [path], tiny_model_dir, tmp_path / "s", max_line_tokens=100, show_progress=False)
    assert seen == lines  # 999 characters <= 16 * 100: not cut



def peak_rss_mb(*args: str) -> float:
    """Peak resident memory of ``python -m infoxlm ARGS`` in its own process, in MB."""
    wrapper = (
        "import resource, subprocess, sys; "
        "r = subprocess.run([sys.executable, '-m', 'infoxlm', *sys.argv[1:]], capture_output=True); "
        "sys.stderr.buffer.write(r.stderr); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
        "sys.exit(r.returncode)"
    )
    result = subprocess.run([sys.executable, "-c", wrapper, *args], capture_output=True, timeout=600)
    assert result.returncode == 0, result.stderr.decode()
    return int(result.stdout.split()[-1]) / 1024  # ru_maxrss is in kB on Linux


@pytest.mark.slow  # two prepares of 30 MB in subprocesses
def test_a_30_mb_line_costs_what_the_same_text_as_lines_does(tmp_path, tiny_model_dir):
    text = corpus_text(400_000)
    (tmp_path / "lines.txt").write_bytes(text)
    (tmp_path / "line.txt").write_bytes(b"first\n" + text.replace(b"\n", b" ") + b"\nlast\n")
    common = ["--lang", "de", "--tokenizer", str(tiny_model_dir), "--no-progress"]
    lines = peak_rss_mb("prepare", "mono", "--input", str(tmp_path / "lines.txt"), "--output", str(tmp_path / "a"), *common)
    line = peak_rss_mb("prepare", "mono", "--input", str(tmp_path / "line.txt"), "--output", str(tmp_path / "b"), *common)
    assert line < lines + 50, (line, lines)  # read whole: 84 MB more


def test_a_50_mb_parallel_side_is_read_only_as_far_as_it_is_kept(tmp_path, tiny_model_dir):
    side = corpus_text(700_000).replace(b"\n", b" ")
    (tmp_path / "de.txt").write_bytes(b"Kurz.\n" + side + b"\nLang.\n")
    (tmp_path / "en.txt").write_bytes(b"Short.\nLong line.\nLong.\n")
    common = ["--tokenizer", str(tiny_model_dir), "--no-progress", "--pair", "en-de", "--src", str(tmp_path / "en.txt")]
    peak = peak_rss_mb("prepare", "parallel", "--tgt", str(tmp_path / "de.txt"), "--output", str(tmp_path / "s"), *common)
    (tmp_path / "short.txt").write_bytes(b"Kurz.\n" + side[:40_000] + b"\nLang.\n")
    short = peak_rss_mb("prepare", "parallel", "--tgt", str(tmp_path / "short.txt"), "--output", str(tmp_path / "t"), *common)
    assert peak < short + 30, (peak, short)  # read whole: 380 MB more
    for store in ("s", "t"):
        corpus = TokenStore.open(tmp_path / store).parallel["en-de"]
        assert corpus.meta["changed"]["truncated_long"] == 1
    kept = [TokenStore.open(tmp_path / store).parallel["en-de"].tgt[1].tolist() for store in ("s", "t")]
    assert kept[0] == kept[1]  # the same first max_line_tokens tokens

# --------------------------------------------------------------------------------------
# 4. Wrong paths: one line, nothing created
# --------------------------------------------------------------------------------------


def test_wrong_paths_give_one_line(tmp_path, tiny_model_dir, capsys, monkeypatch):
    de = tmp_path / "de.txt"
    de.write_bytes(corpus_text(20))
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    cases = {
        "output is a file": (["--input", de, "--output", a_file], str(a_file)),
        "output under a file": (["--input", de, "--output", a_file / "sub" / "store"], str(a_file)),
        "input is a directory": (["--input", tmp_path, "--output", tmp_path / "s1"], str(tmp_path)),
        "input missing": (["--input", tmp_path / "nope.txt", "--output", tmp_path / "s2"], "nope.txt"),
    }
    before = tree(tmp_path)
    for what, (args, named) in cases.items():
        code, err = run_cli(capsys, "prepare", "mono", "--lang", "de", "--tokenizer", tiny_model_dir,
                            "--no-progress", *args)  # fmt: skip
        assert code == 1 and len(err) == 1 and named in err[0], (what, err)
    assert tree(tmp_path) == before

    # No permission to create the store's folder (as a non-root user on a read-only parent).
    real_mkdir = Path.mkdir

    def denied(self, *args, **kwargs):
        if self.name == "store":
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", denied)
    store = tmp_path / "made" / "store"
    code, err = run_cli(capsys, "prepare", "mono", "--lang", "de", "--input", de, "--tokenizer", tiny_model_dir,
                        "--output", store, "--no-progress")  # fmt: skip
    assert code == 1 and err == [f"infoxlm: error: {store}: permission denied"], err
    assert tree(tmp_path) == before  # "made/" too is gone


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere: no EACCES to observe")
def test_a_read_only_parent_gives_one_line(tmp_path, tiny_model_dir, capsys):
    de = tmp_path / "de.txt"
    de.write_bytes(corpus_text(20))
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    code, err = run_cli(capsys, "prepare", "mono", "--lang", "de", "--input", de, "--tokenizer", tiny_model_dir,
                        "--output", locked / "store", "--no-progress")  # fmt: skip
    assert code == 1 and len(err) == 1 and "permission denied" in err[0]


def test_an_output_inside_a_store_or_beside_foreign_files_is_refused(tmp_path, tiny_model_dir, capsys):
    """prepare and export would write a directory the store then reads as a broken corpus."""
    de = tmp_path / "de.txt"
    de.write_bytes(corpus_text(20))
    store = tmp_path / "store"
    prepare_monolingual("de", [de], tiny_model_dir, store, show_progress=False)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("my files")
    before = tree(tmp_path)
    for out, expected in [
        (store / "mono" / "y", f"{store / 'mono' / 'y'}: is inside the token store {store}; write outside it "
                                     "(it would no longer be usable)"),
        (mine, f"{mine}: exists and is not empty, and infoxlm did not write it; choose another directory"),
    ]:
        code, err = run_cli(capsys, "prepare", "mono", "--lang", "fr", "--input", de, "--tokenizer", tiny_model_dir,
                            "--output", out, "--no-progress")  # fmt: skip
        assert code == 1 and err == [f"infoxlm: error: {expected}"], err
    code, err = run_cli(capsys, "export", tiny_model_dir, store / "mono" / "hf")
    assert code == 1 and err == [f"infoxlm: error: {store / 'mono' / 'hf'}: is inside the token store {store}; "
                                 "write outside it (it would no longer be usable)"], err  # fmt: skip
    assert tree(tmp_path) == before
    assert sorted(store_report(store)["mono"]) == ["de"]  # still usable


# A prepare on another host, or in another PID namespace: it holds its corpus's lock until its
# stdin closes; the PID its partial directory is named with means nothing on this host.
HOLD_CORPUS_LOCK = """
import sys
from infoxlm.data.corpus_lock import corpus_lock
with corpus_lock(sys.argv[1], sys.argv[2], sys.argv[3]):
    print("held", flush=True)
    sys.stdin.read()
"""


@pytest.mark.skipif(sys.platform == "win32", reason="corpus locks need fcntl")
def test_a_live_prepare_on_another_host_is_not_deleted_and_a_merge_waits_for_it(tmp_path, tiny_model_dir, capsys):
    de = tmp_path / "de.txt"
    de.write_bytes(corpus_text(20))
    store = tmp_path / "store"
    prepare_monolingual("de", [de], tiny_model_dir, store, show_progress=False)
    live = store / "mono" / f"{PARTIAL_PREFIX}fr-999999997"
    live.mkdir()
    (live / "tokens.u32").write_bytes(b"\0" * 8)
    writer = subprocess.Popen([sys.executable, "-c", HOLD_CORPUS_LOCK, str(store), "mono", "fr"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert writer.stdout.readline().strip() == "held"
        # Another job prepares another corpus of the shared store: the live directory stays.
        code, err = run_cli(capsys, "prepare", "mono", "--lang", "ru", "--input", de, "--tokenizer", tiny_model_dir,
                            "--output", store, "--no-progress")  # fmt: skip
        assert code == 0, err
        assert live.is_dir() and (live / "tokens.u32").read_bytes() == b"\0" * 8
        waiting = f"{live}: being prepared by process {writer.pid} (on host {socket.gethostname()}); wait for it to finish"
        for command in (["prepare", "merge", tmp_path / "merged", store], ["prepare", "inspect", store]):
            code, err = run_cli(capsys, *command, "--no-progress" if command[1] == "merge" else "--json")
            assert code == 1 and len(err) == 1 and err[0].startswith(f"infoxlm: error: {waiting}"), err
        assert not (tmp_path / "merged").exists()
    finally:
        writer.kill()
        writer.wait()
    # Its writer gone, the directory is a leftover: named as one, and removed by the next prepare.
    code, err = run_cli(capsys, "prepare", "inspect", store)
    assert code == 1 and "left by an interrupted or failed prepare" in err[0], err
    prepare_monolingual("ru", [de], tiny_model_dir, store, show_progress=False)
    assert not live.exists()


@pytest.mark.skipif(sys.platform == "win32", reason="corpus locks need fcntl")
@pytest.mark.parametrize("store_state", ["new", "prepared"])
def test_a_corpus_lock_that_is_a_symbolic_link_is_refused_and_its_target_kept(tmp_path, tiny_model_dir, capsys, store_state):
    """Anyone who may write into a shared store could point a corpus's lock file at another
    user's file: the lock's record would overwrite it."""
    de = tmp_path / "de.txt"
    de.write_bytes(corpus_text(20))
    precious = tmp_path / "precious"
    precious.write_text("a user's data\n")
    store = tmp_path / "store"
    if store_state == "prepared":
        prepare_monolingual("de", [de], tiny_model_dir, store, show_progress=False)
    (store / ".locks").mkdir(parents=True, exist_ok=True)
    lock = store / ".locks" / "mono-fr"
    lock.symlink_to(precious)
    code, err = run_cli(capsys, "prepare", "mono", "--lang", "fr", "--input", de, "--tokenizer", tiny_model_dir,
                        "--output", store, "--no-progress")  # fmt: skip
    assert code == 1 and len(err) == 1, err
    assert err[0].startswith(f"infoxlm: error: {lock}: is a symbolic link (to {precious}), not a regular file; "), err
    assert precious.read_text() == "a user's data\n"
    assert not (store / "mono" / "fr").exists()


def test_pretrain_refuses_a_store_with_an_id_outside_the_vocabulary_and_leaves_no_run(tmp_path, capsys):
    """An id at the vocabulary size (a foreign tokens.u32) used to end training with
    `IndexError: index out of range in self`, leaving a run directory. The largest id that
    meta.json records refuses it when the store is opened, reading no token."""
    from training_stores import VOCAB, build_store

    store = tmp_path / "store"
    build_store(store)
    tokens = store / "mono" / "en" / "tokens.u32"
    ids = np.fromfile(tokens, dtype="<u4")
    ids[100] = VOCAB
    ids.tofile(tokens)
    meta = json.loads((tokens.parent / "meta.json").read_text())
    meta["max_token_id"]["tokens.u32"] = VOCAB  # as the prepare that wrote these ids records them
    (tokens.parent / "meta.json").write_text(json.dumps(meta))
    code, err = run_cli(capsys, "pretrain", "--preset", "test", "--data", store, "--output", tmp_path / "run",
                        "--max-steps", "2", "--no-progress")  # fmt: skip
    assert code == 1 and err == [f"infoxlm: error: {tokens}: token id {VOCAB} at position 100 is outside the "
                                 f"vocabulary (size {VOCAB}); the corpus is damaged"], err  # fmt: skip
    assert not (tmp_path / "run").exists()


def test_pretrain_stops_in_one_line_at_a_batch_of_a_tokens_file_damaged_after_prepare(tmp_path, capsys):
    """The file changed after meta.json recorded its largest id: the store opens (reading no
    token), and the first batch that gathers an id outside the vocabulary ends the run."""
    from training_stores import VOCAB, build_store

    store = tmp_path / "store"
    build_store(store)
    for tokens in store.glob("*/*/*tokens.u32"):  # every id but </s> (line ends stay intact)
        ids = np.fromfile(tokens, dtype="<u4")
        ids[ids != 2] = VOCAB + 7
        ids.tofile(tokens)
    code, err = run_cli(capsys, "pretrain", "--preset", "test", "--data", store, "--output", tmp_path / "run",
                        "--max-steps", "3", "--no-progress")  # fmt: skip
    assert code == 1 and len(err) == 1, err
    assert re.fullmatch(rf"infoxlm: error: {re.escape(str(store))}/(mono|parallel)/[a-z-]+/(src\.|tgt\.)?tokens\.u32: "
                        rf"token id {VOCAB + 7} at position \d+ is outside the vocabulary \(size {VOCAB}\); "
                        "the corpus is damaged", err[0]), err  # fmt: skip
    assert (tmp_path / "run").is_dir() and not list((tmp_path / "run").glob("checkpoints/*"))
