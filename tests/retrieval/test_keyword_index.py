"""The keyword side of memory retrieval: BM25 over whole words, rarer words weighing more,
English endings folded, Chinese found without spaces, and common words left out."""

from __future__ import annotations

from backend.memory.terms import search_terms
from backend.retrieval.keyword_index import MAX_HITS, KeywordIndex


def keys(index: KeywordIndex, query: str) -> list[int]:
    return [key for key, _ in index.search(search_terms(query), 10)]


def test_a_rare_word_outweighs_words_many_lines_have() -> None:
    index = KeywordIndex()
    index.add([(1, "Jon went to the market in May")])
    index.add([(2, "Jon went to the gym in May")])
    index.add([(3, "Jon flew to Paris")])
    index.add([(4, "Jon went to the park in May")])

    assert keys(index, "When was Jon in Paris?")[0] == 3


def test_endings_fold_and_whole_words_only() -> None:
    index = KeywordIndex()
    index.add([(1, "My sister works at a bakery"), (2, "Parisa likes tea")])

    assert keys(index, "where is she working") == [1]
    assert keys(index, "Paris") == []  # not a part of "Parisa"


def test_chinese_is_found_without_spaces() -> None:
    index = KeywordIndex()
    index.add(
        [
            (1, "我妹妹在杭州的一家面包店工作"),
            (2, "今天天气很好"),
            (3, "我哥哥在上海工作"),
        ]
    )

    assert keys(index, "妹妹在哪里工作？")[0] == 1
    assert keys(index, "杭州") == [1]


def test_removed_items_are_not_found() -> None:
    index = KeywordIndex()
    index.add([(1, "the tattoo on her arm"), (2, "a tattoo of a rose")])
    index.remove([(1, "the tattoo on her arm")])

    assert keys(index, "tattoo") == [2]


def test_a_word_most_items_hold_is_left_out_but_rarer_ones_still_find() -> None:
    index = KeywordIndex()
    index.add((key, f"Caroline talked about topic{key}") for key in range(1, 101))

    assert keys(index, "Caroline") == []  # in every item: it tells nothing apart
    assert keys(index, "What did Caroline say about topic42?") == [42]


def test_common_terms_past_the_hit_budget_give_way_to_rarer_ones() -> None:
    index = KeywordIndex()
    third = MAX_HITS // 2 + 1
    index.add((key, f"alpha item{key}") for key in range(1, third + 1))
    index.add((key, "beta") for key in range(100_000, 100_000 + third))
    index.add((key, "gamma") for key in range(200_000, 200_000 + third))

    # alpha and beta are each in a third of the items, weigh the same and are together past
    # the budget: alpha, the first asked for, is searched alone (beta's shorter items would
    # otherwise rank first).
    found = index.search(search_terms("alpha beta"), 10)

    assert len(found) == 10 and all(key <= third for key, _ in found)


def test_a_word_weighing_a_tenth_of_the_rarest_is_not_asked_for() -> None:
    """Its matches would cost the search as much as any word's and move the ranking no more
    than a tie-break among the items the rarer word finds."""
    index = KeywordIndex()
    index.add((key, f"favourite number{key}") for key in range(1, 401))  # 40 % of the items
    index.add((key, f"something else {key}") for key in range(401, 1001))

    assert len(keys(index, "favourite")) == 10  # alone, it is asked for
    assert keys(index, "my favourite number7") == [7]


def test_a_word_half_the_items_hold_is_not_asked_for() -> None:
    """FTS5 gives such a word no weight: asking for it would only cost its matches."""
    index = KeywordIndex()
    index.add((key, f"remember topic{key}") for key in range(1, 41))
    index.add((key, "tok0 tok1 tok2") for key in range(41, 81))

    assert keys(index, "remember") == []
    assert keys(index, "please remember topic7") == [7]


def test_a_smaller_hit_budget_asks_for_the_rarest_words_alone() -> None:
    index = KeywordIndex()
    index.add((key, f"t{key % 4} number{key}") for key in range(1, 101))  # t0-t3: 25 each

    asked = index.search(search_terms("number7 t3"), 10, max_hits=10)
    everything = index.search(search_terms("number7 t3"), 10)

    assert [key for key, _ in asked] == [7]  # t3 is held by 25 items: past the budget
    assert everything[0][0] == 7 and len(everything) == 10


def test_items_written_a_few_at_a_time_are_found_as_if_written_at_once() -> None:
    """As turns write them: two rows, then a search, and again, some removed on the way (the
    index merges its segments as it goes; FTS5's own check finds its structure sound)."""
    said = [  # 3,200 items: what a merge could break shows at this size
        (key, f"In week {key % 7} I talked about topic{key % 13} and the {word} at length")
        for key, word in enumerate(["garden", "piano", "invoice", "train"] * 800, start=1)
    ]
    removed = set(said[5::9])
    at_once, in_turns = KeywordIndex(), KeywordIndex()
    at_once.add([item for item in said if item not in removed])
    queries = [search_terms(f"topic{n} piano week {n % 7}") for n in range(13)]
    for start in range(0, len(said), 2):
        in_turns.add(said[start : start + 2])
        in_turns.search(queries[start % 13], 50)
        in_turns.remove([item for item in said[start : start + 2] if item in removed])

    in_turns._db.execute("INSERT INTO items(items) VALUES('integrity-check')")  # raises if not
    for terms in queries:
        assert in_turns.search(terms, 50) == at_once.search(terms, 50)
        assert in_turns.search(terms, 50)  # the equality above compares hits, not two nothings
