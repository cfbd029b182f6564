"""A checkpoint's files checked before anything in them is used: its index unpickled with
named classes only, and every file compared with the digest recorded when it was written.

Index. DCP's index (``.metadata``) is a pickle. ``read_index`` unpickles it with a loader that
builds only the classes an index holds, each named exactly by module and name. A dotted name
is refused: from protocol 4 on, pickle resolves one attribute by attribute, so an allowed module
that imports ``os`` would otherwise hand out ``os.system``. (torch's ``weights_only`` unpickler
would be the well-kept choice, but it does not read the protocol-4 frames DCP writes.) Then
every field DCP's reader uses is checked for its type (an offset that is an integer, not
``"abc"``), and the first wrong one is named.

Digests. ``DigestingWriter`` is DCP's file writer that also records the size and SHA-256 of the
files each rank wrote (``__R_0.distcp``, read back from the page cache right after writing,
inside the background thread of an asynchronous save). Rank 0 merges every rank's records, adds
the index's and writes ``digests.json`` into the temporary directory before it is renamed into
place: a ``step-*`` directory holds its digests unless an earlier infoxlm wrote it.
``verify_files`` checks, cheapest first: the sizes; the index's digest (before the index is
unpickled); that every file the index places data in is listed and long enough; then every
file's digest, each rank of a multi-process run hashing its share.

SHA-256 rather than BLAKE2b or CRC32: with the SHA extensions of current x86 CPUs it is the
fastest cryptographic digest (``benchmarks/checkpoint_digest.py`` on a shared AMD EPYC core:
SHA-256 0.7–1.3 GB/s, BLAKE2b 0.4–0.56, CRC32 1.4–2.3). A CRC would catch damage as well, but
the check runs once per resume or export, and SHA-256 also exposes a file changed on purpose
when a copy of digests.json is kept apart (``sha256sum`` prints the same hex).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import pickle
import reprlib
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.filesystem import _StorageInfo
from torch.distributed.checkpoint.metadata import (
    BytesStorageMetadata, ChunkStorageMetadata, MetadataIndex, StorageMeta, TensorProperties, TensorStorageMetadata,
)

from ..json_files import RECORD_BYTES, read_json
from ..outputs import full_disk_named
from .distributed import World, all_reduce_max
from .errors import CheckpointCorrupt, UnsafeCheckpoint

__all__ = ["DIGESTS", "INDEX", "DigestingWriter", "first_line", "read_index", "sha256_of", "verify_files"]

INDEX = ".metadata"  # DCP's index, written last: its presence marks a complete save
DIGESTS = "digests.json"  # {"algorithm": "sha256", "files": {name: {"size": bytes, "sha256": hex}}}
# Each rank first writes its own records, __R_digests.json (R: DCP's prefix of its files).
_BLOCK = 1 << 20


def sha256_of(path: Path) -> str:
    """A file's SHA-256 in hex, read in 1 MiB blocks."""
    digest, buffer = hashlib.sha256(), bytearray(_BLOCK)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buffer):
            digest.update(view[:n])
    return digest.hexdigest()


def _record(path: Path) -> dict[str, Any]:
    return {"size": path.stat().st_size, "sha256": sha256_of(path)}


def _write_json(path: Path, data: dict[str, Any]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())  # durable before the directory is renamed into place


# --- writing ---------------------------------------------------------------------------------


class DigestingWriter(dcp.FileSystemWriter):
    """DCP's file writer, plus ``digests.json``: every rank records the files it wrote, rank 0
    (DCP's coordinator, whose ``finish`` runs once every rank's ``write_data`` returned) merges
    the records and adds the index's.

    A rank that finds the disk full raises NoSpaceLeft: DCP pickles a rank's error to hand it to
    the others, which drops the OSError that torch's zip writer raised its own error over."""

    def write_data(self, plan, planner):
        directory = Path(self.path)
        with full_disk_named(directory):
            future = super().write_data(plan, planner)
            names = sorted({result.storage_data.relative_path for result in future.wait()})
            # __R_ is the prefix DCP gave this rank's files (FileSystemWriter.prepare_global_plan).
            _write_json(directory / f"{plan.storage_data.prefix}{DIGESTS}", {n: _record(directory / n) for n in names})
        return future

    def finish(self, metadata, results) -> None:
        with full_disk_named(self.path):
            self._finish(metadata, results)

    def _finish(self, metadata, results) -> None:
        super().finish(metadata, results)  # writes the index
        directory = Path(self.path)
        files: dict[str, Any] = {}
        for part in sorted(directory.glob(f"__*_{DIGESTS}")):
            files.update(read_json(part, what="a rank's digests", max_bytes=RECORD_BYTES, error=CheckpointCorrupt))
        written = {result.storage_data.relative_path for rank_results in results for result in rank_results}
        if written - files.keys():  # the save fails here rather than its checkpoint looking damaged later
            raise RuntimeError(f"no digest recorded for {sorted(written - files.keys())} in {directory}")
        files[INDEX] = _record(directory / INDEX)
        _write_json(directory / DIGESTS, {"algorithm": "sha256", "files": files})
        for part in directory.glob(f"__*_{DIGESTS}"):
            part.unlink()


