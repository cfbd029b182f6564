"""benchmarks/lookup_gradient.py: both paths of the lookup's gradient under autocast agree."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "lookup_gradient.py"


@pytest.fixture
def script():
    spec = importlib.util.spec_from_file_location("lookup_gradient", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dense_and_in_place_gradients_agree_and_are_timed(script, capsys):
    figures = script.main(["--vocab", "500", "--passes", "2", "--batch", "1", "--repeat", "1"])
    assert 0 <= figures["relative_difference"] < 1e-5
    for path in ("dense", "in_place"):
        assert len(figures[path]["seconds"]) == 1 and figures[path]["median_seconds"] > 0
    assert "gradients agree" in capsys.readouterr().out


def test_bad_option_is_a_usage_error(script, capsys):
    with pytest.raises(SystemExit):
        script.main(["--passes", "0"])
    assert "--passes 0: expected a positive number" in capsys.readouterr().err
