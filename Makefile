# Two commands do all the set-up on a fresh machine:
#   make demo   create .venv, install infoxlm, run `infoxlm demo` (InfoXLM vs −XLCO on the shipped corpus)
#   make test   create .venv, install infoxlm with its test dependencies, run the test suite
# On a GPU machine, `make gpu-check` runs tests/gpu, infoxlm bench and two short real pre-training
# runs (at the defaults and with each of the run's speed levers changed) and writes
# gpu-check/report.md and report.json (`make gpu-check DRY=1`: the same on a CPU at test sizes;
# `ABLATE=1`: only the bench at the defaults and those runs).
# TORCH pins the torch wheel installed first (a CPU wheel here; users with GPUs may pick theirs).

PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
PY := $(VENV)/bin/python
STAMP := $(VENV)/.infoxlm-installed

.PHONY: demo quickstart test gpu-check clean-venv

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check "$(TORCH)"
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[test]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m infoxlm demo --output out/demo

quickstart: $(STAMP)
	$(PY) examples/quickstart.py

test: $(STAMP)
	$(PY) -m pytest

gpu-check: $(STAMP)
	$(PY) benchmarks/gpu_check.py --output gpu-check $(if $(DRY),--dry) $(if $(ABLATE),--ablate)

clean-venv:
	rm -rf $(VENV)