# --- the index ---------------------------------------------------------------------------------


class _IndexUnpickler(pickle.Unpickler):
    """Builds DCP's index classes and the torch and pathlib values they hold, nothing else."""

    _ALLOWED = {
        "torch.distributed.checkpoint.metadata": {
            "Metadata", "MetadataIndex", "StorageMeta", "TensorStorageMetadata", "BytesStorageMetadata",
            "ChunkStorageMetadata", "TensorProperties", "_MEM_FORMAT_ENCODING",
        },
        "torch.distributed.checkpoint.filesystem": {"_StorageInfo"},
        "torch": {"Size"},
        "torch.serialization": {"_get_layout"},
        "pathlib": {"Path", "PosixPath", "WindowsPath", "PurePosixPath", "PureWindowsPath"},
        "collections": {"OrderedDict"},
        "builtins": {"set", "frozenset"},
    }  # fmt: skip
    _TORCH_VALUES = (torch.dtype, torch.layout, torch.memory_format)

    def find_class(self, module: str, name: str):
        if name in self._ALLOWED.get(module, ()):  # an exact name: never "a.b"
            return super().find_class(module, name)
        if module == "torch" and "." not in name and isinstance(getattr(torch, name, None), self._TORCH_VALUES):
            return getattr(torch, name)  # torch.float32, torch.strided, torch.contiguous_format
        raise UnsafeCheckpoint(
            f"names {module}.{name}, which is not part of a checkpoint index; infoxlm refuses to "
            "load it, since unpickling it could run code from the file"
        )


def read_index(directory: Path) -> dcp.Metadata:
    """A sharded checkpoint's index, unpickled with ``_IndexUnpickler``."""
    path = Path(directory) / INDEX
    try:
        with open(path, "rb") as f:
            metadata = _IndexUnpickler(f).load()
    except CheckpointCorrupt as err:
        raise type(err)(f"{path}: {err}") from None
    except Exception as err:
        raise CheckpointCorrupt(f"{path}: cannot read checkpoint index ({type(err).__name__}: {first_line(err)})") from None
    if not isinstance(metadata, dcp.Metadata):
        raise CheckpointCorrupt(f"{path}: not a checkpoint index (holds a {type(metadata).__name__})")
    problem = next(_index_problems(metadata), None)  # the first field found wrong
    if problem is not None:
        name, value, expected = problem
        raise CheckpointCorrupt(f"{path}: field {name} is {_shown(value)}; expected {expected}")
    return metadata


# --- the index's fields ------------------------------------------------------------------------
# The unpickler builds only the index's classes, but not with the types their fields should
# hold: a dataclass is unpickled by setting its __dict__, whatever it holds (a storage offset of
# "abc", a string for storage_meta). Every field DCP's reader uses is checked before it is used.

class _Missing:
    def __repr__(self) -> str:
        return "missing"


_MISSING = _Missing()  # a field the unpickled object lacks (None fields are not pickled)
_TOP = {  # field: (types it may hold, in words)
    "state_dict_metadata": ((dict,), "a dict of the saved entries"),
    "storage_data": ((dict,), "a dict of where each entry is stored"),
    "planner_data": ((dict, type(None)), "a dict of key paths or None"),
    "storage_meta": ((StorageMeta, type(None)), "a StorageMeta or None"),
    "version": ((str, type(None)), "a version string or None"),
}


def _index_problems(metadata: dcp.Metadata) -> Iterator[tuple[str, Any, str]]:
    """(field, value, what was expected) for each field of the index that DCP could not use."""
    for name, (types, expected) in _TOP.items():
        value = getattr(metadata, name, _MISSING)
        if not isinstance(value, types):
            yield name, value, expected
            return
    for fqn, entry in metadata.state_dict_metadata.items():
        yield from _entry_problems(fqn, entry)
    for index, info in metadata.storage_data.items():
        yield from _storage_problems(index, info)
    for fqn, keys in (metadata.planner_data or {}).items():
        if not isinstance(fqn, str) or not isinstance(keys, (tuple, list)) or not all(isinstance(k, (str, int)) for k in keys):
            yield f"planner_data[{_shown(fqn)}]", keys, "a tuple of keys (strings, list positions)"
    modules = getattr(metadata.storage_meta, "modules", [])
    if not isinstance(modules, list) or not all(isinstance(m, str) for m in modules):
        yield "storage_meta.modules", modules, "a list of module names"
    yield from _claim_problems(metadata)  # reached only with every field of the right type


