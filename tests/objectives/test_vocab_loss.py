import warnings

import pytest
import torch
import torch.nn.functional as F

from infoxlm.objectives.vocab_loss import plain_token_cross_entropy, token_cross_entropy


def test_per_token_loss_is_cross_entropy_in_fp32():
    torch.manual_seed(0)
    logits = torch.randn(7, 50).to(torch.bfloat16)
    targets = torch.randint(0, 50, (7,))
    loss = token_cross_entropy(logits, targets)
    assert loss.dtype == torch.float32 and loss.shape == (7,)
    by_hand = torch.logsumexp(logits.float(), dim=1) - logits.float()[torch.arange(7), targets]
    torch.testing.assert_close(loss, by_hand, rtol=1e-6, atol=1e-6)
    assert float(loss.sum()) == pytest.approx(float(F.cross_entropy(logits.float(), targets, reduction="sum")), rel=1e-6)


def test_cpu_tensors_take_the_plain_path(monkeypatch):
    import infoxlm.objectives.vocab_loss as vocab_loss

    def refuse():
        raise AssertionError("compiled on a CPU tensor")

    monkeypatch.setattr(vocab_loss, "_fused_token_cross_entropy", refuse)
    logits, targets = torch.randn(3, 5, requires_grad=True), torch.tensor([0, 4, 2])
    token_cross_entropy(logits, targets, fused=True).sum().backward()
    expected = torch.softmax(logits.detach(), 1) - F.one_hot(targets, 5)
    torch.testing.assert_close(logits.grad, expected)
    torch.testing.assert_close(plain_token_cross_entropy(logits, targets), token_cross_entropy(logits, targets, fused=True))


def test_the_fused_kernels_run_only_when_asked_for(monkeypatch):
    """Where the kernels run (made to look so on a CPU), the default is still the plain
    function: the caller's fast paths (``FastPaths.fused_vocab_loss``) choose, nothing else."""
    import infoxlm.objectives.vocab_loss as vocab_loss

    calls = []

    def spy(logits, targets):
        calls.append(tuple(logits.shape))
        return plain_token_cross_entropy(logits, targets)

    monkeypatch.setattr(vocab_loss, "fused_kernels_run_on", lambda logits: True)
    monkeypatch.setattr(vocab_loss, "_fused_token_cross_entropy", lambda: spy)
    logits, targets = torch.randn(3, 5), torch.tensor([0, 4, 2])
    plain = token_cross_entropy(logits, targets)
    assert calls == []
    torch.testing.assert_close(token_cross_entropy(logits, targets, fused=True), plain)
    assert calls == [(3, 5)]


def test_a_compile_that_fails_falls_back_to_the_plain_function_with_one_warning(monkeypatch):
    import infoxlm.objectives.vocab_loss as vocab_loss

    def broken_compile():
        def run(logits, targets):
            raise RuntimeError("no C compiler found\nmore detail")

        return run

    monkeypatch.setattr(vocab_loss, "_fused_token_cross_entropy", broken_compile)
    monkeypatch.setattr(vocab_loss, "_fused_works", {})
    logits, targets = torch.randn(3, 5), torch.tensor([0, 4, 2])
    with pytest.warns(RuntimeWarning, match="could not run here .RuntimeError: no C compiler found.; using the plain one"):
        assert vocab_loss._fused_runs_on(logits) is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the second time: remembered, no new warning
        assert vocab_loss._fused_runs_on(logits) is False
    torch.testing.assert_close(token_cross_entropy(logits, targets, fused=False), plain_token_cross_entropy(logits, targets))


def test_a_compile_that_works_is_tried_once(monkeypatch):
    import infoxlm.objectives.vocab_loss as vocab_loss

    calls = []

    def counting_compile():
        def run(logits, targets):
            calls.append(logits.shape)
            return plain_token_cross_entropy(logits, targets)

        return run

    monkeypatch.setattr(vocab_loss, "_fused_token_cross_entropy", counting_compile)
    monkeypatch.setattr(vocab_loss, "_fused_works", {})
    logits = torch.randn(3, 5)
    assert vocab_loss._fused_runs_on(logits) and vocab_loss._fused_runs_on(logits)
    assert calls == [torch.Size([4, 16])]


def test_the_trial_runs_with_gradients_even_under_no_grad(monkeypatch):
    import infoxlm.objectives.vocab_loss as vocab_loss

    monkeypatch.setattr(vocab_loss, "_fused_token_cross_entropy", lambda: plain_token_cross_entropy)
    monkeypatch.setattr(vocab_loss, "_fused_works", {})
    with torch.no_grad():
        assert vocab_loss._fused_runs_on(torch.randn(3, 5))
    monkeypatch.setattr(vocab_loss, "_fused_works", {})
    with torch.inference_mode():
        assert vocab_loss._fused_runs_on(torch.randn(3, 5))
