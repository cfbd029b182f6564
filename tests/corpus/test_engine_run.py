"""Tests for infoxlm.corpus.engine_run: ``infoxlm prepare … --executor local|slurm|ray --tasks N``.

The acceptance: the store a job merges has the ``inspect --json`` checksums, lines and documents
of one plain ``infoxlm prepare`` of the same inputs, whatever the task count; a relaunch runs
only the tasks without a completion marker (a task killed with SIGKILL half-way among them);
a failed task is named with its log's last line and the merge does not run; a changed input,
option or task count, or a second launch at once, is refused. SLURM runs through datatrove's
own script generation with a fake ``sbatch`` (and its pickled tasks run here, as a node would);
Ray on a local two-CPU cluster (slow). Commands go through ``infoxlm.cli.main`` in-process
unless a process must be killed.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("datatrove")

import dill  # noqa: E402 - datatrove's dependency, present with it

from infoxlm import train_tokenizer  # noqa: E402
from infoxlm.cli import main as infoxlm_main  # noqa: E402
from infoxlm.file_lock import exclusive_lock  # noqa: E402

WORDS = "Die Katze schläft auf dem warmen Sofa Öffne die Datei und speichere sie Wir gingen zur alten Brücke".split()
SRC = Path(__file__).resolve().parents[2] / "src"


def _text(seed: int, documents: int) -> str:
    """Documents of 1-15 lines, blank lines between them (long ones cross part boundaries)."""
    rng = random.Random(seed)
    lines: list[str] = []
    for _ in range(documents):
        lines += [" ".join(rng.choices(WORDS, k=rng.randint(1, 12))) for _ in range(rng.randint(1, 15))]
        lines.append("")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """A directory with de.txt.zst (one compressed file: parts are line ranges), de1-3.txt and
    en.txt/de-par.txt (line-aligned), and tok/ learned from them."""
    import zstandard

    root = tmp_path_factory.mktemp("engine")
    text = _text(0, 150)
    (root / "de.txt.zst").write_bytes(zstandard.ZstdCompressor().compress(text.encode("utf-8")))
    for i in range(3):
        (root / f"de{i}.txt").write_text(_text(i + 1, 20), encoding="utf-8")
    pairs = [line for line in text.splitlines() if line][:200]
    (root / "en.txt").write_text("\n".join(f"en {line}" for line in pairs) + "\n", encoding="utf-8")
    (root / "de-par.txt").write_text("\n".join(pairs) + "\n", encoding="utf-8")
    train_tokenizer({"de": [root / "de1.txt"]}, root / "tok", vocab_size=120)
    return root


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = infoxlm_main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _mono(corpus: Path, output: Path, *extra, inputs=("de.txt.zst",)) -> list:
    return ["prepare", "mono", "--lang", "de", "--input", *(corpus / i for i in inputs), "--tokenizer",
            corpus / "tok", "--output", output, "--no-progress", *extra]  # fmt: skip


def _inspect(capsys, store: Path) -> dict:
    code, out, err = _run(capsys, "prepare", "inspect", store, "--json")
    assert code == 0, err
    report = json.loads(out)
    del report["store"]
    return report


@pytest.fixture(scope="module")
def plain(corpus, tmp_path_factory) -> dict:
    """``inspect --json`` of one plain prepare of de.txt.zst."""
    store = tmp_path_factory.mktemp("plain") / "S1"
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert infoxlm_main([str(a) for a in _mono(corpus, store)]) == 0
        out.truncate(0)
        out.seek(0)
        assert infoxlm_main(["prepare", "inspect", str(store), "--json"]) == 0
    report = json.loads(out.getvalue())
    del report["store"]
    return report


@pytest.mark.parametrize("tasks, workers", [(1, None), (2, 1), (3, None)])
def test_local_tasks_merge_into_the_store_one_prepare_writes(corpus, plain, tmp_path, capsys, tasks, workers):
    extra = ["--executor", "local", "--tasks", tasks] + (["--workers", workers] if workers else [])
    code, out, err = _run(capsys, *_mono(corpus, tmp_path / "S", *extra))
    assert code == 0, err
    assert f"(from {tasks} tasks)" in out
    report = _inspect(capsys, tmp_path / "S")
    assert report == plain  # checksums (token ids, line and document offsets), lines, documents, tokens
    assert report["mono"]["de"]["checksum"].startswith("sha256:")
    work = tmp_path / "S-tasks" / "mono-de"
    assert sorted(p.name for p in (work / "tasks" / "completions").iterdir()) == [f"{r:05d}" for r in range(tasks)]
    # The same command again: up to date, no task runs; so too once the task stores are deleted.
    code, out, err = _run(capsys, *_mono(corpus, tmp_path / "S", *extra))
    assert (code, out.strip()) == (0, "de: up to date") and "running task" not in err
    shutil.rmtree(work / "stores")
    code, out, err = _run(capsys, *_mono(corpus, tmp_path / "S", *extra))
    assert (code, out.strip()) == (0, "de: up to date") and "running task" not in err


def test_parallel_text_in_two_tasks_equals_one_prepare(corpus, tmp_path, capsys):
    def parallel(output, *extra):
        return ["prepare", "parallel", "--pair", "en-de", "--src", corpus / "en.txt", "--tgt", corpus / "de-par.txt",
                "--tokenizer", corpus / "tok", "--output", output, "--no-progress", *extra]  # fmt: skip

    assert _run(capsys, *parallel(tmp_path / "S1"))[0] == 0
    code, out, err = _run(capsys, *parallel(tmp_path / "S", "--executor", "local", "--tasks", 2, "--workers", 1))
    assert code == 0, err
    assert _inspect(capsys, tmp_path / "S") == _inspect(capsys, tmp_path / "S1")


_DYING = """
import os, signal, sys
import infoxlm.corpus.prepare as prepare

