"""Numbers in a reply that no source holds: the chat's check that it did not invent a measurement.

A number in the reply is grounded when some number in the sources (tool results, the user's words,
the run summary in the system prompt) equals it as written: rounded to the reply's decimals, within
half a percent, or after a unit change (µs to ms or s, a ratio to a percent). Digits inside
identifiers (k12, g3e1, sm_90, fp8) are not numbers. Integers up to 10 pass unchecked: counts and
ranks of that size are everywhere in the sources, and prose needs them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

# A number not glued to a word or another number on its left: "k12" and "g3e1" hold none.
_NUMBER = re.compile(r"(?<![\w.])(?<![\w.]-)[-+]?(?:\d+(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?")
SMALL_INTEGER = 10
RELATIVE_TOLERANCE = 0.005
_SCALES = (1.0, 1e3, 1e-3, 1e6, 1e-6, 100.0, 0.01)


def numbers_in(text: str) -> list[tuple[str, float]]:
    """(as written, value) for every number in the text."""
    found = []
    for match in _NUMBER.finditer(text):
        written = match.group(0)
        try:
            found.append((written, float(written.replace(",", ""))))
        except ValueError:
            continue
    return found


def _decimals(written: str) -> int:
    mantissa = re.split(r"[eE]", written)[0]
    return len(mantissa.split(".")[1]) if "." in mantissa else 0


def _matches(written: str, value: float, source: float) -> bool:
    if "e" in written.lower():
        return math.isclose(abs(value), abs(source), rel_tol=RELATIVE_TOLERANCE)
    decimals = _decimals(written)
    target = abs(value)
    for scale in _SCALES:
        s = abs(source) * scale
        if round(s, decimals) == round(target, decimals):
            return True
        if s and abs(s - target) <= RELATIVE_TOLERANCE * s:
            return True
    return False


def ungrounded_numbers(reply: str, sources: Iterable[str]) -> list[str]:
    """The numbers of the reply (as written, each once) that no source supports."""
    pool = sorted({abs(v) for text in sources for _, v in numbers_in(text)})
    missing: list[str] = []
    for written, value in numbers_in(reply):
        if value.is_integer() and abs(value) <= SMALL_INTEGER and "." not in written:
            continue
        if written in missing:
            continue
        if not any(_matches(written, value, s) for s in pool):
            missing.append(written)
    return missing
