"""Which dtype autocast multiplies in, where the model's fast paths need to know."""

from __future__ import annotations

import torch


def autocast_dtype(device_type: str) -> torch.dtype | None:
    """The dtype autocast casts products to on this device type ("cuda", "cpu"), or None when
    autocast is off there."""
    return torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else None
