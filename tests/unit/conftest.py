"""Unit-test fixtures: an independent reference for captured attention rows."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch

EagerRows = Callable[[Any, Sequence[int], Sequence[int]], torch.Tensor]


def _eager_rows(proxy: Any, ids: Sequence[int], rows: Sequence[int]) -> torch.Tensor:
    """All layers' attention probabilities at ``rows`` from transformers' own eager attention
    (``output_attentions=True``), fp32, layer-major: ``[layers * heads, len(rows), len(ids)]``.

    The proxy's attention implementation is restored afterwards, whatever it was.
    """
    model = proxy.model
    previous = model.config._attn_implementation
    model.set_attn_implementation("eager")
    try:
        with torch.inference_mode():
            out = model(input_ids=torch.tensor([list(ids)]), output_attentions=True)
    finally:
        model.set_attn_implementation(previous)
    return torch.cat([a[0][:, list(rows), :].float() for a in out.attentions], dim=0)


@pytest.fixture(scope="session")
def eager_rows() -> EagerRows:
    """``eager_rows(proxy, ids, rows)``: the reference the captured rows are compared with."""
    return _eager_rows
