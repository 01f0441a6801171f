"""The JSON every route answers with: whatever text it carries (a provider's error message, a
platform's, anything read from storage), the body always encodes. Text that no UTF-8 encoder
writes (a lone surrogate) or numbers JSON has no word for (NaN) are made storable first
(`domain/text.py`), so a read never fails for what was said or stored before."""

from __future__ import annotations

import json
from typing import Any

from fastapi.responses import JSONResponse

from backend.domain.text import storable_json


def json_bytes(content: Any) -> bytes:
    """`content` as compact UTF-8 JSON, made storable when it could not be written as it is."""
    try:
        return _dump(content)
    except (UnicodeEncodeError, ValueError):
        return _dump(storable_json(content))


def _dump(content: Any) -> bytes:
    text = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.encode("utf-8")


class StorableJSONResponse(JSONResponse):
    def render(self, content: Any) -> bytes:
        return json_bytes(content)
