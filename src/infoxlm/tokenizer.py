"""XLM-R-compatible tokenizer: load, encode, save and train.

The ids follow XLM-R (and fairseq): ``<s>`` = 0, ``<pad>`` = 1, ``</s>`` = 2, ``<unk>`` = 3,
the SentencePiece pieces after that and ``<mask>`` as the very last id. Two file formats
are understood and behave identically behind one :class:`Tokenizer`:

* ``tokenizer.json`` -- a Hugging Face ``tokenizers`` serialisation (preferred);
* ``sentencepiece.bpe.model`` -- a SentencePiece model exactly as XLM-R ships it, whose own
  ids (``<unk>`` = 0, ``<s>`` = 1, ``</s>`` = 2, pieces from 3) are shifted to fairseq's.

Reading either format lives in ``tokenizer_files.py``; this module frames, pads and saves.

:meth:`Tokenizer.save_pretrained` writes a directory that ``transformers`` loads as an
``XLMRobertaTokenizer`` with the same ids, and :func:`infoxlm.tokenizer_training.train_tokenizer` learns a new Unigram
vocabulary from raw text with XLM-R's exponentially smoothed language sampling (implemented
in ``tokenizer_training.py``).

Whitespace: text is split on whitespace before the ``▁`` prefix is added, as SentencePiece
does (leading, trailing and repeated whitespace never produce a token). ``transformers`` 5
rebuilds XLM-R tokenizers this way in ``from_pretrained``; a raw XLM-R ``tokenizer.json``
used verbatim (``tokenizers.Tokenizer.from_file`` or ``XLMRobertaTokenizerFast(
tokenizer_file=...)``) instead emits a lone ``▁`` for whitespace at the end of the text or
before a special token written in it. All other text gets identical ids on every path.

Decomposed input: SentencePiece composes NFD text with stacked combining marks (Vietnamese
``e + U+0323 + U+0302`` -> ``ệ``); the ``tokenizers`` port of its normaliser, used for
``tokenizer.json`` here and in ``transformers``, does not and yields ``<unk>``. The two
backends therefore differ on such input only; NFC-normalise text first to avoid it.

Example (trains a toy vocabulary in a temporary directory, so it runs anywhere)::

    >>> import tempfile, pathlib
    >>> from infoxlm.tokenizer import Tokenizer
    >>> tmp = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (tmp / "en.txt").write_text("the cat sat on the mat\\nthe dog ate the bone\\n" * 50)
    >>> _ = (tmp / "de.txt").write_text("die katze sitzt auf der matte\\n" * 20)
    >>> from infoxlm.tokenizer_training import train_tokenizer
    >>> tok = train_tokenizer([tmp / "en.txt", tmp / "de.txt"], tmp / "tok", vocab_size=60)
    >>> ids = tok.encode("the cat")
    >>> ids[0] == tok.bos_id and ids[-1] == tok.eos_id
    True
    >>> tok.decode(ids)
    'the cat'
    >>> batch = tok(["the cat", "die katze sitzt"])
    >>> batch["input_ids"].shape == batch["attention_mask"].shape
    True
    >>> Tokenizer.from_pretrained(tmp / "tok").fingerprint == tok.fingerprint
    True
    >>> import shutil; shutil.rmtree(tmp)
"""

from __future__ import annotations

import hashlib
import json
import math
import operator
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infoxlm.errors import TokenizerError
from infoxlm.special_tokens import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from infoxlm.tokenizer_files import (
    MODEL_MAX_LENGTH,
    SENTENCEPIECE_MODEL,
    TOKENIZER_JSON,
    Backend,
    open_tokenizer_file,
    transformers_configs,
)

if TYPE_CHECKING:  # annotations only; see Tokenizer.pad
    import torch

# The file names are part of this module's interface: callers name them beside Tokenizer.
__all__ = [
    "Tokenizer",
    "TOKENIZER_JSON",
    "SENTENCEPIECE_MODEL",
]


PathLike = str | Path


