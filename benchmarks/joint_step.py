"""The joint training step of infoxlm against a plain Hugging Face baseline.

The same as ``infoxlm bench`` (see src/infoxlm/bench/step_benchmark.py for what is measured and
how); kept here beside the other benchmarks so that BENCHMARKS.md's commands run from a
checkout:

    python benchmarks/joint_step.py --size demo                 # table on stdout
    python benchmarks/joint_step.py --size base --device cpu --json
"""

from __future__ import annotations

import sys

from infoxlm.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
