"""Whether a text carries a fact's value: in any usual way of writing it, and never as part of
a longer word, number or address."""

from __future__ import annotations

import re

from backend.evals.fact_pools import UNIT_WORDS

_PHONE_LIKE = re.compile(r"\+?\d[\d ()-]{6,}\d")


def is_mentioned(text: str, kind: str, value: str) -> bool:
    """Whether `text` carries `value` (of a fact of `kind`) in any usual way of writing it:
    case and spacing aside; a phone number by its digits; a quantity with its unit as symbol
    or word; a date as "3 June", "June 3" or "3rd June". A value inside a longer word, number
    or email is not mentioned."""
    return Haystack(text).has(kind, value)


class Haystack:
    """A text prepared once for many `is_mentioned` questions."""

    def __init__(self, text: str) -> None:
        self.folded = " ".join(text.casefold().split())
        self._ungrouped = self.folded.replace(",", "")
        self.digit_runs = [re.sub(r"\D", "", run) for run in _PHONE_LIKE.findall(text)]

    def has(self, kind: str, value: str) -> bool:
        if kind == "phone":
            wanted = re.sub(r"\D", "", value)
            return any(wanted in run for run in self.digit_runs)
        if _anchor(kind, value) not in self._ungrouped:  # in every form: none can match
            return False
        return any(_form_pattern(form).search(self.folded) for form in value_forms(kind, value))


def _anchor(kind: str, value: str) -> str:
    """A part of `value` that each of its forms contains (digit grouping aside)."""
    if kind == "quantity":
        return value.split(" ")[0]
    if kind == "date":
        return value.split(" ")[1].casefold()
    return value.casefold()


def value_forms(kind: str, value: str) -> tuple[str, ...]:
    """The ways of writing `value` that `is_mentioned` accepts, case-folded."""
    forms = [value]
    if kind == "quantity":
        number, unit = value.split(" ", 1)
        grouped = f"{int(number):,}"
        for amount in dict.fromkeys((number, grouped)):
            forms += [f"{amount} {unit}", f"{amount}{unit}"]
            forms += [f"{amount} {word}" for word in UNIT_WORDS.get(unit, ())]
            forms += [f"{unit} {amount}", f"€{amount}"] if unit == "EUR" else []
    elif kind == "date":
        day, month = value.split(" ")
        ordinal = day + _ordinal_suffix(int(day))
        forms += [f"{month} {day}", f"{ordinal} {month}", f"{month} {ordinal}"]
        forms += [f"{ordinal} of {month}"]
    return tuple(dict.fromkeys(form.casefold() for form in forms))


def _ordinal_suffix(day: int) -> str:
    if day in (11, 12, 13):
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")


_PATTERNS: dict[str, re.Pattern[str]] = {}


def _form_pattern(form: str) -> re.Pattern[str]:
    pattern = _PATTERNS.get(form)
    if pattern is None:
        # Not inside a longer word, number or address: "72 kg" is not in "172 kg" nor in
        # "1.72 kg"; "priya" is not in "priya.s@example.com".
        body = r"\s".join(re.escape(part) for part in form.split(" "))
        pattern = re.compile(rf"(?<![\w.@+€-]){body}(?![\w@-]|[.,]\w)")
        _PATTERNS[form] = pattern
    return pattern
