"""CPU cost of one step of training data: ``DataPipeline.step`` on a synthetic store.

    .venv/bin/python benchmarks/data_pipeline.py [--global-batch 2048] [--world-size 1]

Writes a throw-away store (3 languages, 61M monolingual tokens; 3 parallel corpora, 1.6M
pairs with length-correlated sides, XLM-R's 250,002-piece vocabulary) to a temporary
directory, then times ``step`` for the default ``PipelineConfig`` (MMLM, TLM and XLCO, each
with the given global batch) and prints the best and median of the timed steps together
with the padding each objective needs.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from infoxlm.data.pipeline import DataPipeline, PipelineConfig
from infoxlm.corpus.store_writer import CorpusWriter, write_json_atomic
from infoxlm.data.store import OFFSET_DTYPE, STORE_FORMAT, STORE_VERSION, TOKEN_DTYPE, TokenStore

VOCAB = 250_002


def offsets(lengths: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def write_synthetic_store(root: Path) -> None:
    rng = np.random.default_rng(0)
    identity = {"fingerprint": "synthetic", "vocab_size": VOCAB}
    write_json_atomic(root / "store.json", {"format": STORE_FORMAT, "version": STORE_VERSION, "tokenizer": identity})
    for language, tokens in (("de", 20_000_000), ("en", 40_000_000), ("sw", 1_000_000)):
        lines = rng.integers(5, 50, tokens // 27)  # ~27 tokens a line
        docs = offsets(rng.integers(1, 20, len(lines) // 10))  # ~10 lines a document
        docs = np.append(docs[docs < len(lines)], len(lines))
        with CorpusWriter(root, "mono", language) as writer:
            writer.append("tokens.u32", rng.integers(4, VOCAB - 1, int(lines.sum())), TOKEN_DTYPE)
            writer.append("lines.i64", offsets(lines), OFFSET_DTYPE)
            writer.append("docs.i64", docs, OFFSET_DTYPE)
            writer.commit({"language": language})
    for pair, count in (("en-de", 1_000_000), ("en-sw", 100_000), ("en-zh", 500_000)):
        base = rng.integers(3, 60, count)
        with CorpusWriter(root, "parallel", pair) as writer:
            for side in ("src", "tgt"):
                lengths = np.maximum(1, (base * rng.uniform(0.8, 1.25, count)).astype(np.int64))
                writer.append(f"{side}.tokens.u32", rng.integers(4, VOCAB - 1, int(lengths.sum())), TOKEN_DTYPE)
                writer.append(f"{side}.lines.i64", offsets(lengths), OFFSET_DTYPE)
            writer.commit({"pair": pair})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--global-batch", type=int, default=2048, help="examples per objective per step")
    parser.add_argument("--world-size", type=int, default=1, help="time rank 0's share of this many ranks")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        write_synthetic_store(Path(tmp))
        g = args.global_batch
        pipeline = DataPipeline(TokenStore.open(tmp), PipelineConfig(mmlm_batch_size=g, tlm_batch_size=g, xlco_batch_size=g))
        for step in range(3):  # warm the page cache
            pipeline.step(step, 0, args.world_size)
        times = []
        for step in range(3, 3 + args.steps):
            started = time.perf_counter()
            data = pipeline.step(step, 0, args.world_size)
            times.append(time.perf_counter() - started)
        print(data.summary())
        print(f"global batch {g} x 3 objectives, rank 0 of {args.world_size}: "
              f"best {1e3 * min(times):.1f} ms, median {1e3 * statistics.median(times):.1f} ms per step")


if __name__ == "__main__":
    main()
