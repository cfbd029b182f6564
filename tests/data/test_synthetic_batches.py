import numpy as np
import pytest

from infoxlm.data.synthetic_batches import SyntheticSpec, step_tokens, synthetic_step
from infoxlm.errors import DataError

SPEC = SyntheticSpec(vocab_size=500, block_size=32, tlm_max_length=48, xlco_max_length=24,
                     mmlm_batch_size=8, tlm_batch_size=8, xlco_batch_size=8, max_tokens=256)


def test_same_step_same_batches_and_shapes_within_limits():
    a, b = synthetic_step(SPEC, 3), synthetic_step(SPEC, 3)
    for x, y in zip(a.mmlm + a.tlm, b.mmlm + b.tlm):
        assert x.input_ids.equal(y.input_ids) and x.targets.equal(y.targets)
    assert all(m.input_ids.shape[1] == 32 and m.num_padding == 0 for m in a.mmlm)
    assert all(t.input_ids.shape[1] <= 48 for t in a.tlm)
    assert all(c.query.input_ids.shape[1] <= 24 and c.key.input_ids.shape[1] <= 24 for c in a.xlco)
    assert sum(c.num_examples for c in a.xlco) == 8
    assert step_tokens(a) == sum(s.num_tokens for s in a.stats.values()) > 0
    # a different step draws different ids
    assert not synthetic_step(SPEC, 4).mmlm[0].input_ids.equal(a.mmlm[0].input_ids)


def test_masking_rate_is_about_fifteen_percent():
    spec = SyntheticSpec(500, 128, 48, 24, 64, 0, 0, 8192)
    data = synthetic_step(spec, 0)
    ordinary = 126 * 64  # the block minus <s> and </s>
    assert data.stats["mmlm"].num_masked / ordinary == pytest.approx(0.15, abs=0.02)
    ids = np.concatenate([b.input_ids.numpy().ravel() for b in data.mmlm])
    assert ids.max() <= 499 and ids.min() >= 0


def test_spec_rejects_a_budget_too_small():
    with pytest.raises(DataError, match="max-tokens 40"):
        SyntheticSpec(500, 32, 48, 24, 1, 1, 1, 40)
