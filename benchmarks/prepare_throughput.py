"""Throughput of ``infoxlm prepare mono`` against the tokenizers library on the same lines.

What is measured, in one run and on one input file:

(a) the tokenizers library alone: ``tokenizers.Tokenizer.encode_batch`` on the file's lines,
    already in memory, in batches as large as prepare's blocks, the ids read out -- the
    target; with ``--with-fast`` also ``encode_batch_fast`` (no character offsets, which
    prepare uses) as a stricter reference;
(a') infoxlm's ``Tokenizer.encode_batch`` on the same batches: the ids prepare stores (its
    tokenizer splits on whitespace before the "▁" prefix, as SentencePiece does, which
    costs a little), without reading, cleaning or writing;
(b) ``prepare_monolingual`` (what ``infoxlm prepare mono`` runs) end to end: reading,
    UTF-8 decoding, NFC and control-character cleaning, tokenizing, writing the corpus,
    with the tokenizer loaded beforehand (loading XLM-R's tokenizer.json is a fixed cost
    per command, reported on its own);
(c) the ``infoxlm prepare mono`` command in a fresh process (includes interpreter start-up
    and imports);
(d) with ``--shards N``: the same command as N processes at once, ``--shard i/N`` each with
    one tokenizer thread, then ``infoxlm prepare merge`` (timed apart): how far prepare
    scales by processes rather than by the tokenizer's threads.

``--threads T`` sets the tokenizer's thread pool (RAYON_NUM_THREADS) for (a), (a') and (b), so
that "per core" figures can be taken with T = 1 and compared with T = the machine's cores.

Every measure is repeated ``--repeat`` times, interleaved, and the best run of each is
reported (the machine's other load only ever slows a run down), with the CPU seconds of
every run; the ratio (b)/(a) is the pipeline's efficiency (target >= 0.8).

Input: ``--mb`` megabytes of multilingual pseudo-text drawn from XLM-R's own vocabulary
(pieces sampled with the Unigram model's probabilities and joined into words, so the
tokenizer meets realistic piece statistics in ~100 scripts and few repeated words), one line
of 5-40 words, a blank line after every 20th line (documents).

    python benchmarks/prepare_throughput.py --mb 8 --repeat 5 --with-fast   # BENCHMARKS.md
    python benchmarks/prepare_throughput.py --mb 8 --json
    python benchmarks/prepare_throughput.py --mb 8 --threads 1 --no-cli              # one core
    python benchmarks/prepare_throughput.py --mb 8 --threads 2 --shards 2 --no-cli    # and 2 shard processes
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from infoxlm.corpus.prepare import prepare_monolingual
from infoxlm.corpus.text_files import DEFAULT_BLOCK_BYTES

from xlmr_assets import xlmr_tokenizer_dir

METASPACE = "\u2581"


def write_pseudo_text(path: Path, megabytes: float, tokenizer_json: Path, seed: int = 0) -> int:
    """Write ~``megabytes`` MB of text sampled from the Unigram vocabulary; returns the byte count."""
    vocab = json.loads(tokenizer_json.read_text(encoding="utf-8"))["model"]["vocab"][4:-1]  # no specials
    pieces = np.array([piece for piece, _ in vocab], dtype=object)
    scores = np.array([score for _, score in vocab])
    probabilities = np.exp(scores - scores.max())
    probabilities /= probabilities.sum()
    rng = np.random.default_rng(seed)
    target = int(megabytes * 1e6)
    written = 0
    with open(path, "w", encoding="utf-8") as out:
        line_number = 0
        while written < target:
            # Draw a pool of pieces, then cut it into words at every "▁"-initial piece.
            draw = rng.choice(len(pieces), size=20_000, p=probabilities)
            text = "".join(pieces[draw]).replace(METASPACE, " ")
            words = text.split()
            position = 0
            chunk = []
            while position < len(words):
                n = int(rng.integers(5, 41))
                chunk.append(" ".join(words[position : position + n]))
                position += n
                line_number += 1
                if line_number % 20 == 0:
                    chunk.append("")  # a document boundary
            block = "\n".join(chunk) + "\n"
            out.write(block)
            written += len(block.encode("utf-8"))
    return path.stat().st_size


def read_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")


def prepare_sized_batches(lines: list[str], block_bytes: int) -> list[list[str]]:
    """The non-empty lines in batches of about ``block_bytes`` of text, as prepare's blocks."""
    batches, batch, size = [], [], 0
    for line in lines:
        if line:
            batch.append(line)
            size += len(line.encode("utf-8")) + 1
        if size >= block_bytes:
            batches.append(batch)
            batch, size = [], 0
    if batch:
        batches.append(batch)
    return batches


