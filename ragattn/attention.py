"""Attention capture: softmax rows for chosen query positions, heads and layers, next to a fast
SDPA pass.

The forward pass itself runs PyTorch SDPA. For each selected layer, a registered attention function
also takes the post-RoPE (and, for Gemma 3, post-QK-norm) queries of the requested positions and all
keys of the layer (including any cached prefix), repeats the keys for grouped-query attention,
applies the module's own scaling, soft-cap, causal and sliding-window masks, and computes the
softmax over all keys in fp32 for those rows only. Nothing of size layers × heads × n × n is ever
materialized.

The forward stops after the deepest selected layer (no later layers, no LM head). A calibration
twin that shares a token prefix with the real prompt reuses the prefix's KV cache, so documents are
encoded once and each twin costs only its tail.

Everything runs on the proxy's device: the input ids and the index tensors (heads, rows, key
positions, causal mask) are built there once per forward, before the layer loop, so no layer copies
anything between host and device; the captured rows stay on the device (callers reduce them there
and move only per-document or per-sentence results to the CPU).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ragattn.cancel import check_cancelled
from ragattn.errors import InvalidInputError, ModelOutputError, TokenizerError
from ragattn.proxy import Proxy
from ragattn.sdpa import (
    ACTIVE,
    ATTN_IMPLEMENTATION,
    CaptureState,
    HeadSet,
    Reduce,
    StopForward,
    register_attention,
)


@dataclass(frozen=True, slots=True)
class Capture:
    """Captured attention rows.

    ``weights`` has shape ``[len(heads), R, n_keys]`` in fp32, on the proxy's device (reduce there,
    then ``.cpu()`` the small result), where R is the number of requested
    rows (``reduce="none"``) or 1 (``reduce="mean"``: the mean over the rows). Each row is a
    probability distribution over all ``n_keys`` earlier positions (it sums to 1 over the keys it
    may see).
    Head order follows ``heads.pairs``.
    """

    weights: torch.Tensor
    heads: HeadSet
    rows: tuple[int, ...]
    reduce: Reduce

    @property
    def n_keys(self) -> int:
        return int(self.weights.shape[-1])


class AttentionEngine:
    """Runs forward passes of a :class:`~ragattn.proxy.Proxy` and captures attention rows.

    One engine per proxy; it installs layer pre-hooks (no-ops unless a capture is active) that end
    the forward after the deepest layer a request needs, and stop cancelled work before each layer
    (:func:`ragattn.cancel.check_cancelled`).
    """

    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy
        self.cache_kw = (
            "cache"
            if "cache" in inspect.signature(proxy.decoder.forward).parameters
            else "past_key_values"
        )
        for index, layer in enumerate(proxy.layers):
            layer.register_forward_pre_hook(self._make_stop_hook(index))

    @staticmethod
    def _make_stop_hook(index: int) -> Any:
        def hook(_module: Any, _args: Any) -> None:
            check_cancelled()  # a layer boundary: abandoned work stops here (ragattn.cancel)
            state = ACTIVE.get()
            if state is not None and state.stop_after is not None and index > state.stop_after:
                raise StopForward

        return hook

    def _check_ids(self, ids: Sequence[int]) -> None:
        if len(ids) == 0:
            raise TokenizerError("cannot run the proxy on an empty token sequence")
        if len(ids) > self.proxy.max_positions:
            raise InvalidInputError(
                f"prompt has {len(ids)} tokens; the proxy {self.proxy.name!r} reads at most "
                f"{self.proxy.max_positions}"
            )

    def run(
        self, ids: Sequence[int], state: CaptureState, cache: Any | None, offset: int = 0
    ) -> None:
        """One forward over ``ids`` after ``offset`` tokens already in ``cache``, capturing what
        ``state`` asks for (read it with :meth:`collect`)."""
        device = self.proxy.device
        state.prepare(device, offset, len(ids))
        token = ACTIVE.set(state)
        try:
            with torch.inference_mode():
                input_ids = torch.tensor([list(ids)], dtype=torch.long, device=device)
                kwargs: dict[str, Any] = {"input_ids": input_ids}
                if cache is not None:
                    kwargs[self.cache_kw] = cache
                    kwargs["use_cache"] = True
                else:
                    kwargs["use_cache"] = False
                with contextlib.suppress(StopForward):
                    self.proxy.decoder(**kwargs)
        finally:
            ACTIVE.reset(token)

    def collect(self, state: CaptureState) -> Capture:
        assert state.heads is not None  # only capturing states are collected
        parts = []
        for layer in state.heads.layers:
            if layer not in state.per_layer:
                raise InvalidInputError(
                    f"layer {layer} captured nothing; rows {state.rows[:3]}... out of range"
                )
            parts.append(state.per_layer[layer])
        weights = torch.cat(parts, dim=0)
        if not bool(torch.isfinite(weights).all()):
            # A NaN here would score every document alike and look like a real answer downstream.
            raise ModelOutputError("the proxy produced non-finite attention weights (NaN/Inf)")
        return Capture(weights=weights, heads=state.heads, rows=state.rows, reduce=state.reduce)

    def capture(
        self,
        ids: Sequence[int],
        rows: Sequence[int],
        heads: HeadSet,
        *,
        reduce: Reduce = "mean",
        early_exit: bool = True,
    ) -> Capture:
        """One forward over ``ids``; attention rows of positions ``rows`` for ``heads``.

        Args:
            ids: the prompt's token ids (batch of one).
            rows: absolute positions whose attention rows to capture (e.g. the query span).
            heads: the (layer, head) pairs to capture.
            reduce: ``"mean"`` averages the rows (ICR), ``"none"`` keeps each row.
            early_exit: stop after ``heads.deepest``; results are identical either way.
        """
        self._check_ids(ids)
        self._check_rows(rows, len(ids), heads)
        state = CaptureState(
            rows=tuple(rows),
            heads=heads,
            reduce=reduce,
            stop_after=heads.deepest if early_exit else None,
        )
        self.run(ids, state, None)
        return self.collect(state)

    def capture_shared_prefix(
        self,
        prefix: Sequence[int],
        tails: Sequence[tuple[Sequence[int], Sequence[int]]],
        heads: HeadSet,
        *,
        reduce: Reduce = "mean",
        early_exit: bool = True,
    ) -> list[Capture]:
        """Encode ``prefix`` once, then run each ``(tail_ids, rows)`` on top of its KV cache.

        ``rows`` are absolute positions in ``prefix + tail``. Each result equals a full forward over
        ``prefix + tail`` (the calibration twin of ICR is the common case: documents in the prefix,
        the real query and ``N/A`` as two tails).
        """
        from transformers import DynamicCache

        if not tails:
            return []
        longest = max((list(t) for t, _ in tails), key=len)
        self._check_ids(list(prefix) + longest)
        heads.validate(self.proxy.num_layers, self.proxy.num_heads)
        stop = heads.deepest if early_exit else None
        cache = DynamicCache()
        if len(prefix) > 0:
            self.run(
                prefix, CaptureState(rows=(), heads=None, reduce="mean", stop_after=stop), cache
            )
        results = []
        for tail, rows in tails:
            if len(tail) == 0:
                raise TokenizerError("a tail after the shared prefix must hold at least one token")
            total = len(prefix) + len(tail)
            self._check_rows(rows, total, heads)
            if any(r < len(prefix) for r in rows):
                raise InvalidInputError(
                    "captured rows must lie in the tail, after the shared prefix"
                )
            state = CaptureState(rows=tuple(rows), heads=heads, reduce=reduce, stop_after=stop)
            self.run(tail, state, cache, offset=len(prefix))
            # A negative crop removes that many tokens in every transformers version we support.
            cache.crop(-len(tail))
            results.append(self.collect(state))
        return results

    def _check_rows(self, rows: Sequence[int], length: int, heads: HeadSet) -> None:
        heads.validate(self.proxy.num_layers, self.proxy.num_heads)
        if not rows:
            raise InvalidInputError("at least one query row must be captured")
        if any(not 0 <= r < length for r in rows):
            raise InvalidInputError(f"captured rows must lie in [0, {length})")


def engine_for(proxy: Proxy) -> AttentionEngine:
    """The engine of ``proxy``, created once (its hooks are installed once per model)."""
    engine = getattr(proxy.model, "_ragattn_engine", None)
    if engine is None:
        engine = AttentionEngine(proxy)
        proxy.model._ragattn_engine = engine
    return engine


__all__ = [
    "ATTN_IMPLEMENTATION",
    "AttentionEngine",
    "Capture",
    "HeadSet",
    "Reduce",
    "engine_for",
    "register_attention",
]
