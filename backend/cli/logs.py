"""Log lines for people and log shippers: one line a record, with its ids and figures.

`text` (the default): `time LEVEL logger: message key=value ...`; `json`: one JSON object a
line (`time`, `level`, `logger`, `message` and the same fields). What a log call passes in
`extra=` (tenant, session, turn, channel, outcome, tokens, durations) becomes those fields;
message bodies and secrets are never passed in. The same configuration goes to uvicorn, so
its lines and every worker process of `tally serve --workers N` log in the same format.
"""

from __future__ import annotations

import json
import logging
import logging.config
from datetime import UTC, datetime
from typing import Any, Literal

LogFormat = Literal["text", "json"]
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Loggers that would print a line per LLM call (with URLs): only their warnings.
CHATTY = ("httpx", "httpx2", "openai", "anthropic")
# Attributes every record has; whatever else a record carries came from `extra=`.
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
    "message",
    "asctime",
    "color_message",  # uvicorn's coloured copy of the message
    "taskName",
}


def extra_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The fields a log call passed in `extra=`, in the order given."""
    return {k: v for k, v in record.__dict__.items() if k not in _STANDARD}


class KeyValueFormatter(logging.Formatter):
    """Appends a record's fields as key=value pairs, for grep and log shippers."""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        pairs = [f"{name}={value}" for name, value in extra_fields(record).items()]
        return " ".join([line, *pairs])


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time (UTC, ISO 8601), level, logger, message and the fields."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            **extra_fields(record),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


class UvicornLines(logging.Filter):
    """Drops uvicorn's "Uvicorn running on …" line (`tally serve` says where it serves itself,
    once it answers), and names uvicorn's general logger `uvicorn`: its INFO lines are no
    errors, whatever the logger's name (`uvicorn.error`) says."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "uvicorn.error":
            record.name = "uvicorn"
        return not record.getMessage().startswith("Uvicorn running on")


def log_config(log_format: LogFormat = "text") -> dict[str, Any]:
    """The `logging.config.dictConfig` of every Tally process: the root logger and uvicorn's
    (which reach it) write one format to stderr."""
    formatter = (
        {"()": JsonFormatter}
        if log_format == "json"
        else {"()": KeyValueFormatter, "fmt": LOG_FORMAT}
    )
    uvicorn = {"handlers": [], "propagate": True, "level": "INFO"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"tally": formatter},
        "filters": {"uvicorn": {"()": UvicornLines}},
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "formatter": "tally",
                "filters": ["uvicorn"],
                "stream": "ext://sys.stderr",
            }
        },
        "root": {"level": "INFO", "handlers": ["stderr"]},
        "loggers": {
            "uvicorn": uvicorn,
            "uvicorn.error": uvicorn,
            "uvicorn.access": uvicorn,
            **{name: {"level": "WARNING"} for name in CHATTY},
        },
    }


def configure_logging(log_format: LogFormat = "text") -> None:
    logging.config.dictConfig(log_config(log_format))