def _entry_problems(fqn: Any, entry: Any) -> Iterator[tuple[str, Any, str]]:
    """A saved entry: bytes, or a tensor's dtype, size and chunks (each as long as the size)."""
    where = f"state_dict_metadata[{_shown(fqn)}]"
    if not isinstance(fqn, str):
        yield "a key of state_dict_metadata", fqn, "a string"
    elif isinstance(entry, BytesStorageMetadata):
        return
    elif not isinstance(entry, TensorStorageMetadata):
        yield where, entry, "a TensorStorageMetadata or BytesStorageMetadata"
    elif not isinstance(getattr(entry, "properties", None), TensorProperties) or not isinstance(
        getattr(entry.properties, "dtype", None), torch.dtype
    ):
        yield f"{where}.properties", getattr(entry, "properties", _MISSING), "TensorProperties with a torch dtype"
    elif not _is_counts(size := getattr(entry, "size", _MISSING)):
        yield f"{where}.size", size, "a tuple of sizes (non-negative integers)"
    elif not isinstance(chunks := getattr(entry, "chunks", _MISSING), list):
        yield f"{where}.chunks", chunks, "a list of chunks"
    else:
        for j, chunk in enumerate(chunks):
            fields = (getattr(chunk, "offsets", _MISSING), getattr(chunk, "sizes", _MISSING))
            if not isinstance(chunk, ChunkStorageMetadata) or not all(_is_counts(f) and len(f) == len(size) for f in fields):
                yield f"{where}.chunks[{j}]", chunk, f"a chunk with {len(size)} offsets and {len(size)} sizes"


def _storage_problems(index: Any, info: Any) -> Iterator[tuple[str, Any, str]]:
    """Where an entry is stored: a file, an offset and a length in it."""
    fqn = getattr(index, "fqn", _MISSING)
    where = f"storage_data[{_shown(fqn)}]"
    if not isinstance(index, MetadataIndex) or not isinstance(fqn, str):
        yield "a key of storage_data", index, "a MetadataIndex naming an entry"
    elif getattr(index, "offset", None) is not None and not _is_counts(index.offset):
        yield f"{where} key's offset", index.offset, "a tuple of offsets (non-negative integers) or None"
    elif not isinstance(info, _StorageInfo):
        yield where, info, "a _StorageInfo (file, offset, length)"
    else:
        for name in ("offset", "length"):  # (relative_path: _check_index_fits, with the files)
            value = getattr(info, name, _MISSING)
            if not _is_count(value):
                yield f"{where}.{name}", value, "a non-negative integer"
        # A transformed item (DCP's zstd compression) would be expanded without a bound before
        # anything checks it; infoxlm writes none.
        descriptors = getattr(info, "transform_descriptors", None)
        if descriptors:
            yield f"{where}.transform_descriptors", descriptors, "none (infoxlm writes no compressed or transformed items)"


def _claim_problems(metadata: dcp.Metadata) -> Iterator[tuple[str, Any, str]]:
    """Each tensor chunk is stored, in no fewer bytes than it claims: a reader allocates what
    the index claims before it reads the data (4,000,000 × 256 claimed for 8,000 × 64 stored)."""
    for fqn, entry in metadata.state_dict_metadata.items():
        if not isinstance(entry, TensorStorageMetadata):
            continue
        for j, chunk in enumerate(entry.chunks):
            where = f"state_dict_metadata[{_shown(fqn)}].chunks[{j}]"
            info = metadata.storage_data.get(MetadataIndex(fqn, torch.Size(chunk.offsets)))
            claimed = math.prod(chunk.sizes) * entry.properties.dtype.itemsize
            if info is None:
                yield where, chunk, "a chunk the index stores somewhere"
            elif claimed > info.length:
                shape = " × ".join(f"{n:,}" for n in chunk.sizes)
                yield f"{where}'s bytes ({shape} of {entry.properties.dtype})", claimed, f"at most the {info.length:,} stored for it"


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_counts(value: Any) -> bool:
    return isinstance(value, (tuple, list)) and all(_is_count(v) for v in value)  # torch.Size is a tuple


def _shown(value: Any) -> str:
    """A value as a message shows it: short whatever it holds (reprlib stops at a depth and a
    length, and survives an object whose own repr fails)."""
    return reprlib.repr(value)


# --- verifying ---------------------------------------------------------------------------------


