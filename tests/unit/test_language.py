"""A call's ``language`` for sentence splitting: checked once where arguments enter
(:class:`~ragattn.contract.VerbArgs`, :class:`~ragattn.pipeline.PipelineOptions`), split by in the
read's ``sentences`` stage, part of the cache key. German text whose split differs between German
and English rules ("am 12. Mai" ends no sentence in German); one short compression per language
on the packaged proxy."""

from __future__ import annotations

import re
from typing import Any, get_args

import pytest

from ragattn.cache import cache_key
from ragattn.compress.read import sentence_units
from ragattn.contract import VerbArgs
from ragattn.errors import InvalidInputError
from ragattn.languages import AUTO, LANGUAGES, check_language
from ragattn.pipeline import PipelineOptions
from ragattn.types import Budget, Document

GERMAN = "Er kam am 12. Mai nach Hause zurück. Dann schlief er lange."
GERMAN_SENTENCES = ["Er kam am 12. Mai nach Hause zurück.", "Dann schlief er lange."]
ENGLISH_RULES = ["Er kam am 12.", "Mai nach Hause zurück.", "Dann schlief er lange."]
UNKNOWN = "unknown language 'xx'; valid: auto, am, ar, bg, da, de,"


def _texts(language: str) -> list[str]:
    return [GERMAN[u.start : u.end] for u in sentence_units([Document(text=GERMAN)], language)]


def test_the_sentences_stage_splits_by_the_calls_language() -> None:
    assert _texts("de") == GERMAN_SENTENCES
    assert _texts("en") == ENGLISH_RULES
    assert _texts(AUTO) == ENGLISH_RULES  # Latin script: English rules unless named


def test_verb_args_take_a_language_and_refuse_an_unknown_one() -> None:
    args = VerbArgs.check("compress", {"ratio": 0.5, "language": "de"})
    assert args.language == "de"
    assert VerbArgs.check("rerank_compress", {"ratio": 0.5}).language == AUTO
    for bad in ("xx", "DE", "", None):
        with pytest.raises(InvalidInputError, match=re.escape("unknown language")):
            VerbArgs.check("compress", {"ratio": 0.5, "language": bad})
    with pytest.raises(InvalidInputError, match=re.escape(UNKNOWN)):
        VerbArgs(verb="compress", budget=Budget(kind="ratio", value=0.5), language="xx")
    with pytest.raises(InvalidInputError, match="rerank splits no sentences"):
        VerbArgs(verb="rerank", language="de")
    assert check_language("zh") == "zh"
    assert "de" in LANGUAGES


def test_the_cache_key_holds_the_language_as_given() -> None:
    def key(language: str) -> str:
        args = VerbArgs.check("compress", {"ratio": 0.5, "language": language})
        assert args.params()["language"] == language
        return cache_key(
            model="m", route="compress:v1", params=args.params(), query="q", documents=[GERMAN]
        )

    assert len({key(AUTO), key("de"), key("en")}) == 3


def test_pipeline_options_take_a_language_only_where_they_compress() -> None:
    opts = PipelineOptions(language="de")
    assert opts.params()["language"] == "de"
    assert PipelineOptions().params()["language"] == AUTO
    assert PipelineOptions(compress=False, language=AUTO).compress is False
    with pytest.raises(InvalidInputError, match="language .* does not apply with compress=false"):
        PipelineOptions(compress=False, language="de")
    with pytest.raises(InvalidInputError, match=re.escape(UNKNOWN)):
        PipelineOptions(language="xx")


def test_the_wire_language_is_the_librarys() -> None:
    from ragattn_api.schemas.common import Language

    assert get_args(Language) == (AUTO, *LANGUAGES)


def test_a_compression_keeps_the_sentences_of_its_language(compressor: Any) -> None:
    german = compressor.compress("Wann kam er nach Hause?", GERMAN, ratio=1.0, language="de")
    english = compressor.compress("Wann kam er nach Hause?", GERMAN, ratio=1.0, language="en")
    spans = german.documents[0].sentence_spans
    assert [GERMAN[a:b] for a, b in spans] == GERMAN_SENTENCES
    assert [GERMAN[a:b] for a, b in english.documents[0].sentence_spans] == ENGLISH_RULES
    assert len(german.documents[0].sentence_scores) == 2
    _, pair = compressor.rerank_and_compress(
        "Wann kam er nach Hause?", [GERMAN], ratio=1.0, language="de"
    )
    assert [GERMAN[a:b] for a, b in pair.documents[0].sentence_spans] == GERMAN_SENTENCES
    with pytest.raises(InvalidInputError, match=re.escape(UNKNOWN)):
        compressor.compress("q", GERMAN, ratio=0.5, language="xx")
