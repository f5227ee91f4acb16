"""A real port (rust/cnn) fed hostile init files, run as `burnside check` runs it (`cnn --init INIT -o OUT`).

Each case corrupts the init file `export_init` writes for the CNN example: the port exits 1 with one
line `cnn: <the file and what is wrong>` on stderr, never a panic, and writes no trace (nor a
temporary file). The burn side's readers are fuzzed directly in
rust/burnside-trace/tests/hostile_readers.rs; this is the same classes through a built binary.
"""

from __future__ import annotations

import json
import struct
import subprocess
from pathlib import Path

import pytest

from burnside.examples import cnn
from burnside.torch import export_init


@pytest.fixture(scope="module")
def port(programs) -> Path:
    return programs.executables[cnn.BURN_BIN]


@pytest.fixture(scope="module")
def good_init(tmp_path_factory) -> bytes:
    path = export_init(*cnn.model_and_batch(), tmp_path_factory.mktemp("init") / "cnn.init.safetensors")
    return path.read_bytes()


def split(data: bytes) -> tuple[dict, bytes]:
    """The header (as a dict) and the data section of a safetensors file."""
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + n]), data[8 + n:]


def join(header: str | bytes, data: bytes) -> bytes:
    raw = header.encode() if isinstance(header, str) else header
    return struct.pack("<Q", len(raw)) + raw + data


def edited(data: bytes, edit) -> bytes:
    """`data` with its header passed through `edit(header_dict) -> header_dict | str`."""
    header, body = split(data)
    new = edit(header)
    return join(new if isinstance(new, str) else json.dumps(new), body)


def tensor(data: bytes, name: str, **fields) -> bytes:
    return edited(data, lambda h: {**h, name: {**h[name], **fields}})


def first_two(header: dict) -> tuple[str, str]:
    """The names of the first two tensors in offset order."""
    names = sorted((k for k in header if k != "__metadata__"), key=lambda k: header[k]["data_offsets"])
    return names[0], names[1]


def overlapping(header: dict) -> dict:
    a, b = first_two(header)
    start, end = header[b]["data_offsets"]
    header[b]["data_offsets"] = [start - 4, end - 4]
    return header


def duplicated(header: dict) -> str:
    text = json.dumps(header)
    a, _ = first_two(header)
    entry = json.dumps({a: header[a]})[1:-1]
    return text[:-1] + ", " + entry + "}"


def meta(**changes):
    def edit(header: dict) -> dict:
        header["__metadata__"] = {k: v for k, v in {**header["__metadata__"], **changes}.items() if v is not None}
        return header
    return edit


def huge_label(data: bytes) -> bytes:
    """`inputs.y` with a label no i32 holds (a bit flip in a label found this crash in the reader)."""
    header, body = split(data)
    start, end = header["inputs.y"]["data_offsets"]
    body = body[:start] + struct.pack("<q", 2**53) + body[start + 8:]
    return join(json.dumps(header), body)


def not_utf8(data: bytes) -> bytes:
    (n,) = struct.unpack("<Q", data[:8])
    at = 8 + data[8:8 + n].index(b"burnside.format")
    return data[:at] + b"\xff" + data[at + 1:]


