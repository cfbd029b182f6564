"""bench/matmul_rate.py: the step's products and their backward shapes, timed on a CPU; and
benchmarks/matmul_rate.py, which prints them."""

import importlib.util
from pathlib import Path

import pytest
import torch

from infoxlm.bench.matmul_rate import product_rate, step_product_rates, step_products

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "matmul_rate.py"


def test_every_forward_product_brings_its_two_backward_products():
    products = step_products("demo", tokens=100)  # demo: d 256, f 1024, V 8000
    assert products["feed-forward in: forward"] == (100, 256, 1024, "")
    assert products["feed-forward in: input gradient"] == (100, 1024, 256, "right")  # dY · Wᵀ
    assert products["feed-forward in: weight gradient"] == (256, 100, 1024, "left")  # Xᵀ · dY
    assert products["vocabulary decoder: forward"] == (15, 256, 8000, "")  # 15 % of the tokens masked
    assert len(products) == 1 + 4 * 3


def test_rates_are_positive_for_every_product():
    rates = step_product_rates("test", torch.device("cpu"), tokens=64, repeat=1)
    assert len(rates) == 13 and all(rate > 0 for rate in rates.values())
    assert product_rate(8, 8, 8, device=torch.device("cpu"), dtype=torch.float32, transposed="left", repeat=1) > 0


def test_script_reports_every_rate_and_the_best(capsys):
    spec = importlib.util.spec_from_file_location("matmul_rate_script", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    figures = script.main(["--size", "test", "--tokens", "64", "--repeat", "1"])
    assert figures["best_flops"] == max(figures["rates_flops"].values()) and figures["dtype"] == "float32"
    out = capsys.readouterr().out
    assert out.count("GFLOP/s") == 13 and "--peak-flops measure" in out
