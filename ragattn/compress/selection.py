"""Document-aware selection: a sentence's keep score that knows how relevant its document is.

The sentence probe scores every sentence on its own, so with several documents the sentences of a
distractor compete for the budget on equal terms with those of the relevant documents (a date from
the wrong monument beats the right one's). The same forward also ranks the documents (the
document probe, :mod:`ragattn.document_probe`), so a sentence's keep score can take its document's
relevance into account at no extra forward:

    keep = sigmoid(w_s * s + w_d * z(d) + w_b * b + bias)

- ``s``: the sentence probe's log-odds (its keep probability, clipped to ``[1e-6, 1 - 1e-6]``);
- ``z(d)``: the document probe's score of the sentence's document, z-scored over the call's
  documents (so neither their number nor their order matters); a selection fitted with
  ``document_score="attention"`` reads the probe's attention correction alone, so selection needs
  no MiniLM pass (:data:`DocumentScore`);
- ``b``: the document's best sentence log-odds minus the call's best (``<= 0``): how far the
  document's best sentence is from the best sentence anywhere;
- optionally the two title links of :mod:`ragattn.compress.links` (the query names the document's
  title; the best keep probability of another document's sentence that names it), for the
  second paragraph of a multi-hop question, which its first paragraph names.

The weights are fitted by logistic regression on the multi-document training questions
(``ragattn probe train --kind selection``, grouped by question) and stored with what they were
fitted on in ``models/<proxy>/selection.json``. A call with one document keeps the sentence
probe's scores unchanged: there is nothing to weigh.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ragattn.compress.links import LINK_COLUMNS, link_inputs
from ragattn.document_probe import zscore_columns
from ragattn.errors import ConfigError
from ragattn.lexical import sigmoid
from ragattn.sentence_attention import Unit
from ragattn.types import Document

FORMAT = "ragattn-document-selection/1"
SELECTION_FILE = "selection.json"
"""The document-aware selection's file name in ``models/<proxy>/``."""
COLUMNS: tuple[str, ...] = ("sentence_logit", "document_z", "best_gap")
"""The three inputs every combination reads, first in :attr:`DocumentSelection.weights`."""
LINKED_COLUMNS: tuple[str, ...] = COLUMNS + LINK_COLUMNS
"""The inputs of a combination that also reads the title links."""
CLIP = 1e-6

DocumentScore = Literal["probe", "attention"]
"""The document input ``z(d)`` of a combination: ``probe``, the document probe's score (the MiniLM
cosine plus the attention correction, :func:`ragattn.document_probe.score_documents`);
``attention``, the attention correction alone, which needs no MiniLM pass over the passages. A
selection records the one it was fitted on (``config["document_score"]``; files written before
the choice existed read ``probe``)."""
DOCUMENT_SCORES: tuple[DocumentScore, ...] = ("probe", "attention")

Selection = Literal["documents", "sentences"]
"""``documents``: document-aware keep scores when a call has several documents (the default
where the proxy ships ``selection.json``); ``sentences``: the sentence probe's scores alone (the
behaviour before document-aware selection, and always the behaviour for one document)."""
SELECTIONS: tuple[Selection, ...] = ("documents", "sentences")


DEFAULT_FIRST_STAGE_PRIOR = 0.0
"""The default weight of a first stage's rank prior in the document score
(:func:`with_rank_prior`; a call reads it only when it passes ``first_stage_order``)."""


