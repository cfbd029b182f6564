"""Every ``>>>`` example in src/infoxlm runs here, one test per module that has any."""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil

import pytest

import infoxlm

FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE

# Modules whose examples fail and live in files this test does not own; each with its reason.
KNOWN_FAILING_DOCTESTS: dict[str, str] = {}


def _module_names() -> list[str]:
    names = [infoxlm.__name__]
    for info in pkgutil.walk_packages(infoxlm.__path__, prefix=f"{infoxlm.__name__}."):
        if info.name.rsplit(".", 1)[-1] != "__main__":
            names.append(info.name)
    return sorted(names)


def _import(name: str):
    """The module, or a skip when it needs an optional package that is not installed."""
    try:
        return importlib.import_module(name)
    except ImportError as error:  # ModuleNotFoundError included
        pytest.skip(f"{name} needs an optional package that is absent: {error}")


def _has_examples(name: str) -> bool:
    """Whether the module's source holds an example that is meant to run, read without
    importing it. Examples marked ``+SKIP`` only illustrate a call on real data (a token
    store, a trained model); a module holding nothing else has no test here."""
    spec = importlib.util.find_spec(name)
    origin = spec.origin if spec is not None else None
    if origin is None or not origin.endswith(".py"):
        return False
    with open(origin, encoding="utf-8") as source:
        return any(">>>" in line and "+SKIP" not in line for line in source)


MODULES = [name for name in _module_names() if _has_examples(name)]


@pytest.mark.parametrize("name", MODULES)
def test_module_examples(name: str) -> None:
    if name in KNOWN_FAILING_DOCTESTS:
        pytest.xfail(KNOWN_FAILING_DOCTESTS[name])
    module = _import(name)
    result = doctest.testmod(module, optionflags=FLAGS, report=True)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed"
    assert result.attempted > 0, f"{name}: holds '>>>' but no example ran"
