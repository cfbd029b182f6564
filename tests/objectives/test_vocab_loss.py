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

    monkeypatch.setattr(vocab_loss, "_compiled_token_cross_entropy", refuse)
    logits, targets = torch.randn(3, 5, requires_grad=True), torch.tensor([0, 4, 2])
    token_cross_entropy(logits, targets).sum().backward()
    expected = torch.softmax(logits.detach(), 1) - F.one_hot(targets, 5)
    torch.testing.assert_close(logits.grad, expected)
    torch.testing.assert_close(plain_token_cross_entropy(logits, targets), token_cross_entropy(logits, targets))
