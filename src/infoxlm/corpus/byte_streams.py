"""Binary streams the text reader (:mod:`~infoxlm.corpus.text_files`) reads through.

* :func:`open_zstd`: the decompressed bytes of a Zstandard file. ``zstandard``'s own stream
  reader returns end-of-file where the data stops, also in the middle of a frame, so a
  truncated file would read as a shorter text; this one raises ``EOFError`` there instead, as
  ``gzip``, ``lzma`` and ``bz2`` do.
* :class:`Window`: at most N bytes of an open file (one part of it, read on its own);
* :class:`Counted`: a stream that counts the bytes read from it (standard input).
"""

from __future__ import annotations

import io
from typing import IO

from infoxlm.errors import DataError

__all__ = ["Counted", "Window", "open_zstd"]


class _ZstdStream(io.RawIOBase):
    """Decompressed bytes of a Zstandard file that has one or more frames: the file is fed to
    one decompressor per frame, and ``EOFError`` raised when it ends inside a frame."""

    _CHUNK = 1 << 17  # compressed bytes per read from the file

    def __init__(self, raw: IO[bytes], zstandard):
        super().__init__()
        self._raw = raw
        self._decompressor = zstandard.ZstdDecompressor()
        self._frame = None  # the decompressor of the frame being read, None between frames
        self._pending = bytearray()  # decompressed, not yet returned

    def readable(self) -> bool:
        return True

    def _feed(self, data: bytes) -> None:
        while data:
            if self._frame is None:
                self._frame = self._decompressor.decompressobj()
            self._pending += self._frame.decompress(data)
            if not self._frame.eof:
                return
            # A frame ended; what follows it belongs to the next one (concatenated files).
            data, self._frame = self._frame.unused_data, None

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self._pending) < size:
            data = self._raw.read(self._CHUNK)
            if not data:
                if self._frame is not None:
                    raise EOFError("the Zstandard frame ends before its end")
                break
            self._feed(data)
        if size < 0 or size >= len(self._pending):
            out, self._pending = bytes(self._pending), bytearray()
        else:
            out = bytes(self._pending[:size])
            del self._pending[:size]
        return out

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def open_zstd(raw: IO[bytes]) -> IO[bytes]:
    try:
        import zstandard
    except ImportError:  # a declared dependency, but say what to do if it is missing
        raise DataError("reading .zst files needs the zstandard package; pip install zstandard") from None
    return _ZstdStream(raw, zstandard)


class Window(io.RawIOBase):
    """At most ``size`` bytes of an open file, from its current position."""

    def __init__(self, raw: IO[bytes], size: int):
        super().__init__()
        self._raw, self._left = raw, size

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        size = self._left if size < 0 else min(size, self._left)
        data = self._raw.read(size) if size else b""
        self._left -= len(data)
        return data


class Counted(io.RawIOBase):
    """A stream that counts the bytes read from it: its ``tell()``, where it cannot seek."""

    def __init__(self, stream: IO[bytes]):
        super().__init__()
        self._stream, self._count = stream, 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self._count += len(data)
        return data

    def tell(self) -> int:
        return self._count
