"""Tunable parameters declared in a candidate's source, and the search around them.

A candidate declares a tunable with a comment directive, in Python (`#`) or
C/C++/CUDA/HIP (`//`) comments, anywhere in the file (also inside a kernel
source string embedded in Python):

    // @tunable BLOCK_M: 16, 32, 64, 128
    # @tunable NUM_WARPS: 2, 4, 8   # a trailing comment is allowed

and gives its current value at exactly one definition site, one of:

    #define BLOCK_M 64
    constexpr int BLOCK_M = 64;        (any declaration whose words include const or constexpr)
    BLOCK_M = 64                       (Python, at column 0; `BLOCK_M: int = 64` too)

Values are single tokens kept as source text: integers (also hex), floats
(C suffixes such as `1.0f` are part of the text), identifiers (`True`, `tl.float16`) and
quoted words (`"ieee"`; letters, digits and `._+-` only). Equality is textual:
`64` and `64u` are different values.

A current value missing from the declared list is accepted and added to it
(it is what the author chose, so the search starts there): at its sorted
place when the list and the value are all numbers in ascending or descending
order, first otherwise. `parse_tunables(..., strict=True)` rejects it instead.

The search is coordinate descent over list positions: a neighbour moves one
parameter one step along its list. The distance between two assignments is
the sum of the parameters' position differences.

This module is on the sandbox side and imports only the standard library.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "Tunable",
    "TunableError",
    "assignment_key",
    "current_assignment",
    "describe",
    "neighbours",
    "parse_tunables",
    "plan_tuning",
    "render",
    "skeleton",
]

# One value: a number (hex, or decimal with C literal suffixes), an identifier (dotted), or a quoted plain word.
_TOKEN = (
    r"(?:0[xX][0-9a-fA-F]+[uUlL]*"
    r"|[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?[fFuUlL]*"
    r"|[A-Za-z_][\w.]*"
    r"|\"[\w.+-]*\"|'[\w.+-]*')"
)
_TOKEN_RE = re.compile(_TOKEN)
_NAME_RE = re.compile(r"[A-Za-z_]\w*")
_NUMBER_RE = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")

_DIRECTIVE_RE = re.compile(r"(?:#|//)[ \t]*@tunable\b[ \t]*(?P<rest>[^\r\n]*)")
# A trailing comment after the value list, separated by whitespace.
_TRAILING_COMMENT_RE = re.compile(r"\s+(?:#|//).*$")

_SITE_PATTERNS = (
    # #define NAME VALUE   (a trailing comment may follow)
    re.compile(
        rf"^[ \t]*#[ \t]*define[ \t]+(?P<name>[A-Za-z_]\w*)[ \t]+(?P<value>{_TOKEN})[ \t\r]*(?:(?://|/\*)[^\n]*)?$",
        re.M,
    ),
    # [static] constexpr|const TYPE NAME = VALUE;   (the words are checked for const below)
    re.compile(
        rf"^[ \t]*(?P<words>(?:[A-Za-z_][\w:]*[ \t]+)+)(?P<name>[A-Za-z_]\w*)[ \t]*=[ \t]*(?P<value>{_TOKEN})[ \t]*;",
        re.M,
    ),
    # Python, at column 0: NAME = VALUE  or  NAME: TYPE = VALUE   (a trailing comment may follow)
    re.compile(
        rf"^(?P<name>[A-Za-z_]\w*)(?:[ \t]*:[ \t]*[^=\n]+?)?[ \t]*=[ \t]*(?P<value>{_TOKEN})[ \t\r]*(?:#[^\n]*)?$",
        re.M,
    ),
)


class TunableError(ValueError):
    """A malformed declaration, a missing or repeated definition site, or a bad assignment."""


@dataclass(frozen=True)
class Tunable:
    name: str
    values: tuple[str, ...]
    current: str
    line: int  # 1-based line of the definition site


@dataclass(frozen=True)
class _Site:
    name: str
    value: str
    start: int  # span of the value in the source
    end: int
    line: int


def _line_of(source: str, offset: int) -> int:
    return source.count("\n", 0, offset) + 1


def _parse_directives(source: str) -> dict[str, tuple[tuple[str, ...], int]]:
    """Declared name -> (values, directive line), in declared order."""
    declared: dict[str, tuple[tuple[str, ...], int]] = {}
    for match in _DIRECTIVE_RE.finditer(source):
        line = _line_of(source, match.start())
        rest = _TRAILING_COMMENT_RE.sub("", match.group("rest")).strip()
        name, colon, listed = rest.partition(":")
        name = name.strip()
        if not colon:
            raise TunableError(f"line {line}: expected '@tunable NAME: v1, v2, ...', got {rest!r}")
        if not _NAME_RE.fullmatch(name):
            raise TunableError(f"line {line}: tunable name {name!r} is not an identifier")
        if name in declared:
            raise TunableError(f"line {line}: tunable {name} is declared twice (first on line {declared[name][1]})")
        values = tuple(v.strip() for v in listed.split(","))
        if values == ("",):
            raise TunableError(f"line {line}: tunable {name} lists no values")
        for value in values:
            if not _TOKEN_RE.fullmatch(value):
                raise TunableError(
                    f"line {line}: tunable {name}: {value!r} is not a value "
                    "(a number, an identifier or a quoted word; values are separated by commas)"
                )
        if len(set(values)) != len(values):
            raise TunableError(f"line {line}: tunable {name} lists a value twice: {', '.join(values)}")
        declared[name] = (values, line)
    return declared


def _find_sites(source: str, names: Collection[str]) -> dict[str, _Site]:
    sites: dict[str, _Site] = {}
    found: dict[str, list[_Site]] = {}
    for pattern in _SITE_PATTERNS:
        for match in pattern.finditer(source):
            name = match.group("name")
            if name not in names:
                continue
            words = match.groupdict().get("words")
            if words is not None and not ({"const", "constexpr"} & set(words.split())):
                continue  # a plain assignment in C++ is not a definition
            start, end = match.span("value")
            site = _Site(name, match.group("value"), start, end, _line_of(source, start))
            found.setdefault(name, []).append(site)
    for name in names:
        candidates = sorted(found.get(name, []), key=lambda s: s.start)
        if not candidates:
            raise TunableError(
                f"tunable {name} has no definition site "
                f"(expected '#define {name} V', 'constexpr int {name} = V;' or '{name} = V' at column 0)"
            )
        if len(candidates) > 1:
            lines = ", ".join(str(s.line) for s in candidates)
            raise TunableError(f"tunable {name} is defined more than once (lines {lines}); keep one definition")
        sites[name] = candidates[0]
    return sites


def _as_number(text: str) -> float | None:
    match = _NUMBER_RE.match(text)
    if match is None or text[match.end() :].strip("fFuUlL"):
        return None
    return float(match.group())


def _with_current(values: tuple[str, ...], current: str) -> tuple[str, ...]:
    """The declared list with an undeclared current value added (see the module docstring)."""
    numbers = [_as_number(v) for v in values]
    value = _as_number(current)
    if value is not None and all(n is not None for n in numbers):
        ordered = [n for n in numbers if n is not None]
        for descending in (False, True):
            if ordered == sorted(ordered, reverse=descending):
                index = sum(1 for n in ordered if (n > value if descending else n < value))
                return values[:index] + (current,) + values[index:]
    return (current, *values)


def parse_tunables(source: str, *, strict: bool = False) -> list[Tunable]:
    """The tunables declared in `source`, in declared order."""
    declared = _parse_directives(source)
    if not declared:
        return []
    sites = _find_sites(source, declared)
    tunables: list[Tunable] = []
    for name, (values, line) in declared.items():
        site = sites[name]
        if site.value not in values:
            if strict:
                raise TunableError(
                    f"tunable {name}: current value {site.value} (line {site.line}) is not in the list "
                    f"declared on line {line}: {', '.join(values)}"
                )
            values = _with_current(values, site.value)
        tunables.append(Tunable(name, values, site.value, site.line))
    return tunables


def current_assignment(tunables: Sequence[Tunable]) -> dict[str, str]:
    return {t.name: t.current for t in tunables}


def render(source: str, assignment: Mapping[str, str]) -> str:
    """`source` with the definition sites of the named tunables set to the given values."""
    tunables = {t.name: t for t in parse_tunables(source)}
    for name, value in assignment.items():
        if name not in tunables:
            raise TunableError(f"unknown tunable {name} (declared: {', '.join(tunables) or 'none'})")
        if value not in tunables[name].values:
            raise TunableError(f"tunable {name}: {value} is not one of {', '.join(tunables[name].values)}")
    sites = _find_sites(source, tunables)
    out = source
    for site in sorted((sites[name] for name in assignment), key=lambda s: s.start, reverse=True):
        out = out[: site.start] + assignment[site.name] + out[site.end :]
    # Cheap insurance that the rewrite hit the right spans.
    got = current_assignment(parse_tunables(out))
    if any(got.get(name) != value for name, value in assignment.items()):
        raise TunableError(f"rendering {assignment_key(assignment)} gave {assignment_key(got)}")
    return out


def skeleton(source: str) -> str:
    """`source` with each definition site's value replaced by `<NAME>`.

    Equal for every assignment of one kernel's tunables, also when a current value was
    added to its list (which `render` to another value drops again): a family key.
    """
    declared = _parse_directives(source)
    out = source
    for site in sorted(_find_sites(source, declared).values(), key=lambda s: s.start, reverse=True):
        out = out[: site.start] + f"<{site.name}>" + out[site.end :]
    return out


def assignment_key(assignment: Mapping[str, str]) -> str:
    """Canonical text of an assignment (names sorted): `BLOCK_M=64,NUM_WARPS=4`."""
    return ",".join(f"{name}={assignment[name]}" for name in sorted(assignment))


def describe(assignment: Mapping[str, str], base_assignment: Mapping[str, str]) -> str:
    """The changes from the base, in the assignment's order: `BLOCK_M 64→128, NUM_WARPS 4→8`."""
    changes = [
        f"{name} {base_assignment.get(name, '?')}→{value}"
        for name, value in assignment.items()
        if base_assignment.get(name) != value
    ]
    return ", ".join(changes) if changes else "unchanged"


