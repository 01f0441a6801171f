"""WeCom's XML read safely: with expat directly, refusing any DOCTYPE (so no entity can be
declared: no "billion laughs", no external entity), within a size, depth and element limit.
What reads is a plain dict: an element's text, or a dict of its children (a repeated child a
list)."""

from __future__ import annotations

from typing import Any
from xml.parsers import expat

from backend.channels.platform_body import RefusedUpdate

MAX_BYTES = 1024 * 1024
MAX_DEPTH = 8  # WeCom's messages nest two or three levels
MAX_ELEMENTS = 2_000


class _Refused(Exception):
    """Raised from inside expat's handlers: the parse stops there."""


def read_xml(body: bytes, *, what: str = "the body", limit: int = MAX_BYTES) -> dict[str, Any]:
    """The root element's children of `body`; RefusedUpdate when it does not read."""
    if len(body) > limit:
        raise RefusedUpdate(f"{what} has more than {limit} bytes")
    builder = _Builder()
    parser = expat.ParserCreate(encoding="utf-8")
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartDoctypeDeclHandler = builder.no_doctype
    parser.EntityDeclHandler = builder.no_entity
    parser.StartElementHandler = builder.start
    parser.EndElementHandler = builder.end
    parser.CharacterDataHandler = builder.text
    try:
        parser.Parse(body, True)
    except _Refused as exc:
        raise RefusedUpdate(f"{what}: {exc}") from exc
    except (expat.ExpatError, ValueError, UnicodeError) as exc:
        raise RefusedUpdate(f"{what} is not XML: {exc}") from exc
    if not isinstance(builder.root, dict):
        raise RefusedUpdate(f"{what} is not an XML document of elements")
    return builder.root


class _Builder:
    def __init__(self) -> None:
        self.root: dict[str, Any] | str | None = None
        self._stack: list[tuple[str, dict[str, Any], list[str]]] = []
        self._count = 0

    def no_doctype(self, *_: object) -> None:
        raise _Refused("a DOCTYPE is not accepted")

    def no_entity(self, *_: object) -> None:
        raise _Refused("an entity declaration is not accepted")

    def start(self, name: str, _attributes: dict[str, str]) -> None:
        self._count += 1
        if self._count > MAX_ELEMENTS:
            raise _Refused(f"more than {MAX_ELEMENTS} elements")
        if len(self._stack) >= MAX_DEPTH:
            raise _Refused(f"nested deeper than {MAX_DEPTH} levels")
        self._stack.append((name, {}, []))

    def text(self, data: str) -> None:
        self._stack[-1][2].append(data)

    def end(self, name: str) -> None:
        _, children, texts = self._stack.pop()
        value: dict[str, Any] | str = children if children else "".join(texts)
        if not self._stack:
            self.root = value
            return
        siblings = self._stack[-1][1]
        if name in siblings:
            before = siblings[name]
            siblings[name] = [*before, value] if isinstance(before, list) else [before, value]
        else:
            siblings[name] = value
