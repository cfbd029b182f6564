"""benchmarks/matmul_rate.py: the step's products and their backward shapes, timed on a CPU."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "matmul_rate.py"


@pytest.fixture
def script():
    spec = importlib.util.spec_from_file_location("matmul_rate", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_forward_product_brings_its_two_backward_products(script):
    products = script.step_products("demo", tokens=100)  # demo: d 256, f 1024, V 8000
    assert products["feed-forward in: forward"] == (100, 256, 1024, "")
    assert products["feed-forward in: input gradient"] == (100, 1024, 256, "right")  # dY · Wᵀ
    assert products["feed-forward in: weight gradient"] == (256, 100, 1024, "left")  # Xᵀ · dY
    assert products["vocabulary decoder: forward"] == (15, 256, 8000, "")  # 15 % of the tokens masked
    assert len(products) == 1 + 4 * 3


def test_rates_are_measured_and_the_best_reported(script, capsys):
    figures = script.main(["--size", "test", "--tokens", "64", "--repeat", "1"])
    assert len(figures["rates_flops"]) == 13 and all(rate > 0 for rate in figures["rates_flops"].values())
    assert figures["best_flops"] == max(figures["rates_flops"].values())
    assert figures["dtype"] == "float32"
    assert "--peak-flops" in capsys.readouterr().out
