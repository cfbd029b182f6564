"""autocast_dtype names the dtype autocast multiplies in, or None where it is off."""

import torch

from infoxlm.model.autocast import autocast_dtype


def test_none_outside_autocast_and_its_dtype_inside():
    assert autocast_dtype("cpu") is None
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert autocast_dtype("cpu") is torch.bfloat16
        assert autocast_dtype("cuda") is None  # per device type
        with torch.autocast("cpu", enabled=False):
            assert autocast_dtype("cpu") is None
