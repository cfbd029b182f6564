"""EngineStep must be the trainer's step: same weights after a step on the same data, and the
step's phase hook sees every phase."""

import torch

from infoxlm.bench.engine_step import EngineStep
from infoxlm.bench.timing import PHASES, PhaseTimer
from infoxlm.train.loop import Trainer
from infoxlm.train.presets import preset
from training_stores import build_store


def test_engine_step_updates_weights_as_the_trainer_does(tmp_path):
    build_store(tmp_path / "store")
    config = preset("test")
    config.model.dropout = 0.0
    trainer = Trainer(config, tmp_path / "store", tmp_path / "run", progress=False)
    trainer.model.contrast.queue_filled.fill_(trainer.model.contrast.queue_size)  # no pre-fill: keep the queue as is
    engine = EngineStep(trainer.config, torch.device("cpu"), vocab_size=trainer.store.vocab_size)
    engine.encoder.load_state_dict(trainer.encoder.state_dict())
    engine.contrast.load_state_dict(trainer.model.contrast.state_dict())

    data = trainer.pipeline.step(0, 0, 1)
    engine_timer, trainer_timer = PhaseTimer(), PhaseTimer()
    engine.step(lambda i: data, 0, engine_timer)
    trainer.train_step(phases=trainer_timer)
    assert set(engine_timer.seconds) == set(trainer_timer.seconds) == set(PHASES)

    for (name, ours), theirs in zip(engine.encoder.state_dict().items(), trainer.encoder.state_dict().values()):
        torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-7, msg=name)
    for (name, ours), theirs in zip(engine.contrast.state_dict().items(), trainer.model.contrast.state_dict().values()):
        torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-7, msg=name)


def test_the_benchmark_builds_the_model_the_trainer_builds(tmp_path):
    """One builder (train.model_build.build_model): from the same config and seed, the
    benchmark's encoder and contrast start with the trainer's very weights and queue."""
    build_store(tmp_path / "store")
    config = preset("test")
    trainer = Trainer(config, tmp_path / "store", tmp_path / "run", progress=False)
    engine = EngineStep(trainer.config, torch.device("cpu"), vocab_size=trainer.store.vocab_size, seed=config.run.seed)
    for ours, theirs in ((engine.encoder, trainer.encoder), (engine.contrast, trainer.model.contrast)):
        assert list(ours.state_dict()) == list(theirs.state_dict())
        for (name, a), b in zip(ours.state_dict().items(), theirs.state_dict().values()):
            assert torch.equal(a, b), name
    assert engine.contrast.key_dropout == trainer.model.contrast.key_dropout == config.contrast.key_dropout