def verify_files(directory: Path, world: World | None = None) -> bool:
    """Check a sharded checkpoint's files against ``digests.json`` (True) or, where an earlier
    infoxlm wrote none, only that the index's files are there and long enough (False).

    Raises CheckpointCorrupt naming the first damaged file, UnsafeCheckpoint for an index that
    names code. ``world``: every rank calls this and hashes a share of the files (one
    all-reduce); every rank raises the same error."""
    directory = Path(directory)
    listed = _read_digests(directory)
    if listed is None:
        _check_index_fits(directory, read_index(directory), listed=None)
        return False
    for name, record in listed.items():
        _check_size(directory / name, record["size"], exact=True)
    if INDEX not in listed:
        raise CheckpointCorrupt(f"{directory / DIGESTS}: does not list the index {INDEX}")
    _check_digest(directory, INDEX, listed)  # before the index is unpickled
    _check_index_fits(directory, read_index(directory), listed)
    shards = sorted(name for name in listed if name != INDEX)
    rank, size = (world.rank, world.size) if world is not None else (0, 1)
    differs = torch.zeros(len(shards), dtype=torch.int32)
    for j in range(rank, len(shards), size):
        differs[j] = int(sha256_of(directory / shards[j]) != listed[shards[j]]["sha256"])
    if world is not None and shards:
        differs = all_reduce_max(differs.to(world.device), world).cpu()
    for name, bad in zip(shards, differs.tolist()):
        if bad:
            raise CheckpointCorrupt(_digest_differs(directory / name))
    return True


def _read_digests(directory: Path) -> dict[str, dict[str, Any]] | None:
    """``digests.json``'s files, or None where it is absent; refused unless well formed."""
    path = directory / DIGESTS
    if not os.path.lexists(path):
        return None
    data = read_json(path, what="a checkpoint's digest list", max_bytes=RECORD_BYTES, error=CheckpointCorrupt)
    try:
        files = data["files"] if data.get("algorithm") == "sha256" else None
        if not isinstance(files, dict) or not all(_well_formed(name, record) for name, record in files.items()):
            raise ValueError("expected {'algorithm': 'sha256', 'files': {name: {'size': bytes, 'sha256': hex}}}")
    except (ValueError, AttributeError, KeyError, TypeError) as err:
        raise CheckpointCorrupt(f"{path}: not a checkpoint's digest list ({type(err).__name__}: {first_line(err)})") from None
    return files


def _well_formed(name: Any, record: Any) -> bool:
    return (
        _is_file_name(name) and isinstance(record, dict) and isinstance(record.get("size"), int)
        and isinstance(record.get("sha256"), str) and len(record["sha256"]) == 64
    )  # fmt: skip


def _is_file_name(name: Any) -> bool:
    """A name of a file inside the checkpoint directory, not a path that leaves it."""
    return isinstance(name, str) and name not in ("", ".", "..") and "/" not in name and "\\" not in name


def _check_size(path: Path, size: int, *, exact: bool) -> None:
    """``path`` is a regular file of ``size`` bytes as digests.json recorded (``exact``), or of
    at least the ``size`` bytes the index places data in."""
    source = DIGESTS if exact else f"the index {INDEX}"
    try:
        info = path.stat()
    except FileNotFoundError:
        raise CheckpointCorrupt(f"{path}: missing, yet {source} lists it") from None
    if not stat.S_ISREG(info.st_mode):
        raise CheckpointCorrupt(f"{path}: not a regular file")
    if info.st_size < size or (exact and info.st_size != size):
        what = "truncated" if info.st_size < size else "damaged"
        expected = f"{DIGESTS} recorded {size:,}" if exact else f"{source} places data up to byte {size:,}"
        raise CheckpointCorrupt(f"{path}: {what}: {info.st_size:,} bytes where {expected}")


def _check_digest(directory: Path, name: str, listed: dict[str, dict[str, Any]]) -> None:
    if sha256_of(directory / name) != listed[name]["sha256"]:
        raise CheckpointCorrupt(_digest_differs(directory / name))


def _digest_differs(path: Path) -> str:
    return f"{path}: damaged: its SHA-256 is not the one {DIGESTS} recorded when the checkpoint was written"


def _check_index_fits(directory: Path, metadata: dcp.Metadata, listed: dict[str, Any] | None) -> None:
    """Every file the index places data in is a file of this directory (listed in digests.json
    where there is one) holding at least the bytes the index places there."""
    ends: dict[str, int] = {}
    for info in (metadata.storage_data or {}).values():
        name = getattr(info, "relative_path", None)
        if not isinstance(info, _StorageInfo) or not _is_file_name(name):
            raise CheckpointCorrupt(f"{directory / INDEX}: places data in {name!r}, not a file of this checkpoint")
        if listed is not None and name not in listed:
            raise CheckpointCorrupt(f"{directory / name}: not listed in {DIGESTS}, yet the index places data in it")
        ends[name] = max(ends.get(name, 0), int(info.offset) + int(info.length))
    for name, end in sorted(ends.items()):
        _check_size(directory / name, end, exact=False)


def first_line(err: Exception | str) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else "no detail"
