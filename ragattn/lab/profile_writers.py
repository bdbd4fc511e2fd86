"""Writers of the learned rerank assets: the rerank profile (``ragattn heads select``) and the
retrieval-head profile with its model-card section (``ragattn heads detect``).

The runtime only reads these files (:mod:`ragattn.rerank.profiles`); the retrieval-head file keeps
every head's score, so another selection can be made from it without running the detection again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ragattn.attention import HeadSet
from ragattn.lab.retrieval_heads import (
    DEPTHS,
    HAYSTACK_FILE,
    LENGTHS,
    NEEDLES,
    SUCCESS_RECALL,
    Detection,
)
from ragattn.rerank.profiles import PROFILE_FILENAME, RETRIEVAL_FILENAME

CARD_START = "<!-- retrieval-heads:start -->"
CARD_END = "<!-- retrieval-heads:end -->"


def write_rerank_profile(out_dir: Path, payload: dict[str, Any]) -> Path:
    """Write the rerank profile (:func:`ragattn.lab.qrhead.fit_rerank_profile`) into ``out_dir``;
    returns the file's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / PROFILE_FILENAME
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path


def retrieval_profile_payload(
    detection: Detection,
    heads: HeadSet,
    *,
    proxy: str,
    selection: dict[str, float | int],
    command: str,
    date: str,
) -> dict[str, Any]:
    """The JSON content: selected heads with scores, all scores, the data and the trials."""
    chosen = set(heads.pairs)
    ranked = [(p, s) for p, s in detection.ranked() if p in chosen]
    scores = detection.scores
    return {
        "proxy": proxy,
        "method": "retrieval heads, copy-paste needle test (Wu et al. 2024, arXiv 2404.15574)",
        "decoding": detection.decoding,
        "selection": selection,
        "heads": [{"layer": a, "head": b, "score": round(s, 4)} for (a, b), s in ranked],
        "summary": {
            "heads_total": int(scores.size),
            "above_0.1": int((scores > 0.1).sum()),
            "above_0.5": int((scores > 0.5).sum()),
        },
        "scores": np.round(scores, 4).tolist(),
        "data": {
            "haystack": f"../shared/data/{HAYSTACK_FILE} (paragraph sentences; train split)",
            "needles": [
                {"sentence": n.sentence, "question": n.question, "answer": n.answer}
                for n in NEEDLES
            ],
            "haystack_tokens": list(LENGTHS),
            "depths": list(DEPTHS),
            "success": f"ROUGE-1 recall of the answer > {SUCCESS_RECALL}",
        },
        "trials": {
            "total": len(detection.trials),
            "successful": detection.successful,
            "seconds": round(detection.seconds, 1),
            "each": [
                {
                    "needle": t.spec.needle,
                    "haystack_tokens": t.spec.haystack_tokens,
                    "depth": t.spec.depth,
                    "actual_depth": round(t.depth, 3),
                    "prompt_tokens": t.prompt_tokens,
                    "recall": round(t.recall, 3),
                    "response": t.response,
                }
                for t in detection.trials
            ],
        },
        "command": command,
        "date": date,
    }


def write_retrieval_profile(path: Path, payload: dict[str, Any]) -> None:
    """Write a retrieval-head profile (:func:`retrieval_profile_payload`) as JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1, ensure_ascii=False) + "\n")


def card_section(payload: dict[str, Any]) -> str:
    """The model-card section for a profile payload, between the retrieval-heads markers."""
    heads = payload["heads"]
    layers = sorted({h["layer"] for h in heads})
    trials = payload["trials"]
    rows = [f"| {h['layer']} | {h['head']} | {h['score']:.3f} |" for h in heads]
    return "\n".join(
        [
            CARD_START,
            f"# Retrieval heads for `{payload['proxy']}` (`{RETRIEVAL_FILENAME}`)",
            "",
            f"Written by `{payload['command']}` on {payload['date']}.",
            "",
            "Wu et al.'s copy-paste needle test: a fictional needle sentence is inserted at a",
            "sentence boundary of HotpotQA *train* paragraphs "
            f"({', '.join(map(str, LENGTHS))} haystack tokens;",
            f"depths {', '.join(map(str, DEPTHS))}; {len(NEEDLES)} needles), "
            f"and the model answers a question by {payload['decoding']} decoding.",
            "A head copies at a step when its most-attended key lies in the needle's answer and",
            "holds the emitted token. Its score is the share of answer tokens it copied, averaged",
            "over the trials whose response recalls more than half of the answer's words.",
            "",
            f"Trials: {trials['successful']} of {trials['total']} successful, "
            f"{trials['seconds']:.0f} s. Heads scoring > 0.1: {payload['summary']['above_0.1']}; "
            f"> 0.5: {payload['summary']['above_0.5']} (of {payload['summary']['heads_total']}).",
            f"Selection {json.dumps(payload['selection'])}: {len(heads)} heads in layers "
            f"{', '.join(map(str, layers))}.",
            "",
            "| layer | head | retrieval score |",
            "|---|---|---|",
            *rows,
            "",
            "The `icr-retrieval` rerank methods score documents with ICR over these heads.",
            CARD_END,
        ]
    )


def write_card_section(readme: Path, section: str) -> None:
    """Append ``section`` to the model card, replacing an earlier retrieval-heads section."""
    replace_card_section(readme, section, CARD_START, CARD_END)


def replace_card_section(
    readme: Path, section: str, start: str, end: str, *, first: bool = False
) -> None:
    """Put ``section`` (which begins with ``start`` and ends with ``end``) into the model card in
    place of an earlier one between the same markers; otherwise append it (or, with ``first``,
    put it first). The card's other sections are kept as they are."""
    text = readme.read_text() if readme.is_file() else ""
    if start in text and end in text:
        before, rest = text.split(start, 1)
        after = rest.split(end, 1)[1]
        text = before + section + after
    elif first:
        text = section + "\n" + ("\n" + text.lstrip("\n") if text else "")
    else:
        text = text.rstrip("\n") + ("\n\n" if text else "") + section + "\n"
    readme.parent.mkdir(parents=True, exist_ok=True)
    readme.write_text(text)


__all__ = [
    "CARD_END",
    "CARD_START",
    "card_section",
    "replace_card_section",
    "retrieval_profile_payload",
    "write_card_section",
    "write_rerank_profile",
    "write_retrieval_profile",
]
