"""Text to vectors, for ranking memory by meaning: the built-in offline model, or a provider's
embeddings endpoint through the official `openai` SDK (any OpenAI-compatible vendor or a local
server).

Every embedder gives L2-normalised float32 rows, so a dot product is the cosine. Its `name`
names the vector space: vectors stored under another name are never compared with its own.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import httpx2
import numpy as np
import numpy.typing as npt
import openai

from backend.errors import TallyError
from backend.providers.endpoints import DEFAULT_BASE_URLS
from backend.retrieval.builtin_model import DIMENSIONS, load_builtin_model
from backend.settings import ProviderSettings
from backend.settings.memory import EmbeddingSettings

Vectors = npt.NDArray[np.float32]
INLINE_TEXTS = 64  # more than this at once is embedded in a worker thread (a cold scope)
PLACEHOLDER_KEY = "unset"  # local servers take any key; the SDK insists on one
RECENT_TEXTS = 256  # vectors the built-in model keeps by text: a turn's message is embedded as
# its query, then again when the scope indexes it
REQUEST_TEXTS = 256  # texts per embeddings request


class EmbeddingFailed(TallyError):
    """No vectors this time: ranking falls back to words alone."""

    code = "embedding_failed"
    status = 503


class Embedder(Protocol):
    name: str
    is_local: bool  # embeds in this process, faster than a stored vector is read back

    async def embed(self, texts: Sequence[str]) -> Vectors:
        """One normalised row per text, in order; EmbeddingFailed when none can be had."""
        ...

    async def aclose(self) -> None: ...


def normalised(rows: npt.ArrayLike) -> Vectors:
    matrix = np.asarray(rows, dtype=np.float32)
    if matrix.ndim != 2:
        raise EmbeddingFailed("the embeddings answer is not a list of vectors")
    norms: Vectors = np.sqrt(np.add.reduce(matrix * matrix, axis=1, keepdims=True))  # as norm()
    norms[norms == 0] = 1  # a text with nothing to embed stays a row of zeros
    return np.divide(matrix, norms, dtype=np.float32)


class BuiltinEmbedder:
    """WordLlama's `l2_supercat` model (`builtin_model.py`): its weights and tokenizer come
    from the installed `wordllama` wheel, so it needs no network, ever. Loaded on first use, in
    a worker thread; a sentence then takes a small fraction of a millisecond.

    Its English is good (paraphrases far above unrelated text); its Chinese signal is mostly
    shared characters, which serves Chinese well beside the keyword side (the long memory eval
    measures both).
    """

    name = f"wordllama-l2-supercat-{DIMENSIONS}"
    is_local = True

    def __init__(self) -> None:
        self._recent: OrderedDict[str, Vectors] = OrderedDict()  # used in the loop's thread only

    async def embed(self, texts: Sequence[str]) -> Vectors:
        """Each text embedded once, however often it appears ("ok", a bot's fixed reply); one
        embedded lately (a turn's message, as its query and then as indexed) not again."""
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        known = {text: self._recent[text] for text in texts if text in self._recent}
        for text in known:
            self._recent.move_to_end(text)
        missing = [text for text in dict.fromkeys(texts) if text not in known]
        if len(missing) > INLINE_TEXTS or (
            missing and not load_builtin_model.cache_info().currsize
        ):
            # A cold index's batch: not kept, it would only push the turns' texts out.
            made = await asyncio.to_thread(self._embed, missing)
            known.update(zip(missing, made, strict=True))
        elif missing:
            made = self._embed(missing)
            known.update(zip(missing, made, strict=True))
            self._recent.update(zip(missing, made, strict=True))
            while len(self._recent) > RECENT_TEXTS:
                self._recent.popitem(last=False)
        return np.stack([known[text] for text in texts])

    def _embed(self, texts: Sequence[str]) -> Vectors:
        return normalised(load_builtin_model().pooled(texts))

    async def aclose(self) -> None:
        pass  # the weights are read-only and shared by every user in the process


class ProviderEmbedder:
    """A provider's `/embeddings` endpoint, through the official SDK, with the provider's own
    timeouts; `dimensions` asks models that can shorten their vectors to do so."""

    def __init__(
        self, provider: str, settings: ProviderSettings, model: str, dimensions: int | None
    ) -> None:
        self.name = f"{provider}:{model}" + (f":{dimensions}" if dimensions else "")
        self.is_local = False
        self._model = model
        self._dimensions = dimensions
        self._client = openai.AsyncOpenAI(
            base_url=settings.base_url or DEFAULT_BASE_URLS["openai_compatible"],
            api_key=settings.api_key() or PLACEHOLDER_KEY,
            timeout=httpx2.Timeout(settings.timeout_s, connect=settings.connect_timeout_s),
            max_retries=settings.max_retries,
        )

    async def embed(self, texts: Sequence[str]) -> Vectors:
        rows: list[list[float]] = []
        for start in range(0, len(texts), REQUEST_TEXTS):
            rows += await self._embed(texts[start : start + REQUEST_TEXTS])
        return normalised(rows) if rows else np.zeros((0, 1), dtype=np.float32)

    async def _embed(self, texts: Sequence[str]) -> list[list[float]]:
        options: dict[str, Any] = (
            {} if self._dimensions is None else {"dimensions": self._dimensions}
        )
        try:
            answer = await self._client.embeddings.create(
                model=self._model, input=list(texts), **options
            )
        except (openai.OpenAIError, httpx2.HTTPError) as exc:
            raise EmbeddingFailed(f"{self.name}: {exc.__class__.__name__}: {exc}") from exc
        rows = sorted(answer.data, key=lambda item: item.index)
        if len(rows) != len(texts):
            raise EmbeddingFailed(f"{self.name}: {len(rows)} vectors for {len(texts)} texts")
        return [list(row.embedding) for row in rows]

    async def aclose(self) -> None:
        await self._client.close()


class EmbedderPool:
    """The embedders the tenants' settings name, one of each, closed together."""

    def __init__(self) -> None:
        self._embedders: dict[str, Embedder] = {}

    def get(
        self,
        choice: str | EmbeddingSettings,
        providers: Mapping[str, ProviderSettings],
    ) -> Embedder | None:
        """`builtin`, None for `off`, or the provider's model (settings checked its kind)."""
        if choice == "off":
            return None
        if isinstance(choice, str):
            return self._embedders.setdefault("builtin", BuiltinEmbedder())
        provider = providers[choice.provider]
        key = f"{choice.model_dump_json()}|{provider.model_dump_json()}"
        if key not in self._embedders:
            self._embedders[key] = ProviderEmbedder(
                choice.provider, provider, choice.name, choice.dimensions
            )
        return self._embedders[key]

    async def load(self) -> None:
        """Read what the embedders named so far need from disk (the built-in model), so that
        no turn waits for it: `tally serve` does this at start."""
        if "builtin" in self._embedders:
            await asyncio.to_thread(load_builtin_model)

    async def aclose(self) -> None:
        for embedder in self._embedders.values():
            await embedder.aclose()
        self._embedders.clear()
