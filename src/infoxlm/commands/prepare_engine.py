"""``infoxlm prepare mono|parallel … --executor local|slurm|ray --tasks N``: the flags, and the
handler that hands the command to :mod:`~infoxlm.corpus.engine_run`.

Building the parser imports nothing of datatrove (nor fsspec, nor ray): the handler imports
the engine when it runs, and says which extra to install when it is missing.

Examples::

    infoxlm prepare mono --lang de --input de.txt.zst --tokenizer tok/ --output store/ --executor local --tasks 3
    infoxlm prepare mono --lang de --input 's3://corpora/de/*.txt.zst' --tokenizer tok/ --output store/ \\
        --executor slurm --tasks 64 --partition cpu --time 4:00:00 --cpus-per-task 2
    infoxlm prepare parallel --pair en-de --tsv en-de.tsv --tokenizer tok/ --output store/ --executor ray --tasks 8
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from infoxlm.cli_args import positive_int
from infoxlm.errors import DataError

__all__ = ["add_engine_options", "run_on_engine"]

_EXECUTORS = ("local", "slurm", "ray")  # engine_run.EXECUTORS, spelled out: the parser imports no datatrove


def add_engine_options(parser: argparse.ArgumentParser) -> None:
    """The ``--executor`` group of ``prepare mono`` and ``prepare parallel``."""
    group = parser.add_argument_group(
        "on a distributed engine (datatrove; pip install 'infoxlm[datatrove]')",
        # Broken by hand: the commands' RawDescriptionHelpFormatter keeps these lines as they are.
        "With --executor the input is prepared as --tasks parts (part I exactly `--shard I/N`),\n"
        "each by a datatrove task into a store of its own under --logging-dir, then merged into\n"
        "--output: the same corpus as one prepare, whatever N. A finished task leaves a completion\n"
        "marker; launching the same command again runs only the tasks without one, then merges (a\n"
        "changed input, option or --tasks is refused). Inputs may be fsspec URLs (s3://, gs://,\n"
        "hf://datasets/…, globs too), copied to --logging-dir by the tasks.",
    )
    group.add_argument(
        "--executor", choices=_EXECUTORS, help="run the tasks on this machine, as a SLURM array, or on Ray"
    )  # fmt: skip
    group.add_argument(
        "--tasks", type=positive_int, metavar="N", help="how many parts (tasks) the input is prepared in"
    )  # fmt: skip
    group.add_argument(
        "--workers", type=positive_int, metavar="W", help="tasks running at once (default: all of them)"
    )  # fmt: skip
    group.add_argument(
        "--logging-dir", type=Path, metavar="DIR",
        help="the job's work directory: task stores, completion markers, logs, copies of remote inputs "
        "(default: STORE-tasks/KIND-NAME beside --output; on SLURM and Ray a directory every node sees)",
    )  # fmt: skip
    group.add_argument(
        "--cpus-per-task", type=positive_int, metavar="C",
        help="cores per task, for the tokenizer's threads (default: local, the cores shared by the workers; "
        "SLURM and Ray: 1)",
    )  # fmt: skip
    group.add_argument("--partition", metavar="NAME", help="SLURM partition")
    group.add_argument("--time", metavar="HH:MM:SS", help="SLURM time limit of each task")
    group.add_argument(
        "--mem-per-cpu-gb", type=positive_int, default=2, metavar="G",
        help="SLURM and Ray: memory per core, in whole GB (default: 2)",
    )  # fmt: skip
    group.add_argument(
        "--sbatch-arg", action="append", default=[], metavar="KEY=VALUE",
        help="another #SBATCH line of the tasks, e.g. account=proj or qos=high (repeatable)",
    )  # fmt: skip
    group.add_argument(
        "--env-command", metavar="CMD", help="SLURM: run before each task, e.g. 'source .venv/bin/activate'"
    )  # fmt: skip
    group.add_argument("--ray-address", metavar="ADDR", help="Ray: the cluster to join (default: start a local one)")


def run_on_engine(kind: str, arguments: dict[str, Any], args: argparse.Namespace) -> int:
    """Build, run and merge the job (``kind`` is mono or parallel; ``arguments`` those of
    prepare_monolingual / prepare_parallel without output, force, progress and shard)."""
    if args.shard is not None:
        raise DataError(f"--shard {args.shard} and --executor: the executor runs every part; expected one of the two")
    if args.tasks is None:
        raise DataError(f"--executor {args.executor} needs --tasks N, the number of parts; expected --tasks")
    sbatch_args = {}
    for item in args.sbatch_arg:
        key, equals, value = item.partition("=")
        if not equals or not key:
            raise DataError(f"--sbatch-arg {item}: expected KEY=VALUE, e.g. account=proj")
        sbatch_args[key] = value
    try:
        from infoxlm.corpus.engine_job import EngineJob
        from infoxlm.corpus.engine_run import EngineOptions, launch
    except ImportError as err:
        raise DataError(
            f"--executor {args.executor} needs datatrove ({err}); pip install 'infoxlm[datatrove]'"
        ) from None  # fmt: skip
    options = EngineOptions(
        args.executor, args.tasks, workers=args.workers or -1, cpus_per_task=args.cpus_per_task,
        partition=args.partition, time=args.time, mem_per_cpu_gb=args.mem_per_cpu_gb, sbatch_args=sbatch_args,
        env_command=args.env_command, ray_address=args.ray_address,
    )  # fmt: skip
    job = EngineJob.create(kind, arguments, args.output, args.tasks, args.logging_dir)
    result = launch(job, options, force=args.force, show_progress=not args.no_progress)
    if result is not None:
        print(result.summary() + ("" if result.up_to_date else f" (from {args.tasks} tasks)"))
        for line in result.warnings():
            print(line, file=sys.stderr)
    return 0