original = prepare.write_monolingual


class Dying:  # the progress bar of task 2: its process is killed once the first block is written
    def __init__(self, progress):
        self.progress = progress

    def update(self, n):
        os.kill(os.getpid(), signal.SIGKILL)


def write(job, writer, progress):
    return original(job, writer, Dying(progress) if job.plan.index == 2 else progress)


prepare.write_monolingual = write
if __name__ == "__main__":  # not in the executor's forkserver, which imports this file again
    from infoxlm.cli import main

    sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 3])
def test_a_task_killed_half_way_alone_runs_again(corpus, plain, tmp_path, capsys, workers):
    # One worker: the tasks run in the launching process, which the kill ends. Three: task 2's
    # pool process is killed, and the launch reports it once the others are done.
    argv = [str(a) for a in _mono(corpus, tmp_path / "S", "--executor", "local", "--tasks", 3, "--workers", workers)]
    script = tmp_path / "dying.py"
    script.write_text(_DYING, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    with open(tmp_path / "launch.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, script, *argv], env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
        try:
            proc.wait(timeout=120)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)  # the executor's manager process, which outlives the kill
    log = (tmp_path / "launch.log").read_text()
    if workers == 1:
        assert proc.returncode == -signal.SIGKILL, log
    else:
        assert proc.returncode == 1, log
        assert "infoxlm: error: mono/de: tasks: task 2 of 3 died (its process was killed)" in log
    work = tmp_path / "S-tasks" / "mono-de"
    assert sorted(p.name for p in (work / "tasks" / "completions").iterdir()) == ["00000", "00001"]
    assert any(p.name.startswith(".partial-") for p in (work / "stores" / "00002" / "mono").iterdir())
    logs = {rank: (work / "tasks" / "logs" / f"task_{rank:05d}.log").read_text() for rank in (0, 1)}
    code, out, err = _run(capsys, *argv)
    assert code == 0, err
    assert "running task 2 of 3 on local (2 done before: 0, 1)" in err
    assert {rank: (work / "tasks" / "logs" / f"task_{rank:05d}.log").read_text() for rank in (0, 1)} == logs
    assert _inspect(capsys, tmp_path / "S") == plain
    assert not any(p.name.startswith(".partial-") for p in (work / "stores" / "00002" / "mono").iterdir())


def test_a_failed_task_is_named_and_the_merge_does_not_run(corpus, tmp_path, capsys):
    inputs = [corpus / f"de{i}.txt" for i in range(3)]
    bad = tmp_path / "de1.txt"
    bad.write_bytes(inputs[1].read_bytes() + b"kaputt \xff\n")
    argv = ["prepare", "mono", "--lang", "de", "--input", inputs[0], bad, inputs[2], "--tokenizer", corpus / "tok",
            "--output", tmp_path / "S", "--no-progress", "--executor", "local", "--tasks", 3]  # fmt: skip
    code, out, err = _run(capsys, *argv)
    assert code == 1
    line = err.strip().splitlines()[-1]
    assert line.startswith("infoxlm: error: mono/de: tasks: task 1 of 3 failed: ") and "UTF-8" in line
    assert "the merge did not run" in line and "task_00001.log" in line
    assert not (tmp_path / "S" / "mono" / "de").exists()
    # The other tasks ran to their end: a relaunch would run task 1 alone.
    assert sorted(p.name for p in (tmp_path / "S-tasks" / "mono-de" / "tasks" / "completions").iterdir()) == [
        "00000", "00002"
    ]
    # Another option for the same work directory is refused; --force starts afresh.
    code, out, err = _run(capsys, *argv, "--skip-invalid")
    assert code == 1 and "a job of other inputs, options, tokenizer or task count" in err
    code, out, err = _run(capsys, *argv, "--skip-invalid", "--force")
    assert code == 0, err
    assert "invalid_utf8 1" in out


def test_another_task_count_and_a_second_launch_are_refused(corpus, tmp_path, capsys):
    argv = _mono(corpus, tmp_path / "S", "--executor", "local", "--workers", 1)
    assert _run(capsys, *argv, "--tasks", 2)[0] == 0
    code, out, err = _run(capsys, *argv, "--tasks", 3)
    assert code == 1 and "(mono/de, 2 tasks, identity" in err and "this one 3 tasks" in err
    with exclusive_lock(tmp_path / "S-tasks" / "mono-de" / "launch.lock"):
        code, out, err = _run(capsys, *argv, "--tasks", 2)
    assert code == 1 and "another launch of this job; expected one launch at a time" in err


def test_shard_and_executor_and_a_missing_task_count_are_refused(corpus, tmp_path, capsys):
    code, out, err = _run(capsys, *_mono(corpus, tmp_path / "S", "--executor", "local", "--shard", "0/2"))
    assert code == 1 and "--shard 0/2 and --executor" in err
    code, out, err = _run(capsys, *_mono(corpus, tmp_path / "S", "--executor", "local"))
    assert code == 1 and "needs --tasks N" in err
    code, out, err = _run(capsys, *_mono(corpus, tmp_path / "S", "--executor", "slurm", "--tasks", 2))
    assert code == 1 and "--partition NAME and --time" in err


_FAKE_SBATCH = """#!/bin/sh
# Records each submission: its arguments and its script, numbered; answers as sbatch does.
n=$(ls "$SBATCH_RECORD" | wc -l)
n=$((n / 2 + 100))
echo "$@" > "$SBATCH_RECORD/$n.args"
for last in "$@"; do :; done
cp "$last" "$SBATCH_RECORD/$n.sh"
echo "Submitted batch job $n"
"""


@pytest.mark.parametrize("url", [False, True])
def test_slurm_submits_the_task_array_then_the_merge_and_its_tasks_run_as_on_nodes(
    corpus, plain, tmp_path, capsys, monkeypatch, url
):
    # With an input at a URL, an array job that copies it comes first, and the tasks wait for it.
    bin_dir, record = tmp_path / "bin", tmp_path / "sbatch"
    bin_dir.mkdir()
    record.mkdir()
    (bin_dir / "sbatch").write_text(_FAKE_SBATCH)
    (bin_dir / "scontrol").write_text("#!/bin/sh\necho node01\n")
    for tool in ("sbatch", "scontrol"):
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("SBATCH_RECORD", str(record))
    argv = _mono(corpus, tmp_path / "S", "--executor", "slurm", "--tasks", 3, "--partition", "cpu", "--time",
                 "1:00:00", "--cpus-per-task", 2, "--mem-per-cpu-gb", 3, "--sbatch-arg", "account=proj")  # fmt: skip
    if url:
        argv[argv.index(corpus / "de.txt.zst")] = f"file://{corpus}/de.txt.zst"
    code, out, err = _run(capsys, *argv)
    assert code == 0, err
    assert "submitted 3 tasks and the merge" in err
    scripts = {p.stem: p.read_text() for p in record.glob("*.sh")}
    args = {p.stem: p.read_text().split() for p in record.glob("*.args")}
    tasks_job = next(n for n, s in scripts.items() if "#SBATCH --array=0-2" in s)
    for line in ("#SBATCH --partition=cpu", "#SBATCH --time=1:00:00", "#SBATCH --cpus-per-task=2",
                 "#SBATCH --mem-per-cpu=3G", "#SBATCH --account=proj", "#SBATCH --job-name=infoxlm-mono-de",
                 "launch_pickled_pipeline"):  # fmt: skip
        assert line in scripts[tasks_job]
    merge_job = next(n for n, s in scripts.items() if "merge/executor.pik" in s)
    assert f"--dependency=afterok:{tasks_job}" in args[merge_job]
    stage_jobs = [n for n, s in scripts.items() if "stage/executor.pik" in s]
    assert len(stage_jobs) == url
    if url:
        assert f"--dependency=afterok:{stage_jobs[0]}" in args[tasks_job]
        assert "#SBATCH --array=0-0" in scripts[stage_jobs[0]]  # one object: one copying task
    # The nodes: each array task, then the merge, runs its pickled executor as launch_pickled_pipeline does.
    work = tmp_path / "S-tasks" / "mono-de"
    monkeypatch.setenv("SLURM_NODELIST", "node01")
    requeue = signal.getsignal(signal.SIGUSR1)  # a SLURM task requeues itself on SIGUSR1: not this process
    try:
        for stage, count in ((("stage", 1),) if url else ()) + (("tasks", 3), ("merge", 1)):
            for index in range(count):
                monkeypatch.setenv("SLURM_ARRAY_TASK_ID", str(index))
                with open(work / stage / "executor.pik", "rb") as file:
                    dill.load(file).run()
    finally:
        signal.signal(signal.SIGUSR1, requeue)
        monkeypatch.delenv("SLURM_ARRAY_TASK_ID")
    capsys.readouterr()
    assert _inspect(capsys, tmp_path / "S") == plain
    # Everything done: the same command submits nothing.
    before = len(list(record.glob("*.sh")))
    code, out, err = _run(capsys, *argv)
    assert (code, out.strip()) == (0, "de: up to date") and len(list(record.glob("*.sh"))) == before


@pytest.mark.slow
def test_ray_on_a_local_two_cpu_cluster(corpus, plain, tmp_path, capsys):
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(SRC)}})  # fmt: skip
    try:
        code, out, err = _run(capsys, *_mono(corpus, tmp_path / "S", "--executor", "ray", "--tasks", 2))
    finally:
        ray.shutdown()
    assert code == 0, err
    assert _inspect(capsys, tmp_path / "S") == plain