CASES = {
    "truncated in the data": (lambda d: d[:-100], "truncated?"),
    "truncated in the header": (lambda d: d[:40], "truncated?"),
    "empty": (lambda d: b"", "0 bytes long, too short"),
    "bytes after the last tensor": (lambda d: d + b"\0" * 8, "bytes after the last tensor"),
    "header length beyond the file": (lambda d: struct.pack("<Q", len(d)) + d[8:], "but only"),
    "header length beyond any header": (lambda d: struct.pack("<Q", 2**63) + d[8:], "more than the 100000000"),
    "header not JSON": (lambda d: join("{" + "x" * 10, split(d)[1]), "the header is not JSON"),
    "header not UTF-8": (not_utf8, "not UTF-8"),
    "wrong dtype": (lambda d: tensor(d, "params.fc.weight", dtype="I32", shape=[3, 64]),
                    "tensor `params.fc.weight` has dtype I32; burnside-trace reads F32, F64, BF16, F16 and I64"),
    "BF16 words not the shape's": (lambda d: tensor(d, "params.fc.weight", dtype="BF16", shape=[3, 64]),
                                   "is BF16 [3, 64], 384 bytes, but its data_offsets"),
    "F16 words not the shape's": (lambda d: tensor(d, "params.fc.weight", dtype="F16", shape=[3, 63]),
                                  "is F16 [3, 63], 378 bytes, but its data_offsets"),
    "unknown dtype": (lambda d: tensor(d, "params.fc.weight", dtype="F33"),
                      "dtype `F33`, which is no safetensors dtype"),
    "1e15 elements claimed": (lambda d: tensor(d, "params.fc.weight", shape=[10**6, 10**9],
                                               data_offsets=[split(d)[0]["params.fc.weight"]["data_offsets"][0],
                                                             4 * 10**15
                                                             + split(d)[0]["params.fc.weight"]["data_offsets"][0]]),
                              "bytes of data but"),
    "element count overflows usize": (lambda d: tensor(d, "params.fc.weight", shape=[2**32, 2**32]),
                                      "more elements than memory can address"),
    "byte length not dtype x shape": (lambda d: tensor(d, "params.fc.weight", shape=[3, 63]), "but its data_offsets"),
    "overlapping offsets": (lambda d: edited(d, overlapping), "overlap tensor"),
    "duplicate key": (lambda d: edited(d, duplicated), "twice"),
    "no burnside.format": (lambda d: edited(d, meta(**{"burnside.format": None})), "`burnside.format` is missing"),
    "a trace, not an init file": (lambda d: edited(d, meta(**{"burnside.format": "trace"})), "expected `init`"),
    "wrong burnside.version": (lambda d: edited(d, meta(**{"burnside.version": "9"})), "burnside.version 9 is not one"),
    "non-string metadata": (lambda d: edited(d, meta(**{"burnside.version": 1})), "is a number, not a string"),
    "a label beyond burn's int dtype": (huge_label, "tensor `inputs.y`: element 0 is 9007199254740992"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_hostile_init_file_is_one_line_and_exit_1_from_the_port(port, good_init, tmp_path, case):
    mutate, words = CASES[case]
    init = tmp_path / "hostile.init.safetensors"
    init.write_bytes(mutate(good_init))
    out = tmp_path / "burn.safetensors"
    proc = subprocess.run([str(port), "--init", str(init), "-o", str(out)], capture_output=True, text=True,
                          timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1, proc.stderr
    assert "panicked at" not in proc.stderr
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"{port.name}: "), lines[0]
    assert words in lines[0], lines[0]
    if case != "a label beyond burn's int dtype":  # the reader's errors name the file
        assert str(init) in lines[0], lines[0]
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [init.name], "no partial output"


def test_wrong_names_are_refused_with_the_misfit_not_a_panic(port, good_init, tmp_path):
    renamed = edited(good_init, lambda h: {("params.head.weight" if k == "params.fc.weight" else k): v
                                           for k, v in h.items()})
    init = tmp_path / "renamed.init.safetensors"
    init.write_bytes(renamed)
    out = tmp_path / "burn.safetensors"
    proc = subprocess.run([str(port), "--init", str(init), "-o", str(out)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "panicked at" not in proc.stderr
    assert proc.stderr.startswith(f"{port.name}: {init}: the burn module does not fit this init file")
    assert "`fc.weight` -> `fc.weight` <- `head.weight`?" in proc.stderr
    assert not out.exists()


def test_the_unmutated_init_file_runs(port, good_init, tmp_path):
    """The cases above fail for what they change: the file they start from trains."""
    init = tmp_path / "good.init.safetensors"
    init.write_bytes(good_init)
    out = tmp_path / "burn.safetensors"
    proc = subprocess.run([str(port), "--init", str(init), "-o", str(out)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert out.is_file()
