"""The built-in embedding model needs no network, ever: its weights and tokenizer come from the
installed package. Proved in a process whose network namespace has no route anywhere."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import wordllama

from backend.retrieval.builtin_model import load_builtin_model
from backend.retrieval.embedders import INLINE_TEXTS, BuiltinEmbedder, EmbedderPool, Vectors
from tests.conftest import ROOT

PROBE = """
import asyncio, json, socket
from backend.retrieval.builtin_model import load_builtin_model
from backend.retrieval.embedders import BuiltinEmbedder
try:
    socket.create_connection(("1.1.1.1", 443), timeout=2)
    reachable = True
except OSError:
    reachable = False
rows = asyncio.run(BuiltinEmbedder().embed(
    ["What is my favourite tea?", "My favourite tea is oolong.", "The train was late."]
))
print(json.dumps({
    "reachable": reachable,
    "dimensions": int(rows.shape[1]),
    "related": float(rows[0] @ rows[1]),
    "unrelated": float(rows[0] @ rows[2]),
}))
"""


@pytest.mark.process
def test_the_builtin_model_loads_and_embeds_with_the_network_unreachable(tmp_path: Path) -> None:
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("no `unshare` here to run a process without a network")
    if subprocess.run([unshare, "-n", "true"], capture_output=True).returncode != 0:
        pytest.skip("`unshare -n` is not permitted here (it needs root or user namespaces)")
    home = tmp_path / "home"
    home.mkdir()
    environment = {
        **os.environ,
        "HOME": str(home),  # nothing to find in a cache, and nothing may be written there
        "PYTHONPATH": str(ROOT),
    }
    environment.pop("HF_HUB_OFFLINE", None)
    result = subprocess.run(
        [unshare, "-n", sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
        cwd=tmp_path,
    )

    assert result.returncode == 0, result.stderr
    probe = json.loads(result.stdout.strip().splitlines()[-1])
    assert probe["reachable"] is False  # the process truly had no network
    assert probe["dimensions"] == 256
    assert probe["related"] > 0.5 > probe["unrelated"]
    assert list(home.iterdir()) == []


async def test_a_text_with_nothing_to_embed_gets_a_zero_vector_never_nan() -> None:
    vectors = await BuiltinEmbedder().embed(["", "hello world"])

    assert not np.isnan(vectors).any()
    assert np.linalg.norm(vectors[0]) == 0 and np.isclose(np.linalg.norm(vectors[1]), 1.0)


class Watched(BuiltinEmbedder):
    """The built-in embedder, noting each text its model is run for."""

    def __init__(self) -> None:
        super().__init__()
        self.embedded: list[str] = []

    def _embed(self, texts: Sequence[str]) -> Vectors:
        self.embedded.extend(texts)
        return super()._embed(texts)


async def test_a_text_embedded_lately_is_not_embedded_again() -> None:
    """A turn's message is embedded as its query, then as a turn: the model runs once."""
    load_builtin_model()  # loaded: a turn's few texts are embedded in the loop's thread
    model = Watched()
    embedded = model.embedded
    query = await model.embed(["Where does my sister work?"])
    both = await model.embed(["The bakery opens at six.", "Where does my sister work?"])

    assert embedded == ["Where does my sister work?", "The bakery opens at six."]
    assert np.array_equal(both[1], query[0])
    assert both.shape == (2, 256) and np.isclose(np.linalg.norm(both[0]), 1.0)


async def test_a_text_repeated_in_a_batch_is_embedded_once_whatever_the_batch_size() -> None:
    """A bot's fixed reply said in every session: a cold index's batch holds it many times."""
    load_builtin_model()
    model = Watched()
    embedded = model.embedded
    notes = [f"Note {i}: the bakery opens at six." for i in range(INLINE_TEXTS + 1)]
    large = await model.embed(notes * 2)  # more texts than are embedded in the loop's thread
    small = await model.embed(["Thanks, noted!"] * 3)

    assert sorted(embedded) == sorted([*notes, "Thanks, noted!"])
    assert large.shape == (2 * len(notes), 256) and small.shape == (3, 256)
    assert np.array_equal(large[0], large[len(notes)]) and np.array_equal(small[0], small[2])
    assert not np.array_equal(large[0], large[1])


def test_the_builtin_model_embeds_as_the_wordllama_package_does() -> None:
    """Our inference over the wheel's files gives the package's own vectors."""
    texts = ["My sister works at a bakery.", "我妹妹在杭州的一家面包店工作", "", "🙂 ok"]
    package = wordllama.WordLlama.load(
        cache_dir=Path(wordllama.__file__).parent, disable_download=True
    )
    expected = package.embed(texts, norm=False)
    ours = load_builtin_model().pooled(texts)

    assert np.allclose(ours, expected, atol=1e-5)


def anonymous_mb() -> float:
    status = Path("/proc/self/status").read_text(encoding="ascii")
    return int(status.split("RssAnon:")[1].split()[0]) / 1024


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_embedding_many_texts_keeps_nothing_of_each() -> None:
    """What the tokenizer remembers stays small however many texts go through it (the
    `tokenizers` library's cache kept every whole text, about 4 KB each, up to 10,000)."""
    model = load_builtin_model()
    model.pooled(["warm up"])
    before = anonymous_mb()
    for start in range(0, 2000, 50):
        model.pooled(
            [
                f"message {n}: my number is {n * 7919}, said among other words"
                for n in range(start, start + 50)
            ]
        )

    assert anonymous_mb() - before < 3


async def test_the_pool_loads_the_builtin_model_once_it_is_named() -> None:
    """`tally serve` loads it at start, so that no user's first turn waits for it."""
    load_builtin_model.cache_clear()
    pool = EmbedderPool()
    await pool.load()
    assert load_builtin_model.cache_info().currsize == 0  # nothing named it yet

    pool.get("builtin", {})
    await pool.load()

    assert load_builtin_model.cache_info().currsize == 1