def test_inputs_named_by_urls_are_copied_then_prepared(corpus, plain, tmp_path, capsys):
    fsspec = pytest.importorskip("fsspec")
    memory = fsspec.filesystem("memory")  # in this process only: one worker runs the tasks here
    memory.pipe("/corpora/de/de.txt.zst", (corpus / "de.txt.zst").read_bytes())
    try:
        argv = ["prepare", "mono", "--lang", "de", "--input", "memory://corpora/de/*.zst", "--tokenizer", corpus / "tok",
                "--output", tmp_path / "S", "--no-progress", "--executor", "local", "--tasks", 2, "--workers", 1]  # fmt: skip
        code, out, err = _run(capsys, *argv)
        assert code == 0, err
        assert _inspect(capsys, tmp_path / "S") == plain
        copies = list((tmp_path / "S-tasks" / "mono-de" / "inputs").rglob("*.zst"))
        assert [p.name for p in copies] == ["de.txt.zst"]
        code, out, err = _run(capsys, *[a if a != "memory://corpora/de/*.zst" else "memory://corpora/de/no.txt" for a in argv])
        assert code == 1 and err.strip() == (
            "infoxlm: error: memory://corpora/de/no.txt: no such object; expected an input file fsspec can read"
        )
    finally:
        memory.rm("/corpora", recursive=True)


