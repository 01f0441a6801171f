"""Log lines for people and log shippers: one line a record, ids as key=value pairs."""

from __future__ import annotations

import logging

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class KeyValueFormatter(logging.Formatter):
    """Appends the ids a log call carries (`extra=`) as key=value pairs, for grep and log
    shippers. Message bodies and secrets are never passed in."""

    FIELDS = ("tenant", "session", "turn")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        pairs = [f"{name}={getattr(record, name)}" for name in self.FIELDS if hasattr(record, name)]
        return " ".join([line, *pairs])


def configure_logging() -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(KeyValueFormatter(LOG_FORMAT))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    for chatty in ("httpx", "httpx2", "openai", "anthropic"):  # a line per LLM call, with URLs
        logging.getLogger(chatty).setLevel(logging.WARNING)