class Tokenizer:
    """XLM-R-compatible tokenizer over a ``tokenizer.json`` or ``sentencepiece.bpe.model``.

    Create it with :meth:`from_pretrained` or :meth:`train`, not directly. Every encoding is
    ``<s> pieces </s>``; padding is on the right with ``pad_id``.
    """

    bos_id: int = BOS_ID
    pad_id: int = PAD_ID
    eos_id: int = EOS_ID
    unk_id: int = UNK_ID

    def __init__(self, backend: Backend, source: Path, data: bytes, extra_files: Sequence[Path] = ()):
        self._backend = backend
        self._source = source  # the file the ids come from
        self._data = data  # its exact bytes: saved verbatim and fingerprinted
        self._extra_files = tuple(extra_files)  # e.g. the .model next to a preferred .json
        self._fingerprint = hashlib.sha256(data).hexdigest()
        #: Set by :meth:`train`; ``None`` for a tokenizer loaded from disk.
        self.training_report = None  # set by train_tokenizer: a tokenizer_training.TrainingReport

    # -- loading -------------------------------------------------------------------------

    @classmethod
    def from_pretrained(cls, path: PathLike) -> Tokenizer:
        """Load from a directory holding ``tokenizer.json`` or ``sentencepiece.bpe.model``.

        ``tokenizer.json`` wins when both are present (the other file is still copied by
        :meth:`save_pretrained`). ``path`` may also name either file directly: a ``.json``
        suffix means tokenizers format, ``.model`` SentencePiece.

        Raises:
            TokenizerError: missing path, neither file present, unreadable file, or special
                tokens not at XLM-R's ids.
        """
        return cls(*open_tokenizer_file(Path(path)))

    # -- ids -------------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        """Number of ids, the five special tokens included (``mask_id + 1``)."""
        return self._backend.vocab_size

    def __len__(self) -> int:
        return self.vocab_size

    @property
    def mask_id(self) -> int:
        """Id of ``<mask>``: always the last id."""
        return self._backend.vocab_size - 1

    @property
    def special_ids(self) -> frozenset[int]:
        """The ids of ``<s>``, ``<pad>``, ``</s>``, ``<unk>`` and ``<mask>``."""
        return frozenset((self.bos_id, self.pad_id, self.eos_id, self.unk_id, self.mask_id))

    @property
    def backend(self) -> str:
        """``"tokenizers"`` or ``"sentencepiece"``: which file format the ids come from."""
        return self._backend.name

    # -- identity --------------------------------------------------------------------------

    @property
    def fingerprint(self) -> str:
        """SHA-256 (hex) of the tokenizer file's bytes: equal fingerprints mean equal ids."""
        return self._fingerprint

    def identity(self) -> dict[str, Any]:
        """A small JSON-serialisable record to store next to data encoded with this tokenizer."""
        return {
            "fingerprint": self._fingerprint,
            "file": self._source.name,
            "backend": self.backend,
            "vocab_size": self.vocab_size,
        }

    def __repr__(self) -> str:
        return (
            f"Tokenizer(backend={self.backend!r}, vocab_size={self.vocab_size}, "
            f"source={str(self._source)!r}, fingerprint={self._fingerprint[:12]!r})"
        )

    # -- encoding --------------------------------------------------------------------------

    def _frame(self, pieces: list[int], add_special_tokens: bool, max_length: int | None) -> list[int]:
        """Truncate ``pieces`` to fit ``max_length`` and wrap them in ``<s> … </s>``."""
        room = max_length
        if add_special_tokens:
            if room is not None:
                room -= 2
            pieces = pieces[:room] if room is not None else pieces
            return [self.bos_id, *pieces, self.eos_id]
        return pieces[:room] if room is not None else pieces

    @staticmethod
    def _check_max_length(max_length: int | None, add_special_tokens: bool) -> None:
        if max_length is None:
            return
        smallest = 2 if add_special_tokens else 1
        if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < smallest:
            raise TokenizerError(
                f"max_length={max_length!r} is invalid; expected an integer >= {smallest}"
                + (" (room for <s> and </s>)" if add_special_tokens else "")
            )

    def encode(self, text: str, add_special_tokens: bool = True, max_length: int | None = None) -> list[int]:
        """Token ids of one text: ``[<s>, pieces…, </s>]``.

        With ``max_length`` the pieces are cut so the whole list (specials included) has at
        most ``max_length`` ids; ``</s>`` is always kept at the end.
        """
        if not isinstance(text, str):
            raise TokenizerError(f"encode() expected a str, got {type(text).__name__}")
        self._check_max_length(max_length, add_special_tokens)
        return self._frame(self._backend.encode_many([text])[0], add_special_tokens, max_length)

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Piece ids of ``text`` without ``<s>``/``</s>`` and each piece's (start, end)
        character span in ``text`` (what extractive QA needs to map answers to tokens).

        The ids equal ``encode(text, add_special_tokens=False)``. Only tokenizer.json models
        give offsets; a SentencePiece model raises TokenizerError.
        """
        return self._backend.encode_with_offsets(text)

    def encode_batch(
        self, texts: Sequence[str], add_special_tokens: bool = True, max_length: int | None = None
    ) -> list[list[int]]:
        """:meth:`encode` for many texts at once (in parallel in the backend library)."""
        texts = list(texts)
        if not set(map(type, texts)) <= {str}:  # one C-level pass; find the culprit only on failure
            for index, text in enumerate(texts):
                if not isinstance(text, str):
                    raise TokenizerError(
                        f"encode_batch() item {index} is a {type(text).__name__}, expected a str"
                    )
        self._check_max_length(max_length, add_special_tokens)
        if not texts:
            return []
        pieces = self._backend.encode_many(texts)
        if not add_special_tokens and max_length is None:
            return pieces  # nothing to frame: skip a Python call per text
        return [self._frame(p, add_special_tokens, max_length) for p in pieces]

    def pad(
        self, batch_ids: Sequence[Sequence[int]], pad_to_multiple_of: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Right-pad id lists into ``(input_ids, attention_mask)``, both ``LongTensor (B, T)``.

        ``T`` is the longest list, rounded up to a multiple of ``pad_to_multiple_of`` if
        given (tensor cores prefer multiples of 8). The mask is 1 on real tokens, 0 on pads.
        """
        if pad_to_multiple_of is not None and (
            isinstance(pad_to_multiple_of, bool)
            or not isinstance(pad_to_multiple_of, int)
            or pad_to_multiple_of < 1
        ):
            raise TokenizerError(
                f"pad_to_multiple_of={pad_to_multiple_of!r} is invalid; expected a positive integer"
            )
        # torch is imported here, where tensors are made: tokenizing text (``infoxlm prepare``,
        # ``infoxlm tokenizer``) never needs it, nor its seconds of start-up.
        import torch

        lengths = [len(ids) for ids in batch_ids]
        width = max(lengths, default=0)
        if pad_to_multiple_of:
            width = math.ceil(width / pad_to_multiple_of) * pad_to_multiple_of
        input_ids = torch.full((len(lengths), width), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(lengths), width), dtype=torch.long)
        for row, (ids, length) in enumerate(zip(batch_ids, lengths)):
            if length:
                input_ids[row, :length] = torch.as_tensor(list(ids), dtype=torch.long)
                attention_mask[row, :length] = 1
        return input_ids, attention_mask

    def __call__(
        self,
        texts: str | Sequence[str],
        max_length: int | None = MODEL_MAX_LENGTH,
        pad_to_multiple_of: int | None = None,
    ) -> dict[str, torch.Tensor]:
        """Encode and pad a batch: ``{"input_ids": (B, T), "attention_mask": (B, T)}``.

        A single string is treated as a batch of one. Sequences longer than ``max_length``
        (default 512, XLM-R's limit) are truncated.
        """
        if isinstance(texts, str):
            texts = [texts]
        input_ids, attention_mask = self.pad(
            self.encode_batch(texts, max_length=max_length), pad_to_multiple_of
        )
        return {"input_ids": input_ids, "attention_mask": attention_mask}

    def decode(self, ids: Iterable[int] | torch.Tensor, skip_special_tokens: bool = True) -> str:
        """Text of a list (or 1-D tensor) of ids; specials are dropped unless asked for."""
        if hasattr(ids, "tolist"):  # a tensor (or NumPy array)
            ids = ids.tolist()
        ids = [operator.index(i) for i in ids]
        for i in ids:
            if not 0 <= i < self.vocab_size:
                raise TokenizerError(
                    f"id {i} is outside the vocabulary; expected 0 <= id < {self.vocab_size}"
                )
        return self._backend.decode(ids, skip_special_tokens)

    # -- saving ----------------------------------------------------------------------------

    def save_pretrained(self, path: PathLike) -> list[Path]:
        """Write the tokenizer file(s) plus ``transformers`` configs into directory ``path``.

        The files are copied byte for byte (so the fingerprint survives); the configs make
        ``transformers.AutoTokenizer.from_pretrained(path)`` load an ``XLMRobertaTokenizer``
        with the same ids. Returns the paths written.
        """
        out = Path(path)
        if out.exists() and not out.is_dir():
            raise TokenizerError(
                f"{out}: exists and is not a directory; expected a directory to save the tokenizer in"
            )
        out.mkdir(parents=True, exist_ok=True)
        written = []
        canonical = TOKENIZER_JSON if self.backend == "tokenizers" else SENTENCEPIECE_MODEL
        target = out / canonical
        if not (target.exists() and target.resolve() == self._source.resolve()):
            target.write_bytes(self._data)
        written.append(target)
        for extra in self._extra_files:
            extra_target = out / extra.name
            if not (extra_target.exists() and extra_target.resolve() == extra.resolve()):
                shutil.copyfile(extra, extra_target)
            written.append(extra_target)
        for name, content in transformers_configs(self.mask_id).items():
            (out / name).write_text(
                json.dumps(content, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
            )
            written.append(out / name)
        return written