def test_file_urls_in_three_pool_tasks(corpus, tmp_path, capsys):
    inputs = [corpus / f"de{i}.txt" for i in range(3)]
    local = _mono(corpus, tmp_path / "S1", inputs=[p.name for p in inputs])
    assert _run(capsys, *local)[0] == 0
    argv = ["prepare", "mono", "--lang", "de", "--input", f"file://{corpus}/de[0-2].txt", "--tokenizer", corpus / "tok",
            "--output", tmp_path / "S", "--no-progress", "--executor", "local", "--tasks", 3]  # fmt: skip
    code, out, err = _run(capsys, *argv)
    assert code == 0, err
    assert "stage: running tasks 0, 1, 2 of 3" in err
    assert _inspect(capsys, tmp_path / "S") == _inspect(capsys, tmp_path / "S1")


def test_the_watchdog_finds_a_task_whose_lock_is_free_without_a_marker(tmp_path, monkeypatch):
    from infoxlm.corpus.engine_job import EngineJob
    from infoxlm.corpus.engine_run import _Watchdog

    job = EngineJob("mono", "de", {}, str(tmp_path / "S"), 3, str(tmp_path), {}, "x")
    (tmp_path / "tasks" / "completions").mkdir(parents=True)
    (tmp_path / "tasks" / "completions" / "00000").touch()  # done
    (tmp_path / "running" / "tasks").mkdir(parents=True)
    (tmp_path / "running" / "tasks" / "00001").touch()  # started, its lock free: died
    monkeypatch.setattr(_Watchdog, "GRACE_S", 0.2)
    with exclusive_lock(tmp_path / "running" / "tasks" / "00002"):  # still running
        with _Watchdog(job, "tasks", 3) as watchdog:
            time.sleep(2)
        assert watchdog.dead == [1]  # found, but no interrupt while task 2 runs
    with pytest.raises(KeyboardInterrupt):  # every task done or dead: the waiting launch is interrupted
        with _Watchdog(job, "tasks", 3) as watchdog:
            time.sleep(10)
    assert watchdog.dead == [1, 2]


