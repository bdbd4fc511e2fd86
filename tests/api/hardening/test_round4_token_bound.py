"""Issue 45 §2: the token pre-check holds for every script, so no over-budget body reaches the
tokenizer thread.

The character-count bound assumed one token per 81 characters (SmolLM2's longest token); text the
vocabulary has no merges for is up to four tokens per character, so four documents of 331,000
U+10000 passed it and held the tokenizer thread for seconds before their 413. The pre-check now
uses :class:`ragattn.token_bounds.TokenFloor`, a lower bound from which byte (or character) pairs
and triples the vocabulary joins in one token. Here:

- the bound is checked against the proxy's own tokenizer (never above the count, for random text
  in many scripts), and against a byte-fallback tokenizer of the SentencePiece kind built here;
- over HTTP, astral, CJK, combining-mark and emoji documents just over the per-document limit,
  and requests just over the request budget, are 413s decided in the pre-check: the tokenizer
  thread's job count (``ragattn_model_seconds{task="tokenize"}``) does not move for them, while
  the same texts just under the limits are accepted and counted there.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from ragattn.limits import LimitChecker, Limits
from ragattn.token_bounds import TokenFloor

pytestmark = pytest.mark.anyio

PER_DOC = 64
BUDGET = 256
SCRIPTS = {
    "astral": "\U00010000\U00010001\U00010002",  # Linear B: no merges, four tokens a character
    "cjk": "中文字符的一是不了人我在有他这为之大来以个上们到说国和地也子时道出而要于就下得可你年生",
    "combining": "e\u0301\u0302\u0303a\u0300\u0308",
    "emoji": "😀🎉👍🔥🚀🌍🧪🦀",
}
"""Scripts whose tokens per character the old bound underestimated (1/81 per character)."""


def _tokens(tokenizer: Any, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def _tokenize_jobs(metrics: str) -> float:
    found = re.search(r'^ragattn_model_seconds_count\{task="tokenize"\} (\S+)$', metrics, re.M)
    return float(found.group(1)) if found else 0.0


def _floor(checker: LimitChecker, text: str) -> int:
    floor = checker.tokens.floor
    assert floor is not None
    return floor.counts([text], 10**9)[0]


def _longest_within(pattern: str, limit: int, count: Callable[[str], int]) -> tuple[str, str]:
    """The longest repetition of ``pattern`` that ``count`` puts at most at ``limit`` and the next
    one (one character longer), which it puts over."""
    text = pattern * (limit * 100 // len(pattern) + 1)
    lo, hi = 0, len(text)  # count(text[:lo]) <= limit < count(text[:hi])
    assert count(text) > limit
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if count(text[:mid]) <= limit:
            lo = mid
        else:
            hi = mid
    return text[:lo], text[:hi]


@pytest.fixture(scope="module")
def checker(proxy: Any) -> LimitChecker:
    return LimitChecker(
        proxy.tokenizer, Limits(max_tokens_per_doc=PER_DOC, max_request_tokens=BUDGET)
    )


def _random_texts(seed: int, n: int) -> list[str]:
    """Random texts mixing scripts, whitespace, digits, punctuation and special tokens."""
    rng = random.Random(seed)
    pools = [
        [chr(c) for c in range(0x20, 0x7F)],
        [" ", "\n", "\t", "  ", "\n\n"],
        [chr(c) for c in range(0x4E00, 0x4F00)],
        [chr(c) for c in range(0x10000, 0x10100)],
        ["\u0300", "\u0301", "\u0308", "\u20dd"],
        ["😀", "🎉", "👍", "🇫🇷", "❤️", "🧑‍🚀"],
        [chr(c) for c in range(0x0600, 0x0650)],
        ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "###", "====", "Ġ", "▁"],
        ["the", " and", "ing", " capital", "Paris", "12345", "1"],
    ]
    out = []
    for _ in range(n):
        chosen = rng.sample(pools, rng.randint(1, 3))
        out.append("".join(rng.choice(rng.choice(chosen)) for _ in range(rng.randint(1, 120))))
    return out


def test_the_bound_never_exceeds_the_proxy_tokenizers_count(
    proxy: Any, checker: LimitChecker
) -> None:
    floor = checker.tokens.floor
    assert floor is not None, "SmolLM2's byte-level BPE must have a pair bound"
    texts = _random_texts(45, 3000)
    counts = [len(ids) for ids in proxy.tokenizer(texts, add_special_tokens=False)["input_ids"]]
    bounds = floor.counts(texts, 10**9)
    over = [(t, b, c) for t, b, c in zip(texts, bounds, counts, strict=True) if b > c]
    assert not over, over[:3]
    # One at a time is at least the batch's bound (n-grams across two texts only lower it).
    alone = [floor.counts([t], 10**9)[0] for t in texts[:200]]
    assert all(a >= b for a, b in zip(alone, bounds, strict=False))
    # Capped at ``stop`` without reading past it.
    assert floor.counts(["\U00010000" * 1_000_000], 7) == [7]


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_the_bound_is_tight_for_scripts_without_merges(
    proxy: Any, checker: LimitChecker, script: str
) -> None:
    """Within 25 % of the count (the old character bound was up to 81 times too low)."""
    text = SCRIPTS[script] * 400
    count, bound = _tokens(proxy.tokenizer, text), _floor(checker, text)
    assert bound <= count <= bound * 1.25, (count, bound)
    assert count > 10 * -(-len(text) // 81)  # what the character bound claimed, far below


def _byte_fallback_tokenizer() -> Any:
    """A small SentencePiece-style tokenizer (BPE over characters with byte fallback, spaces as
    ``▁``), trained here, with the 256 byte tokens a byte-fallback vocabulary has."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    base = Tokenizer(models.BPE())
    base.normalizer = normalizers.Replace(" ", "▁")
    base.pre_tokenizer = pre_tokenizers.Split("▁", "merged_with_next")
    corpus = _random_texts(7, 400) + ["Paris is the capital of France. 中文 字符 中文"] * 50
    base.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=3000, show_progress=False))
    spec = json.loads(base.to_str())
    vocab = spec["model"]["vocab"]
    for byte in range(256):
        vocab.setdefault(f"<0x{byte:02X}>", len(vocab))
    spec["model"]["byte_fallback"] = True
    return Tokenizer.from_str(json.dumps(spec)), spec


