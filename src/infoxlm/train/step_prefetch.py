"""The next steps' data, built while this step runs (``run.prefetch_data``).

A step's data is a pure function of (seed, step, rank, world size) (data/pipeline.py), so
building step s + 1 early changes nothing but when the host does the work: a background
thread (data/prefetch.py) builds the coming steps (NumPy, which lets go of the GIL for most
of it) while the main thread launches step s and waits for the device. On a GPU the batches
are also pinned there, so that the step's copies to the device never wait for the device.

    >>> from infoxlm.train.distributed import World
    >>> class Pipeline:  # any object with DataPipeline's step()
    ...     def step(self, step, rank, world_size):
    ...         return f"data of step {step}"
    >>> with StepPrefetcher(Pipeline(), World(), last_step=3) as data:
    ...     [data.step(s) for s in range(3)]
    ['data of step 0', 'data of step 1', 'data of step 2']
"""

from __future__ import annotations

from collections.abc import Iterator

from ..data.prefetch import prefetch
from .distributed import World

__all__ = ["StepPrefetcher"]


class StepPrefetcher:
    """``step(s)``: the pipeline's data for step s on this rank. Enabled, a background thread
    builds the steps after it, in order, up to ``last_step`` (exclusive), one or two ahead;
    asked for another step than the next (a resume, a jump), it starts over from there.
    Disabled, each call builds its step in the caller's thread. Close it (or use it as a
    context manager) to stop the thread."""

    def __init__(self, pipeline, world: World, *, last_step: int, enabled: bool = True):
        self.pipeline, self.world, self.last_step, self.enabled = pipeline, world, last_step, enabled
        self.pin = world.device.type == "cuda"
        self._stream: Iterator | None = None
        self._next_step: int | None = None  # the step the stream yields next

    def step(self, step: int):
        if not self.enabled:
            return self._build(step)
        if step != self._next_step:
            self.close()
            # depth 1: one step waits in the queue while the thread builds the one after it.
            self._stream = prefetch((self._build(s) for s in range(step, self.last_step)), depth=1, name="train-data")
        self._next_step = step + 1
        return next(self._stream)

    def _build(self, step: int):
        data = self.pipeline.step(step, self.world.rank, self.world.size)
        return data.pin_memory() if self.pin else data

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()  # stops the thread after the step it is building
        self._stream, self._next_step = None, None

    def __enter__(self) -> "StepPrefetcher":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
