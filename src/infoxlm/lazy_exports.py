"""Names a package exports but imports at first use (PEP 562's module ``__getattr__``), so
that importing the package (``import infoxlm``, ``import infoxlm.train``) loads no torch and
``--help`` answers at once."""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable


def lazy_exports(package: str, defined_in: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose public name N is defined in the
    module ``defined_in[N]`` (relative to the package), imported when N is first read."""

    def __getattr__(name: str) -> Any:
        if name not in defined_in:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(defined_in[name], package), name)
        setattr(sys.modules[package], name, value)  # read once; later reads skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(defined_in))

    return __getattr__, __dir__
