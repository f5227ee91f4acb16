"""The mutations of tests/hostile/trace_fuzzer.py: bytes flipped, cut or spliced from another seed, a JSON tree's
nodes changed, a safetensors header or a TOML tolerance file edited in place. `mutate` stacks one to three."""

from __future__ import annotations

import json
import random
import re
import struct
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.hostile.trace_fuzzer import Seed

# Values a hostile file puts where a well-formed one has something else (issue 11's cases among them).
INTERESTING: tuple[object, ...] = (
    None, True, False, 0, -1, 1, 2, 3, 7, 64, 65, 2**31, 2**32, 2**53 + 1, 2**63 - 1, 2**63, 2**64, -(2**63) - 1,
    10**6, 10**30, 10**300, 10**400, 1.5, -0.0, 0.1, 1e-8, 1e300, 1e-320, 5e-324, 3.5e38, 3.4028235e38, 65520.0,
    float("nan"), float("inf"), -float("inf"),
    "", "x", "1", "NaN", "Infinity", "-Infinity", "nan", "NaN:0x7fc00001", "NaN:0xffc00000", "NaN:0x7f800000",
    "NaN:0x7ff8000000000001", "NaN:0x7e01", "NaN:0xzz", "\x1b[2J", "a\nb", "F32", "F64", "F16", "BF16", "I64",
    "U8", "BOOL", "F8", "trace", "init", "sgd", "adam", "adamw", "l2", "decoupled", "step0.loss", "x" * 5000,
    [], {}, [1], [[1]], [True], [1.5], ["1"], [0, 10**30], [2**62, 2**62], [1] * 33, [1] * 65, [-1], [0, 0],
    [4, 3], [3, 4], [0, 8], [8, 0], [0.0, 8.0], {"a": 1}, {"name": "adam"},
)


def _deep(levels: int, open_: str = "[", close: str = "]") -> str:
    return open_ * levels + close * levels


