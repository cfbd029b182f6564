"""One ``infoxlm prepare … --executor`` job: its corpus, its tasks and their work directory.

A job prepares one corpus (``mono/LANG`` or ``parallel/SRC-TGT``) in ``tasks`` parts: task I
is exactly ``infoxlm prepare … --shard I/N`` (:mod:`~infoxlm.corpus.shards`) into a store of
its own, and :func:`merge_tasks` joins the N stores into the output store with
:mod:`~infoxlm.corpus.merge`, so the corpus is the one a single prepare of the whole input
writes, whatever N. This module knows nothing of the engine that runs the tasks
(:mod:`~infoxlm.corpus.engine_run` does). The work directory (``--logging-dir``) holds::

    job.json        what the job is: corpus, arguments, remote objects, task count, identity
    launch.lock     held by the launching process (a second launch is refused)
    inputs/         the copies of inputs named by fsspec URLs (remote_inputs)
    stage/ tasks/   datatrove's logging directories of the two stages: completions/ (an
                    empty marker per finished task), logs/task_NNNNN.log, stats/
    running/        a lock per task of each stage, held while it runs (a task whose lock is
                    free and that has no completion marker died)
    stores/NNNNN/   the task stores
    merge/          the merge job's logging directory (SLURM)
    merged.json     the identity and input fingerprint of the last merge into the store

The identity is a SHA-256 over the corpus, the options, the tokenizer, the inputs (path, size,
modification time of a file; URL, size and version of an object) and the task count: a
relaunch with the same identity continues where the last one stopped; another is refused.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from infoxlm.corpus.inputs import input_source
from infoxlm.corpus.languages import canonical_language, parse_language_pair
from infoxlm.corpus.merge import merge_stores
from infoxlm.corpus.prepare import monolingual_job, parallel_job, prepare_monolingual, prepare_parallel
from infoxlm.corpus.prepare_job import PREPARE_VERSION, PrepareResult
from infoxlm.corpus.remote_inputs import RemoteObject, is_url, list_objects, stage_object, staged_path
from infoxlm.corpus.store_writer import write_json_atomic
from infoxlm.data.store import MonoCorpus, ParallelCorpus, StoreError, read_store_json
from infoxlm.errors import DataError
from infoxlm.tokenizer import Tokenizer

__all__ = ["EngineJob", "merge_tasks", "run_task", "stage_share"]

_INPUT_KEYS = ("inputs", "src", "tgt", "tsv", "input", "tmx")  # the arguments that name inputs
_WORK_ENTRIES = ("job.json", "merged.json", "stage", "tasks", "running", "stores", "merge")


@dataclass(frozen=True)
class EngineJob:
    """What every task of one job needs, as job.json records it (all plain values)."""

    kind: str  # "mono" or "parallel"
    name: str  # "de" or "en-de"
    arguments: dict[str, Any]  # keywords of prepare_monolingual / prepare_parallel, inputs as given
    output: str  # the store the merge writes, absolute
    tasks: int
    work: str  # the work directory, absolute
    objects: dict[str, list[dict[str, Any]]]  # URL as given -> its objects (RemoteObject records)
    identity: str

    @classmethod
    def create(
        cls, kind: str, arguments: dict[str, Any], output: Path | str, tasks: int, work: Path | str | None = None
    ) -> EngineJob:
        """The job of these arguments, checked as a prepare checks them (local inputs; URLs
        are listed, and their objects checked by the tasks), its identity taken; nothing is
        written. ``work`` defaults to ``OUTPUT-tasks/KIND-NAME``."""
        if kind == "mono":
            name = canonical_language(arguments["language"])
        else:
            name = "-".join(parse_language_pair(arguments["pair"], arguments.get("allow_non_english", False)))
        arguments = _absolute(arguments)  # tasks may run elsewhere (another node, Ray's worker directory)
        tokenizer = Tokenizer.from_pretrained(arguments["tokenizer"])  # loaded once, here (XLM-R's: a second)
        _check(kind, {**arguments, "tokenizer": tokenizer})
        objects = {spec: [o.record() for o in list_objects(spec)] for spec in _specs(arguments) if is_url(spec)}
        record = {
            "prepare_version": PREPARE_VERSION,
            "kind": kind,
            "name": name,
            "tasks": tasks,
            # (the language or pair as the name spells it: `deu` and `de` are one corpus)
            "options": {k: v for k, v in arguments.items() if k not in (*_INPUT_KEYS, "tokenizer", "language", "pair")},
            "tokenizer": tokenizer.fingerprint,
            "inputs": [objects[spec] if is_url(spec) else _local_record(spec) for spec in _specs(arguments)],
        }
        work = Path(work) if work is not None else Path(f"{Path(output).absolute()}-tasks") / f"{kind}-{name}"
        store, work = Path(output).resolve(), work.resolve()
        if work == store or store in work.parents or work in store.parents:  # the task stores would nest in it
            raise DataError(f"--logging-dir {work}: inside --output {store} or holding it; expected a directory apart")
        identity = hashlib.sha256(json.dumps(record, sort_keys=True).encode("utf-8")).hexdigest()
        return cls(kind, name, arguments, str(store), tasks, str(work), objects, identity)

    @classmethod
    def load(cls, work: Path | str) -> EngineJob:
        """The job recorded in ``work/job.json``."""
        record = json.loads((Path(work) / "job.json").read_text(encoding="utf-8"))
        return cls(**{key: record[key] for key in cls.__dataclass_fields__})

    @property
    def root(self) -> Path:
        return Path(self.work)

    @property
    def label(self) -> str:
        """``mono/de``: how messages name the corpus."""
        return f"{self.kind}/{self.name}"

    def stage_dir(self) -> Path:
        return self.root / "stage"

    def tasks_dir(self) -> Path:
        return self.root / "tasks"

    def merge_dir(self) -> Path:
        return self.root / "merge"

    def store(self, rank: int) -> Path:
        return self.root / "stores" / f"{rank:05d}"

    def running_lock(self, rank: int, stage: str = "tasks") -> Path:
        """The lock task ``rank`` of ``stage`` (``stage`` or ``tasks``) holds while it runs."""
        return self.root / "running" / stage / f"{rank:05d}"

    def completed(self, rank: int) -> bool:
        """Whether task ``rank`` left datatrove's completion marker."""
        return (self.tasks_dir() / "completions" / f"{rank:05d}").is_file()

    def log_file(self, rank: int) -> Path:
        return self.tasks_dir() / "logs" / f"task_{rank:05d}.log"

    def remote_objects(self) -> list[RemoteObject]:
        return [RemoteObject(**record) for records in self.objects.values() for record in records]

    def record_or_check(self, force: bool) -> None:
        """Write job.json, or check that the one there is this job's (``force``: start afresh).

        Raises:
            DataError: the work directory holds another job (a changed input, option,
                tokenizer or task count).
        """
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / "job.json"
        if path.is_file() and not force:
            theirs = json.loads(path.read_text(encoding="utf-8"))
            if theirs.get("identity") != self.identity:
                raise DataError(
                    f"{path}: a job of other inputs, options, tokenizer or task count ({theirs.get('label', '?')}, "
                    f"{theirs.get('tasks')} tasks, identity {str(theirs.get('identity'))[:12]}…; this one "
                    f"{self.tasks} tasks, {self.identity[:12]}…); expected the same command, or --force to start "
                    "this job afresh there, or another --logging-dir"
                )
            return
        for entry in _WORK_ENTRIES:  # what another job (or an earlier try of this one) left
            target = self.root / entry
            shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
        write_json_atomic(path, {**asdict(self), "label": self.label})

    def local_arguments(self) -> dict[str, Any]:
        """The arguments with each URL replaced by the path of its copy (a glob by its matches)."""
        directory = self.root / "inputs"
        local = dict(self.arguments)
        for key in _INPUT_KEYS:
            value = local.get(key)
            if isinstance(value, list):
                local[key] = [str(p) for spec in value for p in self._local_paths(spec, directory)]
            elif is_url(value):
                paths = self._local_paths(value, directory)
                if len(paths) != 1:
                    raise DataError(f"{value}: matches {len(paths)} objects; expected one file for --{key}")
                local[key] = str(paths[0])
        return local

    def _local_paths(self, spec: str, directory: Path) -> list[Path | str]:
        if not is_url(spec):
            return [spec]
        return [staged_path(RemoteObject(**record), directory) for record in self.objects[spec]]

    def up_to_date(self) -> PrepareResult | None:
        """The store's corpus, if the last merge of this job wrote it and it is intact."""
        try:
            merged = read_store_json(self.root / "merged.json")
            corpus_path = Path(self.output) / self.kind / self.name
            meta = read_store_json(corpus_path / "meta.json")
            if merged.get("identity") != self.identity:
                return None
            if meta.get("input_fingerprint") != merged.get("input_fingerprint"):  # replaced since, or damaged
                return None
            corpus = (MonoCorpus if self.kind == "mono" else ParallelCorpus).open(corpus_path)
            corpus.verify()
        except StoreError:
            return None
        return PrepareResult(self.kind, self.name, corpus_path, corpus.meta, up_to_date=True)


