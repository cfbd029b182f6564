"""Tests for infoxlm.commands.prepare_engine: the ``--executor`` flags of ``prepare mono|parallel``,
parsed without datatrove, and one line naming the extra when it is missing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from infoxlm.cli import main as infoxlm_main

SRC = Path(__file__).resolve().parents[2] / "src"


def test_the_help_explains_the_executors_and_building_it_imports_no_engine():
    code = (
        "import sys, contextlib, io\n"
        "from infoxlm.cli import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    try:\n"
        "        main(['prepare', 'parallel', '--help'])\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(out.getvalue())\n"
        "print(sorted(m for m in ('datatrove', 'fsspec', 'ray') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            env={**os.environ, "PYTHONPATH": str(SRC)})  # fmt: skip
    assert result.stdout.strip().endswith("[]")
    for flag in ("--executor {local,slurm,ray}", "--tasks N", "--workers W", "--logging-dir DIR", "--partition NAME",
                 "--time HH:MM:SS", "--cpus-per-task C", "--sbatch-arg KEY=VALUE", "--ray-address ADDR",
                 "runs only the tasks without one"):  # fmt: skip
        assert flag in result.stdout


def test_an_executor_without_its_extra_says_what_to_install(tmp_path, capsys, monkeypatch):
    for name in ["datatrove", *(m for m in sys.modules if m.startswith("datatrove."))]:
        monkeypatch.setitem(sys.modules, name, None)  # import datatrove… -> ImportError
    for name in [m for m in sys.modules if m.startswith("infoxlm.corpus.engine_")]:
        monkeypatch.delitem(sys.modules, name)
    (tmp_path / "de.txt").write_text("Hallo\n", encoding="utf-8")
    code = infoxlm_main(["prepare", "mono", "--lang", "de", "--input", str(tmp_path / "de.txt"), "--tokenizer",
                         str(tmp_path), "--output", str(tmp_path / "S"), "--executor", "local", "--tasks", "2"])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 1 and err.startswith("infoxlm: error: --executor local needs datatrove (")
    assert err.endswith("pip install 'infoxlm[datatrove]'") and "\n" not in err


def test_a_malformed_sbatch_argument_is_refused(tmp_path, capsys):
    code = infoxlm_main(["prepare", "mono", "--lang", "de", "--input", "x.txt", "--tokenizer", "t", "--output",
                         str(tmp_path / "S"), "--executor", "slurm", "--tasks", "2", "--sbatch-arg", "account"])  # fmt: skip
    assert code == 1
    assert capsys.readouterr().err.strip() == "infoxlm: error: --sbatch-arg account: expected KEY=VALUE, e.g. account=proj"
