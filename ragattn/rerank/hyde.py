"""HyDE reranking: the proxy writes a one-sentence hypothetical answer, MiniLM compares each
document with the query *and* with that answer (Gao et al., 2023, "Precise Zero-Shot Dense
Retrieval without Relevance Labels").

Why: a bi-encoder cannot read a query's qualifier. "What is the capital of Australia?" is as close
to "Melbourne is the capital of the Australian state of Victoria" as to "Canberra is the capital
city of Australia" (MiniLM cosine 0.764 vs 0.763), and "Which ocean is the largest?" is closest to
"The Atlantic Ocean is the second largest ocean". The proxy's greedy answer ("The capital of
Australia is Canberra.") carries what the query asks for, and documents that state it move up.
The answer may be wrong (a 135M model hallucinates); its weight is small (:data:`HYDE_WEIGHT`), so
a wrong answer costs little.

Cost: one greedy generation per *query* (not per document), at most ``max_new_tokens`` tokens
(about 2 s on 2 CPU cores), then MiniLM as for ``minilm``; answers are cached per query text.
The ranking does not depend on the input order of the documents.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from ragattn.embed import dense_scores, titled_text
from ragattn.errors import InputTooLargeError
from ragattn.greedy import greedy_complete
from ragattn.prompt import CHAT_WRAPPERS
from ragattn.proxy import Proxy
from ragattn.rerank.base import DocScores
from ragattn.types import Document

HYDE_INSTRUCTION = "Answer the question in one sentence.\nQuestion: "
"""The prompt the proxy answers, inside its chat template. One sentence states the answer the way
a relevant document would, and keeps the generation short."""

HYDE_MAX_NEW_TOKENS = 32
"""Generation cap in tokens: a one-sentence answer fits."""

HYDE_WEIGHT = 0.25
"""Weight of the answer's cosine against the query's: raw = (cos_q + w cos_a) / (1 + w).

Prompt, cap and weight were chosen on training lists only (``studies/fit_hyde_weight.py``:
HotpotQA, MuSiQue, 2Wiki and SciFact train, 50 lists each; BENCHMARKS.md §2). This prompt at 0.25
had the best macro nDCG@10 (0.8166, MiniLM alone 0.8145); HyDE's own passage prompt ("Write a
short passage that answers the question.", 48 tokens) peaked at 0.8158 and costs 1.5x the
generation."""


class HypotheticalAnswers:
    """Greedy one-sentence answers of the proxy to queries, cached per query text (LRU).

    Greedy decoding makes an answer a function of the query alone: the same query gets the same
    answer whatever documents come with it, so cached and fresh answers are the same.
    """

    def __init__(
        self,
        proxy: Proxy,
        *,
        max_new_tokens: int = HYDE_MAX_NEW_TOKENS,
        instruction: str = HYDE_INSTRUCTION,
        cache_size: int = 4096,
    ) -> None:
        self.proxy = proxy
        self.max_new_tokens = max_new_tokens
        self.instruction = instruction
        self.cache_size = cache_size
        self._cache: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def prompt(self, query: str) -> str:
        """The user turn in the tokenizer's own chat template (with its default system turn, if
        any), or in the proxy's chat family's wrappers when the tokenizer has no template."""
        tokenizer = self.proxy.tokenizer
        user = f"{self.instruction}{query}"
        if getattr(tokenizer, "chat_template", None):
            text: str = tokenizer.apply_chat_template(
                [{"role": "user", "content": user}], tokenize=False, add_generation_prompt=True
            )
            return text
        prefix, suffix = CHAT_WRAPPERS[self.proxy.chat_family]
        return f"{prefix}{user}{suffix}"

    def __call__(self, query: str) -> str:
        with self._lock:
            if query in self._cache:
                self._cache.move_to_end(query)
                return self._cache[query]
        answer = self._generate(query)
        with self._lock:
            self._cache[query] = answer
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return answer

    def _generate(self, query: str) -> str:
        try:
            prompt = self.prompt(query)
            done = greedy_complete(self.proxy, prompt, max_new_tokens=self.max_new_tokens)
        except InputTooLargeError:
            return ""  # the query does not fit the proxy's context: no answer, the scorer says so
        return done.text


class HydeScorer:
    """Raw score in [-1, 1]: ``(cos(query, doc) + w * cos(answer, doc)) / (1 + w)``, MiniLM cosines
    of the document's ``title + text`` with the query and with the proxy's hypothetical answer;
    ``relevance_score = (raw + 1) / 2``. Without an answer (an empty one, or a query longer than
    the proxy's context) the score is the query's cosine alone, and a warning says so. The
    first-stage order is not used."""

    def __init__(
        self,
        proxy: Proxy,
        *,
        weight: float = HYDE_WEIGHT,
        answers: HypotheticalAnswers | None = None,
        name: str = "minilm-hyde",
    ) -> None:
        if weight < 0:
            raise ValueError(f"weight must be >= 0, got {weight}")
        self.name = name
        self.weight = weight
        self.answers = answers or HypotheticalAnswers(proxy)

    def score(
        self, query: str, documents: Sequence[Document], first_stage_order: Sequence[int] | None
    ) -> DocScores:
        texts = [titled_text(d) for d in documents]
        by_query = dense_scores(query, texts)
        warnings: tuple[str, ...] = ()
        raw = by_query
        if self.weight > 0:
            answer = self.answers(query)
            if answer:
                raw = (by_query + self.weight * dense_scores(answer, texts)) / (1.0 + self.weight)
            else:
                warnings = (
                    "the proxy wrote no answer (an empty one, or the query exceeds its context): "
                    "MiniLM cosine of the query alone",
                )
        raw = np.asarray(raw, dtype=np.float64)
        return DocScores(raw=raw, relevance=np.clip((raw + 1.0) / 2.0, 0.0, 1.0), warnings=warnings)


__all__ = ["HYDE_WEIGHT", "HydeScorer", "HypotheticalAnswers"]
