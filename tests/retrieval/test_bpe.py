"""The built-in model's tokenizer (`retrieval/bpe.py`) gives exactly the ids of the
`tokenizers` library over the same file, which `wordllama` installs and Tally no longer loads."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tokenizers import Tokenizer

from backend.evals.long_stories import CHINESE, CHINESE_FILLERS, ENGLISH, ENGLISH_FILLERS
from backend.retrieval.bpe import BpeTokenizer
from backend.retrieval.builtin_model import TOKENIZER, _package_folder
from tests.conftest import ROOT

FILE = _package_folder() / TOKENIZER
EDGES = [
    "",
    " ",
    "   ",
    "▁",
    "hello   world  ",
    "\n\nline\tand tab\n",
    "<s>",
    "<s><s>",
    "a<s>b </s> c<unk>",
    " <s> ",
    "x" * 600,
    "中文" * 300,
    "emoji 🙂👍🏽 and 𝔘nicode, naïve café, straße",
    "\u200bzero width\u00a0non-breaking",
]
ALPHABET = [
    *"abcdefghij KLMNOP  ▁▁,.!?\n\t0123456789",
    "<s>",
    "</s>",
    "<unk>",
    "é",
    "中",
    "😀",
    "<",
]


@pytest.fixture(scope="module")
def library() -> Tokenizer:
    tokenizer = Tokenizer.from_file(str(FILE))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


@pytest.fixture(scope="module")
def ours() -> BpeTokenizer:
    return BpeTokenizer.from_file(FILE)


def corpus() -> list[str]:
    stories = [text for story in (*ENGLISH, *CHINESE) for text in (*story.said, story.question)]
    rng = random.Random(20261205)
    noise = ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 80))) for _ in range(2000)]
    return [*stories, *ENGLISH_FILLERS, *CHINESE_FILLERS, *EDGES, *noise]


def test_the_ids_are_the_librarys(library: Tokenizer, ours: BpeTokenizer) -> None:
    texts = corpus()
    expected = [library.encode(text, add_special_tokens=False).ids for text in texts]

    assert [ours.encode(text) for text in texts] == expected
    # Again, now from the chunks it remembered.
    assert [ours.encode(text) for text in texts] == expected


def merges_as_lists(config: dict[str, Any]) -> None:
    config["model"]["merges"] = [merge.split(" ") for merge in config["model"]["merges"]]


def whitespace_split(config: dict[str, Any]) -> None:
    config["pre_tokenizer"] = {"type": "Whitespace"}


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        (whitespace_split, "not the byte-fallback BPE tokenizer"),
        (merges_as_lists, "not in the form this reader knows"),
    ],
)
def test_a_tokenizer_file_of_another_kind_is_refused(
    tmp_path: Path, change: Callable[[dict[str, Any]], None], refusal: str
) -> None:
    config = json.loads(FILE.read_text(encoding="utf-8"))
    change(config)
    other = tmp_path / "tokenizer.json"
    other.write_text(json.dumps(config, indent=2), encoding="utf-8")

    with pytest.raises(ValueError, match=refusal):
        BpeTokenizer.from_file(other)


@pytest.mark.process
def test_embedding_never_imports_the_tokenizers_library() -> None:
    probe = (
        "import sys; from backend.retrieval.builtin_model import load_builtin_model;"
        "load_builtin_model().pooled(['my sister works at a bakery']);"
        "print('tokenizers' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert result.stdout.strip() == "False"


def test_a_file_written_with_escapes_reads_the_same(tmp_path: Path, ours: BpeTokenizer) -> None:
    escaped = tmp_path / "tokenizer.json"  # every "▁" and CJK character as \uXXXX
    escaped.write_text(json.dumps(json.loads(FILE.read_text(encoding="utf-8"))), "ascii")
    read = BpeTokenizer.from_file(escaped)
    texts = corpus()[:400]

    assert [read.encode(text) for text in texts] == [ours.encode(text) for text in texts]
