"""JSON as the trace format and the tolerance file mean it: strict, bounded, exact.

Python's `json` accepts `NaN`/`Infinity`, turns `1e400` into inf, keeps the last of two
duplicate keys and recurses once per nesting level (100,000 levels is a RecursionError).
`loads` refuses each of these with a message that says which.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np

#: Deeper than any trace, header or tolerance file needs (they nest at most 4 levels).
MAX_DEPTH = 64
#: An integer literal longer than this is out of range for every dtype (f64's largest has 309 digits).
MAX_INT_DIGITS = 310

# Strings are dropped before brackets are counted: a glob or a name may hold `[`.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_OTHER_BYTES = bytes(b for b in range(256) if b not in b'[]{}"\\')


class JsonError(ValueError):
    """Text that is not strict, bounded JSON; the message says what is wrong."""


def nesting_depth(text: str) -> int:
    """How deeply arrays and objects nest in ``text`` (strings ignored); linear time, no recursion."""
    opening = text.count("[") + text.count("{")
    if opening <= 1:
        return opening
    kept = text.encode("utf-8", "surrogatepass").translate(None, _OTHER_BYTES)
    if b"\\" in kept:  # escapes need the character after them: rare, take the slower exact path
        kept = _NOT_BRACKET.sub("", _STRING.sub("", text)).encode("ascii")
    codes = np.frombuffer(kept, dtype=np.uint8)
    quotes = codes == ord('"')
    outside = (np.cumsum(quotes) % 2 == 0) & ~quotes
    codes = codes[outside]
    if codes.size == 0:
        return 0
    steps = np.where((codes == ord("[")) | (codes == ord("{")), 1, -1)
    return int(np.cumsum(steps).max())


def _pairs(pairs: list[tuple[str, object]]) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise JsonError(f"duplicate key {dup[:60]!r}")
    return out


def _constant(token: str) -> float:
    raise JsonError(f"bare {token} is not JSON; write non-finite values as the strings "
                    "\"NaN\", \"Infinity\", \"-Infinity\"")


def _float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise JsonError(f"number {text[:40]} is out of range for a 64-bit float")
    return value


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise JsonError(f"an integer of {len(text.lstrip('-'))} digits is out of range "
                        f"(at most {MAX_INT_DIGITS} digits)")
    return int(text)


def loads(text: str, max_depth: int = MAX_DEPTH, check_floats: bool = True) -> object:
    """Parse strict JSON: no duplicate keys, no NaN/Infinity, no number out of f64 range, bounded nesting.

    With ``check_floats=False`` an out-of-range decimal reads as ±inf (bare NaN/Infinity are
    still refused, so any inf came from such a decimal): a caller reading millions of numbers
    checks them in bulk instead of paying a Python call per number.
    Raises JsonError (or json.JSONDecodeError, a ValueError too, for malformed text).
    """
    depth = nesting_depth(text)
    if depth > max_depth:
        raise JsonError(f"nested {depth} levels deep, more than the {max_depth} allowed")
    try:
        return json.loads(text, object_pairs_hook=_pairs, parse_constant=_constant,
                          parse_float=_float if check_floats else float, parse_int=_int)
    except RecursionError:  # only if the bracket count above was fooled by malformed text
        raise JsonError(f"nested more than the {max_depth} levels allowed") from None


def describe(exc: ValueError) -> str:
    """One-line reason for a `loads` failure."""
    if isinstance(exc, json.JSONDecodeError):
        return f"invalid JSON at line {exc.lineno} column {exc.colno} ({exc.msg})"
    return str(exc)


__all__ = ["MAX_DEPTH", "JsonError", "describe", "loads", "nesting_depth"]
