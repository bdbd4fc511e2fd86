"""Retrieval-head detection by the copy-paste needle test (Wu et al. 2024, arXiv 2404.15574).

A needle sentence ("The secret ingredient in Marta's lemon cake is ...") is inserted at a sentence
boundary of a real-text haystack, at a chosen depth and haystack length; the model is asked a
question only the needle answers and answers by **greedy decoding**. At each decoding step, a head
*copies* when the key it attends to most (argmax over all keys) lies inside the needle's answer
tokens **and** holds the very token being emitted. A head's score on one trial is the fraction of
the answer's tokens it copied at least once; its retrieval score is the mean over successful trials
(the response recalls > 50 % of the answer's words, ROUGE-1 recall, as in the paper).

Why greedy and not teacher-forced: the packaged SmolLM2-135M answers every probe needle verbatim up
to 1,500 haystack tokens, so the attention is read while the model really retrieves. Teacher forcing
(the needle sentence forced as the answer) is kept for proxies that do not copy.

How the attention is read: the model generates with its KV cache (no capture); then one capture
forward over ``prompt + response[:-1]`` takes the softmax rows of the positions that emitted each
response token. Attention is causal, so these rows equal the rows seen while decoding.

Differences from the official code, on purpose: the needle span is exact (the answer's character
range mapped through the prompt's token offsets, not a > 90 % token-overlap search), and a needle
position copied twice counts once, so a score is a fraction in [0, 1].
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from tqdm import tqdm

from ragattn.attention import HeadSet, engine_for
from ragattn.errors import InvalidInputError
from ragattn.lab.evaluation.datasets import load_hotpot
from ragattn.prompt import CHAT_WRAPPERS, BuiltPrompt, Kind, Piece, assemble
from ragattn.proxy import Proxy
from ragattn.types import TokenSpan

Decoding = Literal["greedy", "teacher-forced"]

HAYSTACK_FILE = "hotpotqa/hotpot_train_v1.1.sample100.shared.json"
"""Haystack text: the paragraphs of the HotpotQA *train* sample (never evaluation data)."""
LENGTHS = (300, 600, 1000, 1500)
"""Haystack lengths in proxy tokens (sum over the haystack's sentences)."""
DEPTHS = (0.0, 0.25, 0.5, 0.75, 1.0)
"""Needle depths: fraction of the haystack's tokens placed before the needle."""
SUCCESS_RECALL = 0.5
"""A trial counts if the response recalls more than this share of the answer's words."""
INSTRUCTION = "Read the text below.\n\n"
ASK = "\n\nBased on the text, answer the question: "


@dataclass(frozen=True, slots=True, kw_only=True)
class Needle:
    """A needle sentence, the question it answers, and ``answer``: the part of ``sentence`` whose
    tokens count as copied (Wu et al.'s "real needle"; the question words are not counted)."""

    sentence: str
    question: str
    answer: str

    def __post_init__(self) -> None:
        if self.answer not in self.sentence:
            raise InvalidInputError(f"needle answer {self.answer!r} is not in its sentence")


NEEDLES: tuple[Needle, ...] = (
    Needle(
        sentence="The secret ingredient in Marta's lemon cake is a spoonful of smoked paprika.",
        question="What is the secret ingredient in Marta's lemon cake?",
        answer="a spoonful of smoked paprika",
    ),
    Needle(
        sentence=(
            "The lighthouse keeper on Vell Island named his three goats Pepper, Quill and Juniper."
        ),
        question="What did the lighthouse keeper on Vell Island name his three goats?",
        answer="Pepper, Quill and Juniper",
    ),
    Needle(
        sentence="The password to the archive room of the old observatory is copper kettle ninety.",
        question="What is the password to the archive room of the old observatory?",
        answer="copper kettle ninety",
    ),
    Needle(
        sentence="Dr. Amara Osei keeps her spare house key inside a hollow blue garden gnome.",
        question="Where does Dr. Amara Osei keep her spare house key?",
        answer="inside a hollow blue garden gnome",
    ),
    Needle(
        sentence="The kite festival in Port Elsen always begins with a parade of paper dragons.",
        question="How does the kite festival in Port Elsen always begin?",
        answer="a parade of paper dragons",
    ),
    Needle(
        sentence=(
            "The best way to cross the Tarn Valley in winter is by sledge along the frozen river."
        ),
        question="What is the best way to cross the Tarn Valley in winter?",
        answer="by sledge along the frozen river",
    ),
)
"""Our own needles (fictional facts, so the answer cannot come from the model's memory)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TrialSpec:
    """One cell of the grid: which needle, how long a haystack, how deep, where the text starts."""

    needle: int
    haystack_tokens: int
    depth: float
    offset: int


@dataclass(frozen=True, slots=True, kw_only=True)
class NeedlePrompt:
    """A needle-in-a-haystack prompt; ``answer`` is the token span of the needle's answer part."""

    prompt: BuiltPrompt
    answer: TokenSpan
    haystack_tokens: int
    depth: float


@dataclass(frozen=True, slots=True, kw_only=True)
class TrialResult:
    """One trial. ``scores`` is ``[layers, heads]``: the fraction of answer tokens each head copied
    (0 for heads not scored). ``emitted`` are the response's token ids (cut before end of turn or
    newline); ``recall``: the response's ROUGE-1 recall of the answer, in [0, 1]."""

    spec: TrialSpec
    prompt_tokens: int
    depth: float
    response: str
    emitted: tuple[int, ...]
    recall: float
    success: bool
    scores: np.ndarray = field(repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Detection:
    """Retrieval scores ``[layers, heads]`` (mean over successful trials, each in [0, 1])."""

    scores: np.ndarray
    trials: tuple[TrialResult, ...]
    decoding: Decoding
    seconds: float

    @property
    def successful(self) -> int:
        return sum(t.success for t in self.trials)

    def ranked(self) -> list[tuple[tuple[int, int], float]]:
        """Every head with its score, best first; ties in layer-major order."""
        flat = self.scores.reshape(-1)
        order = np.argsort(-flat, kind="stable")
        n_heads = self.scores.shape[1]
        return [((int(i) // n_heads, int(i) % n_heads), float(flat[i])) for i in order]

    def select(self, *, top: int | None = None, threshold: float | None = None) -> HeadSet:
        """The ``top`` best heads scoring above 0, or every head scoring above ``threshold``."""
        if (top is None) == (threshold is None):
            raise InvalidInputError("give exactly one of top or threshold")
        ranked = [(p, s) for p, s in self.ranked() if s > 0.0]
        if top is not None:
            chosen = ranked[:top]
        else:
            assert threshold is not None  # exactly one of the two is set (checked above)
            chosen = [(p, s) for p, s in ranked if s > threshold]
        if not chosen:
            raise InvalidInputError("no head copied any needle token; no retrieval head to select")
        return HeadSet(tuple(p for p, _ in chosen))


def copy_paste_scores(
    weights: np.ndarray | torch.Tensor,
    key_ids: Sequence[int],
    emitted: Sequence[int],
    answer: TokenSpan,
) -> np.ndarray:
    """Per head, the fraction of the answer's tokens it copy-pasted (Wu et al.'s retrieval score).

    Args:
        weights: ``[heads, steps, n_keys]`` attention rows; row ``r`` is the attention of the step
            that emitted ``emitted[r]``.
        key_ids: the token id at each key position (at least ``n_keys`` of them).
        emitted: the token emitted at each step.
        answer: the needle answer's token span ``[start, end)`` among the keys.

    Returns:
        ``[heads]`` scores in [0, 1]: ``|{i : some step r has argmax_r = i ∈ answer and
        key_ids[i] = emitted[r]}| / |answer|``.
    """
    w = torch.as_tensor(weights)
    if w.ndim != 3 or w.shape[1] != len(emitted):
        raise InvalidInputError("weights must be [heads, steps, n_keys] with one row per step")
    if len(answer) == 0:
        raise InvalidInputError("the needle answer span is empty")
    top = w.argmax(dim=-1).cpu().numpy()  # [heads, steps]
    keys = np.asarray(key_ids, dtype=np.int64)[: w.shape[-1]]
    hit = (top >= answer.start) & (top < answer.end) & (keys[top] == np.asarray(emitted)[None, :])
    out = np.zeros(w.shape[0])
    for h in range(w.shape[0]):
        out[h] = len(set(top[h][hit[h]].tolist())) / len(answer)
    return out


def rouge1_recall(response: str, answer: str) -> float:
    """Share of the answer's lower-cased words found in the response (with multiplicity)."""
    want = Counter(re.findall(r"\w+", answer.lower()))
    got = Counter(re.findall(r"\w+", response.lower()))
    total = sum(want.values())
    return sum(min(n, got[w]) for w, n in want.items()) / total if total else 0.0


def load_haystack(data_dir: Path) -> tuple[str, ...]:
    """The sentences of the HotpotQA train-sample paragraphs, in file order."""
    out: list[str] = []
    for example in load_hotpot(data_dir / HAYSTACK_FILE):
        for passage in example.passages:
            out.extend(s.strip() for s in passage.sentences if s.strip())
    if not out:
        raise InvalidInputError(f"no haystack sentences in {data_dir / HAYSTACK_FILE}")
    return tuple(out)


def trial_grid(trials: int, n_sentences: int) -> list[TrialSpec]:
    """``trials`` specs cycling over lengths, depths and needles; each starts elsewhere.

    Lengths cycle fastest, depths every ``len(LENGTHS)`` trials, needles with the trial index, so
    40 trials cover every (length, depth) cell twice. Since 6 and 4 share the factor 2, a needle
    only meets lengths of its own parity (needle 0 with 300 and 1,000 tokens, needle 1 with 600
    and 1,500, ...); kept so that the committed profile stays reproducible.
    """
    specs = []
    for t in range(trials):
        specs.append(
            TrialSpec(
                needle=t % len(NEEDLES),
                haystack_tokens=LENGTHS[t % len(LENGTHS)],
                depth=DEPTHS[(t // len(LENGTHS)) % len(DEPTHS)],
                offset=(t * 997) % n_sentences,
            )
        )
    return specs


def build_prompt(
    proxy: Proxy, sentences: Sequence[str], spec: TrialSpec, needle: Needle
) -> NeedlePrompt:
    """Haystack of about ``spec.haystack_tokens`` tokens from ``sentences`` (starting at
    ``spec.offset``, wrapping), the needle at the sentence boundary nearest ``spec.depth``, then the
    question, in the proxy's chat wrapper."""
    tok = proxy.tokenizer
    hay: list[str] = []
    counts: list[int] = []
    i = spec.offset
    while sum(counts) < spec.haystack_tokens:
        text = sentences[i % len(sentences)]
        hay.append(text)
        counts.append(len(tok(" " + text, add_special_tokens=False)["input_ids"]))
        i += 1
        if len(hay) > len(sentences):
            raise InvalidInputError("the haystack text is shorter than the requested length")
    cum = np.concatenate([[0], np.cumsum(counts)])
    cut = int(np.argmin(np.abs(cum - spec.depth * cum[-1])))
    prefix, suffix = CHAT_WRAPPERS[proxy.chat_family]
    pieces = [Piece(kind=Kind.CHAT_PREFIX, text=prefix + INSTRUCTION)]
    if cut > 0:
        pieces.append(Piece(kind=Kind.DOCUMENT, text=" ".join(hay[:cut]), doc_index=0))
        pieces.append(Piece(kind=Kind.SEPARATOR, text=" "))
    pieces.append(Piece(kind=Kind.DOCUMENT, text=needle.sentence, doc_index=1))
    if cut < len(hay):
        pieces.append(Piece(kind=Kind.SEPARATOR, text=" "))
        pieces.append(Piece(kind=Kind.DOCUMENT, text=" ".join(hay[cut:]), doc_index=2))
    pieces.append(Piece(kind=Kind.INSTRUCTION, text=ASK))
    pieces.append(Piece(kind=Kind.QUERY, text=needle.question))
    if suffix:
        pieces.append(Piece(kind=Kind.CHAT_SUFFIX, text=suffix))
    prompt = assemble(pieces, tok)
    start = needle.sentence.index(needle.answer)
    answer = prompt.document_text_tokens(1, start, start + len(needle.answer))
    return NeedlePrompt(
        prompt=prompt,
        answer=answer,
        haystack_tokens=int(cum[-1]),
        depth=float(cum[cut] / cum[-1]),
    )


def _greedy(proxy: Proxy, ids: Sequence[int], max_new_tokens: int) -> list[int]:
    """Greedy continuation, cut before the end-of-turn token or the first newline."""
    from transformers import GenerationConfig

    tok = proxy.tokenizer
    config = GenerationConfig(
        max_new_tokens=max_new_tokens,
        do_sample=False,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
    )
    with torch.inference_mode():
        out = proxy.model.generate(
            torch.tensor([list(ids)], dtype=torch.long, device=proxy.device),
            generation_config=config,
        )
    new = []
    for token in out[0, len(ids) :].tolist():
        if token == tok.eos_token_id or "\n" in tok.decode([token]):
            break
        new.append(token)
    return new


def run_trial(
    proxy: Proxy,
    sentences: Sequence[str],
    spec: TrialSpec,
    *,
    decoding: Decoding = "greedy",
    max_new_tokens: int = 32,
) -> TrialResult:
    """Build one prompt, get the response (greedy or forced) and score every full-attention head."""
    needle = NEEDLES[spec.needle]
    built = build_prompt(proxy, sentences, spec, needle)
    ids = list(built.prompt.input_ids)
    if decoding == "greedy":
        emitted = _greedy(proxy, ids, max_new_tokens)
    else:
        emitted = list(proxy.tokenizer(needle.sentence, add_special_tokens=False)["input_ids"])
    response = proxy.tokenizer.decode(emitted)
    recall = rouge1_recall(response, needle.answer)
    scores = np.zeros((proxy.num_layers, proxy.num_heads))
    if emitted:
        heads = HeadSet.from_layers(proxy.full_attention_layers(), proxy.num_heads)
        seq = ids + emitted[:-1]
        rows = list(range(len(ids) - 1, len(seq)))
        cap = engine_for(proxy).capture(seq, rows, heads, reduce="none")
        per_head = copy_paste_scores(cap.weights, seq, emitted, built.answer)
        for (layer, head), value in zip(heads.pairs, per_head, strict=True):
            scores[layer, head] = value
    return TrialResult(
        spec=spec,
        prompt_tokens=len(ids),
        depth=built.depth,
        response=response,
        emitted=tuple(emitted),
        recall=recall,
        success=recall > SUCCESS_RECALL,
        scores=scores,
    )


def detect(
    proxy: Proxy,
    sentences: Sequence[str],
    *,
    trials: int = 40,
    decoding: Decoding = "greedy",
    progress: bool = True,
) -> Detection:
    """Run ``trials`` needle tests and average each head's copy-paste score over the successes.

    Raises:
        InvalidInputError: ``trials < 1``, or no trial succeeded (the proxy never retrieved the
            needle; try ``decoding="teacher-forced"``).
    """
    if trials < 1:
        raise InvalidInputError("trials must be >= 1")
    started = time.perf_counter()
    results = []
    bar = tqdm(trial_grid(trials, len(sentences)), desc="needle trials", disable=not progress)
    for spec in bar:
        results.append(run_trial(proxy, sentences, spec, decoding=decoding))
        bar.set_postfix(ok=f"{sum(r.success for r in results)}/{len(results)}")
    good = [r.scores for r in results if r.success]
    if not good:
        raise InvalidInputError(
            "no trial retrieved its needle; the proxy does not copy — use teacher-forced decoding"
        )
    return Detection(
        scores=np.mean(good, axis=0),
        trials=tuple(results),
        decoding=decoding,
        seconds=time.perf_counter() - started,
    )