TriedSet = Collection[frozenset[tuple[str, str]] | Mapping[str, str] | str]


def _tried_keys(tried: TriedSet) -> set[str]:
    """Tried assignments as keys; accepts frozensets of (name, value), dicts and assignment keys."""
    keys: set[str] = set()
    for entry in tried:
        if isinstance(entry, str):
            keys.add(entry)
        elif isinstance(entry, frozenset):
            keys.add(assignment_key(dict(entry)))
        else:
            keys.add(assignment_key(entry))
    return keys


def _positions(tunables: Sequence[Tunable], around: Mapping[str, str]) -> list[int]:
    positions = []
    for t in tunables:
        value = around.get(t.name, t.current)
        if value not in t.values:
            raise TunableError(f"tunable {t.name}: {value} is not one of {', '.join(t.values)}")
        positions.append(t.values.index(value))
    return positions


def _offsets(bounds: Sequence[tuple[int, int]], distance: int) -> Iterator[tuple[int, ...]]:
    """Position offsets d with |d_1| + ... + |d_n| == distance and low_i <= d_i <= high_i.

    Order: lexicographic over the parameters in declared order, each parameter's
    offsets tried as +1, -1, +2, -2, ..., 0; so at distance 1 it is parameter
    order, one step up (later in the list) before one step down.
    """
    if not bounds:
        if distance == 0:
            yield ()
        return
    (low, high), rest = bounds[0], bounds[1:]
    reach = sum(max(-lo, hi) for lo, hi in rest)
    steps = [s * sign for s in range(1, distance + 1) for sign in (1, -1)] + [0]
    for step in steps:
        remaining = distance - abs(step)
        if low <= step <= high and remaining <= reach:
            for tail in _offsets(rest, remaining):
                yield (step, *tail)


