"""The lexical cascade (ragattn.compress.cascade): what it keeps, when it applies, and that the
sentences it lets through are scored exactly as if the caller had sent only those."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from ragattn.compress import Compressor
from ragattn.compress.cascade import Cascade, keep_by_tokens, keep_linked, named_documents
from ragattn.document_probe import CandidateCosines
from ragattn.embed import document_cosines
from ragattn.errors import InvalidInputError
from ragattn.sentence_attention import Unit
from ragattn.types import Document


def test_keep_by_tokens_takes_the_best_until_the_share_is_reached() -> None:
    scores = [0.1, 0.9, 0.5, 0.7]
    costs = [10, 10, 30, 50]  # 100 tokens
    assert keep_by_tokens(scores, costs, 0.1).tolist() == [1]
    assert keep_by_tokens(scores, costs, 0.5).tolist() == [1, 3]  # 10 + 50 >= 50
    assert keep_by_tokens(scores, costs, 0.61).tolist() == [1, 2, 3]
    assert keep_by_tokens(scores, costs, 1.0).tolist() == [0, 1, 2, 3]


def test_keep_by_tokens_breaks_ties_by_position_and_keeps_one_at_least() -> None:
    assert keep_by_tokens([0.5, 0.5, 0.5], [10, 10, 10], 0.3).tolist() == [0]
    assert keep_by_tokens([0.0, 0.0], [0, 0], 0.5).tolist() == [0]
    assert keep_by_tokens([], [], 0.5).tolist() == []


@pytest.mark.parametrize(
    "kwargs",
    [{"keep": 0.0}, {"keep": 1.5}, {"min_tokens": -1}, {"scorer": "bert"}, {"min_room": 0.5}],
)
def test_a_bad_cascade_is_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidInputError):
        Cascade(**kwargs)


def test_the_cascade_applies_to_long_contexts_with_room_for_attention() -> None:
    cascade = Cascade(min_tokens=1000, keep=0.5, min_room=2.0)
    assert not cascade.applies(999, 100)  # short
    assert not cascade.applies(2000, None)  # a score threshold, not a token budget
    assert cascade.applies(2000, 500)  # keeps 1000 >= 2 x 500
    assert not cascade.applies(2000, 501)
    assert not Cascade(min_tokens=0, keep=1.0).applies(5000, 10)  # keeps everything


FACTS = [
    "Marie Curie was born in Warsaw in 1867. She studied physics in Paris.",
    "The Eiffel Tower is in Paris. It was completed in 1889 for the World's Fair.",
    "Warsaw is the capital of Poland. The Vistula river flows through the city.",
    "Curie won the Nobel Prize in Physics in 1903. She won a second Nobel Prize in 1911.",
]
QUERY = "In which city was Marie Curie born?"


def test_attention_reads_only_what_the_cascade_keeps(proxy: Any) -> None:
    """The read sentences score as in a compression of only those sentences; the dropped ones
    score 0, are never kept, and the warning counts them."""
    cascade = Cascade(min_tokens=16, keep=0.5, scorer="bm25", min_room=1.0)
    cut = Compressor(proxy, cascade=cascade, selection="sentences").compress(
        QUERY, FACTS, ratio=0.2
    )
    warning = [w for w in cut.warnings if w.startswith("the cascade")]
    assert warning, cut.warnings
    scores = [s for doc in cut.documents for s in doc.sentence_scores]
    spans = [(doc.index, a, b) for doc in cut.documents for a, b in doc.sentence_spans]
    read = [i for i, s in enumerate(scores) if s > 0]
    dropped = [i for i, s in enumerate(scores) if s == 0]
    assert dropped and read
    assert f"read {len(read)} of {len(scores)} sentences" in warning[0]
    kept = {(k.doc_index, k.start, k.end) for doc in cut.documents for k in doc.kept_spans}
    assert not kept & {spans[i] for i in dropped}
    # the same sentences sent on their own (each document's read sentences joined by a space)
    by_doc: dict[int, list[str]] = {}
    for i in read:
        d, a, b = spans[i]
        by_doc.setdefault(d, []).append(FACTS[d][a:b])
    texts = [" ".join(v) for _, v in sorted(by_doc.items())]
    alone = Compressor(proxy, selection="sentences").compress(QUERY, texts, ratio=0.2)
    alone_scores = [s for doc in alone.documents for s in doc.sentence_scores]
    np.testing.assert_allclose([scores[i] for i in read], alone_scores, rtol=0, atol=1e-9)


def test_a_cut_read_weighs_its_documents_by_their_whole_text(
    proxy: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under a cut, the document-aware selection reads each document's MiniLM cosine over its
    whole text, the pass the ranking makes anyway, not a second pass over the cut documents."""
    import ragattn.embed as embed

    cascade = Cascade(min_tokens=16, keep=0.5, scorer="bm25", min_room=1.0)
    compressor = Compressor(proxy, cascade=cascade)
    assert compressor.document_selection() is not None
    seen: list[list[str]] = []
    real = embed.dense_scores

    def recorded(query: str, texts: list[str]) -> Any:
        seen.append(list(texts))
        return real(query, texts)

    monkeypatch.setattr(embed, "dense_scores", recorded)
    out = compressor.compress(QUERY, FACTS, ratio=0.2)
    assert any(w.startswith("the cascade") for w in out.warnings)
    assert seen == [FACTS]  # the whole documents, once


