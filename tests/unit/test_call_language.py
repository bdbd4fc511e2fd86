"""Which language a call is read in (:mod:`ragattn.call_language`), and so which proxy reads it.

Paragraphs of two or three sentences as a retriever returns them: each script family is named by
its script (or, for Thai and Korean, which the splitter has no rules for, by the identifier);
Latin-script languages by py3langid's identifier. English prose and what is not prose (code, a
Markdown table, URLs, numbers, nothing) stay English, so an English call never changes proxy by
accident. No model is loaded: the compressors here use the ``lexical`` method, which loads its
proxy's tokenizer alone.
"""

from __future__ import annotations

import pytest

from ragattn.call_language import ENGLISH, call_language, detect_language
from ragattn.compress import Compressor
from ragattn.compress.compressor import MULTILINGUAL_FIRST_PASS
from ragattn.compress.read import sentence_units
from ragattn.contract import VerbArgs
from ragattn.proxy import DEFAULT_PROXY, MULTILINGUAL_PROXY
from ragattn.types import Document

BY_SCRIPT = {
    "zh": "长江是亚洲最长的河流，全长约六千三百公里。它发源于青藏高原，向东流入东海。"
    "沿岸有上海、武汉和重庆等大城市。",
    "ja": "富士山は日本で最も高い山で、標高は三七七六メートルです。静岡県と山梨県の境にあります。"
    "毎年夏には多くの登山者が訪れます。",
    "ar": "القاهرة هي عاصمة مصر وأكبر مدنها. تقع المدينة على ضفاف نهر النيل. "
    "يعيش فيها أكثر من عشرين مليون نسمة.",
    "fa": "تهران پایتخت ایران و بزرگ‌ترین شهر این کشور است. "
    "این شهر در دامنه کوه‌های البرز قرار دارد. "
    "جمعیت تهران بیش از هشت میلیون نفر است.",
    "hi": "गंगा भारत की सबसे लंबी नदी है। यह हिमालय के गंगोत्री हिमनद से निकलती है। "
    "इसके किनारे वाराणसी और पटना जैसे शहर बसे हैं।",
    "el": "Η Αθήνα είναι η πρωτεύουσα της Ελλάδας. Η πόλη είναι γνωστή για την Ακρόπολη και τον "
    "Παρθενώνα. Εκεί ζουν περίπου τρία εκατομμύρια άνθρωποι.",
    "ru": "Волга — самая длинная река в Европе. Она впадает в Каспийское море. На её берегах стоят "
    "Нижний Новгород, Казань и Волгоград.",
    "th": "กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทย แม่น้ำเจ้าพระยาไหลผ่านใจกลางเมือง มีประชากรมากกว่าแปดล้านคน",
    "ko": "서울은 대한민국의 수도이자 가장 큰 도시입니다. 한강이 도시를 가로질러 흐릅니다. "
    "약 천만 명의 사람들이 이곳에 살고 있습니다.",
}
"""Paragraphs in scripts other than Latin, by the language each is written in."""

IN_LATIN = {
    "de": "Der Rhein ist einer der längsten Flüsse Europas. Er entspringt in den Schweizer Alpen "
    "und mündet in die Nordsee. An seinen Ufern liegen Städte wie Köln und Düsseldorf.",
    "es": "El río Amazonas atraviesa varios países de América del Sur. Es el río más caudaloso "
    "del mundo y desemboca en el océano Atlántico. Su cuenca alberga una enorme variedad de "
    "especies.",
    "fr": "La Loire est le plus long fleuve de France. Elle prend sa source dans le Massif central "
    "et se jette dans l'océan Atlantique. De nombreux châteaux bordent ses rives.",
    "it": "Il Po è il fiume più lungo d'Italia. Nasce dal Monviso e sfocia nel mare Adriatico. "
    "Lungo il suo corso si trovano città come Torino e Piacenza.",
    "tr": "İstanbul, Türkiye'nin en kalabalık şehridir. Şehir, Boğaziçi'nin iki yakasında "
    "kurulmuştur. Tarih boyunca birçok imparatorluğa başkentlik yapmıştır.",
    "vi": "Sông Mê Kông chảy qua sáu quốc gia ở Đông Nam Á. Đồng bằng sông Cửu Long là vựa lúa "
    "lớn nhất của Việt Nam. Người dân ở đây sống chủ yếu bằng nghề nông và đánh cá.",
    "pt": "O rio Amazonas atravessa vários países da América do Sul. É o rio mais caudaloso do "
    "mundo e deságua no oceano Atlântico.",
    "ro": "Dunărea este al doilea fluviu ca lungime din Europa. Ea se varsă în Marea Neagră "
    "printr-o deltă întinsă. Delta Dunării este o rezervație a biosferei.",
}
"""Latin-script paragraphs, by the language each is written in (Spanish and Portuguese share
much of their probability with Extremaduran, Aragonese and Galician in py3langid's model)."""