def run_task(job: EngineJob, rank: int, world_size: int) -> PrepareResult:
    """Task ``rank`` of the job: ``prepare … --shard rank/tasks`` into its own store."""
    if world_size != job.tasks:
        raise DataError(f"{job.root}: a job of {job.tasks} tasks run as {world_size}; expected {job.tasks}")
    prepare = prepare_monolingual if job.kind == "mono" else prepare_parallel
    return prepare(**job.local_arguments(), output=job.store(rank), shard=(rank, job.tasks), show_progress=False)


def stage_share(job: EngineJob, rank: int, world_size: int) -> list[Path]:
    """Task ``rank`` of the staging stage: copies of every ``world_size``-th remote object."""
    return [stage_object(obj, job.root / "inputs") for obj in job.remote_objects()[rank::world_size]]


def merge_tasks(job: EngineJob, *, show_progress: bool = True) -> PrepareResult:
    """Join the task stores into the output store (a corpus of another job there is replaced).

    Raises:
        DataError: a task without its completion marker (the merge never runs on part of
            the input), or what :func:`~infoxlm.corpus.merge.merge_stores` refuses.
    """
    missing = [rank for rank in range(job.tasks) if not job.completed(rank)]
    if missing:
        raise DataError(
            f"{job.tasks_dir()}: task{'s' if len(missing) > 1 else ''} {_ranks(missing)} of {job.tasks} not done "
            "(no completion marker); expected every task done before the merge: launch the same command again"
        )
    stores = [job.store(rank) for rank in range(job.tasks)]
    result = merge_stores(job.output, stores, show_progress=show_progress, replace=True)[0]
    merged = {"identity": job.identity, "input_fingerprint": result.meta["input_fingerprint"]}
    write_json_atomic(job.root / "merged.json", merged)
    return result


