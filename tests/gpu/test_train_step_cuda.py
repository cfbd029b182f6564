"""On a GPU: a whole training step reads the device once (the losses and the gradient norm
the host must see before the optimizer writes), and the token bucket's spare rows change no
loss and, beyond bf16 rounding, no gradient. Skipped without CUDA; run on a GPU machine with
``pytest tests/gpu``."""

import contextlib
import io
import warnings

import pytest
import torch

from infoxlm.model.fast_paths import FastPaths
from infoxlm.objectives.masked_lm import MaskedLM
from infoxlm.train.config import apply_overrides
from infoxlm.train.joint_model import JointModel
from infoxlm.train.loop import Trainer
from infoxlm.train.presets import preset

from test_fast_path_cuda import _demo_micro_step, _relative
from training_stores import build_store

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_a_training_step_waits_on_the_device_once(tmp_path):
    build_store(tmp_path / "store")
    config = apply_overrides(preset("test"), ["optim.max_steps=8", "run.device=cuda", "run.compile=false"])
    with contextlib.redirect_stdout(io.StringIO()):
        trainer = Trainer(config, tmp_path / "store", tmp_path / "run", progress=False)
        for _ in range(4):  # the queue's pre-fill and the fused loss's trial run are behind
            trainer.train_step()
            trainer.step += 1
        torch.cuda.synchronize()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                for _ in range(2):
                    trainer.train_step()
                    trainer.step += 1
            finally:
                torch.cuda.set_sync_debug_mode("default")
    trainer.close()
    syncs = [f"{w.filename}:{w.lineno}: {w.message}" for w in caught if "synchroniz" in str(w.message)]
    assert len(syncs) == 2, "\n".join(syncs)


def test_the_token_bucket_leaves_the_joint_micro_step_as_it_is():
    encoder, contrast, batches = _demo_micro_step()
    results = []
    for bucket in (0, 2048):
        torch.manual_seed(0)
        model = JointModel(encoder.with_fast_paths(FastPaths.training(single_process=True, token_bucket=bucket)), [MaskedLM("mmlm"), MaskedLM("tlm"), contrast])
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = {name: term.loss_sum for name, term in model(dict(zip(("mmlm", "tlm", "xlco"), batches))).items()}
        (out["mmlm"] + out["tlm"] + out["xlco"]).backward()
        grads = [p.grad.clone() for p in model.encoder.parameters() if p.grad is not None]
        results.append(([float(out["mmlm"]), float(out["tlm"]), float(out["xlco"])], grads))
    assert any(b.packing.num_tokens % 2048 for b in batches)
    (losses, grads), (bucketed_losses, bucketed_grads) = results
    assert bucketed_losses == pytest.approx(losses, rel=2e-3)
    assert len(grads) == len(bucketed_grads)
    assert max(_relative(a, b) for a, b in zip(bucketed_grads, grads)) < 2e-2
