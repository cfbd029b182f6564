"""The datatrove pipeline steps of ``infoxlm prepare … --executor`` (imported only on that path).

Each step holds the job's work directory alone (a string, so that the executor pickles it to
SLURM nodes and Ray workers as it is) and reads the job from its job.json
(:class:`~infoxlm.corpus.engine_job.EngineJob`) when it runs:

* :class:`StageInputs` -- task I of N copies every N-th object named by a URL;
* :class:`PrepareTask` -- task I of N prepares part I of N of the input into its own store;
  both hold their lock in ``running/`` meanwhile (so that the launcher tells a task that died
  from one still running);
* :class:`MergeTasks` -- one task joins the N stores into the output store.

datatrove writes each task's completion marker after the step returns, and only then: a task
that raised or was killed has none, and runs again on the next launch.
"""

from __future__ import annotations

import os

from datatrove.data import DocumentsPipeline
from datatrove.pipeline.base import PipelineStep
from datatrove.utils.logging import logger

from infoxlm.corpus.engine_job import EngineJob, merge_tasks, run_task, stage_share
from infoxlm.file_lock import exclusive_lock

__all__ = ["MergeTasks", "PrepareTask", "StageInputs"]


class StageInputs(PipelineStep):
    """Copy this task's share of the remote inputs into ``WORK/inputs``."""

    name = "copy remote inputs"
    type = "infoxlm"

    def __init__(self, work: str):
        super().__init__()
        self.work = work

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> None:
        job = EngineJob.load(self.work)
        with exclusive_lock(job.running_lock(rank, "stage")):
            copies = stage_share(job, rank, world_size)
        for path in copies:
            logger.info(f"copied to {path}")
            self.stat_update("objects")


class PrepareTask(PipelineStep):
    """``infoxlm prepare … --shard rank/world_size`` into ``WORK/stores/RANK``."""

    name = "prepare a part"
    type = "infoxlm"

    def __init__(self, work: str, threads: int):
        super().__init__()
        self.work = work
        self.threads = threads  # tokenizer threads: the task's share of the machine's cores

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> None:
        job = EngineJob.load(self.work)
        # Read by the tokenizers library when its thread pool starts (at the first batch);
        # without it each of N tasks on one machine would start a thread per core.
        os.environ["RAYON_NUM_THREADS"] = str(self.threads)
        with exclusive_lock(job.running_lock(rank)):
            result = run_task(job, rank, world_size)
        logger.info(result.summary())
        self.stat_update("tokens", value=result.meta["counts"]["tokens"], unit="task")


class MergeTasks(PipelineStep):
    """Join the task stores into the output store once every task is done."""

    name = "merge the parts"
    type = "infoxlm"

    def __init__(self, work: str):
        super().__init__()
        self.work = work

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> None:
        result = merge_tasks(EngineJob.load(self.work), show_progress=False)
        logger.info(result.summary())
