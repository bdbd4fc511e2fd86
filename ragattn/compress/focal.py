"""AttentionRAG-style focal-token scoring (methods.md §5): one answer-prefix position reads the
context.

The question is turned into the start of its answer by a few rules ("Who directed X?" ->
"X was directed by"; otherwise "Answer:"), placed at the end of a Sentinel-style prompt, and the
attention row of that last position is summed over layers and averaged over heads
(AttentionRAG's Eq. 2 as reimplemented). A sentence scores the maximum share of any of its tokens,
divided by the largest such share in the call, so scores lie in [0, 1] and the sentences holding the
top-attended tokens come first (AttentionRAG's "sentence contains a top-k token" rule as a ranking).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from ragattn.attention import HeadSet, engine_for
from ragattn.cancel import check_cancelled
from ragattn.compress.features import Unit, chunk_context, plan_chunks
from ragattn.prompt import assemble, sentinel_pieces
from ragattn.proxy import Proxy
from ragattn.types import Document

_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            r"^who (directed|wrote|composed|founded|painted|created|invented|produced|designed)"
            r" (.+?)\??$",
            re.I,
        ),
        r"\2 was \1 by",
    ),
    (
        re.compile(
            r"^when was (.+?) (born|founded|released|built|published|established)\??$", re.I
        ),
        r"\1 was \2 in",
    ),
    (re.compile(r"^where was (.+?) (born|founded|built)\??$", re.I), r"\1 was \2 in"),
    (re.compile(r"^where (is|are|was|were) (.+?)\??$", re.I), r"\2 \1 in"),
    (re.compile(r"^(?:who|what) (is|was|are|were) (.+?)\??$", re.I), r"\2 \1"),
)


def answer_prefix(question: str) -> str:
    """A rule-based partial answer ending right before the answer word, or ``Answer:``."""
    q = question.strip()
    for pattern, template in _RULES:
        match = pattern.match(q)
        if match:
            return "Answer: " + match.expand(template).strip()
    return "Answer:"


def focal_scores(
    proxy: Proxy,
    query: str,
    documents: Sequence[Document],
    units: Sequence[Unit],
    *,
    max_chunk_tokens: int = 2048,
) -> tuple[np.ndarray, int]:
    """Per-unit focal-token score in [0, 1] (see module docstring) and the number of chunks read."""
    engine = engine_for(proxy)
    heads = HeadSet.all(proxy.num_layers, proxy.num_heads)
    scores = np.zeros(len(units), dtype=np.float64)
    prefix = answer_prefix(query)
    chunks = plan_chunks(proxy, documents, units, max_chunk_tokens)
    for chunk in chunks:
        check_cancelled()  # a chunk boundary
        sub_docs, offsets = chunk_context(documents, units, chunk)
        built = assemble(sentinel_pieces(query, sub_docs, answer_prefix=prefix), proxy.tokenizer)
        cap = engine.capture(built.input_ids, [len(built.input_ids) - 1], heads, reduce="mean")
        per_layer = cap.weights[:, 0, :].reshape(proxy.num_layers, proxy.num_heads, -1).mean(dim=1)
        token_score = per_layer.sum(dim=0).cpu().numpy()
        for i in chunk:
            sub, base = offsets[units[i].doc]
            span = built.document_text_tokens(sub, units[i].start - base, units[i].end - base)
            if len(span):
                scores[i] = float(token_score[span.as_slice()].max())
    top = scores.max() if len(scores) else 0.0
    return (scores / top if top > 0 else scores), len(chunks)
