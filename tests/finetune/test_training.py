"""The shared fine-tuning loop's per-epoch selection: the kept model is the best dev epoch's."""

from __future__ import annotations

import pytest
import torch

from infoxlm.finetune.training import Evaluation, FinetuneConfig, train


class Toy(torch.nn.Module):
    """y = w·x: every step moves w, so each epoch ends with different weights."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))


def test_a_run_whose_dev_score_peaks_at_epoch_2_reports_epoch_2s_test_score():
    features = [torch.tensor([1.0])] * 8  # 8 items, batch 4: 2 steps an epoch, 3 epochs

    def loss_of(model, batch):
        return ((model.w * batch["x"] - 5.0) ** 2).mean()  # pulls w towards 5, step after step

    dev_scores = iter([60.0, 80.0, 70.0])  # epochs 1, 2, 3: the peak is epoch 2
    test_at_epoch = []  # the test score of the weights each evaluation sees

    def test_score(model) -> float:
        return 100.0 * model.w.item()

    def evaluate(model) -> Evaluation:
        test_at_epoch.append(test_score(model))
        return Evaluation(0, 0.0, next(dev_scores))

    config = FinetuneConfig(lr=0.1, batch_size=4, epochs=3, selection="best", seed=0)
    model = Toy()
    result = train(model, features, lambda items: {"x": torch.stack(items)}, loss_of, config,
                   evaluate=evaluate, progress=False, log=lambda _: None)
    assert [e.epoch for e in result.evaluations] == [1.0, 2.0, 3.0]
    assert result.selected.epoch == 2.0 and result.selected_step == 4
    assert len(set(test_at_epoch)) == 3  # the weights differ at each epoch end
    assert test_score(model) == pytest.approx(test_at_epoch[1])  # epoch 2's, not the last epoch's


def test_last_keeps_the_final_weights():
    features = [torch.tensor([1.0])] * 4
    config = FinetuneConfig(lr=0.1, batch_size=2, epochs=2, selection="last", seed=0)
    scores = iter([90.0, 10.0])
    model = Toy()
    result = train(model, features, lambda items: {"x": torch.stack(items)},
                   lambda m, b: ((m.w * b["x"] - 5.0) ** 2).mean(), config,
                   evaluate=lambda m: Evaluation(0, 0.0, next(scores)), progress=False, log=lambda _: None)
    assert result.selected_step == 4 and result.selected.score == 10.0
