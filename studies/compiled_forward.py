"""Issue 29 item 4, a compiled forward: the default compressor's capture forward run eagerly,
through ``torch.compile`` (inductor, CPU), and as an ONNX export under ONNX Runtime and OpenVINO.

The capture forward is what ``Compressor(method="sentinel")`` runs per chunk of at most 2,048
context tokens: :func:`ragattn.sentence_attention.attention_block` calls
``AttentionEngine.capture`` with the query-span rows and every head of all 30 layers, and the
registered SDPA (:mod:`ragattn.sdpa`) computes those rows' softmax over all keys next to the
ordinary attention. The rest of the call (sentence shares, the probe, the selection) is unchanged
in every variant: a variant replaces only ``capture`` on the proxy's engine, so each is timed and
checked through the very compressor call a user makes.

Variants (``--variants``, in this order):

- ``eager``: the library as it is, the reference of every ratio and difference;
- ``compile``: ``torch.compile(dynamic=True)`` of the decoder's forward inside that same path. The
  capture state travels in a ``ContextVar``, which Dynamo cannot trace, so the forward breaks into
  pieces (counted, reasons listed);
- ``eager-rows``: a study-local forward that returns the captured rows as its output (the query
  rows' softmax computed from each layer's post-RoPE queries and keys, rows and length as tensor
  inputs): the control for every variant below, which compile or export exactly this module. It
  runs on a second copy of the weights, without the engine's per-layer hooks (the cancellation
  check, the early exit), which a compiled or exported graph cannot keep either;
- ``compile-rows``: that module under ``torch.compile(dynamic=True, fullgraph=True)``;
- ``compile-rows-regional``: each decoder layer compiled on its own (one compiled layer reused by
  all 30; one deliberate break per layer, where the rows are handed out);
- ``compile-rows-autotune``: the regional variant with ``mode="max-autotune-no-cudagraphs"`` (its
  GEMM tuning runs on one layer only, so it stays cheap);
- ``onnx``: the module exported with ``torch.onnx.export(dynamo=True)`` (dynamic length and
  number of rows), run by ONNX Runtime's CPU provider;
- ``openvino``: the same ONNX file compiled by OpenVINO's CPU plugin, at fp32 inference precision;
- ``eager-again``: the library again, last, to show the drift of the machine during the run.

A whole-graph variant (``compile-rows``, ``onnx``, ``openvino``) may drop work whose result no
output reads, which eager runs: the last layer's attention output and MLP and the final norm, about
a thirtieth of the forward.

Inputs are ``--runs + 1`` distinct HotpotQA contexts of about ``--tokens`` proxy tokens (those of
``ragattn bench compress``'s cold rows, :func:`ragattn.lab.bench_compress.distinct_contexts`, each
cut to its leading passages that make ``--tokens``, as its one-context rows): the first is the
warm-up of every variant (its seconds, compile or first-call costs included, are the "first call"
column), the others are each timed once per variant, so no timed run repeats an input. Columns:

- compile/export s: seconds before the first request can be served: for ``torch.compile``
  variants the first call (compilation plus one call), for the runtimes the export plus the
  session's (or the plugin's) compilation; inductor compiles into a fresh cache directory unless
  ``--inductor-cache`` names one (a warm cache measures a restart);
- median s: the median seconds of one ``compress(ratio=0.2)`` call over the timed contexts;
  capture s: the part spent in the capture forward; x eager: eager's median over the variant's;
- max |d| rows: the largest difference of a captured probability (in [0, 1]) from eager's;
- max |d| features: of an attention feature (the log of a sentence's share, in nats);
- max |d| keep: of a sentence's keep probability (in [0, 1]), from the shipped sentinel probe;
- same selection: whether every timed context keeps the very same sentences at 20 % of its tokens
  (``Compressor(method="sentinel", selection="sentences")``);
- >= 1.2x and exact: the issue's adoption rule, with the keep-score tolerance ``--score-tol``.

The notes under the table give, per ``torch.compile`` variant, Dynamo's graph breaks and their
reasons (counted per compiled frame: a break in code the 30 layers share counts once; run with
``TORCH_LOGS=graph_breaks`` for their source lines), the functions resumed after a break, the
frames Dynamo gave up on (run eagerly), the graphs compiled and the recompilations met on the timed
contexts (each a new length); for the runtimes, the export and session seconds and the ONNX file's
size. The process runs on
``--threads`` torch (and runtime) threads; its CPU capability, dtype and versions head the output.

    pip install onnxruntime onnx onnxscript openvino   # the runtimes, not dependencies of ragattn
    python studies/compiled_forward.py --threads 2 --runs 3 --out compiled_forward.json
    python studies/compiled_forward.py --smoke --threads 1 --variants eager,compile-rows-regional

``--smoke`` reads ~200-token contexts (about 360 prompt tokens) with one timed run: a check that
every variant runs, not a measurement.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.metadata
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ragattn.attention import Capture, HeadSet, engine_for
from ragattn.compress import Compressor
from ragattn.compress.features import SentenceFeatures, Unit
from ragattn.lab.bench_compress import distinct_contexts
from ragattn.lab.timing import runtime_info, runtime_line
from ragattn.prompt import assemble, sentinel_pieces
from ragattn.proxy import Proxy, load_proxy
from ragattn.types import Document

ROWS_IMPLEMENTATION = "ragattn_study_rows"
"""The attention implementation of the study's second copy of the proxy: SDPA plus the query
rows' softmax handed to a list or a :class:`RowSink` (see :func:`rows_sdpa`)."""