def timed(function) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of all threads, tokens) of one call returning a token count."""
    wall, cpu = time.perf_counter(), time.process_time()
    tokens = function()
    return time.perf_counter() - wall, time.process_time() - cpu, tokens


def raw_tokenizers(tokenizer_json: Path, batches: list[list[str]], fast: bool):
    """tokenizers' own encode_batch (or encode_batch_fast, which skips offsets) over the batches."""
    from tokenizers import Tokenizer as HFTokenizer

    hf = HFTokenizer.from_file(str(tokenizer_json))
    hf.no_padding()
    hf.no_truncation()
    encode = hf.encode_batch_fast if fast else hf.encode_batch

    def run() -> int:
        return sum(len(encoding.ids) for batch in batches for encoding in encode(batch, add_special_tokens=False))

    return run


def infoxlm_tokenizer(tokenizer_dir: Path, batches: list[list[str]]):
    """infoxlm's Tokenizer.encode_batch: the ids prepare stores, without reading or writing."""
    from infoxlm.tokenizer import Tokenizer

    tokenizer = Tokenizer.from_pretrained(tokenizer_dir)

    def run() -> int:
        return sum(len(ids) for batch in batches for ids in tokenizer.encode_batch(batch, add_special_tokens=False))

    return run


def infoxlm_prepare(tokenizer_dir: Path, text_path: Path, store: Path):
    """prepare_monolingual with the tokenizer loaded once beforehand: loading XLM-R's 17 MB
    tokenizer.json is a fixed cost per command (timed separately), not throughput."""
    from infoxlm.tokenizer import Tokenizer

    tokenizer = Tokenizer.from_pretrained(tokenizer_dir)

    def run() -> int:
        result = prepare_monolingual("en", [text_path], tokenizer, store, force=True, show_progress=False)
        return result.meta["counts"]["tokens"]

    return run


def time_tokenizer_load(tokenizer_dir: Path) -> float:
    from infoxlm.tokenizer import Tokenizer

    started = time.perf_counter()
    Tokenizer.from_pretrained(tokenizer_dir)
    return time.perf_counter() - started


def time_cli(tokenizer_dir: Path, text_path: Path, store: Path) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "infoxlm", "prepare", "mono", "--lang", "en", "--input", str(text_path),
         "--tokenizer", str(tokenizer_dir), "--output", str(store), "--force", "--no-progress"],
        check=True, capture_output=True,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    if not (store / "store.json").is_file():  # a command that did nothing must not pass for a fast one
        raise SystemExit(f"the prepare command wrote no store at {store}")
    return seconds


