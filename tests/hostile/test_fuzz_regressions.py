"""Every crash and hang the fuzzer found in the readers (before they were made strict), kept as a case.

Each case names the site that crashed and rebuilds the smallest input that reached it. The
whole path a command takes must now end in one BurnsideError (one line, exit 2), quickly.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from burnside.compare import Tolerance, load_tolerances
from burnside.pipeline import compare_with_evidence
from burnside.diagnose import diagnose
from burnside.errors import BurnsideError
from burnside.trace import convert_trace, open_trace, write_trace
from burnside.trace.metadata import encode
from tests.core.conftest import a1_like_tensors, base_metadata

from .conftest import join, split

ADAM = {"name": "adam", "lr": 0.01, "betas": [0.9, 0.999], "eps": 1e-08, "weight_decay": 0.0,
        "weight_decay_kind": "l2", "amsgrad": False}


def _whole_path(path, tmp_path) -> BurnsideError:
    """open -> compare (both ways) -> diagnose -> convert; the BurnsideError that stops it."""
    reference = open_trace(write_trace(tmp_path / "reference.safetensors", a1_like_tensors(), base_metadata()))
    start = time.perf_counter()
    with pytest.raises(BurnsideError) as info:
        trace = open_trace(path)
        for a, b in ((reference, trace), (trace, reference)):
            diagnose(compare_with_evidence(a, b))
        convert_trace(path, tmp_path / ("back.json" if path.suffix != ".json" else "back.safetensors"))
    assert time.perf_counter() - start < 60, "took long enough to count as a hang"
    assert "\n" not in str(info.value)
    return info.value


def _safetensors(tmp_path, *, metadata: dict | None = None, raw: dict | None = None, header_text=None):
    """A real trace whose safetensors metadata (native values, or raw strings) or header text is replaced."""
    path = write_trace(tmp_path / "mutant.safetensors", a1_like_tensors(), base_metadata())
    n, header, body = split(path)
    if metadata is not None:
        header["__metadata__"] = encode(base_metadata() | metadata, "trace")
    if raw is not None:
        header["__metadata__"] |= raw
    text = json.dumps(header)
    if header_text is not None:
        text = header_text(text)
    path.write_bytes(join(text, body))
    return path


def _json(tmp_path, edit):
    path = write_trace(tmp_path / "mutant.json", a1_like_tensors(), base_metadata())
    doc = json.loads(path.read_text())
    text = edit(doc)
    path.write_text(text if isinstance(text, str) else json.dumps(doc))
    return path


# (crash site in the old readers, mutant, what the one line now says)
SAFETENSORS_CASES = [
    ("safetensors_file.py:59 RecursionError",
     dict(header_text=lambda t: t[:-1] + ', "x": ' + "[" * 1000 + "]" * 1000 + "}"),
     "nested 1001 levels deep"),
    ("safetensors_file.py:59 ValueError (5000-digit integer)",
     dict(header_text=lambda t: t[:-1] + ', "x": ' + "1" * 5000 + "}"),
     "an integer of 5000 digits"),
    ("safetensors_file.py:77 OverflowError (shape [1e400])",
     dict(header_text=lambda t: t.replace('"shape": []', '"shape": [1e400]', 1)), "number 1e400 is out of range"),
    ("safetensors_file.py:78 OverflowError (offsets 1e400)",
     dict(header_text=lambda t: t.replace('"data_offsets": [0, ', '"data_offsets": [1e400, ', 1)), "out of range"),
    ("safetensors_file.py:81 TypeError (dtype a list)",
     dict(header_text=lambda t: t.replace('"dtype": "F32"', '"dtype": ["F32"]', 1)), "not a dtype name"),
    ("names.py:62 ValueError (step index of 5000 digits)",
     dict(header_text=lambda t: t.replace('"step0.loss"', '"step' + "1" * 5000 + '.loss"', 1)),
     "beyond the 100000 steps"),
    ("trace.py:79 OverflowError (steps 1e400)", dict(raw={"steps": "1e400"}), "metadata 'steps' is not valid JSON"),
    ("trace.py:79 ValueError (steps a string)", dict(raw={"steps": '"sgd"'}), "'steps' must be an integer"),
    ("trace.py:79 TypeError (steps a list)", dict(raw={"steps": "[1]"}), "'steps' must be an integer"),
    ("trace.py:161 RecursionError (params nested)", dict(raw={"params": "[" * 100_000 + "]" * 100_000}),
     "nested 100000 levels deep"),
    ("trace.py:50 TypeError (params [[1]])", dict(metadata={"params": [[1]]}), "must be a string"),
    ("trace.py:50 TypeError (params [{}])", dict(metadata={"params": [{}]}), "must be a string"),
    ("trace.py:50 TypeError (params 1.5)", dict(metadata={"params": 1.5}), "must be a list of names"),
    ("evidence.py:31 TypeError (grads_len [{}])", dict(metadata={"grads_len": [{"a": 1}]}),
     "'grads_len' must be a list"),
    ("evidence.py:31 ValueError (grads_len strings)", dict(metadata={"grads_len": ["BF16"]}),
     "'grads_len' must be a list"),
    ("evidence.py:31 OverflowError (grads_len 1e400)", dict(raw={"grads_len": "[1e400]"}), "out of range"),
    ("json_file.py:88 ValueError (convert of lr -1e400)",
     dict(raw={"optimizer": json.dumps(ADAM).replace("0.01", "-1e400")}),
     "out of range"),
    ("d004_adam_epsilon.py:39 TypeError (eps an object)", dict(metadata={"optimizer": ADAM | {"eps": {"a": 1}}}),
     "optimizer.eps must be a finite number"),
    ("d005_optimizer_config.py:60 ValueError (weight_decay_kind a list)",
     dict(metadata={"optimizer": ADAM | {"weight_decay_kind": ["l2"]}}), "weight_decay_kind must be"),
    ("hang: steps 2^63", dict(raw={"steps": str(2**63)}), "'steps' must be an integer from 1 to 100000"),
    ("hang: steps 10^400", dict(raw={"steps": "1" + "0" * 400}), "an integer of 401 digits"),
    ("hang: steps 10^6", dict(metadata={"steps": 10**6}), "'steps' must be an integer from 1 to 100000"),
]


@pytest.mark.parametrize(("site", "mutant", "message"), SAFETENSORS_CASES, ids=[c[0] for c in SAFETENSORS_CASES])
def test_safetensors_crash_sites(tmp_path, site, mutant, message):
    error = _whole_path(_safetensors(tmp_path, **mutant), tmp_path)
    assert message in str(error), site


def _set_loss(doc, **spec):
    doc["tensors"]["step0.loss"] |= spec


JSON_CASES = [
    ("json_file.py:28 RecursionError", lambda d: json.dumps(d)[:-1] + ', "x": ' + "[" * 1000 + "]" * 1000 + "}",
     "nested 1001 levels deep"),
    ("json_file.py:53 TypeError (dtype an object)", lambda d: _set_loss(d, dtype={}), "not a dtype name"),
    ("json_file.py:71 OverflowError (I64 2^64)", lambda d: _set_loss(d, dtype="I64", data=[2**64]),
     "out of range for I64"),
    ("json_file.py:76 OverflowError (F32 of 309 digits)", lambda d: _set_loss(d, data=[2 * 10**308]),
     "out of range for F32"),
    ("d005_optimizer_config.py:60 OverflowError (a beta of 309 digits)",
     lambda d: d["metadata"].__setitem__("optimizer", ADAM | {"betas": [0.9, 2 * 10**308]}), "finite number"),
]


@pytest.mark.parametrize(("site", "edit", "message"), JSON_CASES, ids=[c[0] for c in JSON_CASES])
def test_json_crash_sites(tmp_path, site, edit, message):
    error = _whole_path(_json(tmp_path, edit), tmp_path)
    assert message in str(error), site


TOLERANCE_CASES = [
    ("tolerance.py:66 RecursionError (TOML nested)", "t.toml", "x = " + "[" * 100_000 + "]" * 100_000,
     "nested too deeply"),
    ("tolerance.py:62 UnicodeDecodeError", "t.toml", b"[default]\x96\n", "is not UTF-8"),
    ("tolerance.py:87 OverflowError (ulps = inf)", "t.toml", "[default]\nulps = inf\n", "ulps must be a whole number"),
    ("tolerance.py:66 ValueError (5000 digits)", "t.json", '{"default": {"atol": ' + "1" * 5000 + "}}", "5000 digits"),
    ("tolerance.py:85 OverflowError (atol of 310 digits)", "t.json", '{"default": {"atol": ' + "1" * 310 + "}}",
     "is not a finite number"),
    ("tolerance.py:86 OverflowError (rtol of 310 digits)", "t.json", '{"default": {"rtol": ' + "1" * 310 + "}}",
     "is not a finite number"),
]


@pytest.mark.parametrize(("site", "name", "text", "message"), TOLERANCE_CASES, ids=[c[0] for c in TOLERANCE_CASES])
def test_tolerance_crash_sites(tmp_path, site, name, text, message):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(BurnsideError, match=message):
        load_tolerances(path, Tolerance())


def test_convert_of_a_flipped_nan_payload_is_bit_for_bit(tmp_path):
    """The fuzzer's most frequent wrong result: a NaN's bits changed by a JSON round trip."""
    t = a1_like_tensors()
    t["step0.logits"] = t["step0.logits"].copy()
    t["step0.logits"].view(np.uint32)[0, :2] = [0xFFC00000, 0x7FA00001]
    st = write_trace(tmp_path / "a.safetensors", t, base_metadata())
    back = convert_trace(convert_trace(st, tmp_path / "b.json"), tmp_path / "c.safetensors")
    assert open_trace(back).array("step0.logits").tobytes() == t["step0.logits"].tobytes()