def test_a_short_context_or_a_method_without_attention_is_read_whole(proxy: Any) -> None:
    cascade = Cascade(min_tokens=10_000, keep=0.5)
    whole = Compressor(proxy).compress(QUERY, FACTS, ratio=0.2)
    short = Compressor(proxy, cascade=cascade).compress(QUERY, FACTS, ratio=0.2)
    assert not any(w.startswith("the cascade") for w in short.warnings)
    assert [d.sentence_scores for d in short.documents] == [
        d.sentence_scores for d in whole.documents
    ]
    assert Compressor(proxy, method="lexical", cascade=Cascade(min_tokens=0)).cascade is None


def test_a_document_wholly_dropped_still_comes_back_with_its_sentences(proxy: Any) -> None:
    """Nothing the caller sent is lost: every input document is in the result, in order."""
    cascade = Cascade(min_tokens=16, keep=0.2, scorer="bm25", min_room=1.0)
    docs = [Document(text=t) for t in FACTS]
    cut = Compressor(proxy, cascade=cascade).compress(QUERY, docs, ratio=0.2)
    assert [d.index for d in cut.documents] == [0, 1, 2, 3]
    assert [len(d.sentence_spans) for d in cut.documents] == [2, 2, 2, 2]
    assert any(all(s == 0 for s in d.sentence_scores) for d in cut.documents)


def test_a_cascade_parses_from_the_command_line_form() -> None:
    assert Cascade.parse("0.8:bm25", min_tokens=512) == Cascade(
        min_tokens=512, keep=0.8, scorer="bm25"
    )
    assert Cascade.parse("0.6").scorer == "lexical"
    assert Cascade.parse("0.8:lexical+links") == Cascade(keep=0.8, scorer="lexical", links=True)
    assert Cascade.parse("0.8:lexical+links").name == "0.8:lexical+links"
    assert Cascade.parse("0.7:bm25").name == "0.7:bm25"
    for bad in ("x:bm25", "0.8:bert", "2", "0.5:Documents", "0.8:lexical+both", "0.8:+links"):
        with pytest.raises(InvalidInputError):
            Cascade.parse(bad)
    pooled = Cascade.parse("0.8:lexical+links@1024,ceiling=2048,precut=4,dense=pooled")
    assert pooled.dense == "pooled"
    assert pooled.name == "0.8:lexical+links@1024,ceiling=2048,precut=4,dense=pooled"
    assert Cascade.parse(pooled.name) == pooled
    assert Cascade.parse("0.8:lexical,dense=sentences").name == "0.8:lexical"
    for bad in ("0.8:lexical,dense=tokens", "0.8:lexical,dense"):
        with pytest.raises(InvalidInputError):
            Cascade.parse(bad)
    with pytest.raises(InvalidInputError):
        Cascade(dense="tokens")  # type: ignore[arg-type]