def time_shards(tokenizer_dir: Path, text_path: Path, root: Path, shards: int) -> tuple[float, float]:
    """(wall seconds of N ``--shard i/N`` processes run at once, seconds of the merge)."""
    env = {**os.environ, "RAYON_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "infoxlm", "prepare", "mono", "--lang", "en", "--input", str(text_path),
               "--tokenizer", str(tokenizer_dir), "--force", "--no-progress"]  # fmt: skip
    started = time.perf_counter()
    workers = [
        subprocess.Popen([*command, "--shard", f"{i}/{shards}", "--output", str(root / f"part{i}")], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
        for i in range(shards)
    ]
    for worker in workers:
        _, err = worker.communicate()
        if worker.returncode:
            raise SystemExit(f"a shard failed: {err.decode().strip()}")
    wall = time.perf_counter() - started
    shutil.rmtree(root / "merged", ignore_errors=True)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "infoxlm", "prepare", "merge", str(root / "merged"),
                    *(str(root / f"part{i}") for i in range(shards)), "--no-progress"], check=True, capture_output=True)  # fmt: skip
    return wall, time.perf_counter() - started


MEASURES = {
    "encode_batch": "tokenizers encode_batch",
    "encode_batch_fast": "tokenizers encode_batch_fast",
    "tokenizer": "infoxlm Tokenizer.encode_batch",
    "prepare": "infoxlm prepare mono",
}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=8.0, help="input size in MB (default: 8)")
    parser.add_argument("--repeat", type=int, default=5, help="interleaved runs of each measure, best kept (default: 5)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--no-cli", action="store_true", help="skip (c), the command in a fresh process")
    parser.add_argument("--with-fast", action="store_true", help="also time tokenizers' encode_batch_fast")
    parser.add_argument("--threads", type=int, default=None, help="tokenizer threads (RAYON_NUM_THREADS; default: all cores)")
    parser.add_argument("--shards", type=int, default=0, help="also time N --shard processes and their merge")
    args = parser.parse_args(argv)
    if args.threads is not None:  # read by the tokenizer's thread pool when it first starts, below
        os.environ["RAYON_NUM_THREADS"] = str(args.threads)

    tokenizer_dir = xlmr_tokenizer_dir()
    tokenizer_json = tokenizer_dir / "tokenizer.json"
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        text_path = tmp_path / "input.txt"
        size = write_pseudo_text(text_path, args.mb, tokenizer_json)
        lines = read_lines(text_path)
        batches = prepare_sized_batches(lines, DEFAULT_BLOCK_BYTES)
        runners = {
            "encode_batch": raw_tokenizers(tokenizer_json, batches, fast=False),
            "encode_batch_fast": raw_tokenizers(tokenizer_json, batches, fast=True),
            "tokenizer": infoxlm_tokenizer(tokenizer_dir, batches),
            "prepare": infoxlm_prepare(tokenizer_dir, text_path, tmp_path / "store"),
        }
        if not args.with_fast:
            del runners["encode_batch_fast"]
        raw_tokenizers(tokenizer_json, [lines[:2000]], fast=False)()  # warm-up: thread pool, caches
        runs: dict[str, list[tuple[float, float, int]]] = {name: [] for name in runners}
        # Interleaved, so that a slow spell of the machine hits every measure alike.
        for _ in range(args.repeat):
            for name, run in runners.items():
                runs[name].append(timed(run))
        cli_seconds = None if args.no_cli else time_cli(tokenizer_dir, text_path, tmp_path / "store-cli")
        shard_runs = [time_shards(tokenizer_dir, text_path, tmp_path, args.shards) for _ in range(args.repeat if args.shards else 0)]
        load_seconds = time_tokenizer_load(tokenizer_dir)

    figures: dict = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores, Python {platform.python_version()}",
        "input_bytes": size,
        "input_lines": len(lines),
        "block_bytes": DEFAULT_BLOCK_BYTES,
        "tokenizer_threads": args.threads or os.cpu_count(),
    }
    for name, measured in runs.items():
        best_wall = min(wall for wall, _, _ in measured)
        tokens = measured[0][2]
        figures[name] = {
            "median_wall_seconds": float(np.median([wall for wall, _, _ in measured])),
            "wall_seconds": [round(wall, 3) for wall, _, _ in measured],
            "cpu_seconds": [round(cpu, 3) for _, cpu, _ in measured],
            "tokens": tokens,
            "mb_per_s": size / best_wall / 1e6,
            "lines_per_s": len(lines) / best_wall,
            "tokens_per_s": tokens / best_wall,
        }
    if shard_runs:
        best = min(wall for wall, _ in shard_runs)
        figures["shards"] = {
            "processes": args.shards,
            "wall_seconds": [round(wall, 3) for wall, _ in shard_runs],
            "merge_seconds": [round(merge, 3) for _, merge in shard_runs],
            "mb_per_s": size / best / 1e6,
            "lines_per_s": len(lines) / best,
        }
        figures["ratio_shards_vs_encode_batch"] = figures["shards"]["mb_per_s"] / figures["encode_batch"]["mb_per_s"]
        if cli_seconds is not None:  # both include interpreter start-up, imports and the tokenizer's load
            figures["speedup_shards_vs_one_command"] = cli_seconds / best
    figures["ratio_vs_encode_batch"] = figures["prepare"]["mb_per_s"] / figures["encode_batch"]["mb_per_s"]
    if "encode_batch_fast" in figures:
        figures["ratio_vs_encode_batch_fast"] = figures["prepare"]["mb_per_s"] / figures["encode_batch_fast"]["mb_per_s"]
    figures["ratio_vs_infoxlm_tokenizer"] = figures["prepare"]["mb_per_s"] / figures["tokenizer"]["mb_per_s"]
    figures["median_ratio_vs_encode_batch"] = (
        figures["encode_batch"]["median_wall_seconds"] / figures["prepare"]["median_wall_seconds"]
    )
    figures["cli_seconds"] = cli_seconds
    figures["tokenizer_load_seconds"] = load_seconds
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(f"input: {size / 1e6:.1f} MB, {len(lines):,} lines; {figures['machine']}")
        for name, label in MEASURES.items():
            if name not in figures:
                continue
            entry = figures[name]
            print(
                f"{label:<30} {entry['mb_per_s']:5.2f} MB/s {entry['lines_per_s'] / 1e3:6.1f} k lines/s "
            f"{entry['tokens_per_s'] / 1e3:7.1f} k tokens/s  "
                f"wall {', '.join(f'{s:.2f}' for s in entry['wall_seconds'])} s; "
                f"CPU {', '.join(f'{s:.2f}' for s in entry['cpu_seconds'])} s"
            )
        if "shards" in figures:
            entry = figures["shards"]
            print(
                f"{'prepare, ' + str(entry['processes']) + ' --shard processes':<30} {entry['mb_per_s']:5.2f} MB/s "
                f"{entry['lines_per_s'] / 1e3:6.1f} k lines/s  wall {', '.join(f'{s:.2f}' for s in entry['wall_seconds'])} s; "
                f"merge {', '.join(f'{s:.2f}' for s in entry['merge_seconds'])} s; "
                f"/ encode_batch {figures['ratio_shards_vs_encode_batch']:.1%}"
            )
            if "speedup_shards_vs_one_command" in figures:
                print(f"{entry['processes']} shard processes against one command (c): "
                      f"{figures['speedup_shards_vs_one_command']:.2f}x as fast")
        print(
            f"prepare / encode_batch: {figures['ratio_vs_encode_batch']:.1%} (best runs), "
            f"{figures['median_ratio_vs_encode_batch']:.1%} (median runs)"
        )
        if "ratio_vs_encode_batch_fast" in figures:
            print(f"prepare / encode_batch_fast (best runs): {figures['ratio_vs_encode_batch_fast']:.1%}")
        print(f"prepare / infoxlm Tokenizer.encode_batch (best runs): {figures['ratio_vs_infoxlm_tokenizer']:.1%}")
        print(f"loading the XLM-R tokenizer (once per command, not in the figures above): {load_seconds:.2f} s")
        if cli_seconds is not None:
            print(f"infoxlm prepare mono as a command (fresh process, start-up included): {cli_seconds:.2f} s")
    return figures


if __name__ == "__main__":
    main()
