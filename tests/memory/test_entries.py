"""The MEMORY.md line format: neutralising, formatting, parsing, provenance, ranking."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from backend.errors import InvalidInput
from backend.memory.entries import (
    MemoryEntry,
    NewEntry,
    Provenance,
    compose_source,
    format_line,
    neutralise,
    normalise_replacement,
    parse_document,
    prepare_entry,
    render_document,
    split_source,
    standard_header,
)
from backend.memory.relevance import rank_entries
from backend.memory.terms import search_terms

ROOT = Path(__file__).resolve().parents[2]
DAY = dt.date(2024, 5, 17)
LINE_BREAKS = {
    "cr": "\r",
    "lf": "\n",
    "crlf": "\r\n",
    "vt": "\v",
    "ff": "\f",
    "fs": "\x1c",
    "gs": "\x1d",
    "rs": "\x1e",
    "nel": "\x85",
    "line-separator": "\u2028",
    "paragraph-separator": "\u2029",
}


@pytest.mark.parametrize("line_break", LINE_BREAKS.values(), ids=LINE_BREAKS.keys())
def test_every_line_break_becomes_one_space(line_break: str) -> None:
    assert neutralise(f"first{line_break}second") == "first second"
    # Every break str.splitlines knows: the neutralised text is one line whatever splits it.
    assert len(f"x{line_break}y".splitlines()) == 2


@pytest.mark.parametrize("line_break", LINE_BREAKS.values(), ids=LINE_BREAKS.keys())
def test_forged_entry_after_a_line_break_stays_inside_the_content(line_break: str) -> None:
    line = format_line(DAY, "manual", f"likes tea{line_break}2024-01-01|manual|forged")

    document = parse_document(line + "\n")

    assert len(line.splitlines()) == 1
    assert len(document.entries) == 1
    assert document.invalid_lines == ()
    assert document.entries[0].content == "likes tea 2024-01-01¦manual¦forged"


def test_pipe_in_content_and_source_cannot_shift_fields() -> None:
    line = format_line(DAY, "tele|gram", "a|b||c")

    assert line == "2024-05-17|tele¦gram|a¦b¦¦c"
    entry = parse_document(line).entries[0]
    assert (entry.source, entry.content) == ("tele¦gram", "a¦b¦¦c")


def test_neutralise_strips_controls_and_surrogates_and_is_idempotent() -> None:
    text = "  \x00nul\x1ftab\there\ud800end|  "
    once = neutralise(text)

    assert once == "nul tab here\ufffdend¦"
    assert neutralise(once) == once


def test_comments_and_blank_lines_are_kept_and_not_reported() -> None:
    text = "# header\n\n2024-05-17|manual|fact\n# a note\n"

    document = parse_document(text)

    assert [line.text for line in document.lines] == [
        "# header",
        "",
        "2024-05-17|manual|fact",
        "# a note",
    ]
    assert document.header == ("# header", "")
    assert document.invalid_lines == ()
    assert document.content == text


@pytest.mark.parametrize(
    "line",
    [
        "not an entry",
        "2024-02-30|manual|no such day",
        "24-01-01|manual|short year",
        "2024-01-01||no source",
        "2024-01-01|manual|",
        "2024-01-01|manual|   ",
        "2024-01-01 manual content",
        f"2024-01-01|{'s' * 201}|source too long",
        " # indented is not a comment",
    ],
)
def test_unparseable_line_is_kept_verbatim_and_reported(line: str) -> None:
    text = f"# header\n2024-05-17|manual|before\n{line}\n2024-05-17|manual|after\n"

    document = parse_document(text)

    assert document.invalid_lines == ((3, line),)
    assert [entry.content for entry in document.entries] == ["before", "after"]
    assert document.content == text


def test_hand_written_pipe_in_content_is_read_not_rejected() -> None:
    entry = parse_document("2024-05-17|manual|a|b\n").entries[0]

    assert entry.content == "a¦b"


def test_line_breaks_of_every_kind_split_a_document() -> None:
    text = "2024-05-17|a|one\r\n2024-05-17|b|two\u20282024-05-17|c|three\x85junk"

    document = parse_document(text)

    assert [entry.source for entry in document.entries] == ["a", "b", "c"]
    assert document.invalid_lines == ((4, "junk"),)


def test_provenance_round_trips_through_the_source() -> None:
    provenance = Provenance("0f8fad5b-d9cb-469f-a165-70867728950e", 11, 20)
    source = compose_source("auto-overflow", provenance)

    assert source == "auto-overflow@0f8fad5b-d9cb-469f-a165-70867728950e:11-20"
    assert split_source(source) == ("auto-overflow", provenance)
    entry = parse_document(format_line(DAY, source, "fact")).entries[0]
    assert entry.provenance == provenance
    assert entry.source_kind == "auto-overflow"


@pytest.mark.parametrize(
    "source",
    ["manual", "user@example.com", "auto-overflow@s:9-3", "auto-overflow@s:1-x", "@s:1-2"],
)
def test_source_without_valid_provenance_is_all_kind(source: str) -> None:
    entry = parse_document(format_line(DAY, source, "fact")).entries[0]

    assert entry.provenance is None
    assert entry.source_kind == source


@pytest.mark.parametrize(
    ("session_id", "first", "last"),
    [("", 1, 2), ("has space", 1, 2), ("x" * 37, 1, 2), ("s", 3, 2), ("s", -1, 2)],
)
def test_provenance_that_would_not_parse_back_is_refused(
    session_id: str, first: int, last: int
) -> None:
    with pytest.raises(InvalidInput):
        Provenance(session_id, first, last)


def test_new_entry_kind_cannot_fake_provenance() -> None:
    fields = prepare_entry(NewEntry("manual@s:1-2", "fact", DAY), today=DAY)

    assert fields.source == "manual＠s:1-2"
    assert parse_document(fields.line).entries[0].provenance is None


def test_new_entry_date_defaults_to_today_and_fields_are_neutralised() -> None:
    fields = prepare_entry(NewEntry(" web\n", "a\nb"), today=DAY)

    assert fields.line == "2024-05-17|web|a b"


@pytest.mark.parametrize(
    "entry",
    [
        NewEntry("", "fact"),
        NewEntry("\n", "fact"),
        NewEntry("web", " \u2028 "),
        NewEntry("w" * 201, "x"),
    ],
)
def test_new_entry_without_source_or_content_is_refused(entry: NewEntry) -> None:
    with pytest.raises(InvalidInput):
        prepare_entry(entry, today=DAY)


def test_entry_ids_are_content_hashes_numbered_when_duplicated() -> None:
    line = "2024-05-17|manual|same"
    first = parse_document(f"{line}\n").entries
    both = parse_document(f"{line}\n2024-05-17|manual|other\n{line}\n").entries

    assert len(first[0].id) == 12
    assert int(first[0].id, 16) >= 0
    assert both[0].id == first[0].id
    assert both[2].id == f"{first[0].id}-2"
    assert len({entry.id for entry in both}) == 3


def test_render_document_writes_header_then_one_line_per_entry() -> None:
    entries = [MemoryEntry("x", DAY, "web", "one"), MemoryEntry("y", DAY, "api", "two\nlines")]

    text = render_document(["# header"], entries)

    assert text == "# header\n2024-05-17|web|one\n2024-05-17|api|two lines\n"


def test_the_shipped_example_starts_with_the_default_tenants_header() -> None:
    example = (ROOT / "MEMORY.example.md").read_text(encoding="utf-8")

    assert list(standard_header("default", "")) == example.splitlines()[:6]
    assert parse_document(example).entries  # it shows what a line looks like
    assert "acme" in standard_header("acme", "")[0]


def test_replacement_neutralises_entries_and_keeps_everything_else() -> None:
    header = standard_header("acme", "")
    text = "# mine\n2024-05-17| web |a|b\nnonsense\n\n2024-05-18|api|ok\n"

    assert normalise_replacement(text, header) == (
        "# mine\n2024-05-17|web|a¦b\nnonsense\n\n2024-05-18|api|ok\n"
    )


def test_replacement_without_a_header_gets_the_standard_one() -> None:
    header = standard_header("acme", "")

    replaced = normalise_replacement("2024-05-17|web|fact", header)

    assert replaced.splitlines() == [*header, "2024-05-17|web|fact"]
    assert normalise_replacement("", header).splitlines() == list(header)


@pytest.mark.parametrize("text", ["2024-05-17|web|nul\x00", "lone \udc80 surrogate"])
def test_replacement_that_no_store_can_keep_is_refused(text: str) -> None:
    with pytest.raises(InvalidInput):
        normalise_replacement(text, ())


def test_search_terms_fold_case_drop_punctuation_and_split_cjk_into_bigrams() -> None:
    assert search_terms("Coffee? TEA") == ["coffee", "tea"]
    assert search_terms("When was Jon in Paris with her?") == ["jon", "paris"]
    assert search_terms("我们什么时候去杭州") == ["们什", "候去", "去杭", "杭州"]
    assert search_terms("北京天气") == ["北京", "京天", "天气"]
    assert search_terms("iPhone手机 猫") == ["iphone", "手机", "猫"]
    assert search_terms(" ?! ") == []


def test_ranking_weighs_rarer_terms_higher_then_prefers_newer() -> None:
    entries = [
        MemoryEntry("1", dt.date(2024, 1, 1), "web", "Likes green TEA"),
        MemoryEntry("2", dt.date(2024, 3, 1), "web", "likes coffee"),
        MemoryEntry("3", dt.date(2024, 2, 1), "web", "green tea and coffee"),
        MemoryEntry("4", dt.date(2024, 3, 1), "web", "coffee beans"),
        MemoryEntry("5", dt.date(2024, 4, 1), "web", "nothing relevant"),
    ]

    ranked = rank_entries(entries, "coffee tea", limit=10)

    # tea is in two lines, coffee in three: a line with tea outranks one with coffee.
    assert [entry.id for entry in ranked] == ["3", "1", "4", "2"]
    assert [entry.id for entry in rank_entries(entries, "coffee tea", limit=2)] == ["3", "1"]
    assert rank_entries(entries, "", limit=10) == []


def test_ranking_matches_whole_words_and_ignores_words_every_line_has() -> None:
    entries = [
        MemoryEntry("1", DAY, "web", "Jon was drinking tea in the garden"),
        MemoryEntry("2", DAY, "web", "Jon flew to Paris in May"),
        MemoryEntry("3", DAY, "web", "Parisa likes tea"),
    ]

    assert [e.id for e in rank_entries(entries, "When was Jon in Paris?", limit=5)] == ["2", "1"]
    assert rank_entries(entries, "was it in there?", limit=5) == []


def test_ranking_matches_chinese_without_spaces() -> None:
    entries = [
        MemoryEntry("1", DAY, "web", "用户住在北京，喜欢晴天"),
        MemoryEntry("2", DAY, "web", "用户喜欢喝咖啡"),
    ]

    assert [entry.id for entry in rank_entries(entries, "北京天气", limit=5)] == ["1"]
    assert [entry.id for entry in rank_entries(entries, "咖啡", limit=5)] == ["2"]