VARIANTS = (
    "eager",
    "compile",
    "eager-rows",
    "compile-rows",
    "compile-rows-regional",
    "compile-rows-autotune",
    "onnx",
    "openvino",
    "eager-again",
)
BUDGET = 0.2
"""Fraction of the context's tokens kept by the compressor call that is timed and compared."""

RowsFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""``(input_ids [1, n] int64, rows [R] int64) -> [layers * heads, R, n]`` fp32 probabilities."""
Context = tuple[str, list[Document]]


def trimmed(context: Context, tokens: int, tokenizer: Any) -> Context:
    """The context's leading passages up to the first that brings it to ``tokens`` proxy tokens
    (the rule of :func:`ragattn.lab.bench_compress.hotpot_context`): ``distinct_contexts`` adds
    whole questions' passages, ten at a time, so it overshoots a small target by far."""
    query, docs = context
    kept: list[Document] = []
    total = 0
    for doc in docs:
        kept.append(doc)
        total += len(tokenizer(doc.text, add_special_tokens=False)["input_ids"])
        if total >= tokens:
            break
    return query, kept


# -- the capture forward as a module whose output is the captured rows --------------------------


def row_probabilities(
    query: torch.Tensor, key: torch.Tensor, rows: torch.Tensor, scaling: float
) -> torch.Tensor:
    """The softmax rows of positions ``rows`` over all keys, per head: ``[heads, R, n]`` fp32.

    The computation of :func:`ragattn.sdpa._observe` for a forward without a cache or sliding
    window (SmolLM2), written with ``rows`` and the length as tensors and shapes rather than
    Python numbers, so that a compiled or exported graph keeps both dynamic. ``query`` is
    ``[1, heads, n, d]`` post-RoPE, ``key`` ``[1, kv_heads, n, d]``.
    """
    groups = query.shape[1] // key.shape[1]
    q = query[0].index_select(1, rows).float()  # [h, R, d]
    k = key[0].repeat_interleave(groups, dim=0).float()  # [h, n, d]
    logits = torch.matmul(q, k.transpose(-1, -2)) * scaling  # [h, R, n]
    keys = torch.arange(k.shape[1], device=k.device)
    allowed = keys[None, :] <= rows[:, None]  # causal: a row sees itself and earlier keys
    return torch.softmax(logits.masked_fill(~allowed[None], float("-inf")), dim=-1)


class RowSink:
    """Collects each layer's captured rows in layer order during one forward.

    :meth:`put` is kept out of Dynamo (one graph break per layer in the regional variant) so that
    a compiled layer does not guard on how many rows were already collected, which would compile
    it anew for each of the 30 layers.
    """

    def __init__(self) -> None:
        self.parts: list[torch.Tensor] = []

    @torch.compiler.disable
    def put(self, probs: torch.Tensor) -> None:
        self.parts.append(probs)


