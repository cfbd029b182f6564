"""Tests for infoxlm.corpus.engine_job: a job's identity (what a relaunch must match), its
work directory, URLs mapped to their copies, and the merge refused on an incomplete set."""

from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("fsspec")

from infoxlm import train_tokenizer  # noqa: E402
from infoxlm.corpus.engine_job import EngineJob, merge_tasks  # noqa: E402
from infoxlm.errors import DataError  # noqa: E402


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    root = tmp_path_factory.mktemp("tok")
    (root / "de.txt").write_text("Die Katze schläft auf dem Sofa.\nWir gingen zur Brücke.\n" * 5, encoding="utf-8")
    train_tokenizer({"de": [root / "de.txt"]}, root / "tok", vocab_size=60)
    return root / "tok"


def _job(tok, tmp_path, tasks=2, **options):
    arguments = {"language": "de", "inputs": [str(tmp_path / "de.txt")], "tokenizer": tok, **options}
    return EngineJob.create("mono", arguments, tmp_path / "S", tasks)


def test_the_identity_follows_inputs_options_and_task_count(tok, tmp_path, monkeypatch):
    (tmp_path / "de.txt").write_text("Hallo\n", encoding="utf-8")
    job = _job(tok, tmp_path)
    assert job.name == "de" and job.root == tmp_path.resolve() / "S-tasks" / "mono-de"
    monkeypatch.chdir(tmp_path)
    same = EngineJob.create("mono", {"language": "deu", "inputs": ["de.txt"], "tokenizer": tok}, "S", 2)
    assert same.identity == job.identity  # a relative path, a three-letter code: the same job
    assert _job(tok, tmp_path, tasks=3).identity != job.identity
    assert _job(tok, tmp_path, max_line_tokens=64).identity != job.identity
    os.utime(tmp_path / "de.txt", ns=(1, 1))
    assert _job(tok, tmp_path).identity != job.identity


def test_a_work_directory_of_another_job_is_refused_and_force_starts_afresh(tok, tmp_path):
    (tmp_path / "de.txt").write_text("Hallo\n", encoding="utf-8")
    job = _job(tok, tmp_path)
    job.record_or_check(force=False)
    assert EngineJob.load(job.root) == job
    (job.root / "inputs").mkdir()
    (job.root / "tasks" / "completions").mkdir(parents=True)
    other = _job(tok, tmp_path, tasks=3)
    with pytest.raises(DataError, match=r"job.json: a job of other inputs, options, tokenizer or task count \(mono/de, 2 tasks"):
        other.record_or_check(force=False)
    other.record_or_check(force=True)
    assert EngineJob.load(job.root).tasks == 3
    assert (job.root / "inputs").is_dir() and not (job.root / "tasks").exists()  # copies kept, markers gone


def test_urls_are_read_from_their_copies(tok, tmp_path):
    import fsspec

    memory = fsspec.filesystem("memory")
    memory.pipe("/b/x1.txt", b"eins\n")
    memory.pipe("/b/x2.txt", b"zwei\n")
    try:
        (tmp_path / "de.txt").write_text("Hallo\n", encoding="utf-8")
        arguments = {"language": "de", "inputs": [str(tmp_path / "de.txt"), "memory://b/x*.txt"], "tokenizer": tok}
        job = EngineJob.create("mono", arguments, tmp_path / "S", 2)
        local = job.local_arguments()["inputs"]
        assert local[0] == str(tmp_path / "de.txt")
        assert [p.rpartition("/")[2] for p in local[1:]] == ["x1.txt", "x2.txt"]
        assert all(p.startswith(str(job.root / "inputs")) for p in local[1:])
        assert [o.url for o in job.remote_objects()] == ["memory:///b/x1.txt", "memory:///b/x2.txt"]
        assert json.loads(json.dumps(job.objects)) == job.objects  # job.json holds it as it is
    finally:
        memory.rm("/b", recursive=True)


def test_the_merge_never_runs_on_an_incomplete_set(tok, tmp_path):
    (tmp_path / "de.txt").write_text("Hallo\n", encoding="utf-8")
    job = _job(tok, tmp_path, tasks=3)
    job.record_or_check(force=False)
    (job.root / "tasks" / "completions").mkdir(parents=True)
    (job.root / "tasks" / "completions" / "00001").touch()
    with pytest.raises(DataError, match=r"tasks: tasks 0, 2 of 3 not done \(no completion marker\); expected every task done"):
        merge_tasks(job, show_progress=False)
    assert not (tmp_path / "S").exists()