def _bytes_mutation(rng: random.Random, data: bytes, other: bytes) -> tuple[bytes, str]:
    buf = bytearray(data)
    kind = rng.choice(("flip", "byte", "delete", "insert", "duplicate", "truncate", "append", "splice", "utf8"))
    n = len(buf)
    pos = rng.randrange(n) if n else 0
    if kind == "flip" and n:
        buf[pos] ^= 1 << rng.randrange(8)
    elif kind == "byte" and n:
        buf[pos] = rng.choice((0, 1, 0x20, 0x22, 0x2C, 0x5B, 0x5D, 0x7B, 0x7D, 0x7F, 0x80, 0xFF, rng.randrange(256)))
    elif kind == "delete":
        del buf[pos:pos + rng.choice((1, 2, 8, rng.randrange(1, 64)))]
    elif kind == "insert":
        buf[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.choice((1, 2, 8))))
    elif kind == "duplicate":
        end = min(n, pos + rng.randrange(1, 64))
        buf[end:end] = buf[pos:end]
    elif kind == "truncate":
        del buf[pos:]
    elif kind == "append":
        buf += rng.choice((b"\0", b" ", b"x" * 9, b"}", other[:64]))
    elif kind == "splice" and other:
        cut = rng.randrange(len(other))
        buf = buf[:pos] + other[cut:]
    else:
        buf[pos:pos] = rng.choice((b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xef\xbb\xbf"))
    return bytes(buf), f"bytes.{kind}"


def _nodes(tree: object, path: tuple = ()) -> list[tuple]:
    """Every path into a JSON tree (lists sampled: a data list of 1,000 floats gives a few paths)."""
    out = [path]
    if isinstance(tree, dict):
        for k, v in tree.items():
            out += _nodes(v, path + (k,))
    elif isinstance(tree, list):
        picks = range(len(tree)) if len(tree) <= 8 else (0, 1, len(tree) // 2, len(tree) - 1)
        for i in picks:
            out += _nodes(tree[i], path + (i,))
    return out


def _get(tree: object, path: tuple) -> object:
    for p in path:
        tree = tree[p]  # type: ignore[index]
    return tree


def _tree_mutation(rng: random.Random, tree: object) -> tuple[object, str]:
    """One structural change to a parsed JSON document; returns the new root and the change's class."""
    paths = _nodes(tree)
    path = rng.choice(paths)
    kind = rng.choice(("replace", "replace", "replace", "delete", "insert", "swap", "retype", "number"))
    value = _get(tree, path)
    if kind == "number" and isinstance(value, (int, float)) and not isinstance(value, bool):
        new = rng.choice((value + 1, value - 1, -value, value * 2, value * 1e30, value / 3, float(value), 2**64,
                          float("nan")))
    elif kind == "delete" and path:
        parent = _get(tree, path[:-1])
        del parent[path[-1]]  # type: ignore[union-attr]
        return tree, "tree.delete"
    elif kind == "insert" and isinstance(value, (dict, list)):
        if isinstance(value, dict):
            value[rng.choice(("extra", "dtype", "steps", "__metadata__", "\x07", ""))] = rng.choice(INTERESTING)
        else:
            value.insert(rng.randrange(len(value) + 1), rng.choice(INTERESTING))
        return tree, "tree.insert"
    elif kind == "swap":
        new = _get(tree, rng.choice(paths))
        new = json.loads(json.dumps(new))
    elif kind == "retype":
        new = str(value) if not isinstance(value, str) else ([value] if rng.random() < 0.5 else {value: value})
    else:
        new = rng.choice(INTERESTING)
        kind = "replace"
    if not path:
        return new, f"tree.{kind}"
    parent = _get(tree, path[:-1])
    parent[path[-1]] = new  # type: ignore[index]
    return tree, f"tree.{kind}"


def _text_mutation(rng: random.Random, text: str) -> tuple[str, str]:
    """Changes no JSON encoder makes: duplicate keys, deep nesting, odd number spellings."""
    kind = rng.choice(("dupkey", "deep", "number", "constant"))
    if kind == "dupkey":
        keys = [m for m in re.finditer(r'"[^"\\]{1,40}": ', text)]
        if keys:
            m = rng.choice(keys)
            return text[:m.start()] + m.group() + "0, " + text[m.start():], "text.dupkey"
    if kind == "deep":
        levels = rng.choice((65, 1000, 100_000))
        m = rng.choice(list(re.finditer(r": ", text)) or [None])
        if m is not None:
            return text[:m.end()] + _deep(levels) + ", " + text[m.end():], f"text.deep{levels}"
    numbers = list(re.finditer(r"-?\d+(\.\d+)?([eE][-+]?\d+)?", text))
    if numbers:
        m = rng.choice(numbers)
        spelled = rng.choice(("1e400", "-1e400", "1" + "0" * 400, "1" * 5000, "18446744073709551616", "-0", "1.0e-400",
                              "0x10", "01", "1.", ".5", "NaN", "-Infinity", "Infinity", "4.9e-324", "3.5e38"))
        return (text[:m.start()] + spelled + text[m.end():],
                f"text.{kind if kind in ('number', 'constant') else 'number'}")
    return text + " ", "text.none"


def _json_mutation(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    text = data.decode("utf-8")
    if rng.random() < 0.6:
        tree, kind = _tree_mutation(rng, json.loads(text))
        return json.dumps(tree, indent=rng.choice((None, 1))).encode(), f"json.{kind}"
    text, kind = _text_mutation(rng, text)
    return text.encode("utf-8", "surrogatepass"), f"json.{kind}"


def split_safetensors(data: bytes) -> tuple[dict, bytes]:
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + n]), data[8 + n:]


def join_safetensors(header_text: bytes, body: bytes, length: int | None = None) -> bytes:
    padded = header_text + b" " * (-len(header_text) % 8)
    return struct.pack("<Q", len(padded) if length is None else length) + padded + body


def _safetensors_mutation(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    header, body = split_safetensors(data)
    kind = rng.choice(("length", "header", "header", "metadata", "metadata", "text", "offsets", "body"))
    if kind == "length":
        (n,) = struct.unpack("<Q", data[:8])
        delta = rng.choice((-1, 1, -8, 8, 2**63, 2**64 - 1 - n, len(data), -n))
        return struct.pack("<Q", (n + delta) % 2**64) + data[8:], "st.length"
    if kind == "metadata" and header.get("__metadata__"):
        meta = header["__metadata__"]
        key = rng.choice(sorted(meta))
        try:
            value = json.loads(meta[key])
        except ValueError:
            value = None
        if value is not None and rng.random() < 0.7:
            value, sub = _tree_mutation(rng, value)
            meta[key] = json.dumps(value)
        elif rng.random() < 0.5:
            meta[key], sub = _text_mutation(rng, meta[key])
        else:
            meta[key], sub = rng.choice(INTERESTING), "replace"
        return join_safetensors(json.dumps(header).encode(), body), f"st.metadata.{sub}"
    if kind == "offsets":
        names = [k for k in header if k != "__metadata__"]
        if len(names) >= 2:
            a, b = rng.sample(names, 2)
            if rng.random() < 0.5:
                header[a]["data_offsets"], header[b]["data_offsets"] = (header[b]["data_offsets"],
                                                                         header[a]["data_offsets"])
            else:
                begin, end = header[a]["data_offsets"]
                shift = rng.choice((-1, 1, -4, 4, 0.5))
                header[a]["data_offsets"] = [begin + shift, end + shift]
            return join_safetensors(json.dumps(header).encode(), body), "st.offsets"
    if kind == "text":
        text, sub = _text_mutation(rng, json.dumps(header))
        return join_safetensors(text.encode(), body), f"st.header.{sub}"
    if kind == "body" and body:
        mutated, sub = _bytes_mutation(rng, body, b"")
        return data[: len(data) - len(body)] + mutated, f"st.body.{sub}"
    tree, sub = _tree_mutation(rng, header)
    text = json.dumps(tree).encode()
    keep_length = rng.random() < 0.2
    return join_safetensors(text, body, len(data) - len(body) - 8 if keep_length else None), f"st.header.{sub}"


def _toml_mutation(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    text = data.decode()
    kind = rng.choice(("value", "value", "line", "deep", "table"))
    values = list(re.finditer(r"(?<== )\S+", text))
    if kind == "value" and values:
        m = rng.choice(values)
        new = rng.choice(("nan", "-nan", "inf", "-inf", "-1", "-0.0", "1.9", "true", "\"1e-6\"", "[1]", "{a = 1}",
                          "1e400", "1" * 30, "9223372036854775808", "0x10", "1e-320", "1_000", "2024-01-01",
                          _deep(100_000), "{" * 1000, "0", "4", "1e308"))
        return (text[:m.start()] + new + text[m.end():]).encode(), "toml.value"
    if kind == "line":
        line = rng.choice(("atol = 1", "ulps = 2.5", "bogus = 1", "[default]", "[tensors]", "tensors = 5",
                           "default = [1]", "[tensors.\"x\".deeper]", "atol = \"nan\"", "\x00", "a.b.c.d.e = 1"))
        lines = text.splitlines()
        lines.insert(rng.randrange(len(lines) + 1), line)
        return "\n".join(lines).encode(), "toml.line"
    if kind == "deep":
        return (text + "\nx = " + _deep(rng.choice((65, 1000, 100_000))) + "\n").encode(), "toml.deep"
    return text.replace("[default]",
                        rng.choice(("[default.default]", "[[default]]", "[default]\n[default]"))).encode(), \
        "toml.table"


def mutate(rng: random.Random, form: str, seed: Seed, others: list[Seed]) -> tuple[bytes, str]:
    """One mutant of ``seed`` and its mutation class; 1 to 3 mutations stacked."""
    data, classes = seed.data, []
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        try:
            if rng.random() < 0.25:
                data, kind = _bytes_mutation(rng, data, rng.choice(others).data)
            elif form in ("safetensors", "init"):
                data, kind = _safetensors_mutation(rng, data)
            elif form == "tolerances.toml":
                data, kind = _toml_mutation(rng, data)
            else:
                data, kind = _json_mutation(rng, data)
        except Exception:  # noqa: BLE001
            # the previous mutation left something this structured one cannot parse: mutate bytes instead
            data, kind = _bytes_mutation(rng, data, b"")
        classes.append(kind)
    return data, "+".join(classes)