def check_first_stage_prior(value: float) -> float:
    """``value`` as a rank prior's weight: a finite number >= 0.

    Raises:
        ConfigError: a negative, infinite or non-numeric weight.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < np.inf:
        raise ConfigError(f"first_stage_prior must be a finite number >= 0; got {value!r}")
    return float(value)


def _one_of(value: str, valid: tuple[str, ...], name: str) -> str:
    if value not in valid:
        raise ConfigError(f"unknown {name} {value!r}; valid: {', '.join(valid)}")
    return value


def check_document_score(value: str) -> DocumentScore:
    """``value`` as a :data:`DocumentScore`.

    Raises:
        ConfigError: any other value (the message lists the valid ones).
    """
    return _one_of(value, DOCUMENT_SCORES, "document_score")  # type: ignore[return-value]


def check_selection(value: str) -> Selection:
    """``value`` as a :data:`Selection`.

    Raises:
        ConfigError: any other value (the message lists the valid ones).
    """
    return _one_of(value, SELECTIONS, "selection")  # type: ignore[return-value]


def logit(probabilities: np.ndarray) -> np.ndarray:
    """Log-odds of keep probabilities, clipped so that 0 and 1 stay finite."""
    p = np.clip(np.asarray(probabilities, dtype=np.float64), CLIP, 1.0 - CLIP)
    return np.log(p / (1.0 - p))


def with_rank_prior(document_scores: np.ndarray, prior: np.ndarray, weight: float) -> np.ndarray:
    """Document scores that also read a first stage's order: ``z(d) + weight * z(prior)``.

    Both are z-scored over the call's documents (:func:`ragattn.document_probe.zscore_columns`),
    so ``weight`` is in standard deviations of the document score per standard deviation of the
    prior, whatever the number of documents. The combination z-scores the blend again
    (:func:`combination_inputs`), so the prior moves a sentence at most as far as its document's
    own score can: as ``weight`` grows the document input tends to ``z(prior)`` alone, and the
    sentence probe's own score still decides within and across documents.

    Args:
        document_scores: one score per document (the document probe's log-odds).
        prior: one rank prior per document, the same documents in the same order
            (:func:`ragattn.first_stage.rank_prior`, higher is better).
        weight: the prior's weight, >= 0 (0 returns ``z(d)``).
    """
    z = zscore_columns(
        np.stack([np.asarray(document_scores, dtype=np.float64), np.asarray(prior)], axis=1)
    )
    return z[:, 0] + weight * z[:, 1]


def combination_inputs(
    probabilities: np.ndarray, unit_docs: Sequence[int], document_scores: np.ndarray
) -> np.ndarray:
    """The ``[n_units, 3]`` inputs of :data:`COLUMNS` for one call.

    Args:
        probabilities: the sentence probe's keep probabilities, one per unit, in [0, 1].
        unit_docs: each unit's document index.
        document_scores: one score per document (the document probe's log-odds; any scale, only
            its z-score over the call's documents is used).
    """
    s = logit(probabilities)
    docs = np.asarray(unit_docs, dtype=np.int64)
    scores = np.asarray(document_scores, dtype=np.float64)
    z = zscore_columns(scores[:, None])[:, 0]
    best = np.full(len(scores), -np.inf)
    np.maximum.at(best, docs, s)
    top = float(s.max()) if len(s) else 0.0
    gap = np.where(np.isfinite(best), best - top, 0.0)
    return np.stack([s, z[docs], gap[docs]], axis=1) if len(s) else np.zeros((0, 3))


@dataclass(frozen=True, slots=True, kw_only=True)
class DocumentSelection:
    """The fitted combination (weights over :data:`COLUMNS`, in log-odds per unit of each input).

    ``config`` records what it was fitted on (sources, question counts, grouped-CV recall) and
    which sentence probe it reads (``method``), so it is never applied to another probe's scores.
    """

    weights: tuple[float, ...]
    bias: float
    config: Mapping[str, Any] = field(default_factory=dict)
    columns: tuple[str, ...] = COLUMNS

    def __post_init__(self) -> None:
        if self.columns not in (COLUMNS, LINKED_COLUMNS) or len(self.weights) != len(self.columns):
            raise ConfigError(
                f"a document-aware selection needs one weight per column of {COLUMNS} or "
                f"{LINKED_COLUMNS}; got {len(self.weights)} over {self.columns}"
            )
        self.document_score  # noqa: B018  # refuses an unknown input at construction

    @property
    def document_score(self) -> DocumentScore:
        """The document input this selection was fitted on (:data:`DocumentScore`)."""
        return check_document_score(str(self.config.get("document_score", "probe")))

    @property
    def reads_minilm(self) -> bool:
        """Whether its document input needs MiniLM's cosine of each passage."""
        return self.document_score == "probe"

    @property
    def uses_links(self) -> bool:
        """Whether the combination reads the title links (:mod:`ragattn.compress.links`)."""
        return self.columns == LINKED_COLUMNS

    @property
    def method(self) -> str:
        """The compress method whose sentence probabilities this selection combines."""
        return str(self.config.get("method", "sentinel"))

    def combine(
        self,
        probabilities: np.ndarray,
        unit_docs: Sequence[int],
        document_scores: np.ndarray,
        *,
        links: np.ndarray | None = None,
    ) -> np.ndarray:
        """Document-aware keep probabilities in [0, 1], one per unit; with fewer than two
        documents the sentence probabilities are returned unchanged. ``links`` (the
        ``[n_units, 2]`` of :func:`ragattn.compress.links.link_inputs`) is required when
        :attr:`uses_links`, ignored otherwise."""
        probabilities = np.asarray(probabilities, dtype=np.float64)
        if len(document_scores) < 2 or len(probabilities) == 0:
            return probabilities
        x = combination_inputs(probabilities, unit_docs, document_scores)
        if self.uses_links:
            if links is None:
                raise ValueError("this selection reads the title links: pass links=")
            x = np.concatenate([x, np.asarray(links, dtype=np.float64)], axis=1)
        return sigmoid(x @ np.asarray(self.weights) + self.bias)

    def weigh(
        self,
        query: str,
        documents: Sequence[Document],
        units: Sequence[Unit],
        probabilities: np.ndarray,
        document_scores: np.ndarray,
    ) -> np.ndarray:
        """:meth:`combine` for one call, with the title links computed when it reads them."""
        links = link_inputs(query, documents, units, probabilities) if self.uses_links else None
        return self.combine(probabilities, [u.doc for u in units], document_scores, links=links)

    def save(self, path: str | Path) -> None:
        payload = {
            "format": FORMAT,
            "columns": list(self.columns),
            "weights": list(self.weights),
            "bias": self.bias,
            "config": dict(self.config),
        }
        Path(path).write_text(json.dumps(payload, indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> DocumentSelection:
        """Raises ConfigError for a file of another format or other columns."""
        data = json.loads(Path(path).read_text())
        columns = tuple(data.get("columns", ()))
        if data.get("format") != FORMAT or columns not in (COLUMNS, LINKED_COLUMNS):
            raise ConfigError(
                f"{path} is not a {FORMAT} file over {', '.join(COLUMNS)} "
                f"(optionally {', '.join(LINK_COLUMNS)})"
            )
        return cls(
            weights=tuple(float(v) for v in data["weights"]),
            bias=float(data["bias"]),
            config=data["config"],
            columns=columns,
        )


__all__ = [
    "COLUMNS",
    "DEFAULT_FIRST_STAGE_PRIOR",
    "DOCUMENT_SCORES",
    "LINKED_COLUMNS",
    "SELECTIONS",
    "SELECTION_FILE",
    "DocumentScore",
    "DocumentSelection",
    "Selection",
    "check_document_score",
    "check_first_stage_prior",
    "check_selection",
    "combination_inputs",
    "logit",
    "with_rank_prior",
]