def _ranks(ranks: list[int]) -> str:
    """``0, 2, 5`` (the first ten, then how many more)."""
    shown = ", ".join(map(str, ranks[:10]))
    return shown + (f" and {len(ranks) - 10} more" if len(ranks) > 10 else "")


def _specs(arguments: dict[str, Any]) -> list[str]:
    """Every input the arguments name, in order."""
    specs: list[str] = []
    for key in _INPUT_KEYS:
        value = arguments.get(key)
        if value is not None:
            specs += [str(v) for v in value] if isinstance(value, list) else [str(value)]
    return specs


def _check(kind: str, arguments: dict[str, Any]) -> None:
    """The checks a prepare makes before it writes (language, inputs, whether they can be
    split), made once by the launcher rather than failing in every task; inputs named by URLs
    are checked by the tasks, once copied."""
    if any(is_url(spec) for spec in _specs(arguments)):
        return
    where = Path(tempfile.gettempdir()) / "unused"  # a job is built, never run: nothing is written
    if kind == "mono":
        monolingual_job(**arguments, output=where, shard=(0, 1))
    else:
        parallel_job(**arguments, output=where, shard=(0, 1))


def _absolute(arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments with local paths (inputs, tokenizer) made absolute; URLs and ``hf:`` kept."""

    def absolute(value: Any) -> Any:
        text = str(value)
        return text if is_url(text) or text.startswith("hf:") else str(Path(text).absolute())

    absolute_arguments = dict(arguments)
    for key in (*_INPUT_KEYS, "tokenizer"):
        value = arguments.get(key)
        if value is not None:
            absolute_arguments[key] = [absolute(v) for v in value] if isinstance(value, list) else absolute(value)
    return absolute_arguments


def _local_record(spec: str) -> dict[str, Any]:
    """Path, size and modification time of a local input (as a prepare fingerprints it)."""
    return input_source(spec, "--input", allow_tmx=True).fingerprint_record()