STAYS_ENGLISH = {
    "prose": "The Thames flows through London and into the North Sea. It is the longest river "
    "entirely in England. Many bridges cross it in the city centre.",
    "python": "def mean(xs):\n    total = sum(xs)\n    return total / len(xs)\n\n"
    "print(mean([1, 2, 3]))\n",
    "markdown table": "| name | value | unit |\n|---|---|---|\n| width | 12 | cm |\n"
    "| height | 30 | cm |\n",
    "urls": "https://example.com/docs/index.html\nhttps://github.com/org/repo/blob/main/README.md\n"
    "http://localhost:8080/v1/compress\n",
    "numbers": "12 345 6.78 -90 1e5 3/4 2024-05-12",
    "empty": "",
}

ENGLISH_DOCS = [
    Document(text=STAYS_ENGLISH["prose"]),
    Document(text="Paris is the capital and largest city of France. It lies on the Seine."),
]
GERMAN_DOCS = [Document(text=IN_LATIN["de"])]
CHINESE_QUERY = "长江有多长？"
GERMAN_QUERY = "Welcher Fluss fließt durch London und mündet in die Nordsee?"
QUOTING_A_NAME = (
    "Which language is कसबा पेठ विधानसभा मतदारसंघ written in, and how many speakers does it have?"
)


@pytest.mark.parametrize(("language", "text"), BY_SCRIPT.items(), ids=list(BY_SCRIPT))
def test_each_script_names_its_language(language: str, text: str) -> None:
    found = detect_language(text)
    assert found.language == language
    assert found.confidence >= 0.9


@pytest.mark.parametrize(("language", "text"), IN_LATIN.items(), ids=list(IN_LATIN))
def test_latin_script_languages_are_told_apart_by_the_identifier(language: str, text: str) -> None:
    found = detect_language(text)
    assert (found.language, found.by) == (language, "identifier")
    assert found.confidence >= 0.9


@pytest.mark.parametrize("text", STAYS_ENGLISH.values(), ids=list(STAYS_ENGLISH))
def test_english_and_what_is_not_prose_stay_english(text: str) -> None:
    assert detect_language(text).language == ENGLISH


def test_the_documents_decide_first() -> None:
    assert call_language("How long is the Rhine?", GERMAN_DOCS) == "de"
    assert call_language(CHINESE_QUERY, GERMAN_DOCS) == "de"
    assert call_language(GERMAN_QUERY, [Document(text=BY_SCRIPT["zh"])]) == "zh"


def test_a_question_in_another_language_over_english_documents_is_read_in_its_language() -> None:
    assert call_language(CHINESE_QUERY, ENGLISH_DOCS) == "zh"
    assert call_language(GERMAN_QUERY, ENGLISH_DOCS) == "de"
    assert call_language("¿Cuál es el río más largo de España?", ENGLISH_DOCS) == "es"
    assert call_language("Which river flows through London?", ENGLISH_DOCS) == ENGLISH


