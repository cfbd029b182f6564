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
With two sizes (``--mb 2,8``) the marginal throughput is reported too: the extra MB over the
extra seconds, which leaves out what every command pays once (start-up, the tokenizer's load,
datatrove's processes, the merge), and that fixed cost per measure. At the end of each size the
stores' ``inspect --json`` checksums are compared: every store holds the same corpus, or the
script stops.

Input: ``--mb`` MB of the multilingual pseudo-text of prepare_throughput.py (XLM-R's Unigram
pieces), tokenized with XLM-R's real 250,002-piece tokenizer.json.

    python benchmarks/prepare_engine.py --mb 2,8 --repeat 3        # BENCHMARKS.md
    python benchmarks/prepare_engine.py --mb 8 --repeat 3 --json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
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


def run_once(argv: list[str], env: dict[str, str], store: Path, cpu: list[float]) -> float:
    """The command's wall seconds; its CPU seconds (user + system, of the processes it waited
    for: with one task, all of it) are appended to ``cpu``."""
    shutil.rmtree(store, ignore_errors=True)
    shutil.rmtree(f"{store}-tasks", ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run(argv, env={**os.environ, **env}, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    if result.returncode or not (store / "mono" / "en" / "meta.json").is_file():
        raise SystemExit(f"{' '.join(argv)} failed: {result.stderr.strip()[-2000:]}")
    return seconds


def checksum(store: Path) -> str:
    out = subprocess.run([sys.executable, "-m", "infoxlm", "prepare", "inspect", str(store), "--json"],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    corpus = json.loads(out)["mono"]["en"]
    return f"{corpus['checksum']} {corpus['lines']} {corpus['documents']}"


def measure(sizes: list[float], todo: dict, repeat: int, tokenizer: Path) -> tuple[dict, dict, dict, str]:
    """(input bytes per size, walls and CPU seconds per size and measure, the common checksum
    of the largest size)."""
    walls: dict[float, dict[str, list[float]]] = {}
    cpus: dict[float, dict[str, list[float]]] = {}
    size_bytes: dict[float, int] = {}
    with tempfile.TemporaryDirectory(prefix="prepare-engine-") as tmp:
        root = Path(tmp)
        for mb in sizes:
            text = root / f"en-{mb}.txt"
            size_bytes[mb] = write_pseudo_text(text, mb, tokenizer / "tokenizer.json")
            walls[mb] = {name: [] for name in todo}
            cpus[mb] = {name: [] for name in todo}
            stores = {name: root / f"store-{k}" for k, name in enumerate(todo)}
            for _ in range(repeat):  # interleaved: a slow spell of the machine hits every measure
                for name, (extra, env) in todo.items():
                    argv = command(text, tokenizer, stores[name], *extra)
                    walls[mb][name].append(run_once(argv, env, stores[name], cpus[mb][name]))
            sums = {name: checksum(store) for name, store in stores.items()}
            if len(set(sums.values())) != 1:
                raise SystemExit(f"the stores of {mb} MB differ: {sums}")
    return size_bytes, walls, cpus, next(iter(sums.values()))


def summary(size_bytes: dict[float, int], walls: dict, repeat: int) -> dict:
    """MB/s of the best runs per size; with two sizes the marginal MB/s (what one more MB
    costs, start-up and merge of the command left out) and each measure's fixed seconds."""
    best = {mb: {name: min(w) for name, w in by_name.items()} for mb, by_name in walls.items()}
    report: dict = {"repeat": repeat, "input_bytes": size_bytes, "walls": walls,
                    "mb_per_s": {mb: {n: round(size_bytes[mb] / 1e6 / t, 3) for n, t in b.items()} for mb, b in best.items()}}  # fmt: skip
    largest = max(best)
    ratio = lambda table, a, b: round(table[a] / table[b], 3) if a in table and b in table else None  # noqa: E731
    report["per_core"] = ratio(report["mb_per_s"][largest], "local 1/1", "plain/1")
    report["all_cores"] = ratio(report["mb_per_s"][largest], "local 1", "plain")
    report["speedup"] = {n: ratio(report["mb_per_s"][largest], n, "local 1/1") for n in best[largest] if n.startswith("local ")}
    if len(best) >= 2:
        small = min(best)
        grown = (size_bytes[largest] - size_bytes[small]) / 1e6
        marginal = {n: grown / (best[largest][n] - best[small][n]) for n in best[largest]}
        report["marginal_mb_per_s"] = {n: round(v, 3) for n, v in marginal.items()}
        report["fixed_s"] = {n: round(best[small][n] - size_bytes[small] / 1e6 / marginal[n], 2) for n in marginal}
        report["marginal_per_core"] = ratio(marginal, "local 1/1", "plain/1")
        report["marginal_speedup"] = {n: ratio(marginal, n, "local 1/1") for n in marginal if n.startswith("local ")}
    return report


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", default="8", help="input sizes in MB, comma-separated (default: 8; two sizes give "
                        "the marginal throughput, start-up left out)")  # fmt: skip
    parser.add_argument("--repeat", type=int, default=3, help="interleaved runs of each measure, best kept (default: 3)")
    parser.add_argument("--tasks", default="1,2", help="task counts of `--executor local` (default: 1,2)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    todo = measures([int(n) for n in args.tasks.split(",")])
    sizes = sorted(float(mb) for mb in args.mb.split(","))
    load = os.getloadavg()[0]
    size_bytes, walls, cpus, common = measure(sizes, todo, args.repeat, xlmr_tokenizer_dir())
    report = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "load_average_before_after": [round(load, 2), round(os.getloadavg()[0], 2)],
        "checksum": common,
        **summary(size_bytes, walls, args.repeat),
        "cpu_s": cpus,
        # One core's work per byte: MB per CPU second of the least CPU a run took (one task).
        "mb_per_cpu_s": {mb: {n: round(size_bytes[mb] / 1e6 / min(c), 3) for n, c in by.items()} for mb, by in cpus.items()},
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return report
    for mb, by_name in report["mb_per_s"].items():
        print(f"{size_bytes[mb] / 1e6:.1f} MB, best of {args.repeat}:")
        for name, rate in by_name.items():
            print(f"  {name:10s} {rate:6.2f} MB/s   ({', '.join(f'{w:.2f}' for w in walls[mb][name])} s)")
    print(f"MB per CPU second (least CPU of the runs): {report['mb_per_cpu_s']}")
    print(f"every store of the largest input: {common}; load average {report['load_average_before_after']}")
    print(f"per core: {report['per_core']}; all cores: {report['all_cores']}; against local 1/1: {report['speedup']}")
    if "marginal_mb_per_s" in report:
        print(f"marginal MB/s: {report['marginal_mb_per_s']}; fixed seconds: {report['fixed_s']}")
        print(f"marginal per core: {report['marginal_per_core']}; marginal against local 1/1: {report['marginal_speedup']}")
    return report


if __name__ == "__main__":
    main()
