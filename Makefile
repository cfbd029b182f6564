# Two commands do all the set-up on a fresh machine:
#   make demo   create .venv, install infoxlm, run the demo
#   make test   create .venv, install infoxlm with its test dependencies, run the test suite
# TORCH pins the torch wheel installed first (a CPU wheel here; users with GPUs may pick theirs).

PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
PY := $(VENV)/bin/python
STAMP := $(VENV)/.infoxlm-installed

.PHONY: demo test clean-venv

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check "$(TORCH)"
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[test]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/quickstart.py

test: $(STAMP)
	$(PY) -m pytest

clean-venv:
	rm -rf $(VENV)