def test_the_bound_holds_for_a_byte_fallback_vocabulary() -> None:
    tokenizer, spec = _byte_fallback_tokenizer()
    floor = TokenFloor.from_spec(spec)
    assert floor is not None
    texts = _random_texts(46, 2000)
    counts = [len(e.ids) for e in tokenizer.encode_batch(texts, add_special_tokens=False)]
    bounds = floor.counts(texts, 10**9)
    assert all(b <= c for b, c in zip(bounds, counts, strict=True))
    assert len(spec["model"]["merges"]) > 1000  # a vocabulary with real merges
    # A character no entry holds alone (an Egyptian hieroglyph: none in the training text) is
    # its UTF-8 bytes, four tokens a character, and the bound counts exactly that.
    astral = "\U00013000" * 100
    assert [len(tokenizer.encode(astral).ids)] == floor.counts([astral], 10**9) == [400]


def test_unsupported_tokenizers_have_no_pair_bound() -> None:
    _, spec = _byte_fallback_tokenizer()
    fused = {**spec, "model": {**spec["model"], "byte_fallback": False}}
    assert TokenFloor.from_spec(fused) is None  # unknown characters fused into one <unk>
    nfc = {**spec, "normalizer": {"type": "NFC"}}
    assert TokenFloor.from_spec(nfc) is None  # the tokenized text is not the text sent
    stripping = {**spec, "added_tokens": [{"content": "<m>", "lstrip": True, "rstrip": False}]}
    assert TokenFloor.from_spec(stripping) is None  # such a token swallows whitespace


@pytest.mark.parametrize("script", sorted(SCRIPTS))
async def test_documents_just_over_the_limit_are_refused_before_the_tokenizer(
    make_app: Callable[..., Litestar], proxy: Any, checker: LimitChecker, script: str
) -> None:
    pattern = SCRIPTS[script]
    under, over = _longest_within(pattern, PER_DOC, lambda t: _floor(checker, t))
    assert _tokens(proxy.tokenizer, over) > PER_DOC  # really over: the bound is a lower bound
    assert _tokens(proxy.tokenizer, over) <= PER_DOC * 1.25  # and near the limit, not far past
    fits = _longest_within(pattern, PER_DOC, lambda t: _tokens(proxy.tokenizer, t))[0]
    app = make_app(cache_backend="none", max_tokens_per_doc=PER_DOC, max_request_tokens=BUDGET)
    async with AsyncTestClient(app=app) as c:
        before = _tokenize_jobs((await c.get("/metrics")).text)
        for route, extra in (("/v2/rerank", {}), ("/v1/compress", {"ratio": 0.5})):
            resp = await c.post(route, json={"query": "q", "documents": ["short", over], **extra})
            assert resp.status_code == 413, resp.text
            assert resp.json()["error_type"] == "input_too_large"
            assert f"documents[1] has more than {PER_DOC} tokens" in resp.json()["message"]
        # Five documents each within the per-document bound, over the request budget together.
        assert 5 * _floor(checker, under) > BUDGET
        resp = await c.post("/v2/rerank", json={"query": "q", "documents": [under] * 5})
        assert resp.status_code == 413, resp.text
        assert "RAGATTN_MAX_REQUEST_TOKENS" in resp.json()["message"]
        assert _tokenize_jobs((await c.get("/metrics")).text) == before, "the tokenizer ran"
        # The longest text the tokenizer puts within the limit is accepted, counted there once.
        resp = await c.post("/v2/rerank", json={"query": "q", "documents": [fits]})
        assert resp.status_code == 200, resp.text
        assert resp.json()["meta"]["billed_units"]["input_tokens"] <= PER_DOC + 1
        assert _tokenize_jobs((await c.get("/metrics")).text) == before + 1


async def test_the_issues_astral_request_is_refused_unread(
    make_app: Callable[..., Litestar],
) -> None:
    """Issue 45's reproduction: four documents of 331,000 × U+10000 (5.3 MB as UTF-8), under the
    character bound of the default limits (4,096 × 81 characters each), over every token limit."""
    document = "\U00010000" * 331_000
    body = json.dumps({"query": "q", "documents": [document] * 4}, ensure_ascii=False).encode()
    async with AsyncTestClient(app=make_app(cache_backend="none")) as c:
        before = _tokenize_jobs((await c.get("/metrics")).text)
        resp = await c.post(
            "/v2/rerank", content=body, headers={"content-type": "application/json"}
        )
        assert resp.status_code == 413, resp.text
        assert "documents[0] has more than 4096 tokens" in resp.json()["message"]
        # Truncating every document to the limit leaves 4 × 4,096 tokens: over 16,384 with the
        # query, still refused before the tokenizer.
        truncating = json.dumps(
            {"query": "q", "documents": [document] * 4, "max_tokens_per_doc": 4096},
            ensure_ascii=False,
        ).encode()
        resp = await c.post(
            "/v2/rerank", content=truncating, headers={"content-type": "application/json"}
        )
        assert resp.status_code == 413, resp.text
        assert "RAGATTN_MAX_REQUEST_TOKENS" in resp.json()["message"]
        assert _tokenize_jobs((await c.get("/metrics")).text) == before
