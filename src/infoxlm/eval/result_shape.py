"""Checking a result file before a report reads it: each key it needs, each value's kind, and
the layer an all-layer evaluation reports at; a mismatch is one line naming the file and the
key (``runs/xnli/results.json: mean.test.de is "80"; expected a number``).

A shape is a mapping of keys (a key ending in "?" may be absent; "*" stands for every key) or
the name of a kind of value (``KINDS``).

    >>> check_shape({"mean": {"test": {"de": 80.0}}}, {"mean": {"test": {"*": "number"}}}, Path("r.json"), "xnli")
    >>> check_shape({"mean": {"test": {"de": "80"}}}, {"mean": {"test": {"*": "number"}}}, Path("r.json"), "xnli")
    Traceback (most recent call last):
    infoxlm.errors.EvalDataError: r.json: mean.test.de is "80"; expected a number
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ..errors import EvalDataError
from ..model.sentence_layer import default_layer


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


KINDS = {
    "number": _is_number,
    "number or null": lambda v: v is None or _is_number(v),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "list": lambda v: isinstance(v, list),
    # The XNLI setting names a PNG file: no path separators.
    "name": lambda v: isinstance(v, str) and re.fullmatch(r"[\w-]+", v, re.ASCII) is not None,
    "name or words": lambda v: isinstance(v, str),
}
_EXPECTED = {"number": "a number", "number or null": "a number or null", "integer": "an integer", "list": "a list",
             "name": "a name of letters, digits, - and _",
             "name or words": "a string"}


def check_shape(value: Any, shape: Any, file: Path, task: str, keys: tuple[str, ...] = ()) -> None:
    """Refuse a result the report cannot read, naming the file and the key (``mean.test.de``);
    ``keys`` lead to ``value`` in the file, ``task`` names what the file should hold."""
    where = f"{file}: " + ".".join(keys)
    if not isinstance(shape, dict):
        if not KINDS[shape](value):
            shown = json.dumps(value, ensure_ascii=False)
            raise EvalDataError(f"{where} is {shown if len(shown) <= 40 else shown[:37] + '...'}; expected {_EXPECTED[shape]}")
        return
    if not isinstance(value, dict):
        raise EvalDataError(f"{where} is {json.dumps(value)[:40]}; expected an object")
    for key, inner in shape.items():
        if key == "*":
            for name, item in value.items():
                check_shape(item, inner, file, task, (*keys, name))
            continue
        name = key.rstrip("?")
        if name in value:
            check_shape(value[name], inner, file, task, (*keys, name))
        elif not key.endswith("?"):
            raise EvalDataError(f"{file}: no key {'.'.join((*keys, name))}; expected it in {task} results")


def shown_layer(obj: dict, file: Path, task: str) -> tuple[int, str]:
    """(layer, rule) an ``eval … --layer all`` output reports at: the layer it names, else the
    default rule's for its depth; never the layer that scores best on its (test) data."""
    if "layer" in obj:
        check_shape(obj, {"layer": "integer"}, file, task)
        layer, rule = obj["layer"], obj.get("layer_rule", "fixed")
    else:
        layer, rule = default_layer(len(obj["layers"]) - 1)
    if str(layer) not in obj["layers"]:
        raise EvalDataError(f"{file}: layers has no key {layer} (the layer that layer names); its keys are "
                            + ", ".join(obj["layers"]))
    return layer, str(rule)