def test_an_english_question_quoting_a_name_in_its_script_stays_english() -> None:
    # Mostly Latin letters: identified by them alone, the Devanagari name does not decide.
    assert detect_language(QUOTING_A_NAME).language == ENGLISH
    assert call_language(QUOTING_A_NAME, ENGLISH_DOCS) == ENGLISH
    marathi = [Document(text=f"Kasba Peth is a constituency (Marathi: {'कसबा पेठ'}) in Pune.")]
    assert call_language("Where is Kasba Peth?", marathi) == ENGLISH


def test_english_calls_and_a_compressor_without_a_second_proxy_keep_their_engine() -> None:
    english = Compressor(method="lexical")
    assert english.multilingual == MULTILINGUAL_PROXY
    assert english.engine_for("Which river flows through London?", ENGLISH_DOCS, "auto") is english
    assert english.engine_for(CHINESE_QUERY, ENGLISH_DOCS, "en") is english  # named, not detected
    alone = Compressor(method="lexical", multilingual=None)
    for language in ("auto", "de", "zh"):
        assert alone.engine_for(CHINESE_QUERY, GERMAN_DOCS, language) is alone
    chosen = Compressor(MULTILINGUAL_PROXY, method="lexical")  # a chosen proxy reads every language
    assert chosen.multilingual is None
    assert chosen.engine_for(CHINESE_QUERY, GERMAN_DOCS, "auto") is chosen


def test_a_call_in_another_language_is_read_by_one_multilingual_compressor() -> None:
    english = Compressor(method="lexical")  # the second compressor loads Gemma's tokenizer only
    second = english.engine_for(CHINESE_QUERY, ENGLISH_DOCS, "auto")
    assert second is not english
    assert (english.proxy_name, second.proxy_name) == (DEFAULT_PROXY, MULTILINGUAL_PROXY)
    assert (second.method, second.multilingual) == ("lexical", None)
    assert second.first_pass == MULTILINGUAL_FIRST_PASS
    assert english.engine_for("How long is the Rhine?", GERMAN_DOCS, "auto") is second
    assert english.engine_for("Which river?", ENGLISH_DOCS, "fr") is second  # a named language
    assert english.multilingual_compressor is second


DATED = (
    "Die Konferenz begann am 12. Mai in Berlin. Dr. Müller sprach dort z. B. über Energie. "
    "Danach gab es ein Essen im Rathaus."
)
"""German with an ordinal date and abbreviations: English rules cut it at "12.", "z." and "B."."""


def _sentences(compressor: Compressor, query: str, docs: list[Document]) -> list[str]:
    _, args = compressor.route(query, docs, VerbArgs.check("compress"))
    return [docs[u.doc].text[u.start : u.end] for u in sentence_units(docs, args.language)]


def test_a_latin_language_call_is_split_by_its_own_rules() -> None:
    docs = [Document(text=DATED)]
    expected = [
        "Die Konferenz begann am 12. Mai in Berlin.",
        "Dr. Müller sprach dort z. B. über Energie.",
        "Danach gab es ein Essen im Rathaus.",
    ]
    assert _sentences(Compressor(method="lexical"), "Wann begann die Konferenz?", docs) == expected
    # One proxy for every language still splits by the language identified.
    alone = Compressor(method="lexical", multilingual=None)
    assert _sentences(alone, "Wann begann die Konferenz?", docs) == expected
    # By the script alone (English rules) the date and the abbreviation are cut.
    assert len(sentence_units(docs)) > 3


def test_route_keeps_english_script_and_named_languages_as_they_are() -> None:
    english = Compressor(method="lexical", multilingual=None)
    given = VerbArgs.check("compress")
    assert english.route("Which river?", ENGLISH_DOCS, given)[1] is given
    zh = [Document(text=BY_SCRIPT["zh"])]
    assert english.route(CHINESE_QUERY, zh, given)[1].language == "auto"  # the script's rules
    named = VerbArgs.check("compress", {"language": "en"})
    assert english.route("Wann?", [Document(text=DATED)], named)[1] is named
