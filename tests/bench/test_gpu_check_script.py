"""benchmarks/gpu_check.py (`make gpu-check`): its dry run end to end on a CPU, and the figures
it reads off each command's output."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # the scripts import their neighbours
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def figures(monkeypatch):
    return _load("gpu_check_figures", monkeypatch)


@pytest.mark.slow  # the whole check at test size: pytest, infoxlm bench twice, two pretrain runs
def test_the_dry_run_writes_every_section_on_a_cpu(tmp_path):
    out = tmp_path / "gpu-check"
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "gpu_check.py"), "--dry", "--output", str(out)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((out / "report.json").read_text())
    names = [s["name"] for s in report["sections"]]
    levers = ["pretrain, without any lever", "pretrain, without expandable segments", "pretrain, without prefetching",
              "pretrain, with a 2,048-token bucket"]  # fmt: skip
    assert names == [
        "environment", "tests", "bench test, defaults", "bench test, 256 tokens", "init directory and store",
        "pretrain", *levers, "pretrain, activation checkpointing",
    ]  # fmt: skip
    assert all(s["ok"] for s in report["sections"]), [s.get("error") for s in report["sections"]]
    markdown = (out / "report.md").read_text()
    assert all(f"## {name}" in markdown for name in names[1:]) and "FAILED" not in markdown
    sections = {s["name"]: s["figures"] for s in report["sections"]}
    assert sections["environment"]["torch"] and sections["environment"]["commit"]
    assert sections["tests"]["summary"].endswith("s") and sections["tests"]["skipped"] > 0  # no CUDA here
    assert sections["bench test, 256 tokens"]["baseline_tokens_per_s"] > 0
    assert sections["bench test, defaults"]["max_tokens"] == 16384  # auto on a CPU
    for name in ("pretrain", *levers, "pretrain, activation checkpointing"):
        run = sections[name]
        assert run["steps"] == 5 and run["tokens_per_s"] > 0 and run["max_tokens"]["tokens"] == 256
        assert run["checkpoint"]["written"] and run["checkpoint"]["size_mb"] > 0
        assert run["compile"] == {"compiled_layers": False} and run["peak_rss_mb"] > 0
    # The real runs side by side: a row per run, the step against the run at the defaults.
    table = markdown[markdown.index("## The real runs side by side"):].splitlines()
    assert [row.split(" | ")[0] for row in table[4:]] == [f"| {n}" for n in ("pretrain", *levers, "pretrain, activation checkpointing")]
    assert table[4].endswith(" | 1.000× |")


def test_a_failing_section_is_recorded_with_its_message_and_the_next_runs(monkeypatch, tmp_path):
    script = _load("gpu_check", monkeypatch)
    report = script.Report(tmp_path, dry=True)

    def broken():
        raise script.CheckFailed("exit status 1: infoxlm: error: CUDA out of memory")

    report.run("bench base, defaults", broken)
    report.run("pretrain", lambda: {"tokens_per_s": 1234.5})
    markdown = (tmp_path / "report.md").read_text()
    assert "| bench base, defaults | **FAILED** |" in markdown and "CUDA out of memory" in markdown
    assert "- tokens_per_s: 1,234" in markdown
    saved = json.loads((tmp_path / "report.json").read_text())["sections"]
    assert [s["ok"] for s in saved] == [False, True]


def test_pytest_counts_and_failures(figures):
    out = "F.s\nFAILED tests/gpu/test_a.py::test_x - AssertionError: 0.5 > 0.01\n===== 1 failed, 1 passed, 1 skipped in 9.20s =====\n"
    assert figures.pytest_figures(out) == {
        "summary": "1 failed, 1 passed, 1 skipped in 9.20s", "failed": 1, "passed": 1, "skipped": 1,
        "failed_tests": ["tests/gpu/test_a.py::test_x - AssertionError: 0.5 > 0.01"],
    }  # fmt: skip
    assert figures.pytest_figures("ssssss    [100%]\n6 skipped in 2.73s\n") == {"summary": "6 skipped in 2.73s", "skipped": 6}


def test_recompiles_are_counted_per_function(figures):
    log = "\n".join(
        f"V1126 07:00:0{i}.1 42 torch/_dynamo/guards.py:5389] [0/{i}] [__recompiles] Recompiling function forward in "
        f"/src/infoxlm/model/encoder.py:225\n    triggered by the following guard failure(s):\n    - ___check_grad_mode"
        for i in range(1, 12)
    )  # fmt: skip
    found = figures.recompile_figures(log, compiled=True)
    assert found["recompiles"] == 11 and found["most_graphs_of_one_function"] == 12  # the 12 forms, no more
    assert found["graphs_by_function"] == {"forward in /src/infoxlm/model/encoder.py:225": 12}
    assert found["recompile_limit_hit"] == []
    hit = figures.recompile_figures(log + "\nW1126 torch._dynamo hit config.recompile_limit (16)\n", compiled=True)
    assert hit["recompile_limit_hit"] == ["recompile_limit"]
    assert figures.recompile_figures("", compiled=False) == {"compiled_layers": False}


def test_the_budget_comes_from_the_run_s_line_else_its_config(figures):
    line = "micro-batch token budget: 98,304 tokens per objective (data.max_tokens unset: the largest …)"
    assert figures.token_budget(f"config:\n{{}}\n{line}\n", {})["tokens"] == 98304
    assert figures.token_budget("config: …", {"data": {"max_tokens": 256}})["tokens"] == 256


def test_step_and_checkpoint_figures_from_metrics(figures, tmp_path):
    # 8 steps of 1 s, the first 5 s (compiling); each step logged 0.1 s after the previous one
    # ended, except after step 4, where a save held the loop up 0.6 s and slowed the next step.
    seconds = [5.0, 1.0, 1.0, 1.0, 1.0, 1.5, 1.0, 1.0]
    metrics, now = [], 0.0
    for step, s in enumerate(seconds, start=1):
        now += s + (0.7 if step == 5 else 0.1)
        metrics.append({"step": step, "time": now, "seconds": s, "tokens_per_s": 100 / s, "loss/mmlm": 9.0})
    steps = figures.step_figures(metrics)
    assert steps["step_seconds"] == 1.0 and steps["warmup_excess_seconds"] == pytest.approx(4.0)
    assert steps["tokens_per_s"] == 100 and steps["final_losses"] == {"loss/mmlm": 9.0} and "mfu" not in steps
    folder = tmp_path / "step-00000004"
    folder.mkdir()
    (folder / "data.distcp").write_bytes(b"x" * 2**20)
    saved = figures.checkpoint_figures(metrics, 4, folder)
    assert saved["blocking_seconds"] == pytest.approx(0.6) and saved["next_steps_extra_seconds"] == pytest.approx(0.5)
    assert saved["written"] and saved["size_mb"] == 1.0


def test_a_command_that_fails_or_runs_too_long_says_so_and_keeps_its_log(monkeypatch, tmp_path):
    script = _load("gpu_check", monkeypatch)
    log = tmp_path / "logs" / "x.log"
    with pytest.raises(script.CheckFailed, match=r"exit status 3: boom \(log: "):
        script.run_command([sys.executable, "-c", "import sys; print('boom', file=sys.stderr); sys.exit(3)"], log, 60)
    assert "boom" in log.read_text()
    with pytest.raises(script.CheckFailed, match="ran past 1 s"):
        script.run_command([sys.executable, "-c", "import time; print('started', flush=True); time.sleep(30)"], log, 1)


def test_only_picks_sections_by_whole_name_or_prefix_and_adds_the_store_a_run_needs(monkeypatch):
    script = _load("gpu_check", monkeypatch)
    names = [n for n, _ in script.sections(Path("out"), script.gpu_plan())]
    assert names[0] == "tests" and names[-2:] == ["bench large, defaults", "bench large, 16,384 tokens"]
    assert script.chosen(names, None) == names
    assert script.chosen(names, ["bench base"]) == ["bench base, defaults", "bench base, 98,304 tokens"]
    assert script.chosen(names, ["pretrain, act"]) == ["init directory and store", "pretrain, activation checkpointing"]
    # "pretrain" is the run at the defaults' whole name: it alone, not every run it begins.
    assert script.chosen(names, ["pretrain", "pretrain, 131"]) == [
        "init directory and store", "pretrain", "pretrain, 131,072-token budget",
    ]  # fmt: skip
    with pytest.raises(SystemExit, match="--only 'bench huge' names no section"):
        script.chosen(names, ["bench huge"])


def test_ablate_picks_the_bench_at_the_defaults_and_the_runs_with_the_levers_on_and_off(monkeypatch):
    script = _load("gpu_check", monkeypatch)
    names = [n for n, _ in script.sections(Path("out"), script.gpu_plan())]
    assert script.ablation(names) == [
        "bench base, defaults", "init directory and store", "pretrain", "pretrain, without any lever",
        "pretrain, without expandable segments", "pretrain, without prefetching", "pretrain, with a 2,048-token bucket",
    ]  # fmt: skip


def test_the_real_runs_table_compares_each_run_with_the_one_at_the_defaults(figures):
    run = lambda name, step, allocs: {"name": name, "ok": True, "figures": {  # noqa: E731
        "step_seconds": step, "tokens_per_s": 1000 / step, "mfu": 0.1 / step, "device_allocs_per_step": allocs,
        "device_frees_per_step": allocs, "compile": {"most_graphs_of_one_function": 7}}}  # fmt: skip
    sections = [run("pretrain", 0.30, 0.0), run("pretrain, without any lever", 0.36, 4.0), {"name": "tests", "ok": True, "figures": {}}]
    table = figures.lever_table(sections)
    assert table[1] == "## The real runs side by side" and len(table) == 7
    assert table[5].startswith("| pretrain | 0.3 | 3,333 | 0.3333 | 0 | 0 | – | – | 7 |") and table[5].endswith("| 1.000× |")
    assert table[6].startswith("| pretrain, without any lever | 0.36 |") and table[6].endswith("| 4 | 4 | – | – | 7 | 1.200× |")
    assert figures.lever_table(sections[:1]) == []  # one run: nothing to compare


def test_allocations_per_settled_step_from_the_cumulative_counters(figures):
    metrics = [{"memory/device_allocs": a, "memory/device_frees": f} for a, f in ((40, 0), (44, 2), (46, 3), (46, 3), (47, 3))]
    assert figures.allocator_figures(metrics, 2) == {"device_allocs_per_step": 1.0, "device_frees_per_step": pytest.approx(1 / 3)}
    assert figures.allocator_figures([{"seconds": 1.0}] * 5, 2) == {}  # a CPU run logs none
