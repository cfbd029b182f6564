"""Throughput of ``infoxlm prepare mono --executor local --tasks N`` against the plain command.

Every measure is the whole command in a fresh process (interpreter, imports, the tokenizer's
load, and for the executor datatrove's start-up, the tasks and the merge), on the same input
file, into a fresh store each time; the measures are interleaved run by run and the best of
``--repeat`` counts (the machine's other load only ever slows a run down):

* ``plain`` -- ``infoxlm prepare mono`` with the tokenizer on every core;
* ``plain/1`` -- the same with one tokenizer thread (RAYON_NUM_THREADS=1): one core's worth;
* ``local N`` -- ``--executor local --tasks N`` (each task's tokenizer gets cores/N threads);
* ``local 1/1`` -- ``--executor local --tasks 1 --cpus-per-task 1``: one core's worth, the
  per-core figure set against ``plain/1``.

"Linear in tasks" is ``local N`` against ``local 1/1`` (N tasks of one core each on N cores).
At the end the stores' ``inspect --json`` checksums are compared: every store holds the same
corpus, or the script stops.

Input: ``--mb`` MB of the multilingual pseudo-text of prepare_throughput.py (XLM-R's Unigram
pieces), tokenized with XLM-R's real 250,002-piece tokenizer.json.

    python benchmarks/prepare_engine.py --mb 8 --repeat 3          # BENCHMARKS.md
    python benchmarks/prepare_engine.py --mb 8 --repeat 3 --json
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

from prepare_throughput import write_pseudo_text
from xlmr_assets import xlmr_tokenizer_dir


def command(text: Path, tokenizer: Path, store: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "infoxlm", "prepare", "mono", "--lang", "en", "--input", str(text), "--tokenizer",
            str(tokenizer), "--output", str(store), "--no-progress", *extra]  # fmt: skip


def measures(tasks: list[int]) -> dict[str, tuple[list[str], dict[str, str]]]:
    """name -> (extra arguments, extra environment)."""
    found = {"plain": ([], {}), "plain/1": ([], {"RAYON_NUM_THREADS": "1"}),
             "local 1/1": (["--executor", "local", "--tasks", "1", "--cpus-per-task", "1"], {})}  # fmt: skip
    for n in tasks:
        found[f"local {n}"] = (["--executor", "local", "--tasks", str(n)], {})
    return found


def run_once(argv: list[str], env: dict[str, str], store: Path) -> float:
    shutil.rmtree(store, ignore_errors=True)
    shutil.rmtree(f"{store}-tasks", ignore_errors=True)
    started = time.perf_counter()
    result = subprocess.run(argv, env={**os.environ, **env}, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if result.returncode or not (store / "mono" / "en" / "meta.json").is_file():
        raise SystemExit(f"{' '.join(argv)} failed: {result.stderr.strip()[-2000:]}")
    return seconds


def checksum(store: Path) -> str:
    out = subprocess.run([sys.executable, "-m", "infoxlm", "prepare", "inspect", str(store), "--json"],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    corpus = json.loads(out)["mono"]["en"]
    return f"{corpus['checksum']} {corpus['lines']} {corpus['documents']}"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=8.0, help="input size in MB (default: 8)")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved runs of each measure, best kept (default: 3)")
    parser.add_argument("--tasks", default="1,2", help="task counts of `--executor local` (default: 1,2)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    tokenizer = xlmr_tokenizer_dir()
    todo = measures([int(n) for n in args.tasks.split(",")])
    with tempfile.TemporaryDirectory(prefix="prepare-engine-") as tmp:
        root = Path(tmp)
        size = write_pseudo_text(root / "en.txt", args.mb, tokenizer / "tokenizer.json")
        walls: dict[str, list[float]] = {name: [] for name in todo}
        stores = {name: root / f"store-{k}" for k, name in enumerate(todo)}
        for _ in range(args.repeat):
            for name, (extra, env) in todo.items():
                walls[name].append(run_once(command(root / "en.txt", tokenizer, stores[name], *extra), env, stores[name]))
        sums = {name: checksum(store) for name, store in stores.items()}
        if len(set(sums.values())) != 1:
            raise SystemExit(f"the stores differ: {sums}")
    best = {name: min(w) for name, w in walls.items()}
    report = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "input_bytes": size,
        "checksum": next(iter(sums.values())),
        "walls": walls,
        "mb_per_s": {name: round(size / 1e6 / seconds, 3) for name, seconds in best.items()},
        "per_core": round(best["plain/1"] / best["local 1/1"], 3),
        "all_cores": round(best["plain"] / best["local 1"], 3) if "local 1" in best else None,
        "speedup": {name: round(best["local 1/1"] / seconds, 2) for name, seconds in best.items() if name.startswith("local ")},
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{size / 1e6:.1f} MB, best of {args.repeat}; every store: {report['checksum']}")
        for name, seconds in best.items():
            runs = ", ".join(f"{w:.2f}" for w in walls[name])
            print(f"  {name:10s} {size / 1e6 / seconds:6.2f} MB/s   ({runs} s)")
        print(f"per core (local 1/1 against plain/1): {report['per_core']:.1%}; all cores (local 1 against plain): "
              f"{report['all_cores']:.1%}; against local 1/1: {report['speedup']}")  # fmt: skip
    return report


if __name__ == "__main__":
    main()
