"""SentencePiece's ``nmt_nfkc`` normalisation map, the one XLM-R's tokenizer applies.

A trained vocabulary is written as a ``tokenizers`` file whose normaliser is
``Precompiled(nmt_nfkc_charsmap())``, so it normalises text exactly as SentencePiece (and
XLM-R's own model) does. The map is read from the ``sentencepiece`` package, with just enough
of the protobuf wire format to take it out of a serialised spec.
"""

from __future__ import annotations

from functools import lru_cache

__all__ = ["nmt_nfkc_charsmap"]


def _protobuf_bytes_field(message: bytes, number: int) -> bytes | None:
    """The first length-delimited field ``number`` of a serialised protobuf message.

    Just enough of the wire format to read SentencePiece's charsmap without depending on
    the ``protobuf`` package.
    """

    def varint(pos: int) -> tuple[int, int]:
        result, shift = 0, 0
        while True:
            byte = message[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return result, pos

    pos = 0
    while pos < len(message):
        key, pos = varint(pos)
        field_number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            _, pos = varint(pos)
        elif wire_type == 1:
            pos += 8
        elif wire_type == 5:
            pos += 4
        elif wire_type == 2:
            length, pos = varint(pos)
            if field_number == number:
                return message[pos : pos + length]
            pos += length
        else:  # groups (3/4) never occur in SentencePiece protos
            raise ValueError(f"unsupported protobuf wire type {wire_type}")
    return None


@lru_cache(maxsize=1)
def nmt_nfkc_charsmap() -> bytes:
    """SentencePiece's compiled ``nmt_nfkc`` normalisation map, as XLM-R's model holds it."""
    import sentencepiece as spm

    if hasattr(spm, "SentencePieceNormalizer"):  # sentencepiece >= 0.2
        spec = spm.SentencePieceNormalizer(rule_name="nmt_nfkc").serialized_normalizer_spec()
    else:
        spec = _normalizer_spec_via_training()
    charsmap = _protobuf_bytes_field(spec, 2)  # NormalizerSpec.precompiled_charsmap
    if not charsmap:
        raise RuntimeError("sentencepiece returned no nmt_nfkc character map")
    return charsmap


def _normalizer_spec_via_training() -> bytes:
    """NormalizerSpec of a throw-away model (older sentencepiece has no normalizer API)."""
    import io

    import sentencepiece as spm

    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(["abc def"] * 4),
        model_writer=buffer,
        model_type="char",
        vocab_size=10,
        normalization_rule_name="nmt_nfkc",
        minloglevel=2,
    )
    spec = _protobuf_bytes_field(buffer.getvalue(), 3)  # ModelProto.normalizer_spec
    if spec is None:
        raise RuntimeError("sentencepiece model has no normalizer spec")
    return spec