def _ring(tunables: Sequence[Tunable], positions: Sequence[int], distance: int) -> Iterator[dict[str, str]]:
    bounds = [(-p, len(t.values) - 1 - p) for p, t in zip(positions, tunables, strict=True)]
    for offsets in _offsets(bounds, distance):
        yield {t.name: t.values[p + d] for t, p, d in zip(tunables, positions, offsets, strict=True)}


def neighbours(tunables: Sequence[Tunable], around: Mapping[str, str], tried: TriedSet = ()) -> list[dict[str, str]]:
    """Untried assignments one step from `around` along one parameter's list.

    Order: parameters in declared order; for each, the next value in its list
    before the previous one. Names missing from `around` take their current value.
    """
    keys = _tried_keys(tried)
    ring = _ring(tunables, _positions(tunables, around), 1)
    return [a for a in ring if assignment_key(a) not in keys]


def plan_tuning(source: str, tried: TriedSet = (), limit: int = 4) -> list[dict[str, str]]:
    """Up to `limit` untried assignments nearest the source's current values.

    First the untried neighbours (order of `neighbours`); if fewer than
    `limit`, untried assignments at distance 2, then 3, ... (order of
    `_offsets`). Empty when there are no tunables or every assignment is tried.
    The current assignment itself is never proposed.
    """
    tunables = parse_tunables(source)
    if not tunables or limit <= 0:
        return []
    keys = _tried_keys(tried)
    positions = _positions(tunables, current_assignment(tunables))
    farthest = sum(max(p, len(t.values) - 1 - p) for p, t in zip(positions, tunables, strict=True))
    rings = (_ring(tunables, positions, d) for d in range(1, farthest + 1))
    untried = (a for a in itertools.chain.from_iterable(rings) if assignment_key(a) not in keys)
    return list(itertools.islice(untried, limit))