def _encoded_texts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text the shared MiniLM runs a forward over from now on (its LRU cleared)."""
    from ragattn.embed import shared_embedder

    embedder = shared_embedder()
    embedder.clear_cache()
    seen: list[str] = []
    forward = embedder._forward

    def recording(texts: list[str], spans: Any) -> Any:
        seen.extend(texts)
        return forward(texts, spans)

    monkeypatch.setattr(embedder, "_forward", recording)
    return seen


def test_a_pooled_cut_runs_no_minilm_forward_over_a_sentence_alone(
    proxy: Any, monkeypatch: pytest.MonkeyPatch, pool: Callable[..., list[Document]]
) -> None:
    """The ``pooled`` first pass reads its sentence cosines from the document pass: MiniLM runs
    over the query and the whole documents only (every sentence here is inside MiniLM's window,
    and the default ``sentinel`` sentence probe reads no MiniLM column), where the ``sentences``
    pass encodes every scored sentence alone. Both read the Eiffel paragraph within the
    budget."""
    from dataclasses import replace

    from ragattn.compress.cascade import DEFAULT_CASCADE

    docs = pool(60)
    query = "When was the Eiffel Tower completed?"
    whole = {f"{d.title or ''} {d.text}".strip() for d in docs}
    alone: dict[str, list[str]] = {}
    for dense in ("sentences", "pooled"):
        compressor = Compressor(proxy, cascade=replace(DEFAULT_CASCADE, dense=dense))  # type: ignore[arg-type]
        seen = _encoded_texts(monkeypatch)
        result = compressor.compress(query, docs, ratio=0.1)
        assert result.compressed_tokens <= 0.1 * result.origin_tokens
        assert "1889" in result.compressed_text
        assert whole <= set(seen)  # the document pass (the precut's ranking, the selection)
        alone[dense] = [t for t in seen if t not in whole and t != query]
        monkeypatch.undo()
    assert alone["pooled"] == []
    assert len(set(alone["sentences"])) > 60  # the precut documents' sentences, one by one


# A two-hop context: the film's paragraph names its director's; the director's birthplace shares
# no word with the question but "born", and a distractor shares more.
FILM = Document(
    text="The Blue Bird is a 1940 fantasy film. It was directed by Walter Lang.",
    title="The Blue Bird (1940 film)",
)
DIRECTOR = Document(
    text="Walter Lang was an American film director. Lang was born in Memphis, Tennessee.",
    title="Walter Lang",
)
OTHER = Document(
    text="The Blue Bird is a play. The director of the play was born in Ghent.",
    title="The Blue Bird (play)",
)
LINK_QUERY = "Where was the director of the film The Blue Bird born?"


def _units(docs: list[Document]) -> list[Unit]:
    from ragattn.sentences import split_sentences

    return [
        Unit(d, s.start, s.end) for d, doc in enumerate(docs) for s in split_sentences(doc.text)
    ]


def test_named_documents_are_those_the_query_or_a_read_sentence_names_by_title() -> None:
    docs = [FILM, DIRECTOR, Document(text="Cats sleep a lot.", title="Cats")]
    units = _units(docs)
    assert len(units) == 5
    # The query names "The Blue Bird" (the disambiguation is not matched); the film's second
    # sentence, read, names Walter Lang; nothing names "Cats".
    assert named_documents(LINK_QUERY, docs, units, [0, 1]) == {0, 1}
    assert named_documents(LINK_QUERY, docs, units, [0]) == {0}  # the naming sentence unread
    assert named_documents("Who wrote it?", docs, units, [1]) == {1}
    # A document naming itself is no link.
    assert named_documents("Who?", docs, units, [2, 3]) == set()
    # Plain strings are linked by the name their first sentence gives them ("The Blue Bird is
    # ...", "Walter Lang was ..."); a passage that names nothing ("Cats sleep ...") has no link.
    untitled = [Document(text=d.text) for d in docs]
    assert named_documents(LINK_QUERY, untitled, units, [0, 1]) == {0, 1}
    nameless = [Document(text="It is " + d.text[0].lower() + d.text[1:]) for d in docs]
    assert named_documents(LINK_QUERY, nameless, _units(nameless), [0, 1, 2, 3, 4]) == set()


def test_keep_linked_keeps_the_named_paragraph_at_the_same_token_share() -> None:
    docs = [FILM, OTHER, DIRECTOR]
    units = _units(docs)  # film 0-1, play 2-3, director 4-5
    scores = [3.0, 1.0, 2.5, 2.0, 0.5, 0.0]  # words favour the play over the director
    costs = [10] * 6
    plain = keep_by_tokens(scores, costs, 0.6)
    assert plain.tolist() == [0, 1, 2, 3]  # the director's paragraph is dropped
    linked = keep_linked(LINK_QUERY, docs, units, scores, costs, 0.6)
    # The query names both "The Blue Bird" documents; the film's kept sentence names Walter Lang:
    # all three are linked, so the first pass's order decides among them and the same 4 units
    # (60 % of the tokens) are read.
    assert linked.tolist() == plain.tolist()
    docs_only_film = [FILM, Document(text=OTHER.text, title="A play"), DIRECTOR]
    linked = keep_linked(LINK_QUERY, docs_only_film, units, scores, costs, 0.6)
    assert linked.tolist() == [0, 1, 4, 5]  # the film and its director; the play is dropped
    # As plain strings the same links come from the names the passages give themselves.
    untitled = [Document(text=d.text) for d in docs_only_film]
    assert keep_linked(LINK_QUERY, untitled, units, scores, costs, 0.6).tolist() == [0, 1, 2, 3]
    nameless = [Document(text="It says: " + d.text) for d in docs]
    assert keep_linked(LINK_QUERY, nameless, units, scores, costs, 0.6).tolist() == plain.tolist()


def test_the_documents_scorer_keeps_whole_documents_best_first(proxy: Any) -> None:
    """With ``scorer="documents"`` a cut never splits a document it reads in full before it
    reads another: the kept units are whole documents by MiniLM cosine, the last one perhaps
    cut short."""
    cascade = Cascade(min_tokens=16, keep=0.5, scorer="documents", min_room=1.0)
    cut = Compressor(proxy, cascade=cascade).compress(QUERY, FACTS, ratio=0.2)
    read_docs = [d.index for d in cut.documents if any(s > 0 for s in d.sentence_scores)]
    assert 0 in read_docs  # Curie's birthplace: the best document by cosine
    full = [d for d in cut.documents if all(s > 0 for s in d.sentence_scores)]
    assert len(full) >= len(read_docs) - 1


def test_the_documents_scorer_never_cuts_a_single_document(proxy: Any) -> None:
    """One document gives every sentence the same cosine: a cut would drop its tail unranked."""
    cascade = Cascade(min_tokens=16, keep=0.5, scorer="documents", min_room=1.0)
    one = [" ".join(FACTS)]
    cut = Compressor(proxy, cascade=cascade).compress(QUERY, one, ratio=0.2)
    whole = Compressor(proxy, cascade=None).compress(QUERY, one, ratio=0.2)
    assert not any(w.startswith("the cascade") for w in cut.warnings)
    assert cut.documents[0].sentence_scores == whole.documents[0].sentence_scores


def test_the_default_compressor_cuts_long_contexts_with_the_default_cascade(proxy: Any) -> None:
    from ragattn.compress import DEFAULT_CASCADE

    assert Compressor(proxy).cascade == DEFAULT_CASCADE
    assert DEFAULT_CASCADE.applies(1024, 204) and not DEFAULT_CASCADE.applies(1023, 204)
    # attention reads at most 1,024 tokens, never fewer than 1.5 times the budget
    assert DEFAULT_CASCADE.read_share(2560, 512) == pytest.approx(1024 / 2560)
    assert DEFAULT_CASCADE.read_share(4000, 1300) == pytest.approx(1.5 * 1300 / 4000)
    # over 53 %, 80 % leaves too little room: read whole, up to the 2,048-token ceiling
    assert not DEFAULT_CASCADE.applies(2000, 1200)
    assert DEFAULT_CASCADE.read_share(4000, 2200) == pytest.approx(2048 / 4000)
    assert DEFAULT_CASCADE.fills(4000, 2200) and not DEFAULT_CASCADE.fills(4000, 1300)
    assert Compressor(proxy, cascade=None).cascade is None


def test_without_a_lexical_probe_the_default_cascade_is_off_and_an_explicit_one_fails(
    proxy: Any, tmp_path: Any
) -> None:
    """A models folder without ``lexical.npz`` (a proxy of the user's own): the default cascade
    steps aside; a lexical cascade asked for fails at construction, not on a long context."""
    import shutil

    from ragattn.assets import default_models_dir, proxy_slug
    from ragattn.errors import ModelLoadError

    folder = tmp_path / proxy_slug(proxy)
    folder.mkdir()
    shutil.copy(default_models_dir() / proxy_slug(proxy) / "sentinel.npz", folder)
    assert Compressor(proxy, models_dir=tmp_path).cascade is None
    with pytest.raises(ModelLoadError, match="lexical probe"):
        Compressor(proxy, models_dir=tmp_path, cascade=Cascade(scorer="lexical"))
    assert Compressor(proxy, models_dir=tmp_path, cascade=Cascade(scorer="bm25")).cascade


def test_the_default_cascade_reads_the_paragraph_a_kept_sentence_names(proxy: Any) -> None:
    """The second hop: the lexical first pass keeps a distractor that shares the question's words
    and drops the director's birthplace ("Lang was born in Memphis"); the linked cut reads the
    whole paragraph that the film's kept sentence names, at the same token share."""
    from ragattn.compress import DEFAULT_CASCADE

    assert (
        DEFAULT_CASCADE.links
        and DEFAULT_CASCADE.name == "0.8:lexical+links@1024,ceiling=2048,precut=4"
    )
    docs = [
        FILM,
        Document(
            text="The director of the play The Bluebird was born in Ghent. The play was first "
            "staged in Moscow.",
            title="The Bluebird (play)",
        ),
        DIRECTOR,
        Document(text="Memphis is a city on the Mississippi River.", title="Memphis"),
    ]
    birthplace = {}
    for links in (False, True):
        cascade = Cascade(min_tokens=16, keep=0.6, scorer="lexical", min_room=1.0, links=links)
        result = Compressor(proxy, cascade=cascade).compress(LINK_QUERY, docs, ratio=0.2)
        assert any(w.startswith("the cascade") for w in result.warnings)
        birthplace[links] = result.documents[2].sentence_scores[1]
    assert birthplace[False] == 0.0  # dropped before attention read it
    assert birthplace[True] > 0.0


def _kept(result: Any) -> set[tuple[int, int, int]]:
    return {(k.doc_index, k.start, k.end) for d in result.documents for k in d.kept_spans}


@pytest.mark.parametrize("cascade", [None, Cascade(min_tokens=16, keep=0.5, min_room=1.0)])
def test_the_one_read_call_keeps_what_compress_keeps(proxy: Any, cascade: Cascade | None) -> None:
    """``rerank_and_compress`` is :meth:`compress`'s read plus a ranking: with every document
    kept, the same sentences are kept with the same scores (the cascade's cut included), and
    the context is arranged best document first."""
    compressor = Compressor(proxy, cascade=cascade)
    docs = [FILM, DIRECTOR, OTHER, *(Document(text=t) for t in FACTS)]
    alone = compressor.compress(QUERY, docs, ratio=0.2)
    ranked, joint = compressor.rerank_and_compress(QUERY, docs, ratio=0.2)
    assert ranked.method == "sentinel:document-probe"
    assert sorted(r.index for r in ranked) == list(range(len(docs)))
    assert [d.index for d in joint.documents] == [r.index for r in ranked]
    assert _kept(joint) == _kept(alone)
    by_index = {d.index: d.sentence_scores for d in alone.documents}
    for d in joint.documents:
        assert d.sentence_scores == by_index[d.index]
    cut = [w for w in alone.warnings if w.startswith("the cascade")]
    assert [w for w in joint.warnings if w.startswith("the cascade")] == cut
    assert bool(cut) == (cascade is not None)


def test_a_document_the_cascade_drops_whole_is_ranked_by_minilm_alone(proxy: Any) -> None:
    """Under a cut, every document keeps a rank: the document probe's MiniLM term over all of
    them, plus the attention correction where attention read the document (0 elsewhere)."""
    from ragattn.document_probe import zscore_columns
    from ragattn.embed import dense_scores

    cascade = Cascade(min_tokens=16, keep=0.2, scorer="bm25", min_room=1.0)
    compressor = Compressor(proxy, cascade=cascade)
    docs = [Document(text=t) for t in FACTS]
    ranked, out = compressor.rerank_and_compress(QUERY, docs, ratio=0.2)
    dropped = [d.index for d in out.documents if all(s == 0 for s in d.sentence_scores)]
    assert dropped and sorted(r.index for r in ranked) == [0, 1, 2, 3]
    probe = compressor._document_probe()
    assert probe is not None
    base = zscore_columns(np.asarray(dense_scores(QUERY, FACTS))[:, None])[:, 0]
    raw = {r.index: r.raw_score for r in ranked}
    for d in dropped:
        assert raw[d] == pytest.approx(probe.minilm_weight * base[d], abs=1e-9)


def test_a_capped_cascade_reads_at_most_its_cap_and_keeps_attention_room() -> None:
    """``max_read`` caps the tokens attention reads, never below ``min_room`` times the budget;
    without a cap the share is ``keep`` as before."""
    capped = Cascade(min_tokens=1024, keep=0.8, min_room=1.5, max_read=768)
    assert capped.read_share(2560, 512) == pytest.approx(768 / 2560)
    assert capped.read_share(2560, 700) == pytest.approx(1050 / 2560)  # room: 1.5 x 700
    assert capped.read_share(1000, 100) is None  # shorter than min_tokens
    assert capped.read_share(1100, 600) is None  # keep (880) leaves less than the room (900)
    assert capped.read_share(1100, None) is None
    plain = Cascade(min_tokens=1024, keep=0.8, min_room=2.0)
    assert plain.read_share(2560, 512) == 0.8 and plain.read_share(2560, 1100) is None
    assert Cascade.parse("0.8:lexical+links@768", min_room=1.5) == Cascade(
        keep=0.8, scorer="lexical", links=True, max_read=768, min_room=1.5
    )
    assert Cascade.parse("0.8:lexical+links@768").name == "0.8:lexical+links@768"
    for bad in ("0.8:lexical@x", "0.8:lexical@-5", "0.8@0"):
        with pytest.raises(InvalidInputError):
            Cascade.parse(bad)


class _Bm25First:
    """A first pass for :meth:`Cascade.cut` that needs no model (BM25 over the given units):
    the cut, not the lexical probe, is what these tests check."""

    def __init__(self) -> None:
        self.scored: list[int] = []

    def score(self, query: str, docs: Any, units: Any) -> tuple[Any, int]:
        from ragattn.lexical import bm25_scores

        self.scored.append(len(units))
        return bm25_scores(query, [docs[u.doc].text[u.start : u.end] for u in units]), 0

    def score_with_features(
        self, query: str, docs: Any, units: Any, *, dense: Any = None
    ) -> tuple[Any, None]:
        return self.score(query, docs, units)[0], None


@pytest.mark.parametrize("n_docs", [20, 60, 120])
@pytest.mark.parametrize("ratio", [0.1, 0.5, 0.9])
def test_the_ceiling_bounds_what_attention_reads_for_every_budget(
    proxy: Any, n_docs: int, ratio: float, pool: Callable[..., list[Document]]
) -> None:
    """Counted in proxy tokens: however many candidates and whatever the budget, the read stays
    at most the ceiling; past the room it leaves, the unread sentences fill the budget."""
    from ragattn.sentences import split_sentences
    from ragattn.types import Budget

    cascade = Cascade(
        min_tokens=1024, keep=0.8, scorer="lexical", min_room=1.5, links=True,
        max_read=1024, ceiling=2048, precut=2,
    )  # fmt: skip
    docs = pool(n_docs)
    units = [
        Unit(d, s.start, s.end) for d, doc in enumerate(docs) for s in split_sentences(doc.text)
    ]
    tokenizer = proxy.tokenizer
    costs = [
        len(ids)
        for ids in tokenizer(
            [docs[u.doc].text[u.start : u.end] for u in units], add_special_tokens=False
        )["input_ids"]
    ]
    first = _Bm25First()
    total = sum(costs)
    query = "When was the Eiffel Tower completed?"
    sizes = cascade.sizes(docs, units, Budget(kind="ratio", value=ratio), tokenizer=tokenizer)
    cut = None
    if sizes is not None:
        assert sizes.costs == costs
        ran = cascade.minilm_pass(sizes)
        cosines = CandidateCosines(documents=document_cosines(query, docs)) if ran else None
        cut = cascade.cut(query, docs, units, sizes, lexical=lambda: first, cosines=cosines)
    if cut is None:  # read whole: no room to cut and no more than the ceiling
        assert total <= 2048 and 1.5 * ratio * total > 0.8 * total
        return
    read_tokens = sum(costs[i] for i in cut.read)
    assert read_tokens <= 2048 + max(costs)  # whole sentences: at most one past the ceiling
    assert cut.fill == (total > 2048 and 1.5 * ratio * total > 2048)
    # the precut: past twice the read, the lexical pass scores only some documents' sentences
    if total > 2 * 2048:
        assert first.scored[0] < len(units)
    eiffel = n_docs // 2
    assert any(units[i].doc == eiffel for i in cut.read)


def test_fill_scores_put_every_unread_unit_below_the_read_ones_in_first_pass_order() -> None:
    from ragattn.compress.cascade import Cut

    cut = Cut(read=np.array([1, 3]), first=np.array([0.9, 0.5, -np.inf, 0.7, 0.1]), fill=True)
    scores = cut.fill_scores(np.array([0.8, 0.2]))
    assert scores[1] == 0.8 and scores[3] == 0.2
    unread = [0, 4, 2]  # by the first pass: 0.9, 0.1, then the unscored one
    assert all(0 < scores[i] < 0.2 for i in unread)
    assert scores[0] > scores[4] > scores[2]
    plain = Cut(read=np.array([1, 3]), first=cut.first, fill=False).fill_scores(
        np.array([0.8, 0.2])
    )
    assert plain.tolist() == [0.0, 0.8, 0.0, 0.2, 0.0]  # no fill: the dropped units score 0


def test_the_precut_scores_the_named_then_the_closest_documents_only() -> None:
    from ragattn.compress.cascade import precut_units

    docs = [
        Document(text="Bananas are yellow fruit grown in warm places."),
        Document(text="Walter Lang was an American film director born in Memphis."),
        Document(text="The Eiffel Tower is in Paris and was completed in 1889."),
        Document(text="Cats sleep for most of the day in warm places."),
    ]
    units = [Unit(d, 0, len(doc.text)) for d, doc in enumerate(docs)]
    costs = [10, 10, 10, 10]
    query = "Where was Walter Lang born, and when was the Eiffel Tower completed?"
    # precut 2 x a read of 25 % = 20 tokens: two whole documents
    cosines = document_cosines(query, docs)
    kept = precut_units(query, docs, units, costs, precut=2.0, share=0.25, cosines=cosines)
    assert kept is not None and set(units[i].doc for i in kept) == {1, 2}
    assert precut_units(query, docs, units, costs, None, 0.25, cosines) is None
    assert precut_units(query, docs, units, costs, 4.0, 0.25, cosines) is None  # all of it


def test_pooled_cosines_keep_the_document_cosines_and_encode_far_sentences_alone() -> None:
    """The document pass's cosines are :func:`document_cosines`' bit for bit; a sentence past
    MiniLM's window is scored as if encoded alone (``dense_scores``)."""
    from ragattn.document_probe import document_and_unit_cosines, document_cosines
    from ragattn.embed import dense_scores
    from ragattn.sentences import split_sentences

    long_text = " ".join(f"Item {i} of the list is a red brick house." for i in range(60))
    # blanks around a text are stripped from what MiniLM reads: the spans follow them
    docs = [Document(text=long_text, title="Houses"), Document(text=f"  {DIRECTOR.text}  \n")]
    units = _units(docs)
    query = "Where was Walter Lang born?"
    doc_cos, unit_cos = document_and_unit_cosines(query, docs, units)
    np.testing.assert_array_equal(doc_cos, document_cosines(query, docs))
    last = max(i for i, u in enumerate(units) if u.doc == 0)
    u = units[last]
    np.testing.assert_allclose(
        unit_cos[last], dense_scores(query, [docs[0].text[u.start : u.end]])[0], atol=1e-6
    )
    born = next(i for i, u in enumerate(units) if "born" in docs[u.doc].text[u.start : u.end])
    assert unit_cos[born] == max(unit_cos)
    assert len(split_sentences(docs[1].text)) == sum(1 for u in units if u.doc == 1)
