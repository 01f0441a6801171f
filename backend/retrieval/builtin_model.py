"""The built-in embedding model: WordLlama's `l2_supercat` token embeddings (32,000 × 256,
float16), averaged over a text's tokens, from the files the `wordllama` wheel ships.

Inference is that average, as the package computes it, without importing the package (its
loader reads the weights into a float32 copy, and its default path looks for the tokenizer in
the wrong folder and then downloads it), and without the `tokenizers` library: its tokenizer
held 12 MB and its import 5 more; `bpe.py` reads the same file into one and gives the same
ids. The weights are mapped from the wheel's file, not read: they cost no memory until rows
are used, and the pages are shared by every worker process on the machine.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import struct
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from backend.host.heap import give_back_free_memory
from backend.retrieval.bpe import BpeTokenizer

DIMENSIONS = 256
WEIGHTS = Path("weights/l2_supercat_256.safetensors")
TOKENIZER = Path("tokenizers/l2_supercat_tokenizer_config.json")
TENSOR = "embedding.weight"


class BuiltinModel:
    def __init__(self, tokenizer: BpeTokenizer, weights: npt.NDArray[np.float16]) -> None:
        self._tokenizer = tokenizer
        self._weights = weights

    def pooled(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Each text's token embeddings averaged (a row of zeros for a text with no tokens);
        not normalised."""
        rows = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        last = self._weights.shape[0] - 1
        for row, text in enumerate(texts):
            encoded = self._tokenizer.encode(text)
            if encoded:
                ids = np.array(encoded, dtype=np.intp)
                np.clip(ids, 0, last, out=ids)
                # The mean as `ndarray.mean(dtype=float32)` takes it (the float32 sum, divided
                # by the count as a NumPy integer): the same bits, in a few calls instead of its
                # dozen, the float16 rows converted at once rather than while summed (a turn
                # embeds its message with caches cold, where each call costs several times more).
                total = np.add.reduce(self._weights[ids].astype(np.float32), axis=0, out=rows[row])
                np.true_divide(total, np.intp(len(encoded)), out=total)
        return rows


@functools.cache  # once per process: every tenant and every test shares the read-only model
def load_builtin_model() -> BuiltinModel:
    package = _package_folder()
    model = BuiltinModel(
        BpeTokenizer.from_file(package / TOKENIZER), _mapped_weights(package / WEIGHTS)
    )
    give_back_free_memory()  # reading the tokenizer's file left megabytes freed
    return model


def _package_folder() -> Path:
    spec = importlib.util.find_spec("wordllama")  # finds it without running its imports
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("the built-in embedding model needs the wordllama package")
    return Path(spec.origin).parent


def _mapped_weights(path: Path) -> npt.NDArray[np.float16]:
    """The tensor of a safetensors file, mapped read-only: the file is an 8-byte little-endian
    header length, a JSON header (dtype, shape, data offsets) and the raw data."""
    with path.open("rb") as file:
        (length,) = struct.unpack("<Q", file.read(8))
        tensor = json.loads(file.read(length))[TENSOR]
    if tensor["dtype"] != "F16" or tensor["shape"][1] != DIMENSIONS:
        raise ValueError(f"{path.name}: not the float16 {DIMENSIONS}-dimension model expected")
    start, _ = tensor["data_offsets"]
    mapped = np.memmap(
        path, dtype="<f2", mode="r", offset=8 + length + start, shape=tuple(tensor["shape"])
    )
    return mapped.view(np.ndarray)  # the same pages, without memmap's cost on every lookup