def test_a_pair_that_looks_like_a_header_at_a_part_start_is_kept_as_one_prepare_keeps_it(corpus, tmp_path, capsys):
    # Part 1 of 2 begins at line 3, `en<TAB>de`: only a file's first line can be a header.
    tsv = tmp_path / "en-de.tsv"
    tsv.write_text("Die Katze.\tThe cat.\nDie Katze.\tThe cat.\nen\tde\nDie Katze.\tThe cat.\n", encoding="utf-8")

    def parallel(output, *extra):
        return ["prepare", "parallel", "--pair", "en-de", "--tsv", tsv, "--tokenizer", corpus / "tok",
                "--output", output, "--no-progress", *extra]  # fmt: skip

    code, out, err = _run(capsys, *parallel(tmp_path / "S1"))
    assert code == 0 and "4 pairs" in out, err
    code, out, err = _run(capsys, *parallel(tmp_path / "S", "--executor", "local", "--tasks", 2, "--workers", 1))
    assert code == 0, err
    meta = tmp_path / "S-tasks" / "parallel-en-de" / "stores" / "00001" / "parallel" / "en-de" / "meta.json"
    assert json.loads(meta.read_text())["shard"]["parts"][0]["bytes"] == [40, 66]  # from line 3 on
    assert _inspect(capsys, tmp_path / "S") == _inspect(capsys, tmp_path / "S1")
