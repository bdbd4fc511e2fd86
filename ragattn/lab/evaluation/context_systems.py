"""The systems of ``ragattn eval context`` over one proxy (:mod:`ragattn.lab.evaluation.context`):
``one-read`` and ``compress`` at the budget, and the matched systems at ``one-read``'s tokens of
each question, each timed as if it ran alone (MiniLM vectors forgotten, a replayed forward charged
its seconds).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from ragattn.compress import Compressor
from ragattn.compress.cascade import DEFAULT_CASCADE, Cascade
from ragattn.compress.read import FirstPass
from ragattn.compress.selection import DEFAULT_FIRST_STAGE_PRIOR
from ragattn.lab.evaluation.context import (
    MATCHED,
    METRICS_VERSION,
    SYSTEM_UNDER_TEST,
    ContextQuestion,
    KeptContext,
    Outcome,
    budget_label,
    n_tokens,
    score_context,
    stuff,
)
from ragattn.lab.evaluation.metrics import TokenizerLike
from ragattn.languages import AUTO, check_language
from ragattn.rerank import Reranker
from ragattn.types import Budget, CompressionResult, Document

RERANK_K: Mapping[str, int] = {"rerank3-compress": 3, "rerank5-compress": 5}


def _kept(result: CompressionResult, positions: Sequence[int]) -> KeptContext:
    """A compressor's context; ``positions[i]`` is the candidate the call's document ``i`` is."""
    spans = tuple(
        (positions[d.index], s.start, s.end) for d in result.documents for s in d.kept_spans
    )
    return KeptContext(text=result.compressed_text, spans=spans)


class ForwardMemo:
    """Keeps the default compressor's last forwards, so the budgets of one question share them.

    The proxy forward of a (question, documents, sentences) triple does not depend on the budget;
    only the selection does. The memo wraps the compressor's scorer (its ``score`` and
    ``score_with_features``) and returns a forward already computed for the same triple, adding
    the seconds it took when computed to :attr:`replayed`, so a system is still timed as if it had
    run the forward itself.
    """

    def __init__(self, scorer: Any, size: int = 16) -> None:
        self.replayed = 0.0
        self._memo: OrderedDict[tuple[Any, ...], tuple[Any, float]] = OrderedDict()
        self._size = size
        for name in ("score", "score_with_features"):
            inner = getattr(scorer, name, None)
            if inner is not None:
                setattr(scorer, name, self._wrap(name, inner))

    def _wrap(self, name: str, inner: Any) -> Any:
        def call(query: str, docs: Sequence[Document], units: Sequence[Any]) -> Any:
            key = (name, query, tuple((d.text, d.title) for d in docs), tuple(units))
            found = self._memo.get(key)
            if found is not None:
                self._memo.move_to_end(key)
                self.replayed += found[1]
                return found[0]
            start = time.perf_counter()
            value = inner(query, docs, units)
            self._memo[key] = (value, time.perf_counter() - start)
            if len(self._memo) > self._size:
                self._memo.popitem(last=False)
            return value

        return call


class ContextSystems:
    """The systems of the comparison over one proxy: the default compressor (``one-read``,
    ``compress``, ``rerankK-compress``), the lexical compressor and the default reranker.

    Args:
        compressor: the default :class:`Compressor`.
        lexical: a :class:`Compressor` with ``method="lexical"``.
        reranker: the default :class:`Reranker` (its order feeds every ``rerank*`` system).
        tokenizer: counts every system's tokens (default: the compressor's proxy's).
        language: the language every compressor call splits sentences by (a code of
            :data:`~ragattn.languages.LANGUAGES`, or ``"auto"``: each text's script); the
            questions' own sentences must be split by the same
            (:attr:`ContextQuestion.language`).

    A question whose candidates come ranked (:attr:`ContextQuestion.ranked`) gives ``one-read``
    and ``compress`` their order as ``first_stage_order``; the compressor's
    ``first_stage_prior`` says how much it moves the read (0: not at all).

    Raises:
        InvalidInputError: an unknown language.
    """

    def __init__(
        self,
        compressor: Compressor,
        lexical: Compressor,
        reranker: Reranker,
        tokenizer: TokenizerLike | None = None,
        *,
        language: str = AUTO,
    ) -> None:
        self.language = check_language(language)
        self.compressor = compressor
        self.lexical = lexical
        self.reranker = reranker
        self.tokenizer: TokenizerLike = tokenizer or compressor.proxy.tokenizer
        self._ranking: tuple[str, tuple[int, ...], float] | None = None
        self._warm = False
        self._forwards = ForwardMemo(compressor.scorer)

    @classmethod
    def from_proxy(
        cls,
        proxy: Any,
        *,
        cascade: Cascade | None = DEFAULT_CASCADE,
        language: str = AUTO,
        first_stage_prior: float = DEFAULT_FIRST_STAGE_PRIOR,
        first_pass: FirstPass = "minilm",
    ) -> ContextSystems:
        """Every system on one loaded :class:`~ragattn.proxy.Proxy` (no second proxy: the
        evaluation picks one proxy per set, ``ragattn eval context --proxy auto``);
        ``cascade``, ``first_stage_prior`` and ``first_pass`` are the default compressor's (the
        read of ``one-read`` and of the ``rerankK-compress`` systems); ``language`` splits
        every compressor call's sentences."""
        return cls(
            Compressor(
                proxy,
                cascade=cascade,
                first_stage_prior=first_stage_prior,
                multilingual=None,
                first_pass=first_pass,
            ),
            Compressor(proxy, method="lexical", multilingual=None),
            Reranker(proxy),
            language=language,
        )

    def fingerprint(self) -> str:
        """The proxy's weights, the scoring code and assets, and these systems' settings; the
        language is a part only when it is not ``"auto"`` (an ``auto`` run keeps the
        fingerprint, and the cached outcomes, of the runs before the option)."""
        from ragattn.embed import embedder_part
        from ragattn.fingerprint import model_fingerprint

        c = self.compressor
        parts = [
            f"compress={c.method}",
            f"selection={c.selection}",
            f"cascade={c.cascade!r}",
            f"models={c.models_dir}",
            f"lexical={self.lexical.method}",
            f"rerank={self.reranker.method}",
            f"metrics={METRICS_VERSION}",
        ]
        if self.language != AUTO:
            parts.append(f"language={self.language}")
        if c.first_stage_prior > 0:  # 0 reads no order: the outcomes of the runs before it
            parts.append(f"first_stage_prior={c.first_stage_prior:g}")
        first_pass = getattr(c, "first_pass", "minilm")
        if first_pass != "minilm":
            parts.append(f"first_pass={first_pass}")
        if embed := embedder_part():
            parts.append(embed)
        return model_fingerprint(c.proxy, *parts)

    @staticmethod
    def _cold() -> None:
        """Forget the MiniLM vectors and the sentence splits of earlier calls: the reranker, the
        lexical probe and the document-aware selection embed and split the same texts, and each
        system is timed as if alone."""
        from ragattn.embed import shared_embedder
        from ragattn.sentences import clear_split_cache

        shared_embedder().clear_cache()
        clear_split_cache()

    def _warm_up(self, question: ContextQuestion) -> None:
        """One untimed call of each model, so that no system's first question pays for loading
        and first-call allocation."""
        if not self._warm:
            docs = list(question.candidates)
            self.compressor.rerank_and_compress(
                question.query, docs, ratio=0.2, language=self.language
            )
            self.lexical.compress(question.query, docs, ratio=0.2, language=self.language)
            self.reranker.rerank(question.query, docs)
            self._warm = True

    def _rank(self, question: ContextQuestion) -> tuple[tuple[int, ...], float]:
        """The reranker's order of the candidates (best first) and its wall seconds, computed
        once per question and charged to every system that reads it."""
        if self._ranking is None or self._ranking[0] != question.qid:
            self._cold()
            start = time.perf_counter()
            ranked = self.reranker.rerank(question.query, list(question.candidates))
            seconds = time.perf_counter() - start
            self._ranking = (question.qid, tuple(r.index for r in ranked), seconds)
        return self._ranking[1], self._ranking[2]

    def _matched(
        self, system: str, question: ContextQuestion, tokens: int
    ) -> tuple[KeptContext, float]:
        if tokens < 1:
            return KeptContext(text="", spans=()), 0.0
        order, seconds = self._rank(question) if system.startswith("rerank") else ((), 0.0)
        docs = list(question.candidates)
        self._cold()
        self._forwards.replayed = 0.0
        start = time.perf_counter()
        if system == "first-stage":
            kept = stuff(question, range(len(docs)), tokens, self.tokenizer)
        elif system == "rerank-stuff":
            kept = stuff(question, order, tokens, self.tokenizer)
        elif system == "lexical":
            result = self.lexical.compress(
                question.query, docs, target_tokens=tokens, language=self.language
            )
            kept = _kept(result, range(len(docs)))
        else:
            best = order[: RERANK_K[system]]
            result = self.compressor.compress(
                question.query,
                [docs[i] for i in best],
                target_tokens=tokens,
                language=self.language,
            )
            kept = _kept(result, best)
        return kept, seconds + time.perf_counter() - start + self._forwards.replayed

    def run(
        self, system: str, question: ContextQuestion, budget: Budget, tokens: int = 0
    ) -> Outcome:
        """One system on one question: ``one-read`` and ``compress`` at ``budget``, a matched
        system with exactly ``tokens`` (``one-read``'s on this question at this budget)."""
        self._warm_up(question)
        if system in MATCHED:
            kept, seconds = self._matched(system, question, tokens)
            limit = tokens
        else:
            docs = list(question.candidates)
            self._cold()
            self._forwards.replayed = 0.0
            start = time.perf_counter()
            order = list(range(len(docs))) if question.ranked else None
            if system == SYSTEM_UNDER_TEST:
                _, result = self.compressor.rerank_and_compress(
                    question.query,
                    docs,
                    budget=budget,
                    language=self.language,
                    first_stage_order=order,
                )
            else:
                result = self.compressor.compress(
                    question.query,
                    docs,
                    budget=budget,
                    language=self.language,
                    first_stage_order=order,
                )
            seconds = time.perf_counter() - start + self._forwards.replayed
            kept = _kept(result, range(len(docs)))
            limit = budget.token_limit(result.origin_tokens) or 0
        return score_context(
            question,
            kept,
            system=system,
            budget=budget_label(budget),
            tokens=n_tokens(self.tokenizer, kept.text),
            limit=limit,
            seconds=seconds,
        )


__all__ = ["RERANK_K", "ContextSystems", "ForwardMemo"]
