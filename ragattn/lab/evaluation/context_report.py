"""Running ``ragattn eval context`` and its report (:mod:`ragattn.lab.evaluation.context`): every
system on every question at every budget, outcomes cached as they are computed so an interrupted
run resumes, and one row per system and budget (means over the questions).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragattn.errors import InvalidInputError
from ragattn.lab.evaluation.context import (
    MATCHED,
    SYSTEM_UNDER_TEST,
    SYSTEMS,
    ContextQuestion,
    Outcome,
    budget_label,
    extractive,
    structure_breaks,
)
from ragattn.lab.evaluation.context_systems import ContextSystems
from ragattn.lab.evaluation.harness import fmt_cell, mean_or_none
from ragattn.lab.evaluation.markdown_checks import StructureBreaks
from ragattn.languages import AUTO
from ragattn.types import Budget, to_plain


class OutcomeCache:
    """Outcomes appended to ``<folder>/context-<dataset>.jsonl`` as they are computed, one JSON
    object a line keyed by dataset, question id, system, budget and the systems' fingerprint
    (:meth:`ContextSystems.fingerprint`), so an interrupted run resumes where it stopped. Lines of
    another fingerprint stay in the file unread; a line cut short by an interruption is skipped."""

    def __init__(self, folder: Path, dataset: str, fingerprint: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"context-{dataset}.jsonl"
        self.dataset = dataset
        self.fingerprint = fingerprint
        self._known: dict[tuple[str, str, str], Outcome] = {}
        self._newline = False
        if self.path.is_file():
            raw = self.path.read_bytes()
            self._newline = bool(raw) and not raw.endswith(b"\n")
            for line in raw.decode("utf-8", errors="replace").splitlines():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if record.get("dataset") == dataset and record.get("fingerprint") == fingerprint:
                    outcome = Outcome.from_record(record)
                    self._known[(outcome.qid, outcome.system, outcome.budget)] = outcome

    def __len__(self) -> int:
        return len(self._known)

    def get(self, qid: str, system: str, budget: str) -> Outcome | None:
        return self._known.get((qid, system, budget))

    def put(self, outcome: Outcome) -> None:
        self._known[(outcome.qid, outcome.system, outcome.budget)] = outcome
        record = {"dataset": self.dataset, "fingerprint": self.fingerprint, **to_plain(outcome)}
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(("\n" if self._newline else "") + json.dumps(record) + "\n")
        self._newline = False


# --------------------------------------------------------------------------------------- report


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextRow:
    """One system at one budget, means over the questions.

    Attributes:
        matched: the system was given ``one-read``'s tokens (else the budget itself).
        evidence_recall: gold kept / gold present, in [0, 1], averaged over the questions with
            gold among their candidates; None when none has.
        answer_kept: share in [0, 1] of the questions with an extractive answer whose answer is
            in the kept text; None when none has one.
        passages: candidates touched per question.
        tokens: kept tokens per question (proxy tokenizer).
        seconds: wall-clock seconds per question.
        over_ids: the questions whose kept text is longer than the tokens given.
        broken: broken Markdown structure per question (open fences, table rows without their
            header, code lines cut: :func:`~ragattn.lab.evaluation.context.structure_breaks`);
            None when the row was summarized without its questions.
        breaks: the three counts summed over the questions; None likewise.
    """

    budget: str
    system: str
    matched: bool
    evidence_recall: float | None
    answer_kept: float | None
    passages: float
    tokens: float
    seconds: float
    over_ids: tuple[str, ...]
    broken: float | None = None
    breaks: StructureBreaks | None = None


def summarize(
    outcomes: Sequence[Outcome],
    *,
    budget: str,
    system: str,
    questions: Mapping[str, ContextQuestion] | None = None,
) -> ContextRow:
    """The row of ``system`` at ``budget`` from its outcomes (one per question); with the
    ``questions`` (by id), the broken Markdown structure of each kept context too (from the
    outcome's spans, so cached outcomes are counted as well)."""
    if not outcomes:
        raise InvalidInputError(f"no outcome of {system} at {budget}")
    broken: float | None = None
    breaks: StructureBreaks | None = None
    if questions is not None:
        each = [structure_breaks(questions[o.qid], o.spans) for o in outcomes]
        broken = float(np.mean([b.total for b in each]))
        breaks = sum(each, StructureBreaks())
    return ContextRow(
        budget=budget,
        system=system,
        matched=system in MATCHED,
        evidence_recall=mean_or_none(
            [o.gold_kept / o.gold_present for o in outcomes if o.gold_present]
        ),
        answer_kept=mean_or_none(
            [float(o.answer_kept) for o in outcomes if o.answer_kept is not None]
        ),
        passages=float(np.mean([o.passages for o in outcomes])),
        tokens=float(np.mean([o.tokens for o in outcomes])),
        seconds=float(np.mean([o.seconds for o in outcomes])),
        over_ids=tuple(o.qid for o in outcomes if o.over),
        broken=broken,
        breaks=breaks,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextReport:
    """Every system at every budget on one set; tokens counted in ``tokenizer``, sentences split
    by ``language`` (``"auto"``: each text's script)."""

    dataset: str
    language: str
    num_questions: int
    num_with_gold: int
    num_with_answer: int
    tokenizer: str
    cpu_capability: str
    threads: int
    fingerprint: str
    rows: tuple[ContextRow, ...]
    outcomes: tuple[Outcome, ...]

    def to_markdown(self) -> str:
        lines = [
            f"{self.dataset}: {self.num_questions} questions, gold among the candidates in "
            f"{self.num_with_gold}, an extractive answer in {self.num_with_answer}",
            f"sentences split by language {self._language()}; tokens in {self.tokenizer}; "
            f"CPU capability {self.cpu_capability}, "
            f"{self.threads} torch threads; systems {self.fingerprint}",
            "",
            f"| budget | system | evidence recall (n={self.num_with_gold}) | answer kept "
            f"(n={self.num_with_answer}) | passages | tokens | s / question | over | broken "
            "(fence / row / code) |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in self.rows:
            name = r.system if r.matched else f"{r.system} *"
            cells = [r.budget, name, fmt_cell(r.evidence_recall), fmt_cell(r.answer_kept)]
            cells += [
                fmt_cell(r.passages, 2),
                fmt_cell(r.tokens, 1),
                fmt_cell(r.seconds),
                str(len(r.over_ids)),
                _broken_cell(r),
            ]
            lines.append("| " + " | ".join(cells) + " |")
        lines += [
            "",
            "\\* at the budget itself; every other row gets one-read's tokens of each question, "
            "never more (over: questions past the tokens given). broken: Markdown structure "
            "broken per question (fences left open, table rows kept without their header, code "
            "lines cut), and each count summed over the questions.",
        ]
        lines += [
            f"over budget: {r.system} at {r.budget}: {', '.join(r.over_ids[:10])}"
            + (" …" if len(r.over_ids) > 10 else "")
            for r in self.rows
            if r.over_ids
        ]
        return "\n".join(lines)

    def _language(self) -> str:
        return "auto (each text's script)" if self.language == AUTO else self.language

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON values; outcomes without their spans (the cache has them)."""
        out: dict[str, Any] = to_plain(self)
        for outcome in out["outcomes"]:
            outcome.pop("spans", None)
        return out


def _broken_cell(row: ContextRow) -> str:
    if row.broken is None or row.breaks is None:
        return fmt_cell(None)
    b = row.breaks
    return f"{fmt_cell(row.broken, 2)} ({b.fences} / {b.rows} / {b.code_lines})"


def evaluate_context(
    dataset: str,
    questions: Sequence[ContextQuestion],
    systems: ContextSystems,
    budgets: Sequence[Budget],
    names: Sequence[str] = SYSTEMS,
    *,
    cache: OutcomeCache | None = None,
    progress: bool = True,
) -> ContextReport:
    """Run ``one-read`` and the systems ``names`` on every question at every budget and report.

    ``one-read`` always runs (it sets each question's tokens). Outcomes found in ``cache`` are
    reused, new ones appended to it.

    Raises:
        InvalidInputError: no question, no budget, a threshold budget, an unknown system, or a
            question split by another language than ``systems``' own.
    """
    if not questions or not budgets:
        raise InvalidInputError("evaluate_context needs questions and budgets")
    if other := sorted({q.language for q in questions} - {systems.language}):
        raise InvalidInputError(
            f"questions split as {', '.join(other)}, the systems as {systems.language}: "
            "load the set with the systems' language"
        )
    if unknown := [n for n in names if n not in SYSTEMS]:
        raise InvalidInputError(f"unknown systems {unknown}; valid: {', '.join(SYSTEMS)}")
    if any(b.kind == "threshold" for b in budgets):
        raise InvalidInputError("a threshold keeps no set number of tokens; give ratios or tokens")
    chosen = [s for s in SYSTEMS if s == SYSTEM_UNDER_TEST or s in names]
    from tqdm import tqdm

    by_row: dict[tuple[str, str], list[Outcome]] = {}
    for question in tqdm(questions, desc=dataset, disable=not progress, mininterval=5.0):
        for budget in budgets:
            tokens = 0
            for system in chosen:
                label = budget_label(budget)
                outcome = cache.get(question.qid, system, label) if cache else None
                if outcome is not None and system in MATCHED and outcome.limit != tokens:
                    outcome = None  # matched to another one-read run: match it again
                if outcome is None:
                    outcome = systems.run(system, question, budget, tokens)
                    if cache is not None:
                        cache.put(outcome)
                if system == SYSTEM_UNDER_TEST:
                    tokens = outcome.tokens
                by_row.setdefault((label, system), []).append(outcome)
    return _report(dataset, questions, systems, by_row, cache)


def _report(
    dataset: str,
    questions: Sequence[ContextQuestion],
    systems: ContextSystems,
    by_row: Mapping[tuple[str, str], Sequence[Outcome]],
    cache: OutcomeCache | None,
) -> ContextReport:
    import torch

    by_id = {q.qid: q for q in questions}
    return ContextReport(
        dataset=dataset,
        language=systems.language,
        num_questions=len(questions),
        num_with_gold=sum(any(q.gold) for q in questions),
        num_with_answer=sum(bool(extractive(q.answers)) for q in questions),
        tokenizer=str(getattr(systems.tokenizer, "name_or_path", type(systems.tokenizer).__name__)),
        cpu_capability=str(torch.backends.cpu.get_cpu_capability()),
        threads=torch.get_num_threads(),
        fingerprint=cache.fingerprint if cache else systems.fingerprint(),
        rows=tuple(
            summarize(o, budget=b, system=s, questions=by_id) for (b, s), o in by_row.items()
        ),
        outcomes=tuple(o for outs in by_row.values() for o in outs),
    )


__all__ = [
    "ContextReport",
    "ContextRow",
    "OutcomeCache",
    "evaluate_context",
    "summarize",
]
