"""Learned attention reranking: LoRA on the query→document attention of a layer band
(BlockRank-style, Gupta et al. 2025), behind ``ragattn heads train``.

What is trained: LoRA adapters (rank ``r``, via :mod:`peft`) on ``q_proj`` and ``k_proj`` of a band
of consecutive layers (default 10–17 of SmolLM2-135M's 30), nothing else. At rank 8 that is
8 · (576 + 576 + 576 + 192) · 8 = 122,880 parameters, a 0.5 MB file.

The score of a document d is the quantity ICR scores, read from the band only: with ICR's listwise
prompt (:func:`ragattn.prompt.rerank_pieces`, documents first, then the late instruction, the query
and the chat suffix), average the attention probabilities of the query-span rows, then the band's
heads (``L × H`` of them), and sum that over d's tokens:

    m(d)  = Σ_{t ∈ T_d} mean_{(l,h) ∈ band} mean_{q ∈ query span} a^{l,h}_{q→t}
    s(d)  = log(n · m(d))                      uncalibrated (n documents in the prompt)
    s(d)  = log m(d) − log m_N/A(d)            calibrated (ICR's ``N/A`` twin, same documents)

so ``s`` is in nats: uncalibrated, 0 means d gets the share of a uniform reader (1/n of the mass);
calibrated, 0 means the query moves no mass to d compared with the content-free ``N/A`` query.

Loss: listwise softmax cross-entropy over a list's documents, multi-positive as the likelihood that
the softmax picks *any* relevant document, ``−log Σ_{d ∈ R} softmax(s / T)_d``. (Uncalibrated and at
T = 1 that is ``−log`` of the share of the query's band attention that lands on relevant documents.)
The alternative, the mean over positives of ``−log softmax(s)_d``, pushes positives against each
other in multi-hop lists (HotpotQA's two gold paragraphs) and is not used.

Recipe (issue 19's pilot: lr 1e-3 without warm-up did nothing, 1e-2 diverged): Adam at lr 3e-3,
linear warm-up over the first 10 % of the steps and constant afterwards, gradient-norm clipping at
1.0, one list per step.

The differentiable forward: the runtime's attention engine captures rows under
``torch.inference_mode``, so training runs its own capture. A forward pre-hook on each band layer's
attention module recomputes the post-RoPE queries of the query rows and the keys of all positions
from that module's own (possibly LoRA-wrapped) ``q_proj``/``k_proj`` and the rotary embeddings the
decoder passes in, and takes the softmax in fp32 with autograd on; a pre-hook on the layer after the
band ends the forward (early exit), as the engine does. The model's own attention runs unchanged.
The ``N/A`` twin reuses the documents' KV cache (the prefix runs once; each twin costs its tail).

Adapters are written as one safetensors file (A/B matrices; band, rank, alpha, calibration and
prompt in its metadata) beside a model card. :func:`merge_into` folds ``W += (alpha / r) · B A``
into the proxy's weights, so inference costs nothing extra; :func:`score_lists` reads the band
score from a plain or merged proxy.

Training lists (:func:`build_lists`) come from training splits only, never from an evaluation set
(TREC DL19, SciFact test, NovelEval, FiQA test, 2Wiki questions 0–299, HotpotQA dev, SQuAD questions
0–999).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import inspect
import json
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from ragattn._optional import require
from ragattn.errors import ConfigError, InvalidInputError, ModelOutputError
from ragattn.lab.evaluation import datasets as ds
from ragattn.lab.evaluation.metrics import list_ndcg_at_10, ndcg_at_10
from ragattn.limits import cut_at_tokens
from ragattn.prompt import (
    CALIBRATION_QUERY,
    BuiltPrompt,
    assemble,
    document_text,
    rerank_pieces,
    shared_prefix_length,
    with_query,
)
from ragattn.proxy import Proxy
from ragattn.rerank.icr import plan_windows
from ragattn.types import Document

ADAPTER_FILENAME = "attention-lora.safetensors"
"""The adapter file under ``models/<proxy>/``."""
CARD_FILENAME = "attention-lora.md"
"""Its model card, beside it."""
ADAPTER_FORMAT = 1
"""Version of the adapter file layout (metadata key ``ragattn_adapter``)."""
TARGETS = ("q_proj", "k_proj")
"""The projections LoRA adapts: only queries and keys, so only attention patterns change."""
MAX_ADAPTER_BYTES = 2 * 1024 * 1024
"""The size bound of the issue: an adapter is a small file."""

TWOWIKI_TRAIN_FROM = 300
"""2Wiki questions 0–299 are evaluation questions; training reads 300 on."""
SQUAD_TRAIN_FROM = 1000
"""SQuAD v2 answerable questions 0–999 are the compression evaluation slice; training reads 1000
on (the same rule as the sentence probes' training)."""


# ------------------------------------------------------------------------------------ settings


@dataclass(frozen=True, slots=True)
class Band:
    """Consecutive decoder layers ``first..last`` (inclusive, 0-based) whose attention is trained
    and read."""

    first: int
    last: int

    def __post_init__(self) -> None:
        if not 0 <= self.first <= self.last:
            raise InvalidInputError(
                f"a band needs 0 <= first <= last, got {self.first}-{self.last}"
            )

    @classmethod
    def parse(cls, text: str) -> Band:
        """``"10-17"`` (or ``"12"`` for one layer) -> ``Band(10, 17)``."""
        parts = [p.strip() for p in text.split("-")]
        try:
            values = [int(p) for p in parts]
        except ValueError:
            raise InvalidInputError(f"a band is FIRST-LAST (e.g. 10-17), got {text!r}") from None
        if len(values) == 1:
            return cls(values[0], values[0])
        if len(values) != 2:
            raise InvalidInputError(f"a band is FIRST-LAST (e.g. 10-17), got {text!r}")
        return cls(values[0], values[1])

    @property
    def layers(self) -> tuple[int, ...]:
        return tuple(range(self.first, self.last + 1))

    def __str__(self) -> str:
        return f"{self.first}-{self.last}"

    def check(self, proxy: Proxy) -> None:
        """Raise InvalidInputError when the band lies outside the proxy's layers."""
        if self.last >= proxy.num_layers:
            raise InvalidInputError(
                f"band {self} is outside the proxy's {proxy.num_layers} layers "
                f"(0-{proxy.num_layers - 1})"
            )


DEFAULT_BAND = Band(10, 17)


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainSettings:
    """How :func:`train_adapter` trains.

    Attributes:
        band: the layers whose ``q_proj``/``k_proj`` get LoRA and whose attention is scored.
        rank: LoRA rank r.
        alpha: LoRA alpha; the update is ``(alpha / r) · B A``. None: alpha = r (scale 1, peft's
            default ratio at r = 8).
        lr: Adam's peak learning rate.
        warmup: fraction of the steps over which the learning rate rises linearly from lr/steps to
            lr (at least one step); then constant (``decay="none"``) or falling to zero along a
            half cosine (``decay="cosine"``).
        decay: the learning rate after the warm-up: ``"none"`` or ``"cosine"``.
        clip: maximum global gradient norm (L2 over all LoRA parameters).
        epochs: passes over the lists (reshuffled, seeded, after the first).
        calibrate: train the calibrated score (minus the ``N/A`` twin), else the uncalibrated one.
        max_doc_tokens: documents are cut to their first this many proxy tokens (title included)
            before they enter the prompt; keeps lists of 30 documents near 2,700 tokens.
        instruction: ICR's late instruction (``"ie"``, ``"qa"`` or literal text).
        temperature: softmax temperature T of the loss, in nats of score.
        seed: seeds the LoRA initialisation and the epoch shuffles.
        curve_every: steps per point of the loss-curve summary (None: about ten points).
    """

    band: Band = DEFAULT_BAND
    rank: int = 8
    alpha: int | None = None
    lr: float = 3e-3
    warmup: float = 0.1
    decay: str = "none"
    clip: float = 1.0
    epochs: int = 1
    calibrate: bool = True
    max_doc_tokens: int = 80
    instruction: str = "ie"
    temperature: float = 1.0
    seed: int = 0
    curve_every: int | None = None

    def __post_init__(self) -> None:
        checks = [
            (self.rank >= 1, f"rank must be >= 1, got {self.rank}"),
            (self.alpha is None or self.alpha > 0, f"alpha must be > 0, got {self.alpha}"),
            (self.lr > 0, f"lr must be > 0, got {self.lr}"),
            (0.0 <= self.warmup < 1.0, f"warmup must be in [0, 1), got {self.warmup}"),
            (self.decay in ("none", "cosine"), f"decay must be none or cosine, got {self.decay}"),
            (self.clip > 0, f"clip must be > 0, got {self.clip}"),
            (self.epochs >= 1, f"epochs must be >= 1, got {self.epochs}"),
            (self.max_doc_tokens >= 1, f"max_doc_tokens must be >= 1, got {self.max_doc_tokens}"),
            (self.temperature > 0, f"temperature must be > 0, got {self.temperature}"),
            (
                self.curve_every is None or self.curve_every >= 1,
                f"curve_every must be >= 1, got {self.curve_every}",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise InvalidInputError(message)

    @property
    def lora_alpha(self) -> int:
        return self.rank if self.alpha is None else self.alpha


# ------------------------------------------------------------------------------ adapter (file)


@dataclass(frozen=True, slots=True, kw_only=True)
class AdapterConfig:
    """What an adapter file says about itself (its safetensors metadata).

    ``calibrate``, ``instruction`` and ``max_doc_tokens`` are how it was *trained*; scoring with the
    same prompt and calibration is what its card's numbers assume.
    """

    proxy: str
    band: Band
    rank: int
    alpha: int
    calibrate: bool
    instruction: str
    max_doc_tokens: int
    targets: tuple[str, ...] = TARGETS
    format: int = ADAPTER_FORMAT

    @property
    def scale(self) -> float:
        """The LoRA scale ``alpha / r`` of ``W + scale · B A``."""
        return self.alpha / self.rank

    def to_json(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "proxy": self.proxy,
            "band": [self.band.first, self.band.last],
            "rank": self.rank,
            "alpha": self.alpha,
            "targets": list(self.targets),
            "calibrate": self.calibrate,
            "prompt": {"layout": "icr", "instruction": self.instruction},
            "max_doc_tokens": self.max_doc_tokens,
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> AdapterConfig:
        if int(raw.get("format", 0)) != ADAPTER_FORMAT:
            raise ConfigError(
                f"adapter format {raw.get('format')!r} is not {ADAPTER_FORMAT}; retrain it with "
                "'ragattn heads train'"
            )
        first, last = raw["band"]
        return cls(
            proxy=str(raw["proxy"]),
            band=Band(int(first), int(last)),
            rank=int(raw["rank"]),
            alpha=int(raw["alpha"]),
            calibrate=bool(raw["calibrate"]),
            instruction=str(raw["prompt"]["instruction"]),
            max_doc_tokens=int(raw["max_doc_tokens"]),
            targets=tuple(raw["targets"]),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class LoraPair:
    """The LoRA matrices of one projection: ``a`` is ``[r, in]``, ``b`` is ``[out, r]`` (fp32)."""

    layer: int
    target: str
    a: torch.Tensor
    b: torch.Tensor

    @property
    def key(self) -> str:
        return f"layers.{self.layer}.self_attn.{self.target}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Adapter:
    """A trained adapter: its configuration and one :class:`LoraPair` per adapted projection."""

    config: AdapterConfig
    pairs: tuple[LoraPair, ...]

    @property
    def parameters(self) -> int:
        return sum(p.a.numel() + p.b.numel() for p in self.pairs)

    @property
    def digest(self) -> str:
        """SHA-256 (16 hex digits) of the configuration and the matrices: the adapter's identity."""
        h = hashlib.sha256(json.dumps(self.config.to_json(), sort_keys=True).encode())
        for p in self.pairs:
            h.update(p.key.encode())
            h.update(p.a.detach().cpu().contiguous().numpy().tobytes())
            h.update(p.b.detach().cpu().contiguous().numpy().tobytes())
        return h.hexdigest()[:16]


def save_adapter(adapter: Adapter, path: str | Path) -> Path:
    """Write ``adapter`` as one safetensors file (fp32 A/B matrices, config in the metadata).

    Raises:
        ModelOutputError: the file would exceed :data:`MAX_ADAPTER_BYTES` (2 MB).
    """
    from safetensors.torch import save_file

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tensors: dict[str, torch.Tensor] = {}
    for p in adapter.pairs:
        tensors[f"{p.key}.lora_A"] = p.a.detach().float().cpu().contiguous()
        tensors[f"{p.key}.lora_B"] = p.b.detach().float().cpu().contiguous()
    metadata = {"ragattn_adapter": json.dumps(adapter.config.to_json(), sort_keys=True)}
    tmp = target.with_name(target.name + ".tmp")
    save_file(tensors, str(tmp), metadata=metadata)
    size = tmp.stat().st_size
    if size > MAX_ADAPTER_BYTES:
        tmp.unlink()
        raise ModelOutputError(
            f"the adapter would be {size / 1e6:.1f} MB, over the {MAX_ADAPTER_BYTES / 1e6:.1f} MB "
            "bound; lower the rank or narrow the band"
        )
    tmp.chmod(0o644)  # a packaged asset: readable by everyone, like the other model files
    tmp.replace(target)
    return target


def load_adapter(path: str | Path) -> Adapter:
    """Read an adapter written by :func:`save_adapter`.

    Raises:
        ConfigError: the file is missing, is not an adapter, or has another format version.
    """
    from safetensors import safe_open

    source = Path(path)
    if not source.is_file():
        raise ConfigError(f"adapter file {source} does not exist; train one: ragattn heads train")
    with safe_open(str(source), framework="pt") as fh:
        meta = fh.metadata() or {}
        if "ragattn_adapter" not in meta:
            raise ConfigError(f"{source} is not a ragattn attention adapter (no metadata)")
        config = AdapterConfig.from_json(json.loads(meta["ragattn_adapter"]))
        pairs = tuple(
            LoraPair(
                layer=layer,
                target=target,
                a=fh.get_tensor(f"layers.{layer}.self_attn.{target}.lora_A"),
                b=fh.get_tensor(f"layers.{layer}.self_attn.{target}.lora_B"),
            )
            for layer in config.band.layers
            for target in config.targets
        )
    return Adapter(config=config, pairs=pairs)


def merge_into(proxy: Proxy, adapter: Adapter | str | Path) -> Adapter:
    """Fold the adapter into the proxy's weights in place: ``W += (alpha / r) · B A`` for each
    adapted ``q_proj``/``k_proj``. Afterwards the proxy scores exactly like the LoRA model (up to
    fp32 rounding) at no extra cost per forward. Needs only torch and safetensors.

    Returns:
        The merged adapter.

    Raises:
        ConfigError: the proxy carries LoRA modules or int8-quantised linears (merge before
            quantising), its shapes do not fit the adapter, or this adapter is already merged.
    """
    found = adapter if isinstance(adapter, Adapter) else load_adapter(adapter)
    found.config.band.check(proxy)
    merged: tuple[str, ...] = getattr(proxy.model, "_ragattn_merged_adapters", ())
    if found.digest in merged:
        raise ConfigError(f"adapter {found.digest} is already merged into this proxy")
    linears = []
    for pair in found.pairs:
        linear = getattr(proxy.layers[pair.layer].self_attn, pair.target)
        if not isinstance(linear, torch.nn.Linear) or hasattr(linear, "base_layer"):
            raise ConfigError(
                f"layer {pair.layer} {pair.target} is a {type(linear).__name__}, not a plain "
                "Linear (LoRA attached, or quantised): merge into an unquantised proxy"
            )
        if tuple(linear.weight.shape) != (pair.b.shape[0], pair.a.shape[1]):
            raise ConfigError(
                f"adapter {pair.key} is {pair.b.shape[0]}x{pair.a.shape[1]}, the proxy's weight "
                f"is {tuple(linear.weight.shape)}: it was trained on another proxy"
            )
        linears.append(linear)
    with torch.no_grad():
        for pair, linear in zip(found.pairs, linears, strict=True):
            delta = (pair.b.float() @ pair.a.float()) * found.config.scale
            linear.weight.add_(delta.to(dtype=linear.weight.dtype, device=linear.weight.device))
    proxy.model._ragattn_merged_adapters = (*merged, found.digest)
    return found


@contextlib.contextmanager
def lora_attached(
    proxy: Proxy,
    *,
    band: Band,
    rank: int,
    alpha: int,
    adapter: Adapter | None = None,
    seed: int = 0,
) -> Iterator[dict[tuple[int, str], Any]]:
    """Wrap the band's ``q_proj``/``k_proj`` in peft LoRA layers for the duration of the block.

    Fresh LoRA layers start as peft initialises them (A Kaiming-uniform from ``seed``, B zero, so
    the model is unchanged); with ``adapter`` its matrices are copied in. Only the LoRA matrices
    require gradients. On exit the original Linear modules are put back, so the proxy is exactly
    as before.

    Yields:
        ``{(layer, target): peft LoRA layer}``.
    """
    band.check(proxy)
    peft = require("peft", extra="lab")
    from peft.tuners.lora.layer import Linear as LoraLinear

    config = peft.LoraConfig(
        r=rank, lora_alpha=alpha, lora_dropout=0.0, target_modules=list(TARGETS), bias="none"
    )
    originals: dict[tuple[int, str], torch.nn.Module] = {}
    wrapped: dict[tuple[int, str], Any] = {}
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            for layer in band.layers:
                attn = proxy.layers[layer].self_attn
                for target in TARGETS:
                    base = getattr(attn, target)
                    if hasattr(base, "base_layer"):
                        raise ConfigError(f"layer {layer} {target} already carries LoRA")
                    lora = LoraLinear(base, "default", config=config, r=rank, lora_alpha=alpha)
                    lora.to(base.weight.device)
                    originals[(layer, target)] = base
                    setattr(attn, target, lora)
                    wrapped[(layer, target)] = lora
        if adapter is not None:
            by_key = {(p.layer, p.target): p for p in adapter.pairs}
            if set(by_key) != set(wrapped):
                raise ConfigError("the adapter's projections differ from the requested band")
            with torch.no_grad():
                for key, lora in wrapped.items():
                    lora.lora_A["default"].weight.copy_(by_key[key].a)
                    lora.lora_B["default"].weight.copy_(by_key[key].b)
        for lora in wrapped.values():
            lora.base_layer.requires_grad_(False)
            lora.lora_A["default"].weight.requires_grad_(True)
            lora.lora_B["default"].weight.requires_grad_(True)
        yield wrapped
    finally:
        for (layer, target), base in originals.items():
            setattr(proxy.layers[layer].self_attn, target, base)


def adapter_from(
    modules: Mapping[tuple[int, str], Any], proxy: Proxy, settings: TrainSettings
) -> Adapter:
    """Copy the current LoRA matrices out of :func:`lora_attached`'s modules into an Adapter."""
    pairs = tuple(
        LoraPair(
            layer=layer,
            target=target,
            a=modules[(layer, target)].lora_A["default"].weight.detach().float().cpu().clone(),
            b=modules[(layer, target)].lora_B["default"].weight.detach().float().cpu().clone(),
        )
        for layer in settings.band.layers
        for target in TARGETS
    )
    config = AdapterConfig(
        proxy=proxy.name,
        band=settings.band,
        rank=settings.rank,
        alpha=settings.lora_alpha,
        calibrate=settings.calibrate,
        instruction=settings.instruction,
        max_doc_tokens=settings.max_doc_tokens,
    )
    return Adapter(config=config, pairs=pairs)


# --------------------------------------------------------------------- differentiable band capture


class _BandDone(Exception):
    """Raised by the pre-hook of the layer after the band: the forward ends there."""


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding of ``x`` ``[1, heads, n, d]`` with ``cos``/``sin`` ``[1, n, d]`` (the
    half-split convention of transformers' Llama, Qwen and Gemma)."""
    return x * cos.unsqueeze(1) + _rotate_half(x) * sin.unsqueeze(1)


def _heads(module: Any, name: str, hidden: torch.Tensor) -> torch.Tensor:
    """``[1, heads, n, head_dim]`` projections of ``hidden`` by ``module.<name>_proj``, with the
    module's q/k norm where it has one (Qwen 3, Gemma 3)."""
    out = getattr(module, f"{name}_proj")(hidden)
    out = out.view(hidden.shape[0], hidden.shape[1], -1, int(module.head_dim))
    norm = getattr(module, f"{name}_norm", None)
    if norm is not None:
        out = norm(out)
    return out.transpose(1, 2)


@dataclass(slots=True)
class _BandState:
    """One forward's request: which rows to read, and the band's keys of an earlier prefix."""

    rows: torch.Tensor | None = None  # local positions of the query rows in this forward
    offset: int = 0  # tokens already in the KV cache
    keep_keys: bool = False  # prefix pass: store the band's keys for the tails
    prefix_keys: dict[int, torch.Tensor] = field(default_factory=dict)
    probs: dict[int, torch.Tensor] = field(default_factory=dict)  # layer -> [heads, n_keys]


class BandCapture:
    """Differentiable capture of the band's query-row attention (a context manager).

    Inside the ``with`` block, :meth:`run` does one forward (optionally on top of a KV cache) that
    ends after the band's last layer and returns, per key position, the band's attention averaged
    over the query rows and all band heads (probability units, fp32, with autograd when grad mode
    is on). Hooks are installed on entry and removed on exit; outside the block the proxy is
    untouched.
    """

    def __init__(self, proxy: Proxy, band: Band) -> None:
        band.check(proxy)
        self.proxy = proxy
        self.band = band
        self._state = _BandState()
        self._handles: list[Any] = []
        self._cache_kw = (
            "cache"
            if "cache" in inspect.signature(proxy.decoder.forward).parameters
            else "past_key_values"
        )

    def __enter__(self) -> BandCapture:
        for layer in self.band.layers:
            attn = self.proxy.layers[layer].self_attn
            self._handles.append(
                attn.register_forward_pre_hook(self._make_hook(layer), with_kwargs=True)
            )
        if self.band.last + 1 < self.proxy.num_layers:
            self._handles.append(
                self.proxy.layers[self.band.last + 1].register_forward_pre_hook(self._stop)
            )
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    @staticmethod
    def _stop(_module: Any, _args: Any) -> None:
        raise _BandDone

    def _make_hook(self, layer: int) -> Callable[[Any, tuple, dict], None]:
        def hook(module: Any, args: tuple, kwargs: dict) -> None:
            state = self._state
            hidden = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
            cos, sin = kwargs["position_embeddings"]
            keys = _rope(_heads(module, "k", hidden), cos, sin)  # [1, kv, n, d]
            earlier = state.prefix_keys.get(layer)
            if earlier is not None and not state.keep_keys:
                keys = torch.cat([earlier, keys], dim=2)
            if state.keep_keys:
                state.prefix_keys[layer] = keys
            if state.rows is None:
                return
            rows = state.rows
            q = _heads(module, "q", hidden.index_select(1, rows))
            q = _rope(q, cos.index_select(1, rows), sin.index_select(1, rows))[0].float()
            groups = q.shape[0] // keys.shape[1]
            k = keys[0].float().repeat_interleave(groups, dim=0)  # [heads, n_keys, d]
            logits = torch.matmul(q, k.transpose(-1, -2)) * float(module.scaling)
            positions = torch.arange(k.shape[1], device=k.device)
            absolute = rows + state.offset
            allowed = positions[None, :] <= absolute[:, None]
            window = getattr(module, "sliding_window", None)
            if window:
                allowed = allowed & (positions[None, :] > absolute[:, None] - int(window))
            logits = logits.masked_fill(~allowed[None], float("-inf"))
            state.probs[layer] = torch.softmax(logits, dim=-1).mean(dim=1)  # [heads, n_keys]

        return hook

    def run(
        self,
        ids: Sequence[int],
        rows: Sequence[int] | None,
        *,
        cache: Any | None = None,
        offset: int = 0,
        keep_keys: bool = False,
    ) -> torch.Tensor | None:
        """One forward over ``ids`` after ``offset`` tokens already in ``cache``.

        Args:
            ids: this forward's token ids.
            rows: absolute positions (>= ``offset``) of the query rows to read, or None (a prefix
                pass that only fills the cache).
            cache: a transformers DynamicCache for prefix reuse, or None.
            offset: tokens already in ``cache``.
            keep_keys: remember the band's keys of these tokens for later tails (prefix pass).

        Returns:
            ``[offset + len(ids)]`` mean attention of the rows over the band's heads per key
            position, or None when ``rows`` is None.
        """
        if not self._handles:
            raise InvalidInputError("BandCapture.run needs the capture entered ('with' block)")
        device = self.proxy.device
        state = self._state
        local = None if rows is None else [r - offset for r in rows]
        if local is not None and (not local or any(not 0 <= r < len(ids) for r in local)):
            raise InvalidInputError("query rows must lie in this forward's tokens")
        state.rows = None if local is None else torch.tensor(local, dtype=torch.long, device=device)
        state.offset, state.keep_keys, state.probs = offset, keep_keys, {}
        if keep_keys or cache is None:
            state.prefix_keys = {}  # a new prompt: no keys of an earlier prefix apply
        kwargs: dict[str, Any] = {
            "input_ids": torch.tensor([list(ids)], dtype=torch.long, device=device),
            "use_cache": cache is not None,
        }
        if cache is not None:
            kwargs[self._cache_kw] = cache
        with contextlib.suppress(_BandDone):
            self.proxy.decoder(**kwargs)
        if rows is None:
            return None
        missing = [layer for layer in self.band.layers if layer not in state.probs]
        if missing:
            raise ModelOutputError(f"band layers {missing} captured nothing")
        per_token = torch.cat([state.probs[layer] for layer in self.band.layers]).mean(dim=0)
        return per_token


# --------------------------------------------------------------------------------------- scores


def truncate_documents(tokenizer: Any, docs: Sequence[Document], max_tokens: int) -> list[Document]:
    """Each document cut to its first ``max_tokens`` proxy tokens of ``title + "\\n" + text`` (the
    prompt body), the rule ICR's windows use."""
    out = []
    for doc in docs:
        body, offset = document_text(doc)
        enc = tokenizer(body, add_special_tokens=False, return_offsets_mapping=True)
        cut = cut_at_tokens(enc["offset_mapping"], max_tokens)
        if cut is not None:
            doc = Document(
                text=doc.text[: max(0, cut - offset)],
                id=doc.id,
                title=doc.title,
                metadata=doc.metadata,
            )
        out.append(doc)
    return out


def _prompts(
    proxy: Proxy,
    query: str,
    docs: Sequence[Document],
    order: Sequence[int],
    *,
    calibrate: bool,
    instruction: str,
) -> tuple[BuiltPrompt, BuiltPrompt | None]:
    pieces = rerank_pieces(query, docs, order, family=proxy.chat_family, instruction=instruction)
    real = assemble(pieces, proxy.tokenizer)
    twin = assemble(with_query(pieces, CALIBRATION_QUERY), proxy.tokenizer) if calibrate else None
    longest = max(len(real), len(twin) if twin is not None else 0)
    if longest > proxy.max_positions:
        raise InvalidInputError(
            f"the prompt has {longest} tokens; the proxy {proxy.name!r} reads at most "
            f"{proxy.max_positions} (lower max_doc_tokens or the list length)"
        )
    return real, twin


def _masses(per_token: torch.Tensor, prompt: BuiltPrompt, order: Sequence[int]) -> torch.Tensor:
    return torch.stack([per_token[prompt.document(i).tokens.as_slice()].sum() for i in order])


def band_scores(
    capture: BandCapture,
    query: str,
    docs: Sequence[Document],
    order: Sequence[int],
    *,
    calibrate: bool,
    instruction: str = "ie",
) -> torch.Tensor:
    """Scores (nats; see the module docstring) of the documents in ``order``, one prompt.

    ``docs`` are used as given (cut them first with :func:`truncate_documents`); ``order`` is the
    prompt order, the last document nearest the query. Differentiable when grad mode is on.

    Returns:
        ``[len(order)]`` scores, aligned with ``order``.
    """
    proxy = capture.proxy
    real, twin = _prompts(proxy, query, docs, order, calibrate=calibrate, instruction=instruction)
    rows = list(range(real.query_span.start, real.query_span.end))
    if twin is None:
        per_token = capture.run(real.input_ids, rows)
        assert per_token is not None
        mass = _masses(per_token, real, order)
        return torch.log(mass.clamp_min(1e-30)) + math.log(len(order))
    from transformers import DynamicCache

    prefix = min(shared_prefix_length(real, twin), real.query_span.start, twin.query_span.start)
    if prefix < max(real.document(i).tokens.end for i in order):
        raise InvalidInputError("the calibration twin does not share the document prefix")
    cache = DynamicCache()
    capture.run(real.input_ids[:prefix], None, cache=cache, keep_keys=True)
    out = []
    for prompt in (real, twin):
        tail = prompt.input_ids[prefix:]
        span = range(prompt.query_span.start, prompt.query_span.end)
        per_token = capture.run(tail, list(span), cache=cache, offset=prefix)
        assert per_token is not None
        out.append(torch.log(_masses(per_token, prompt, order).clamp_min(1e-30)))
        cache.crop(-len(tail))
    return out[0] - out[1]


def score_lists(
    proxy: Proxy,
    query: str,
    docs: Sequence[Document],
    band: Band = DEFAULT_BAND,
    calibrate: bool = True,
    *,
    order: Sequence[int] | None = None,
    instruction: str = "ie",
    max_doc_tokens: int = 400,
    max_window_tokens: int = 3072,
) -> np.ndarray:
    """Band attention scores of ``docs`` for ``query`` on a plain or merged proxy (evaluation).

    Args:
        proxy: the proxy (with an adapter merged by :func:`merge_into`, or untrained).
        query: the query text.
        docs: the candidates.
        band: the layers to read (an adapter's own band).
        calibrate: subtract the ``N/A`` twin's log mass (ICR's calibration).
        order: prompt order of the document indices, the last nearest the query (ICR with a first
            stage: the first-stage order reversed); default the input order.
        instruction: ICR's late instruction.
        max_doc_tokens: documents are cut to this many proxy tokens (ICR's default 400).
        max_window_tokens: longer lists are split into windows of about equal document counts,
            as ICR does; scores stay comparable across windows (uncalibrated: ``log(n · m)``).

    Returns:
        ``[len(docs)]`` float64 scores in input order (nats; higher = more relevant).
    """
    if not docs:
        return np.zeros(0, dtype=np.float64)
    prompt_order = list(range(len(docs))) if order is None else list(order)
    if sorted(prompt_order) != list(range(len(docs))):
        raise InvalidInputError("order must be a permutation of the document indices")
    cut = truncate_documents(proxy.tokenizer, docs, max_doc_tokens)
    tok = proxy.tokenizer
    counts = [len(tok(document_text(d)[0], add_special_tokens=False)["input_ids"]) + 8 for d in cut]
    q_tokens = len(tok(query, add_special_tokens=False)["input_ids"])
    budget = max_window_tokens - q_tokens - 64
    if budget < max(counts):
        raise InvalidInputError(
            f"the query is too long ({q_tokens} proxy tokens) for a window of {max_window_tokens}"
        )
    scores = np.zeros(len(docs), dtype=np.float64)
    with torch.inference_mode(), BandCapture(proxy, band) as capture:
        for window in plan_windows(counts, prompt_order, budget):
            values = band_scores(
                capture, query, cut, window, calibrate=calibrate, instruction=instruction
            )
            scores[window] = values.double().cpu().numpy()
    if not bool(np.isfinite(scores).all()):
        # A NaN would rank every document alike and look like a real answer downstream.
        raise ModelOutputError("the band attention produced non-finite scores (NaN/Inf)")
    return scores


def listwise_loss(
    scores: torch.Tensor, relevant: Sequence[int], temperature: float = 1.0
) -> torch.Tensor:
    """``−log Σ_{d ∈ relevant} softmax(scores / T)_d`` (nats): the listwise softmax cross-entropy
    with several positives counted as one event ("a relevant document is picked")."""
    if not relevant:
        raise InvalidInputError("a training list needs at least one relevant document")
    log_p = torch.log_softmax(scores / temperature, dim=0)
    index = torch.tensor(list(relevant), dtype=torch.long, device=scores.device)
    return -torch.logsumexp(log_p.index_select(0, index), dim=0)


# -------------------------------------------------------------------------------- training lists


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingList:
    """One training list: a query, its documents in prompt order (shuffled), the indices of the
    relevant ones, and where it came from."""

    source: str
    query: str
    docs: tuple[Document, ...]
    relevant: tuple[int, ...]


Lengths = Callable[[], int]
"""Draws the next list's length."""


def _uniform(rng: random.Random, low: int, high: int) -> Lengths:
    def draw() -> int:
        return rng.randint(low, high)

    return draw


def _listed(
    source: str,
    query: str,
    positives: Sequence[Document],
    negatives: Sequence[Document],
    rng: random.Random,
) -> TrainingList:
    pairs = [(d, True) for d in positives] + [(d, False) for d in negatives]
    rng.shuffle(pairs)
    return TrainingList(
        source=source,
        query=query,
        docs=tuple(d for d, _ in pairs),
        relevant=tuple(i for i, (_, gold) in enumerate(pairs) if gold),
    )


class _Bm25Pool:
    """BM25 (bm25s, Lucene idf, English stopwords; as ``datasets.bm25_candidates``) over a fixed
    pool of texts, indexed once and queried one query at a time."""

    def __init__(self, texts: Sequence[str]) -> None:
        import bm25s

        self._bm25s = bm25s
        self._size = len(texts)
        self._retriever = bm25s.BM25()
        self._retriever.index(
            bm25s.tokenize(list(texts), stopwords="en", show_progress=False), show_progress=False
        )

    def top(self, query: str, k: int) -> list[int]:
        """Indices of the ``k`` best texts for ``query`` (arbitrary order among zero scores)."""
        tokens = self._bm25s.tokenize([query], stopwords="en", show_progress=False)
        hits, _ = self._retriever.retrieve(
            tokens, k=min(k, self._size), show_progress=False, n_threads=1
        )
        return [int(i) for i in hits[0]]


def _beir_lists(
    source: str, folder: Path, split: str, rng: random.Random, lengths: Lengths
) -> Iterator[TrainingList]:
    """BEIR queries of ``split`` with their relevant documents and BM25 hard negatives from the
    folder's whole corpus (SciFact: all 5,183 abstracts; FiQA: the gold pool)."""
    data = ds.load_beir(folder, split=split)  # type: ignore[arg-type]
    ids = list(data.corpus)
    docs = {d: Document(text=c.text, title=c.title or None, id=d) for d, c in data.corpus.items()}
    qids = sorted(data.queries)
    rng.shuffle(qids)
    pool: _Bm25Pool | None = None
    for qid in qids:
        relevant = [d for d, g in data.qrels.get(qid, {}).items() if g > 0 and d in docs]
        if not relevant:
            continue
        if pool is None:
            pool = _Bm25Pool([f"{c.title} {c.text}".strip() for c in data.corpus.values()])
        n = lengths()
        kept = relevant[: n - 1]
        hits = pool.top(data.queries[qid], n + len(relevant))
        negatives = [docs[ids[i]] for i in hits if ids[i] not in relevant][: n - len(kept)]
        yield _listed(source, data.queries[qid], [docs[d] for d in kept], negatives, rng)


def _qa_lists(
    source: str, examples: Sequence[ds.QAExample], rng: random.Random, lengths: Lengths
) -> Iterator[TrainingList]:
    """Questions with labelled gold/distractor paragraphs (HotpotQA, 2Wiki, MuSiQue): the gold
    paragraphs, the question's own distractors, and — for lists longer than the question's
    paragraphs — random paragraphs of other questions whose titles the question does not hold."""
    pool = [(i, p) for i, ex in enumerate(examples) for p in ex.passages]
    order = list(range(len(examples)))
    rng.shuffle(order)
    for index in order:
        ex = examples[index]
        gold = [p for p in ex.passages if p.is_gold]
        if not gold:
            continue
        n = lengths()
        gold = gold[: n - 1]
        distractors = [p for p in ex.passages if not p.is_gold]
        rng.shuffle(distractors)
        negatives = distractors[: n - len(gold)]
        titles = {p.title for p in ex.passages}
        tries = 0
        while len(negatives) < n - len(gold) and tries < 50 * n:
            tries += 1
            owner, passage = pool[rng.randrange(len(pool))]
            if owner != index and passage.title not in titles and passage not in negatives:
                negatives.append(passage)
        yield _listed(
            source,
            ex.question,
            [Document(text=p.text, title=p.title or None) for p in gold],
            [Document(text=p.text, title=p.title or None) for p in negatives],
            rng,
        )


def _article(title: str) -> str:
    """SQuAD's article id as a title (``French_and_Indian_War`` -> ``French and Indian War``)."""
    return title.replace("_", " ")


def _squad_lists(path: Path, rng: random.Random, lengths: Lengths) -> Iterator[TrainingList]:
    """SQuAD v2 answerable questions from :data:`SQUAD_TRAIN_FROM` on: the answer's paragraph
    among the other paragraphs of its article (those of the training questions), then of other
    articles if the article runs short."""
    examples = ds.load_squad(path)[SQUAD_TRAIN_FROM:]
    by_article: dict[str, list[str]] = {}
    for ex in examples:
        paragraphs = by_article.setdefault(_article(ex.passages[0].title), [])
        if ex.passages[0].text not in paragraphs:
            paragraphs.append(ex.passages[0].text)
    everything = [(title, text) for title, texts in by_article.items() for text in texts]
    order = list(range(len(examples)))
    rng.shuffle(order)
    for index in order:
        ex = examples[index]
        title, text = _article(ex.passages[0].title), ex.passages[0].text
        n = lengths()
        same = [t for t in by_article[title] if t != text]
        rng.shuffle(same)
        negatives = [(title, t) for t in same[: n - 1]]
        tries = 0
        while len(negatives) < n - 1 and tries < 50 * n:
            tries += 1
            other = everything[rng.randrange(len(everything))]
            if other[1] != text and other not in negatives:
                negatives.append(other)
        yield _listed(
            "squad-train",
            ex.question,
            [Document(text=text, title=title)],
            [Document(text=t, title=a) for a, t in negatives],
            rng,
        )


def _nq_lists(path: Path, rng: random.Random, lengths: Lengths) -> Iterator[TrainingList]:
    """NQ-open oracle: each question's gold passage plus BM25 negatives from the other questions'
    gold passages (a negative holding one of the question's answers is skipped)."""
    rows = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                rows.append(json.loads(line))
    passages = []
    for row in rows:
        gold = next((c for c in row["ctxs"] if c.get("isgold")), row["ctxs"][0])
        passages.append(Document(text=gold["text"], title=gold.get("title") or None))
    order = list(range(len(rows)))
    rng.shuffle(order)
    pool: _Bm25Pool | None = None
    for index in order:
        if pool is None:
            pool = _Bm25Pool([f"{d.title or ''} {d.text}".strip() for d in passages])
        n = lengths()
        answers = [a.lower() for a in rows[index]["answers"] if a.strip()]
        own = passages[index]
        negatives = []
        for hit in pool.top(rows[index]["question"], 3 * n + 1):
            doc = passages[hit]
            if hit == index or doc.text == own.text or doc in negatives:
                continue
            if any(a in doc.text.lower() for a in answers):
                continue
            negatives.append(doc)
            if len(negatives) == n - 1:
                break
        if negatives:
            yield _listed("nq-open", rows[index]["question"], [own], negatives, rng)


SOURCES: tuple[str, ...] = (
    "hotpotqa-train",
    "2wiki-train",
    "musique-train",
    "squad-train",
    "nq-open",
    "fiqa-dev",
    "scifact-train",
)
"""The training sources, in round-robin order."""


def _source(
    name: str, data_dir: Path, rng: random.Random, lengths: Lengths
) -> Iterator[TrainingList]:
    """A lazy stream of one source's lists (files are read at the first list)."""
    if name == "hotpotqa-train":
        path = data_dir / "hotpotqa" / "hotpot_train_v1.1.sample100.shared.json"
        yield from _qa_lists(name, ds.load_hotpot(path), rng, lengths)
    elif name == "2wiki-train":
        path = data_dir / "2wikimultihopqa" / "2wiki_dev_sample500.json"
        yield from _qa_lists(name, ds.load_2wiki(path)[TWOWIKI_TRAIN_FROM:], rng, lengths)
    elif name == "musique-train":
        path = data_dir / "musique" / "musique_ans_v1.0_train.sample100.jsonl"
        yield from _qa_lists(name, ds.load_musique(path), rng, lengths)
    elif name == "squad-train":
        yield from _squad_lists(data_dir / "squad-v2" / "dev-v2.0.shared.json", rng, lengths)
    elif name == "nq-open":
        yield from _nq_lists(
            data_dir / "nq-open-oracle" / "nq-open-oracle.shared.jsonl", rng, lengths
        )
    elif name == "fiqa-dev":
        yield from _beir_lists(name, data_dir / "fiqa-goldpool", "dev", rng, lengths)
    elif name == "scifact-train":
        yield from _beir_lists(name, data_dir / "scifact", "train", rng, lengths)
    else:
        raise InvalidInputError(f"unknown training source {name!r}; use one of {SOURCES}")


def build_lists(
    data_dir: str | Path,
    n_lists: int,
    seed: int = 0,
    *,
    min_docs: int = 5,
    max_docs: int = 30,
    sources: Sequence[str] = SOURCES,
) -> tuple[TrainingList, ...]:
    """Up to ``n_lists`` training lists, round-robin over ``sources`` (a source that runs out
    drops out; all seven hold about 3,300 lists).

    Each list has a length drawn uniformly from ``min_docs..max_docs`` (capped by what its source
    holds), at least one relevant and one non-relevant document, and a seeded shuffled order, so
    relevance never sits at a fixed depth. Deterministic in ``(data_dir, seed)``; a source's lists
    do not depend on ``n_lists`` or on the other sources. Only training splits are read (see the
    module docstring). Files are read lazily: a small ``n_lists`` touches only the first sources.
    """
    if n_lists < 1:
        raise InvalidInputError(f"n_lists must be >= 1, got {n_lists}")
    if not 2 <= min_docs <= max_docs:
        raise InvalidInputError(f"need 2 <= min_docs <= max_docs, got {min_docs}, {max_docs}")
    folder = Path(data_dir)
    streams = []
    for name in sources:
        rng = random.Random(f"{seed}:{name}")
        length_rng = random.Random(f"{seed}:{name}:length")
        streams.append(_source(name, folder, rng, _uniform(length_rng, min_docs, max_docs)))
    out: list[TrainingList] = []
    while streams and len(out) < n_lists:
        for stream in list(streams):
            if len(out) >= n_lists:
                break
            item = next(stream, None)
            if item is None:
                streams.remove(stream)
            else:
                out.append(item)
    return tuple(out)


# -------------------------------------------------------------------------------------- training


@dataclass(frozen=True, slots=True)
class CurvePoint:
    """Mean training loss (nats) over steps ``first..last`` (1-based, inclusive)."""

    first: int
    last: int
    loss: float


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainResult:
    """What :func:`train_adapter` returns: the adapter, the per-step losses (nats) and gradient
    norms (before clipping), the wall time (s) and the list counts per source."""

    adapter: Adapter
    settings: TrainSettings
    losses: tuple[float, ...]
    grad_norms: tuple[float, ...]
    seconds: float
    sources: Mapping[str, int]
    curve: tuple[CurvePoint, ...]

    @property
    def steps(self) -> int:
        return len(self.losses)

    @property
    def seconds_per_list(self) -> float:
        return self.seconds / max(1, self.steps)


def loss_curve(losses: Sequence[float], every: int | None = None) -> tuple[CurvePoint, ...]:
    """Mean loss per block of ``every`` steps (None: ten blocks, at least one step each)."""
    if not losses:
        return ()
    size = every or max(1, math.ceil(len(losses) / 10))
    return tuple(
        CurvePoint(
            start + 1, min(start + size, len(losses)), float(np.mean(losses[start : start + size]))
        )
        for start in range(0, len(losses), size)
    )


def learning_rate(settings: TrainSettings, step: int, steps: int, warmup_steps: int) -> float:
    """The learning rate of 0-based ``step`` of ``steps``: linear warm-up over ``warmup_steps``,
    then constant or a half cosine down to zero at the last step."""
    if step < warmup_steps or settings.decay == "none":
        return settings.lr * min(1.0, (step + 1) / warmup_steps)
    progress = (step - warmup_steps + 1) / max(1, steps - warmup_steps)
    return settings.lr * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


def _schedule(lists: Sequence[TrainingList], settings: TrainSettings) -> list[TrainingList]:
    steps = list(lists)
    rng = random.Random(f"{settings.seed}:epochs")
    for _ in range(settings.epochs - 1):
        again = list(lists)
        rng.shuffle(again)
        steps += again
    return steps


def train_adapter(
    proxy: Proxy,
    lists: Sequence[TrainingList],
    settings: TrainSettings = TrainSettings(),
    *,
    progress: bool = True,
) -> TrainResult:
    """Train LoRA on the band's ``q_proj``/``k_proj`` with the listwise loss, one list per step.

    The proxy is left exactly as it was (the LoRA modules are removed at the end); the trained
    matrices are in the result's adapter, ready for :func:`save_adapter` / :func:`merge_into`.

    Raises:
        InvalidInputError: no lists, or a list without a relevant document.
        ModelOutputError: a non-finite loss (the run diverged: lower ``lr``).
    """
    if not lists:
        raise InvalidInputError("no training lists")
    settings.band.check(proxy)
    schedule = _schedule(lists, settings)
    warmup_steps = max(1, math.ceil(settings.warmup * len(schedule)))
    losses: list[float] = []
    norms: list[float] = []
    started = time.perf_counter()
    with (
        lora_attached(
            proxy,
            band=settings.band,
            rank=settings.rank,
            alpha=settings.lora_alpha,
            seed=settings.seed,
        ) as modules,
        BandCapture(proxy, settings.band) as capture,
    ):
        params = [
            p
            for m in modules.values()
            for p in (m.lora_A["default"].weight, m.lora_B["default"].weight)
        ]
        optimiser = torch.optim.Adam(params, lr=settings.lr)
        bar = tqdm(schedule, desc="attention LoRA", unit="list", disable=not progress)
        for step, item in enumerate(bar):
            for group in optimiser.param_groups:
                group["lr"] = learning_rate(settings, step, len(schedule), warmup_steps)
            docs = truncate_documents(proxy.tokenizer, item.docs, settings.max_doc_tokens)
            with torch.enable_grad():
                scores = band_scores(
                    capture,
                    item.query,
                    docs,
                    range(len(docs)),
                    calibrate=settings.calibrate,
                    instruction=settings.instruction,
                )
                loss = listwise_loss(scores, item.relevant, settings.temperature)
                if not bool(torch.isfinite(loss)):
                    raise ModelOutputError(
                        f"non-finite loss at step {step + 1} ({item.source}); lower lr"
                    )
                optimiser.zero_grad(set_to_none=True)
                loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(params, settings.clip)
            optimiser.step()
            losses.append(float(loss.detach()))
            norms.append(float(norm))
            recent = losses[-20:]
            bar.set_postfix(loss=f"{sum(recent) / len(recent):.3f}")
        adapter = adapter_from(modules, proxy, settings)
    return TrainResult(
        adapter=adapter,
        settings=settings,
        losses=tuple(losses),
        grad_norms=tuple(norms),
        seconds=time.perf_counter() - started,
        sources=dict(Counter(item.source for item in lists)),
        curve=loss_curve(losses, settings.curve_every),
    )


# ------------------------------------------------------------------------------------ evaluation


@dataclass(frozen=True, slots=True, kw_only=True)
class RerankScore:
    """nDCG@10 (trec_eval semantics, in [0, 1]) of the band score over a rerank set, per query,
    and the wall time of the scoring (s)."""

    ndcg_at_10: float
    per_query: Mapping[str, float]
    seconds: float


def evaluate_rerank(
    proxy: Proxy,
    queries: Sequence[ds.RerankQuery],
    qrels: ds.Qrels,
    *,
    band: Band = DEFAULT_BAND,
    calibrate: bool = True,
    instruction: str = "ie",
    max_doc_tokens: int = 400,
    progress: bool = True,
    desc: str = "rerank",
) -> RerankScore:
    """Rerank each query's first-stage candidates by :func:`score_lists` and score nDCG@10.

    The prompt reads the candidates in reversed first-stage order (the best nearest the query),
    ICR's layout with a first stage, so a run here and ``ragattn eval rerank --method icr`` see the
    same prompt.
    """
    started = time.perf_counter()
    run: dict[str, dict[str, float]] = {}
    for item in tqdm(queries, desc=desc, unit="q", disable=not progress):
        docs = [Document(text=c.text, title=c.title or None, id=c.doc_id) for c in item.candidates]
        scores = score_lists(
            proxy,
            item.query,
            docs,
            band,
            calibrate,
            order=list(reversed(range(len(docs)))),
            instruction=instruction,
            max_doc_tokens=max_doc_tokens,
        )
        run[item.qid] = {c.doc_id: float(s) for c, s in zip(item.candidates, scores, strict=True)}
    mean, per_query = ndcg_at_10(run, qrels)
    return RerankScore(ndcg_at_10=mean, per_query=per_query, seconds=time.perf_counter() - started)


def list_ndcg(
    proxy: Proxy,
    lists: Sequence[TrainingList],
    *,
    band: Band = DEFAULT_BAND,
    calibrate: bool = True,
    instruction: str = "ie",
    max_doc_tokens: int = 80,
) -> float:
    """Mean nDCG@10 of the band score over held-out training-style lists (binary gains)."""
    scores, gains = [], []
    for item in lists:
        scores.append(
            score_lists(
                proxy,
                item.query,
                item.docs,
                band,
                calibrate,
                instruction=instruction,
                max_doc_tokens=max_doc_tokens,
            )
        )
        gains.append(np.asarray([int(i in item.relevant) for i in range(len(item.docs))]))
    return float(np.mean(list_ndcg_at_10(scores, gains))) if scores else float("nan")


def cpu_capability() -> str:
    """The CPU kernels torch dispatches to (``AVX2``, ``AVX512``, ...): timings depend on it."""
    return str(torch.backends.cpu.get_cpu_capability())


# ------------------------------------------------------------------------------------ model card


def card_markdown(
    result: TrainResult,
    *,
    command: str,
    file_bytes: int,
    evaluation: Mapping[str, float] | None = None,
    date: str | None = None,
) -> str:
    """The adapter's model card: data, recipe, loss curve, and the validation numbers given."""
    cfg = result.adapter.config
    s = result.settings
    lines = [
        f"# Attention LoRA for {cfg.proxy}",
        "",
        "Learned query→document attention (BlockRank-style): LoRA on `q_proj`/`k_proj` of layers "
        f"{cfg.band} trained so that the query span's band attention lands on relevant documents "
        "(`ragattn.lab.attention_training`).",
        "",
        f"- Command: `{command}`",
        f"- Date: {date or dt.date.today().isoformat()}",
        f"- File: `{ADAPTER_FILENAME}`, {file_bytes:,} bytes, {result.adapter.parameters:,} "
        f"parameters, digest `{result.adapter.digest}`",
        f"- LoRA: rank {cfg.rank}, alpha {cfg.alpha:g} (scale {cfg.scale:g}), targets "
        f"{', '.join(cfg.targets)}, layers {cfg.band}",
        f"- Score: log of the band's query-span attention mass per document, "
        f"{'N/A-calibrated' if cfg.calibrate else 'uncalibrated'}; ICR prompt "
        f"(instruction `{cfg.instruction}`), documents cut to {cfg.max_doc_tokens} tokens",
        "- Loss: listwise softmax cross-entropy, multi-positive (−log Σ softmax over relevant), "
        f"T = {s.temperature:g}",
        f"- Optimiser: Adam lr {s.lr:g}, linear warm-up over {s.warmup:.0%} of the steps, "
        f"{'cosine decay to 0' if s.decay == 'cosine' else 'then constant'}, "
        f"gradient-norm clip {s.clip:g}, {s.epochs} epoch(s), seed {s.seed}",
        f"- Steps: {result.steps} (one list each), {result.seconds:.0f} s, "
        f"{result.seconds_per_list:.2f} s per list on {torch.get_num_threads()} threads "
        f"({cpu_capability()})",
        "",
        "## Training lists",
        "",
        "| source | lists |",
        "|---|---|",
        *[f"| {name} | {count} |" for name, count in sorted(result.sources.items())],
        f"| total | {sum(result.sources.values())} |",
        "",
        "## Loss curve (mean per block of steps, nats)",
        "",
        "| steps | loss |",
        "|---|---|",
        *[f"| {p.first}–{p.last} | {p.loss:.4f} |" for p in result.curve],
    ]
    if evaluation:
        lines += ["", "## Validation", "", "| measure | value |", "|---|---|"]
        lines += [f"| {name} | {value:.4f} |" for name, value in evaluation.items()]
    return "\n".join(lines) + "\n"


def write_adapter(
    result: TrainResult,
    folder: str | Path,
    *,
    command: str,
    evaluation: Mapping[str, float] | None = None,
) -> tuple[Path, Path]:
    """Write the adapter file and its model card into ``folder`` (``models/<proxy>/``).

    Returns:
        ``(adapter path, card path)``.
    """
    target = Path(folder)
    path = save_adapter(result.adapter, target / ADAPTER_FILENAME)
    card = target / CARD_FILENAME
    card.write_text(
        card_markdown(
            result, command=command, file_bytes=path.stat().st_size, evaluation=evaluation
        )
    )
    return path, card


__all__ = [
    "ADAPTER_FILENAME",
    "CARD_FILENAME",
    "DEFAULT_BAND",
    "SOURCES",
    "Adapter",
    "AdapterConfig",
    "Band",
    "BandCapture",
    "CurvePoint",
    "LoraPair",
    "RerankScore",
    "TrainResult",
    "TrainSettings",
    "TrainingList",
    "band_scores",
    "build_lists",
    "card_markdown",
    "cpu_capability",
    "evaluate_rerank",
    "list_ndcg",
    "listwise_loss",
    "load_adapter",
    "lora_attached",
    "loss_curve",
    "merge_into",
    "save_adapter",
    "score_lists",
    "train_adapter",
    "truncate_documents",
    "write_adapter",
]