def rows_sdpa(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' SDPA attention, plus the rows ``kwargs["capture_rows"]`` handed to
    ``kwargs["capture_sink"]`` (a list, or a :class:`RowSink`); transformers passes the decoder's
    extra keyword arguments down to here."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    rows = kwargs.pop("capture_rows", None)
    sink = kwargs.pop("capture_sink", None)
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    if sink is not None and rows is not None:
        probs = row_probabilities(query, key, rows, scale)
        if isinstance(sink, RowSink):
            sink.put(probs)
        else:
            sink.append(probs)
    return sdpa_attention_forward(
        module, query, key, value, attention_mask, scaling=scaling, **kwargs
    )


def register_rows_attention() -> None:
    """Register :func:`rows_sdpa` (and transformers' SDPA mask) as :data:`ROWS_IMPLEMENTATION`."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(ROWS_IMPLEMENTATION, rows_sdpa)
    AttentionMaskInterface.register(ROWS_IMPLEMENTATION, sdpa_mask)


class RowsForward(torch.nn.Module):
    """One forward of the decoder whose output is the captured rows, for compilers and exporters.

    ``forward(input_ids [1, n], rows [R]) -> [layers * heads, R, n]``: every head of every layer,
    layer-major (the order of ``Capture.weights`` for a :class:`~ragattn.attention.HeadSet` of
    whole layers). The decoder must use :data:`ROWS_IMPLEMENTATION`. ``sink_object`` hands rows
    out through a :class:`RowSink` (the regional variant) instead of a plain list.
    """

    def __init__(self, decoder: torch.nn.Module, *, sink_object: bool = False) -> None:
        super().__init__()
        self.decoder = decoder
        self.sink_object = sink_object

    def forward(self, input_ids: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        if self.sink_object:
            sink = RowSink()
            self.decoder(input_ids=input_ids, use_cache=False, capture_rows=rows, capture_sink=sink)
            return torch.cat(sink.parts, dim=0)
        parts: list[torch.Tensor] = []
        self.decoder(input_ids=input_ids, use_cache=False, capture_rows=rows, capture_sink=parts)
        return torch.cat(parts, dim=0)


def rows_proxy(dtype: str) -> Proxy:
    """A second copy of the packaged proxy (from the same cached weights) that uses
    :data:`ROWS_IMPLEMENTATION`. It never meets ``engine_for``, so its layers carry no engine hooks
    (the per-layer cancellation check and early exit, which a compiled or exported graph cannot
    keep either)."""
    proxy = load_proxy("smollm2-135m", device="cpu", dtype=dtype)
    proxy.model.set_attn_implementation(ROWS_IMPLEMENTATION)
    return proxy


def example_inputs(proxy: Proxy, context: Context) -> tuple[torch.Tensor, torch.Tensor]:
    """A real Sentinel prompt (the context's question and first passage) and its query-span rows:
    the example an exporter traces; its sizes are not baked in (both are dynamic)."""
    query, docs = context
    built = assemble(sentinel_pieces(query, docs[:1]), proxy.tokenizer)
    ids = torch.tensor([list(built.input_ids)], dtype=torch.long)
    rows = torch.arange(built.query_span.start, len(built.input_ids), dtype=torch.long)
    return ids, rows


# -- plugging a forward into the library's compressor call --------------------------------------


@dataclass(slots=True)
class CaptureLog:
    """What the engine's capture did during one compressor call: seconds and rows per chunk."""

    seconds: list[float] = field(default_factory=list)
    weights: list[torch.Tensor] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)

    def clear(self) -> None:
        self.seconds.clear()
        self.weights.clear()
        self.tokens.clear()


def rows_capture(
    forward: RowsFn,
    n_heads: int,
    ids: Sequence[int],
    rows: Sequence[int],
    heads: HeadSet,
    reduce: str,
) -> Capture:
    """``AttentionEngine.capture`` through ``forward`` (a proxy with ``n_heads`` heads per layer),
    for the head sets the sentinel compressor asks for (every head of the leading layers, each
    row kept)."""
    depth = len(heads.layers)
    if reduce != "none" or heads.pairs != HeadSet.from_layers(range(depth), n_heads).pairs:
        raise NotImplementedError("the study forward captures every head's rows, unreduced")
    weights = forward(
        torch.tensor([list(ids)], dtype=torch.long), torch.tensor(list(rows), dtype=torch.long)
    )[: depth * n_heads]
    if not bool(torch.isfinite(weights).all()):  # the library's own check, kept for equal work
        raise ValueError("non-finite captured rows")
    return Capture(weights=weights, heads=heads, rows=tuple(rows), reduce="none")


def under_inference_mode(fn: RowsFn) -> RowsFn:
    """``fn`` run under inference mode, as the engine runs its forward."""

    def run(ids: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            return fn(ids, rows)

    return run


@contextlib.contextmanager
def capture_through(proxy: Proxy, forward: RowsFn | None, log: CaptureLog) -> Iterator[None]:
    """Within the block, the proxy's engine captures through ``forward`` (None: its own
    ``capture``), and every capture's seconds and rows land in ``log``."""
    engine = engine_for(proxy)
    own = engine.capture

    def capture(
        ids: Sequence[int],
        rows: Sequence[int],
        heads: HeadSet,
        *,
        reduce: Any = "mean",
        early_exit: bool = True,
    ) -> Capture:
        started = time.perf_counter()
        if forward is None:
            cap = own(ids, rows, heads, reduce=reduce, early_exit=early_exit)
        else:
            cap = rows_capture(forward, proxy.num_heads, ids, rows, heads, reduce)
        log.seconds.append(time.perf_counter() - started)
        log.weights.append(cap.weights)
        log.tokens.append(len(ids))
        return cap

    engine.capture = capture  # type: ignore[method-assign]  # an instance attribute, removed below
    try:
        yield
    finally:
        del engine.capture


def record_features(
    compressor: Compressor, sink: list[tuple[np.ndarray, SentenceFeatures]]
) -> None:
    """Make the compressor's probe scorer append each call's keep scores and features to
    ``sink`` (the compressor's own call, selection included, is what gets timed)."""
    scorer: Any = compressor.scorer
    own = scorer.score_with_features

    def score_with_features(
        query: str, documents: Sequence[Document], units: Sequence[Unit]
    ) -> tuple[np.ndarray, SentenceFeatures]:
        scores, feats = own(query, documents, units)
        sink.append((scores, feats))
        return scores, feats

    scorer.score_with_features = score_with_features


# -- measuring ----------------------------------------------------------------------------------


@dataclass(slots=True)
class Outcome:
    """One timed compressor call of one variant on one context."""

    seconds: float
    capture_seconds: float
    weights: list[torch.Tensor]
    features: np.ndarray
    scores: np.ndarray
    kept: frozenset[tuple[int, int, int]]
    tokens: list[int]
    sentences: int


@dataclass(slots=True)
class VariantResult:
    """A variant's timings, differences from eager and notes (or the error that stopped it)."""

    variant: str
    prepare_s: float | None = None  # export + runtime compilation (runtimes only)
    first_call_s: float | None = None
    runs_s: list[float] = field(default_factory=list)
    capture_runs_s: list[float] = field(default_factory=list)
    max_abs_rows: float | None = None
    max_abs_features: float | None = None
    max_abs_keep: float | None = None
    same_selection: bool | None = None
    notes: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    @property
    def median_s(self) -> float | None:
        return statistics.median(self.runs_s) if self.runs_s else None

    @property
    def capture_median_s(self) -> float | None:
        return statistics.median(self.capture_runs_s) if self.capture_runs_s else None

    @property
    def warm_up_s(self) -> float | None:
        """Seconds before the first request is served: export and runtime compilation for the
        runtimes, the first call (which compiles) for ``torch.compile``."""
        if self.prepare_s is not None:
            return self.prepare_s
        return self.first_call_s if self.variant.startswith("compile") else None


class Harness:
    """Runs the compressor over the contexts with a chosen capture forward and compares each
    variant with the eager reference."""

    def __init__(self, proxy: Proxy, contexts: list[Context]) -> None:
        self.proxy = proxy
        self.warm_up, self.timed = contexts[0], contexts[1:]
        self.compressor = Compressor(proxy, method="sentinel", selection="sentences")
        self.scored: list[tuple[np.ndarray, SentenceFeatures]] = []
        record_features(self.compressor, self.scored)
        self.log = CaptureLog()
        self.reference: list[Outcome] | None = None

    def call(self, context: Context) -> Outcome:
        """One ``compress(ratio=0.2)`` call, timed, with what it captured and kept."""
        query, docs = context
        self.log.clear()
        self.scored.clear()
        started = time.perf_counter()
        result = self.compressor.compress(query, docs, ratio=BUDGET)
        seconds = time.perf_counter() - started
        scores, feats = self.scored[-1]
        kept = frozenset(
            (span.doc_index, span.start, span.end)
            for d in result.documents
            for span in d.kept_spans
        )
        return Outcome(
            seconds=seconds,
            capture_seconds=sum(self.log.seconds),
            weights=list(self.log.weights),
            features=feats.matrix,
            scores=np.asarray(scores, dtype=np.float64),
            kept=kept,
            tokens=list(self.log.tokens),
            sentences=len(feats.units),
        )

    def measure(
        self,
        result: VariantResult,
        forward: RowsFn | None,
        after_first: Callable[[], None] = lambda: None,
        after_each: Callable[[], None] = lambda: None,
    ) -> None:
        """Warm up on the first context, then time each other context once; fill ``result``."""
        with capture_through(self.proxy, forward, self.log):
            result.first_call_s = self.call(self.warm_up).seconds
            after_first()
            outcomes = []
            for context in self.timed:
                outcome = self.call(context)
                after_each()
                result.runs_s.append(outcome.seconds)
                result.capture_runs_s.append(outcome.capture_seconds)
                outcomes.append(outcome)
        if self.reference is None:
            self.reference = outcomes
            result.notes["prompt tokens per chunk"] = [o.tokens for o in outcomes]
            result.notes["sentences"] = [o.sentences for o in outcomes]
        self.compare(result, outcomes)

    def compare(self, result: VariantResult, outcomes: list[Outcome]) -> None:
        assert self.reference is not None
        rows = features = keep = 0.0
        same = True
        for ours, ref in zip(outcomes, self.reference, strict=True):
            for w, w_ref in zip(ours.weights, ref.weights, strict=True):
                rows = max(rows, float((w.float() - w_ref.float()).abs().max()))
            features = max(features, float(np.abs(ours.features - ref.features).max()))
            keep = max(keep, float(np.abs(ours.scores - ref.scores).max()))
            same = same and ours.kept == ref.kept
        result.max_abs_rows, result.max_abs_features = rows, features
        result.max_abs_keep, result.same_selection = keep, same


def reason_line(reason: str) -> str:
    """A Dynamo reason's headline, its ``Explanation:`` and the frame it made Dynamo skip (run
    eagerly), if any, on one line."""
    lines = [line.strip() for line in str(reason).strip().splitlines() if line.strip()]
    explained = next((line for line in lines if line.startswith("Explanation:")), "")
    skipped = next((line for line in lines if "frame skipped:" in line), "")
    skipped = skipped[skipped.find("frame skipped:") :] if skipped else ""
    return " ".join(x for x in (lines[0][:60], explained[:140], skipped) if x) if lines else ""


def dynamo_counts() -> dict[str, Any]:
    """Dynamo's counters since the last ``counters.clear()``: graph breaks with their reasons,
    the functions resumed after a break (where the breaks are), frames Dynamo gave up on (run
    eagerly, e.g. a break inside a loop or a recompile limit), and the graphs compiled."""
    from torch._dynamo.utils import counters

    def tally(counter: Any) -> dict[str, int]:
        out: dict[str, int] = {}
        for reason, count in counter.items():
            out[reason_line(reason)] = out.get(reason_line(reason), 0) + int(count)
        return out

    return {
        "graph breaks": sum(int(v) for v in counters["graph_break"].values()),
        "break reasons": tally(counters["graph_break"]),
        "resumed in": sorted(counters["resumes"]),
        "frames run eagerly": tally(counters["unimplemented"]),
        "graphs compiled": int(counters["stats"]["unique_graphs"]),
    }


def with_dynamo(harness: Harness, result: VariantResult, forward: RowsFn | None) -> None:
    """:meth:`Harness.measure` with Dynamo's counters read after the first call (compilation) and
    after each timed context (each a new length: a new graph there is a recompilation)."""
    from torch._dynamo.utils import counters

    counters.clear()
    graphs_after: list[int] = []

    def first() -> None:
        result.notes.update(dynamo_counts())

    def each() -> None:
        graphs_after.append(int(counters["stats"]["unique_graphs"]))

    harness.measure(result, forward, first, each)
    compiled = result.notes.get("graphs compiled", 0)
    result.notes["recompilations on the timed contexts"] = [
        g - p for p, g in zip([compiled, *graphs_after[:-1]], graphs_after, strict=True)
    ]


# -- the variants -------------------------------------------------------------------------------


def run_eager(harness: Harness, result: VariantResult) -> None:
    harness.measure(result, None)


def run_compile_in_place(harness: Harness, result: VariantResult) -> None:
    """``torch.compile`` of the decoder's forward, inside the library's own capture path."""
    decoder = harness.proxy.decoder
    torch._dynamo.reset()
    decoder.forward = torch.compile(decoder.forward, dynamic=True)
    try:
        with_dynamo(harness, result, None)
    finally:
        del decoder.forward  # the class's forward again
        torch._dynamo.reset()


def run_rows(harness: Harness, result: VariantResult, args: argparse.Namespace) -> None:
    """The study forward, eager or compiled (whole, or layer by layer)."""
    proxy = rows_proxy(args.dtype)
    regional = result.variant in ("compile-rows-regional", "compile-rows-autotune")
    module = RowsForward(proxy.decoder, sink_object=regional).eval()
    try:
        if result.variant == "eager-rows":
            harness.measure(result, under_inference_mode(module))
            return
        torch._dynamo.reset()
        if regional:
            mode = "max-autotune-no-cudagraphs" if result.variant.endswith("autotune") else None
            for layer in proxy.layers:
                layer.compile(dynamic=True, mode=mode)
            with_dynamo(harness, result, under_inference_mode(module))
        else:
            compiled = torch.compile(module, dynamic=True, fullgraph=True)
            with_dynamo(harness, result, under_inference_mode(compiled))
    finally:
        torch._dynamo.reset()
        del module, proxy
        gc.collect()


def export_onnx(args: argparse.Namespace, context: Context, folder: Path) -> tuple[Path, float]:
    """The study forward exported to ``folder/capture.onnx`` (weights beside it), with the
    length and the number of rows dynamic; returns the path and the export's seconds."""
    from torch.export import Dim

    proxy = rows_proxy(args.dtype)
    module = RowsForward(proxy.decoder).eval()
    path = folder / "capture.onnx"
    ids, rows = example_inputs(proxy, context)
    started = time.perf_counter()
    with torch.no_grad():
        torch.onnx.export(
            module,
            (ids, rows),
            str(path),
            dynamo=True,
            input_names=["input_ids", "rows"],
            output_names=["probs"],
            dynamic_shapes=({1: Dim.DYNAMIC}, {0: Dim.DYNAMIC}),
        )
    seconds = time.perf_counter() - started
    del module, proxy
    gc.collect()
    return path, seconds


def onnx_size_mb(path: Path) -> float:
    """The exported graph and its external weights, in MiB."""
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*")) / 2**20


def run_onnx(
    harness: Harness, result: VariantResult, args: argparse.Namespace, exported: dict[str, Any]
) -> None:
    """ONNX Runtime's CPU provider over the exported forward."""
    import onnxruntime as ort

    path, export_s = exported["path"], exported["seconds"]
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.inter_op_num_threads = 1
    started = time.perf_counter()
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    session_s = time.perf_counter() - started

    def forward(ids: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        out = session.run(["probs"], {"input_ids": ids.numpy(), "rows": rows.numpy()})[0]
        return torch.from_numpy(out)

    result.prepare_s = export_s + session_s
    result.notes.update(
        {
            "export s": round(export_s, 2),
            "session s": round(session_s, 2),
            "onnx MiB": round(onnx_size_mb(path), 1),
            "onnxruntime": ort.__version__,
        }
    )
    harness.measure(result, forward)


def run_openvino(
    harness: Harness, result: VariantResult, args: argparse.Namespace, exported: dict[str, Any]
) -> None:
    """OpenVINO's CPU plugin over the same ONNX file, held to fp32 inference precision (its
    default on CPUs with AVX-512 BF16 or AMX is bf16)."""
    import openvino as ov

    path, export_s = exported["path"], exported["seconds"]
    core = ov.Core()
    started = time.perf_counter()
    compiled = core.compile_model(
        core.read_model(str(path)),
        "CPU",
        {
            "INFERENCE_NUM_THREADS": str(args.threads),
            "INFERENCE_PRECISION_HINT": "f32",
            "NUM_STREAMS": "1",
        },
    )
    compile_s = time.perf_counter() - started
    request = compiled.create_infer_request()
    output = compiled.output(0)

    def forward(ids: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        out = request.infer({"input_ids": ids.numpy(), "rows": rows.numpy()})[output]
        return torch.from_numpy(np.array(out, copy=True))

    result.prepare_s = export_s + compile_s
    result.notes.update(
        {
            "export s": round(export_s, 2),
            "plugin compile s": round(compile_s, 2),
            "openvino": ov.__version__,
        }
    )
    harness.measure(result, forward)


def run_variant(
    name: str, harness: Harness, args: argparse.Namespace, folder: Path, exported: dict[str, Any]
) -> VariantResult:
    """Run one variant; an exception (an export or compilation that fails) becomes its error."""
    result = VariantResult(variant=name)
    print(f"-- {name}", flush=True)
    try:
        if name in ("eager", "eager-again"):
            run_eager(harness, result)
        elif name == "compile":
            run_compile_in_place(harness, result)
        elif name.startswith(("eager-rows", "compile-rows")):
            run_rows(harness, result, args)
        else:
            if not exported:  # one export serves both runtimes; a failed one fails both
                try:
                    exported["path"], exported["seconds"] = export_onnx(
                        args, harness.warm_up, folder
                    )
                except Exception as exc:
                    exported["error"] = f"the ONNX export failed: {type(exc).__name__}: {exc}"
            if "error" in exported:
                raise RuntimeError(exported["error"])
            (run_onnx if name == "onnx" else run_openvino)(harness, result, args, exported)
    except Exception as exc:  # a failing variant is a result, not a crash
        result.error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:600]}"
    print(json.dumps(row_json(result)), flush=True)
    return result


# -- reporting ----------------------------------------------------------------------------------


def row_json(r: VariantResult) -> dict[str, Any]:
    return {
        "variant": r.variant,
        "warm_up_s": r.warm_up_s,
        "first_call_s": r.first_call_s,
        "median_s": r.median_s,
        "runs_s": r.runs_s,
        "capture_median_s": r.capture_median_s,
        "capture_runs_s": r.capture_runs_s,
        "max_abs_rows": r.max_abs_rows,
        "max_abs_features": r.max_abs_features,
        "max_abs_keep": r.max_abs_keep,
        "same_selection": r.same_selection,
        "notes": r.notes,
        "error": r.error,
    }


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def table(results: list[VariantResult], score_tol: float) -> str:
    """The markdown table: one row per variant, ratios against the first (eager) row."""
    base = results[0].median_s
    base_capture = results[0].capture_median_s
    lines = [
        "| variant | compile/export s | first call s | median s | x eager | capture s "
        "| capture x eager | max abs d rows | max abs d features | max abs d keep "
        "| same selection | >= 1.2x and exact |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if r.error is not None:
            lines.append(f"| {r.variant} | failed: see notes |" + " |" * 10)
            continue
        ratio = base / r.median_s if base and r.median_s else None
        capture_ratio = (
            base_capture / r.capture_median_s if base_capture and r.capture_median_s else None
        )
        exact = bool(r.same_selection) and (r.max_abs_keep or 0.0) <= score_tol
        adopt = "yes" if ratio is not None and ratio >= 1.2 and exact else "no"
        lines.append(
            f"| {r.variant} | {fmt(r.warm_up_s, '.1f')} | {fmt(r.first_call_s, '.2f')} "
            f"| {fmt(r.median_s, '.3f')} | {fmt(ratio, '.2f')} | {fmt(r.capture_median_s, '.3f')} "
            f"| {fmt(capture_ratio, '.2f')} | {fmt(r.max_abs_rows, '.1e')} "
            f"| {fmt(r.max_abs_features, '.1e')} | {fmt(r.max_abs_keep, '.1e')} "
            f"| {'-' if r.same_selection is None else ('yes' if r.same_selection else 'no')} "
            f"| {adopt if r.variant != 'eager' else '-'} |"
        )
    return "\n".join(lines)


def version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--tokens", type=int, default=2000, help="context size in proxy tokens")
    parser.add_argument("--runs", type=int, default=3, help="timed contexts (distinct inputs)")
    parser.add_argument("--threads", type=int, default=2, help="torch and runtime threads")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    parser.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help=f"comma-separated, run in the order given; of: {', '.join(VARIANTS)}",
    )
    parser.add_argument(
        "--score-tol",
        type=float,
        default=1e-3,
        help="largest |d keep probability| still called exact (tests/unit/proxy/test_bf16.py lets "
        "bf16 move it by 0.05)",
    )
    parser.add_argument(
        "--inductor-cache",
        type=Path,
        default=None,
        help="inductor's cache folder (default: a fresh one, so compile times are cold)",
    )
    parser.add_argument("--smoke", action="store_true", help="~200-token contexts, 1 timed run")
    parser.add_argument("--out", type=Path, default=None, help="also write the rows as JSON")
    args = parser.parse_args()
    if args.smoke:
        args.tokens, args.runs = 200, 1
    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; use {', '.join(VARIANTS)}")
    if names[0] != "eager":
        names.insert(0, "eager")  # the reference of every ratio and difference
    with tempfile.TemporaryDirectory(prefix="compiled_forward.") as tmp:
        folder = Path(tmp)
        cache = args.inductor_cache or folder / "inductor"
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache)
        proxy = load_proxy("smollm2-135m", device="cpu", dtype=args.dtype, threads=args.threads)
        register_rows_attention()
        print(
            f"{runtime_line(runtime_info(proxy))}\ntorch {torch.__version__}, transformers "
            f"{version('transformers')}, onnxruntime {version('onnxruntime')}, openvino "
            f"{version('openvino')}; inductor cache {cache}",
            flush=True,
        )
        contexts = [
            trimmed(c, args.tokens, proxy.tokenizer)
            for c in distinct_contexts(args.data / "hotpotqa", args.tokens, proxy, args.runs + 1)
        ]
        harness = Harness(proxy, contexts)
        exported: dict[str, Any] = {}
        results = [run_variant(name, harness, args, folder, exported) for name in names]
    chunks, sentences = (results[0].notes.get(k) for k in ("prompt tokens per chunk", "sentences"))
    print(
        f"\n{args.runs} timed contexts of ~{args.tokens} proxy tokens (prompt tokens per chunk: "
        f"{chunks}, sentences: {sentences}); "
        f"compress(ratio={BUDGET}), sentinel probe, selection=sentences; keep-score tolerance "
        f"{args.score_tol}\n"
    )
    print(table(results, args.score_tol))
    print("\nNotes:")
    for r in results:
        notes = {
            k: v for k, v in r.notes.items() if k not in ("prompt tokens per chunk", "sentences")
        }
        if r.error is not None:
            print(f"- {r.variant}: FAILED: {r.error}")
        elif notes:
            print(f"- {r.variant}: {json.dumps(notes)}")
    if args.out:
        args.out.write_text(
            json.dumps(
                {
                    "runtime": runtime_info(proxy),
                    "torch": torch.__version__,
                    "tokens": args.tokens,
                    "runs": args.runs,
                    "score_tol": args.score_tol,
                    "rows": [row_json(r) for r in results],
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
