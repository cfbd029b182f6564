"""What a hostile or damaged checkpoint holds, for the tests: index files that run a command
when unpickled, index fields of the wrong type, and bytes flipped inside a tensor's data."""

from __future__ import annotations

import pickle
import subprocess
from pathlib import Path
from typing import Any, Callable

import torch

from infoxlm.train.checkpoint_integrity import read_index


def _text(s: str) -> bytes:
    data = s.encode()
    return b"\x8c" + bytes([len(data)]) + data  # SHORT_BINUNICODE (every string here is < 256 bytes)


def _global(module: str, name: str) -> bytes:
    return _text(module) + _text(name) + b"\x93"  # STACK_GLOBAL: protocol 4 resolves a dotted name


def _call(func: bytes, *args: bytes) -> bytes:
    return func + b"(" + b"".join(args) + b"tR"  # MARK args TUPLE REDUCE: func(*args)


def payloads(marker: Path) -> dict[str, bytes]:
    """Protocol-4 pickles, each of which touches ``marker`` when unpickled with plain pickle."""
    command = f"touch {marker}"
    bodies = {
        # The reported one: a dotted name through a module an index's classes live in.
        "dotted name": _call(_global("torch.distributed.checkpoint.filesystem", "os.system"), _text(command)),
        "dotted name via pathlib": _call(_global("pathlib", "os.system"), _text(command)),
        "builtins.eval": _call(_global("builtins", "eval"), _text(f"__import__('os').system({command!r})")),
        "builtins.getattr": _call(
            _call(_global("builtins", "getattr"), _call(_global("builtins", "__import__"), _text("os")), _text("system")),
            _text(command),
        ),
        # copyreg._reconstructor(cls, base, state) calls base.__init__(obj, state): Popen(["touch", …]).
        "copyreg._reconstructor": _call(
            _global("copyreg", "_reconstructor"), _global("subprocess", "Popen"), _global("subprocess", "Popen"),
            b"](" + _text("touch") + _text(str(marker)) + b"e",  # EMPTY_LIST MARK … APPENDS
        ),  # fmt: skip
        "functools.partial": _call(_global("functools", "partial"), _global("os", "system"), _text(command)) + b")R",
    }
    return {name: b"\x80\x04" + body + b"." for name, body in bodies.items()}


def runs_under_plain_pickle(payload: bytes, marker: Path) -> bool:
    """Whether unpickling ``payload`` with plain pickle touches ``marker`` (it is removed again):
    proof that a payload a test feeds infoxlm is live."""
    result = pickle.loads(payload)
    if isinstance(result, subprocess.Popen):
        result.wait()
    ran = marker.exists()
    marker.unlink(missing_ok=True)
    return ran


def _nested_list(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def _first_storage(metadata: Any) -> Any:
    return next(iter(metadata.storage_data.values()))


def _first_tensor(metadata: Any) -> Any:
    return next(entry for entry in metadata.state_dict_metadata.values() if hasattr(entry, "chunks"))


# Index fields of the wrong type, as a hand-made index holds them: name → change of the index.
MALFORMED_INDEX: dict[str, Callable[[Any], None]] = {
    "storage_meta a string": lambda m: setattr(m, "storage_meta", "abc"),
    "storage_meta a list 200 deep": lambda m: setattr(m, "storage_meta", _nested_list(200)),  # shown short
    "offset None": lambda m: setattr(_first_storage(m), "offset", None),
    "offset 'abc'": lambda m: setattr(_first_storage(m), "offset", "abc"),
    "length -5": lambda m: setattr(_first_storage(m), "length", -5),
    "storage_data a list": lambda m: setattr(m, "storage_data", [1]),
    "an entry a string": lambda m: m.state_dict_metadata.update(step="bytes"),
    "size a string": lambda m: setattr(_first_tensor(m), "size", "abc"),
    "chunks None": lambda m: setattr(_first_tensor(m), "chunks", None),
    # DCP's zstd-compressed item: expanded without a bound if it were read.
    "a compressed item": lambda m: setattr(_first_storage(m), "transform_descriptors", ["zstd"]),
    "a tensor larger than its data": lambda m: _claim_larger(_first_tensor(m)),
}


def _claim_larger(entry: Any) -> None:
    """A 1-D tensor entry claiming 4,000,000 × 256 elements in its one chunk: stored, its data
    holds a few bytes."""
    entry.size = torch.Size([4_000_000 * 256])
    entry.chunks[0].sizes = torch.Size([4_000_000 * 256])


def malform_index(checkpoint: Path, change: Callable[[Any], None]) -> None:
    """Rewrite a checkpoint's index with ``change`` made to it, without its digests (as whoever
    made it would do; with them, the index's digest differs)."""
    metadata = pickle.loads((checkpoint / ".metadata").read_bytes())  # our own index: plain pickle is safe
    change(metadata)
    (checkpoint / ".metadata").write_bytes(pickle.dumps(metadata, protocol=4))
    (checkpoint / "digests.json").unlink()


def flip_tensor_bytes(checkpoint: Path) -> Path:
    """Invert 8 bytes in the middle of the largest item of a sharded checkpoint (tensor data,
    not its framing); returns the shard file."""
    storage = read_index(checkpoint).storage_data
    where = max(storage.values(), key=lambda info: info.length)
    path = checkpoint / where.relative_path
    data = bytearray(path.read_bytes())
    middle = where.offset + where.length // 2
    data[middle : middle + 8] = bytes(b ^ 0xFF for b in data[middle : middle + 8])
    path.write_bytes(data)
    return path
