"""What checkpoint digests cost: the digest candidates' speed, a save with and without
``digests.json``, and checking a checkpoint before a resume or an export.

    .venv/bin/python benchmarks/checkpoint_digest.py [--gib 1.0] [--repeats 3]

Writes a one-tensor checkpoint of the given size to a temporary directory (twice: DCP's plain
writer, then infoxlm's, which also hashes what it wrote) and times ``verify_checkpoint`` on it
with the files in the page cache, as they are right after a save. Prints the best of
``--repeats`` runs, per GB (10^9 bytes). One process, one CPU core hashing.
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
import time
import zlib
from pathlib import Path

import torch
import torch.distributed.checkpoint as dcp

from infoxlm.train.checkpoint import save_checkpoint, verify_checkpoint


def best_of(repeats: int, fn) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def digest_speeds(data: memoryview, repeats: int) -> dict[str, float]:
    """GB/s of each candidate over ``data`` in 1 MiB blocks, as the checkpoint code reads it."""
    block = 1 << 20

    def hashlib_run(name: str):
        def run():
            h = hashlib.new(name)
            for i in range(0, len(data), block):
                h.update(data[i : i + block])

        return run

    def crc32():
        c = 0
        for i in range(0, len(data), block):
            c = zlib.crc32(data[i : i + block], c)

    runs = {"sha256": hashlib_run("sha256"), "blake2b": hashlib_run("blake2b"), "crc32": crc32}
    return {name: len(data) / best_of(repeats, run) / 1e9 for name, run in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=float, default=1.0, help="checkpoint size in GiB (default 1)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    weights = torch.randn(int(args.gib * (1 << 30)) // 4)
    gb = weights.numel() * 4 / 1e9
    speeds = digest_speeds(memoryview(weights.numpy()).cast("B"), args.repeats)
    print("digest speed (GB/s): " + ", ".join(f"{name} {speed:.2f}" for name, speed in speeds.items()))
    with tempfile.TemporaryDirectory() as tmp:
        root, state = Path(tmp), {"step": 1, "w": weights}
        plain = best_of(args.repeats, lambda: dcp.save(state, storage_writer=dcp.FileSystemWriter(root / "plain"), no_dist=True))
        with_digests = best_of(args.repeats, lambda: save_checkpoint(root / "run", 1, state, keep=1))
        path = root / "run" / "checkpoints" / "step-00000001"
        assert verify_checkpoint(path) is None
        verify = best_of(args.repeats, lambda: verify_checkpoint(path))
    print(f"save of {gb:.2f} GB: DCP's writer {plain / gb:.2f} s/GB, with digests.json {with_digests / gb:.2f} s/GB")
    print(f"verify_checkpoint: {verify / gb:.2f} s/GB ({gb / verify:.2f} GB/s)")


if __name__ == "__main__":
    main()
