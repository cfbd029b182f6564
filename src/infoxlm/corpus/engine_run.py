"""Run an ``infoxlm prepare … --executor`` job on datatrove's local, SLURM or Ray executor.

:func:`launch` takes the job (:class:`~infoxlm.corpus.engine_job.EngineJob`) through its
stages, each a datatrove executor over the same work directory:

1. ``stage`` -- copies of the inputs named by URLs (only if there are any);
2. ``tasks`` -- N tasks, task I preparing part I of N into its own store;
3. the merge -- in the launching process (local, Ray) or as a one-task SLURM job that
   starts when every array task succeeded (``afterok``).

datatrove skips a task whose completion marker exists, so a relaunch of the same command runs
only what is missing, and says which. Local and Ray launches wait for their tasks: a task that
fails is reported with its rank and the last line of its log, and the merge does not run. A
local task killed outright (SIGKILL, the OOM killer) is found by its free lock in ``running/``
(:class:`_Watchdog`): the launch waits for the other tasks, then stops with that task named,
instead of waiting forever for its result. A SLURM launch submits the jobs and returns.

Only one launch of a job runs at a time: the launcher holds ``WORK/launch.lock`` (a second
launch is refused with who holds it).

Example::

    >>> arguments = {"language": "de", "inputs": ["de.txt"], "tokenizer": "tok"}
    >>> job = EngineJob.create("mono", arguments, "store", 3)   # doctest: +SKIP
    >>> print(launch(job, EngineOptions("local", tasks=3)).summary())   # doctest: +SKIP
    de: 1,745 lines in 400 documents, 11,470 tokens, <unk> 0.00 % -> /data/store/mono/de
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

import multiprocess
from datatrove.executor import LocalPipelineExecutor, SlurmPipelineExecutor
from datatrove.executor.base import PipelineExecutor
from datatrove.utils.stats import PipelineStats

from infoxlm.corpus.engine_job import EngineJob, merge_tasks
from infoxlm.corpus.engine_steps import MergeTasks, PrepareTask, StageInputs
from infoxlm.corpus.prepare_job import PrepareResult
from infoxlm.errors import DataError
from infoxlm.file_lock import LockHeld, exclusive_lock, lock_if_free

__all__ = ["EXECUTORS", "EngineOptions", "build_executor", "launch"]

EXECUTORS = ("local", "slurm", "ray")


@dataclass(frozen=True)
class EngineOptions:
    """How to run a job's tasks: the executor and what it takes (``--executor`` and its flags)."""

    executor: str  # one of EXECUTORS
    tasks: int
    workers: int = -1  # tasks at once; -1: all of them
    cpus_per_task: int | None = None  # None: local, the machine's cores shared by the workers; else 1
    partition: str | None = None  # SLURM
    time: str | None = None  # SLURM time limit per array task, e.g. 12:00:00
    mem_per_cpu_gb: int = 2  # SLURM and Ray (sbatch takes whole units: --mem-per-cpu=2G)
    sbatch_args: dict[str, str] = field(default_factory=dict)  # SLURM: more #SBATCH lines (account, qos, …)
    env_command: str | None = None  # SLURM: run before each task, e.g. `source .venv/bin/activate`
    ray_address: str | None = None  # Ray: a cluster's address; None starts a local one
    job_name: str = "infoxlm-prepare"

    def __post_init__(self) -> None:
        if self.executor not in EXECUTORS:
            raise DataError(f"--executor {self.executor}: unknown; expected one of {', '.join(EXECUTORS)}")
        if self.executor == "slurm" and (self.partition is None or self.time is None):
            raise DataError("--executor slurm needs --partition NAME and --time HH:MM:SS; expected both")

    def threads(self) -> int:
        """Tokenizer threads per task."""
        if self.cpus_per_task is not None:
            return self.cpus_per_task
        if self.executor != "local":
            return 1
        at_once = min(self.tasks, self.workers) if self.workers > 0 else self.tasks
        return max(1, (os.cpu_count() or 1) // at_once)


def build_executor(
    options: EngineOptions, pipeline: list, logging_dir: str, tasks: int, depends: PipelineExecutor | None = None
) -> PipelineExecutor:
    """The datatrove executor of one stage, built from the user's options."""
    if options.executor == "local":
        return _LocalExecutor(pipeline, tasks=tasks, workers=options.workers, logging_dir=logging_dir, depends=depends)
    if options.executor == "slurm":
        return SlurmPipelineExecutor(
            pipeline, tasks=tasks, time=options.time, partition=options.partition, cpus_per_task=options.threads(),
            mem_per_cpu_gb=options.mem_per_cpu_gb, workers=options.workers, job_name=options.job_name,
            env_command=options.env_command, sbatch_args=dict(options.sbatch_args), logging_dir=logging_dir,
            depends=depends, qos=None,
        )  # fmt: skip
    if options.executor == "ray":
        from datatrove.executor.ray import RayPipelineExecutor  # its module imports no ray: that is checked in run

        return RayPipelineExecutor(
            pipeline, tasks=tasks, workers=options.workers, logging_dir=logging_dir, cpus_per_task=options.threads(),
            mem_per_cpu_gb=options.mem_per_cpu_gb, depends=depends,
        )  # fmt: skip
    raise DataError(f"--executor {options.executor}: unknown; expected one of {', '.join(EXECUTORS)}")


def launch(
    job: EngineJob, options: EngineOptions, *, force: bool = False, show_progress: bool = True
) -> PrepareResult | None:
    """Run (or, on SLURM, submit) the job; returns the merged corpus, or None once submitted.

    Raises:
        DataError: another launch of the job is running, the work directory holds another
            job, a task failed or died (its rank and last log line), bad arguments.
    """
    lock = job.root / "launch.lock"
    job.root.mkdir(parents=True, exist_ok=True)
    try:
        with exclusive_lock(lock, wait=False):
            job.record_or_check(force)
            done = job.up_to_date()
            if done is not None and not force:
                return done
            if options.executor == "slurm":
                _submit(job, options)
                return None
            _connect_ray(options)
            for stage in _stages(job, options):
                _run_stage(job, options, stage)
            return merge_tasks(job, show_progress=show_progress)
    except LockHeld as held:
        raise DataError(
            f"{lock}: held by {held.holder.describe()}, another launch of this job; expected one launch at a time "
            "(wait for it to end, or stop it)"
        ) from None


def _stages(job: EngineJob, options: EngineOptions) -> list[tuple[str, list, int]]:
    """(logging directory, pipeline, tasks) of each stage before the merge."""
    stages = []
    objects = job.remote_objects()
    if objects:
        stages.append((str(job.stage_dir()), [StageInputs(job.work)], min(options.tasks, len(objects))))
    stages.append((str(job.tasks_dir()), [PrepareTask(job.work, options.threads())], job.tasks))
    return stages


def _run_stage(job: EngineJob, options: EngineOptions, stage: tuple[str, list, int]) -> None:
    """Run one stage to its end; every task must leave its completion marker."""
    logging_dir, pipeline, tasks = stage
    done = [rank for rank in range(tasks) if _completed(logging_dir, rank)]
    what = os.path.basename(logging_dir)
    if len(done) < tasks:
        todo = [rank for rank in range(tasks) if rank not in done]
        print(
            f"{job.label}: {what}: running task{'s' if len(todo) > 1 else ''} {_listed(todo)} of {tasks} on "
            f"{options.executor}" + (f" ({len(done)} done before: {_listed(done)})" if done else "")
            + f"; logs in {logging_dir}/logs",
            file=sys.stderr,
        )  # fmt: skip
    executor = build_executor(options, pipeline, logging_dir, tasks)
    if options.executor == "local":
        # The executor's manager process is started in the default way, a fork, which would
        # inherit (and keep, should this process be killed) the lock of the launch.
        multiprocess.set_start_method("forkserver", force=True)
    watch = options.executor == "local" and options.workers != 1 and tasks > 1  # else no pool to wait on
    watchdog = _Watchdog(job, what, tasks) if watch else None
    error = None
    try:
        with watchdog or _Nothing():
            executor.run()
    except KeyboardInterrupt:
        if watchdog is None or not watchdog.dead:
            raise
    except Exception as raised:  # noqa: BLE001 - a task's error: reported below with its rank and log line
        error = raised
    failed = [rank for rank in range(tasks) if not _completed(logging_dir, rank)]
    logs = [os.path.join(logging_dir, "logs", f"task_{rank:05d}.log") for rank in failed]
    if error is not None and not any(os.path.isfile(log) for log in logs):
        raise error  # the executor itself failed before any of these tasks ran: its own message says more
    if failed:  # a task that raised first: the others may have been stopped because of it
        failed.sort(key=lambda rank: "ERROR" not in _read(os.path.join(logging_dir, "logs", f"task_{rank:05d}.log")))
        raise DataError(_failure(job, what, logging_dir, failed, tasks, watchdog.dead if watchdog else []))


def _completed(logging_dir: str, rank: int) -> bool:
    """Whether task ``rank`` of the stage logged in ``logging_dir`` left its completion marker."""
    return os.path.isfile(os.path.join(logging_dir, "completions", f"{rank:05d}"))


def _failure(job: EngineJob, what: str, logging_dir: str, failed: list[int], tasks: int, dead: list[int]) -> str:
    """One line: which tasks failed, the first one's last log line, and what to do."""
    rank = failed[0]
    log = os.path.join(logging_dir, "logs", f"task_{rank:05d}.log")
    killed = rank in dead and "ERROR" not in _read(log)
    last = "" if killed else _last_line(log)  # a killed task's log just stops
    how = "died (its process was killed)" if killed else "failed"
    others = sorted(failed[1:])
    more = f" (and task{'s' if len(others) > 1 else ''} {_listed(others)}, not done)" if others else ""
    return (
        f"{job.label}: {what}: task {rank} of {tasks} {how}{more}" + (f": {last}" if last else "")
        + f" [{log}]; the merge did not run; expected every task done: fix the cause and launch the same "
        "command again (only the tasks without a completion marker run)"
    )  # fmt: skip


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            return file.read()
    except OSError:
        return ""


def _last_line(path: str) -> str:
    """The last non-empty line of a task's log (the error it raised), its timestamp prefix cut."""
    lines = [line.strip() for line in _read(path).splitlines() if line.strip()]
    return lines[-1].rpartition(" - ")[2] if lines and " | " in lines[-1] else (lines[-1] if lines else "")


def _listed(ranks: list[int]) -> str:
    shown = ", ".join(map(str, ranks[:10]))
    return shown + (f" and {len(ranks) - 10} more" if len(ranks) > 10 else "")


def _submit(job: EngineJob, options: EngineOptions) -> None:
    """Submit the stages as SLURM array jobs, each after the previous one, and the merge job."""
    options = replace(options, job_name=f"infoxlm-{job.kind}-{job.name}")  # what squeue shows
    executor = None
    for logging_dir, pipeline, tasks in _stages(job, options):
        executor = build_executor(options, pipeline, logging_dir, tasks, depends=executor)
    merge_options = replace(options, cpus_per_task=1, workers=-1)
    merge = build_executor(merge_options, [MergeTasks(job.work)], str(job.merge_dir()), 1, depends=executor)
    merge.run()  # launches its dependencies first, then itself with --dependency=afterok:<their job>
    print(
        f"{job.label}: submitted {job.tasks} tasks and the merge (SLURM job {merge.job_id}) into {job.output}; "
        f"logs in {job.root}; launch the same command again once they ended to rerun any that failed",
        file=sys.stderr,
    )


def _connect_ray(options: EngineOptions) -> None:
    """Join the Ray cluster at ``--ray-address`` or start a local one (Ray launches only)."""
    if options.executor != "ray":
        return
    try:
        import ray
    except ImportError:
        raise DataError("--executor ray needs the ray package; pip install 'infoxlm[ray]'") from None
    if not ray.is_initialized():
        local = {"include_dashboard": False} if options.ray_address is None else {}  # a cluster of this command only
        ray.init(address=options.ray_address, log_to_driver=False, **local, **_ray_runtime())


def _ray_runtime() -> dict[str, Any]:
    """Workers see this process's PYTHONPATH (an infoxlm run from a source tree)."""
    path = os.environ.get("PYTHONPATH")
    return {"runtime_env": {"env_vars": {"PYTHONPATH": path}}} if path else {}


class _LocalExecutor(LocalPipelineExecutor):
    """datatrove's local executor, except that a task's error ends that task alone. (datatrove's
    pool stops at the first error and terminates the tasks still running, which then run again
    on the next launch; here they finish, and the launch reports every task without a marker.)"""

    def _launch_run_for_rank(
        self, rank: int, ranks_q: Any, completed: Any = None, completed_lock: Any = None
    ) -> PipelineStats:
        try:
            return super()._launch_run_for_rank(rank, ranks_q, completed, completed_lock)
        except Exception:  # noqa: BLE001 - in the task's log already (datatrove logs it); no marker written
            return PipelineStats()


class _Nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


class _Watchdog:
    """Finds local tasks that died without a completion marker: started (their lock file
    exists), their lock free, no marker, for longer than the marker takes to be written. Once
    every task is done or dead it interrupts the waiting launcher (SIGINT to this process), whose
    pool would otherwise wait forever for a dead task's result."""

    GRACE_S = 3.0  # a finished task frees its lock just before datatrove writes its marker
    POLL_S = 0.5

    def __init__(self, job: EngineJob, stage: str, tasks: int):
        self.job, self.stage, self.tasks = job, stage, tasks
        self.dead: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="infoxlm-task-watchdog", daemon=True)

    def __enter__(self) -> _Watchdog:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        free_since: dict[int, float] = {}
        while not self._stop.wait(self.POLL_S):
            now, settled = time.monotonic(), 0
            for rank in range(self.tasks):
                if _completed(str(self.job.root / self.stage), rank):
                    settled += 1
                    continue
                if self._free(rank):
                    free_since.setdefault(rank, now)
                    if now - free_since[rank] > self.GRACE_S:
                        settled += 1
                        if rank not in self.dead:
                            self.dead.append(rank)
                else:
                    free_since.pop(rank, None)
            if self.dead and settled == self.tasks:
                os.kill(os.getpid(), signal.SIGINT)
                return

    def _free(self, rank: int) -> bool:
        """Started, and no process holds its lock."""
        path = self.job.running_lock(rank, self.stage)
        if not path.is_file():
            return False
        with lock_if_free(path) as holder:
            return holder is None
