"""``infoxlm bench``: infoxlm's joint training step timed against a plain Hugging Face baseline.

- ``sizes.py``: the named sizes (test, demo, base, large) and their default batches;
- ``synthetic_batches.py``: realistic random batches in the engine's own types;
- ``engine_step.py``: infoxlm's step (the trainer's ``build_model`` and ``JointStep``) with
  phase timers; ``hf_baseline.py``: the same step
  written plainly with transformers;
- ``timing.py``: phase timers and memory probes (the FLOP count behind MFU is
  ``train/flops.py``, which the training log uses too);
- ``step_benchmark.py``: the run (loss check, interleaved timing); ``report.py``: the table.
"""
