"""Valid traces to break, and the raw pieces of their files."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from burnside.trace import write_trace
from tests.core.conftest import a1_like_tensors, base_metadata


@pytest.fixture
def st_path(tmp_path: Path) -> Path:
    """A valid one-step safetensors trace."""
    return write_trace(tmp_path / "t.safetensors", a1_like_tensors(), base_metadata())


@pytest.fixture
def json_path(tmp_path: Path) -> Path:
    """The same trace in the JSON form."""
    return write_trace(tmp_path / "t.json", a1_like_tensors(), base_metadata())


def split(path: Path) -> tuple[int, dict, bytes]:
    """(header length, header object, data area) of a safetensors file."""
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    return n, json.loads(data[8:8 + n]), data[8 + n:]


def join(header: dict | str, body: bytes, length: int | None = None) -> bytes:
    """A safetensors file from a header (object or raw text), padded to 8 bytes like the writers do."""
    text = (header if isinstance(header, str) else json.dumps(header)).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text) if length is None else length) + text + body


def edit_metadata(path: Path, **metadata) -> None:
    """Rewrite a safetensors file's metadata keys in place (a value of None removes the key)."""
    _, header, body = split(path)
    for key, value in metadata.items():
        if value is None:
            header["__metadata__"].pop(key, None)
        else:
            header["__metadata__"][key] = value
    path.write_bytes(join(header, body))


def tiny_tensors() -> dict[str, np.ndarray]:
    """A one-step trace small enough to spell out in a test."""
    return {"step0.loss": np.array(1.5, np.float32), "step0.inputs.y": np.array([1, 2], np.int64)}


def tiny_metadata(**overrides) -> dict:
    """Valid metadata for tiny_tensors, with some keys replaced."""
    meta = base_metadata()
    meta["params"] = []
    meta["grads_len"] = [0]
    return meta | overrides
