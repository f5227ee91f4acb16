"""burnside compare on traces built for each case of the core issue's §3."""

from __future__ import annotations

import json

import numpy as np
import pytest

from burnside.examples.a1 import a1_arrays, a1_f32_arithmetic_inputs
from burnside.compare import Tolerance, Tolerances, compare_traces, diff_arrays
from burnside.compare.tensor_diff import CHUNK
from burnside.errors import TraceError
from burnside.trace import open_trace

from .conftest import a1_like_tensors, next_f32, run_cli


def _compare(write, a, b, **kw):
    return compare_traces(open_trace(write("a.safetensors", a)), open_trace(write("b.safetensors", b, "burn")), **kw)


def test_identical_traces_pass_with_zero_worst(write):
    t = a1_like_tensors()
    c = _compare(write, t, dict(t))
    assert c.passed
    assert c.worst == 0.0
    assert all(r.stats.identical for r in c.rows)
    assert c.first_divergence is None


def test_one_ulp_near_one_is_1_19e_7_and_within_1e_6(write):
    # The seed's worst: one f32 ulp near 1 (loss 1.14) is 1.19e-07, inside tol 1e-6.
    a = a1_like_tensors()
    b = dict(a)
    b["step0.loss"] = np.array(next_f32(a["step0.loss"]), dtype=np.float32)
    c = _compare(write, a, b)
    row = next(r for r in c.rows if r.name == "step0.loss")
    assert row.stats.max_ulps == 1
    assert row.stats.max_abs == pytest.approx(1.1920929e-07, rel=1e-6)
    assert c.passed
    assert f"{c.worst:.2e}" == "1.19e-07"


def test_out_of_tolerance_fails_and_names_first_divergence(write):
    a = a1_like_tensors()
    b = dict(a)
    g = a["step0.grads.fc1.weight"].copy()
    g[3, 2] += 1e-3
    b["step0.grads.fc1.weight"] = g
    pa = a["step0.params_after.fc2.bias"].copy()
    pa[1] += 1e-2
    b["step0.params_after.fc2.bias"] = pa
    c = _compare(write, a, b)
    assert not c.passed
    assert c.first_divergence.name == "step0.grads.fc1.weight"
    row = c.first_divergence
    assert row.worst_index == (3, 2)
    assert row.stats.out_of_tol == 1
    assert [r.name for r in c.failed_rows] == ["step0.grads.fc1.weight", "step0.params_after.fc2.bias"]


def test_f32_arithmetic_inputs_are_caught_before_outputs(write):
    # Seed S3: computing inputs in f32 makes 7 of 16 inputs differ by 1-3 ulps and fc1.bias[5] by 1 ulp.
    a = a1_like_tensors()
    b = dict(a)
    f32 = a1_f32_arithmetic_inputs()
    b["step0.inputs.x"] = f32["x"]
    b["step0.params_before.fc1.bias"] = f32["fc1.bias"]
    c = _compare(write, a, b)
    mismatch = {r.name: r for r in c.start_mismatch}
    assert set(mismatch) == {"step0.inputs.x", "step0.params_before.fc1.bias"}
    x = mismatch["step0.inputs.x"].stats
    assert x.differing == 7
    assert x.max_ulps in (1, 2, 3)
    bias = mismatch["step0.params_before.fc1.bias"].stats
    assert bias.differing == 1 and bias.max_ulps == 1
    assert mismatch["step0.params_before.fc1.bias"].worst_index == (5,)
    assert a1_arrays()["x"].reshape(-1)[3] == np.float32(-0.20000000298023224)
    assert f32["x"].reshape(-1)[3] == np.float32(-0.19999998807907104)
    assert not c.passed  # every row is within 1e-6, but the start is not bit-identical
    assert not c.failed_rows


def test_nan_at_same_place_is_equal_one_sided_is_failure_per_side(write):
    a = a1_like_tensors()
    b = dict(a)
    la, lb = a["step0.logits"].copy(), a["step0.logits"].copy()
    la[0, 0] = lb[0, 0] = np.nan
    lb[1, 1] = np.inf
    la[2, 2] = np.nan
    a["step0.logits"], b["step0.logits"] = la, lb
    c = _compare(write, a, b)
    row = next(r for r in c.rows if r.name == "step0.logits")
    assert row.stats.nonfinite_a_only == 1  # la[2,2]
    assert row.stats.nonfinite_b_only == 1  # lb[1,1]
    assert row.stats.out_of_tol == 2
    assert row.stats.differing == 2  # the shared NaN at [0,0] is equal
    assert not row.passed


def test_infinities_of_opposite_sign_differ():
    a = np.array([np.inf, 1.0], dtype=np.float32)
    b = np.array([-np.inf, 1.0], dtype=np.float32)
    s = diff_arrays(a, b, "F32", Tolerance())
    assert s.out_of_tol == 1 and s.worst_index == 0


def test_transposed_shape_is_a_structure_problem_with_hint_never_transposed(write):
    a = a1_like_tensors()
    b = dict(a)
    b["step0.grads.fc1.weight"] = np.ascontiguousarray(a["step0.grads.fc1.weight"].T)
    b["step0.loss"] = a["step0.loss"].astype(np.float64)
    c = _compare(write, a, b)
    problems = {p.name: p for p in c.structure}
    assert problems["step0.grads.fc1.weight"].what == "shape"
    assert "transpose" in problems["step0.grads.fc1.weight"].hint
    assert problems["step0.loss"].what == "dtype"
    assert "step0.grads.fc1.weight" not in {r.name for r in c.rows}
    assert not c.passed


def test_missing_names_are_listed_per_side(write):
    a = a1_like_tensors()
    b = dict(a)
    del b["step0.loss_after"]
    b["step0.optim.momentum_buffer.fc1.bias"] = np.zeros(8, np.float32)
    c = _compare(write, a, b)
    assert c.only_in_a == ["step0.loss_after"]
    assert c.only_in_b == ["step0.optim.momentum_buffer.fc1.bias"]
    assert not c.passed


def test_traces_with_nothing_in_common_are_unusable(write):
    with pytest.raises(TraceError, match="share no tensor names"):
        _compare(write, {"step0.loss": np.float32(1)}, {"step0.logits": np.zeros(2, np.float32)})


def test_rows_come_in_pipeline_order_step_by_step(write):
    t = a1_like_tensors()
    two = {**t, **{k.replace("step0.", "step1."): v for k, v in t.items()}}
    c = _compare(write, two, dict(two))
    stages = [(r.name.split(".")[0], r.stage) for r in c.rows]
    assert stages.index(("step0", "loss_after")) < stages.index(("step1", "inputs"))
    assert c.rows[0].name == "step0.inputs.x"
    names = [r.name for r in c.rows if r.stage == "grads" and r.name.startswith("step0")]
    assert names == [f"step0.grads.{p}" for p in ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")]


@pytest.mark.parametrize(("dtype", "np_dtype"), [("F64", np.float64), ("F32", np.float32), ("F16", np.float16)])
def test_ulps_are_counted_in_the_tensors_own_dtype(dtype, np_dtype):
    a = np.array([1.0, -2.0, 0.0], dtype=np_dtype)
    b = a.copy()
    b[0] = np.nextafter(np.nextafter(a[0], np_dtype(2)), np_dtype(2))  # 2 ulps up
    b[2] = -np.nextafter(np_dtype(0), np_dtype(1))  # smallest negative subnormal: 1 ulp from +0
    s = diff_arrays(a, b, dtype, Tolerance())
    assert s.max_ulps == 2
    assert s.differing == 2


def test_negative_zero_equals_zero_in_ulps():
    s = diff_arrays(np.array([0.0], np.float32), np.array([-0.0], np.float32), "F32", Tolerance())
    assert s.max_ulps == 0 and s.out_of_tol == 0 and s.differing == 1


def test_bf16_ulps_from_raw_bits():
    one = np.array([0x3F80], dtype=np.uint16)  # 1.0
    up3 = np.array([0x3F83], dtype=np.uint16)  # 3 bf16 ulps above (0.0078125 each)
    s = diff_arrays(one, up3, "BF16", Tolerance(atol=0.01))
    assert s.max_ulps == 3
    assert s.max_abs == pytest.approx(3 * 2**-7)
    assert s.out_of_tol == 1


def test_ulps_tolerance_accepts_elements_within_n_ulps():
    a = np.array([1e6], np.float32)
    b = np.array([next_f32(1e6, 2)], np.float32)  # 2 ulps = 0.125 at 1e6
    assert diff_arrays(a, b, "F32", Tolerance(atol=1e-6)).out_of_tol == 1
    assert diff_arrays(a, b, "F32", Tolerance(atol=1e-6, ulps=2)).out_of_tol == 0
    assert diff_arrays(a, b, "F32", Tolerance(atol=1e-6, rtol=1e-6)).out_of_tol == 0


def test_integer_tensors_must_be_equal():
    s = diff_arrays(np.array([0, 2, 1, 2]), np.array([0, 2, 2, 2]), "I64", Tolerance(atol=10))
    assert s.out_of_tol == 1 and s.worst_index == 2 and s.max_ulps is None


def test_large_tensor_walks_chunks_on_threads_and_finds_the_worst():
    n = 5 * CHUNK + 123
    a = np.linspace(-1, 1, n, dtype=np.float32)
    b = a.copy()
    b[4 * CHUNK + 7] += np.float32(0.5)
    b[CHUNK + 1] = np.nextafter(b[CHUNK + 1], np.float32(9))
    s = diff_arrays(a, b, "F32", Tolerance())
    assert s.worst_index == 4 * CHUNK + 7
    assert s.differing == 2
    assert s.out_of_tol == 1
    assert s.max_abs == pytest.approx(0.5, abs=1e-6)


def test_per_tensor_tolerances_from_a_file(tmp_path, write):
    from burnside.compare import load_tolerances

    a = a1_like_tensors()
    b = dict(a)
    b["step0.logits"] = a["step0.logits"] + np.float32(1e-4)
    spec = tmp_path / "tol.toml"
    spec.write_text('[default]\natol = 1e-6\n[tensors."*.logits"]\natol = 1e-3\n')
    tolerances = load_tolerances(spec, Tolerance())
    assert _compare(write, a, b, tolerances=tolerances).passed
    assert not _compare(write, a, b, tolerances=Tolerances()).passed


def test_only_glob_restricts_rows(write):
    t = a1_like_tensors()
    c = _compare(write, t, dict(t), only="grads.*")
    assert {r.stage for r in c.rows} == {"grads"}


# --- the command itself: table, exit codes, JSON ---------------------------------------------

def test_cli_table_reads_like_the_seed_and_exits_0(write):
    t = a1_like_tensors()
    b = dict(t)
    b["step0.loss"] = np.array(next_f32(t["step0.loss"]), np.float32)
    proc = run_cli("compare", str(write("a.json", t)), str(write("b.safetensors", b, "burn")))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    loss = next(line for line in lines if line.startswith("loss "))
    assert "n=  1" in loss and "max|diff|=1.19e-07" in loss and "ulps=  1" in loss
    assert any(line.startswith("grads.fc1.weight") and "n= 32" in line for line in lines)
    assert lines[-1] == "worst=1.19e-07 tol=1e-06 OK"


def test_cli_mismatch_exits_1_and_json_has_everything(write):
    t = a1_like_tensors()
    b = dict(t)
    b["step0.logits"] = t["step0.logits"] + np.float32(0.01)
    a_path, b_path = write("a.safetensors", t), write("b.safetensors", b, "burn")
    proc = run_cli("compare", str(a_path), str(b_path))
    assert proc.returncode == 1
    assert "FAIL" in proc.stdout.splitlines()[-2] or "FAIL" in proc.stdout
    assert "first divergence: step0.logits" in proc.stdout
    proc = run_cli("compare", str(a_path), str(b_path), "--json")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 1
    assert doc["passed"] is False and doc["first_divergence"] == "step0.logits"
    row = next(r for r in doc["tensors"] if r["name"] == "step0.logits")
    assert row["out_of_tol"] == 12 and row["max_ulps"] > 0 and len(row["worst_index"]) == 2


def _reference_stats(a: np.ndarray, b: np.ndarray, atol: float):
    """The obvious, slow definition: exact |a-b| in f64, ULPs via Python integers."""
    bits = {np.float32: (np.int32, 31), np.float64: (np.int64, 63)}[a.dtype.type]
    ia, ib = a.view(bits[0]).astype(object), b.view(bits[0]).astype(object)

    def key(v):
        return -(v & ((1 << bits[1]) - 1)) if v < 0 else v

    ulps = [abs(key(x) - key(y)) for x, y in zip(ia, ib, strict=True)]
    diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
    return int(np.count_nonzero(ia != ib)), float(diff.max()), max(ulps), int(np.count_nonzero(diff > atol))


@pytest.mark.parametrize("np_dtype", [np.float32, np.float64])
@pytest.mark.parametrize("spread", ["ulps", "signs", "bound"])
def test_dense_chunks_agree_with_the_slow_definition(np_dtype, spread):
    rng = np.random.default_rng(7)
    n = 3 * CHUNK + 17  # several chunks on the threads, and a short last one
    a = (rng.standard_normal(n) * 1e-3).astype(np_dtype)
    if spread == "ulps":  # every element a few ULPs away
        b = a.view(np.int32 if np_dtype is np.float32 else np.int64) + rng.integers(-5, 6, n).astype(
            np.int32 if np_dtype is np.float32 else np.int64)
        b = b.view(np_dtype)
    elif spread == "signs":  # values around zero, many crossing it, and -0 against +0
        b = (a + (rng.standard_normal(n) * 1e-3).astype(np_dtype)).astype(np_dtype)
        a[:10], b[:10] = np_dtype(0.0), np_dtype(-0.0)
    else:  # differences right at the tolerance, where f32 rounding of |a-b| matters
        a = rng.uniform(-1, 1, n).astype(np_dtype)
        b = (a.astype(np.float64) + rng.choice([-1, 1], n) * 1e-6 * rng.uniform(0.999999, 1.000001, n)).astype(np_dtype)
    stats = diff_arrays(a, b, "F32" if np_dtype is np.float32 else "F64", Tolerance(atol=1e-6))
    differing, max_abs, max_ulps, out = _reference_stats(a, b, 1e-6)
    assert stats.differing == differing
    assert stats.max_abs == max_abs
    assert stats.max_ulps == max_ulps
    assert stats.out_of_tol == out
    assert abs(float(a[stats.worst_index]) - float(b[stats.worst_index])) == max_abs


def test_the_verdict_shows_the_tolerances_actually_used(tmp_path, write):
    a = a1_like_tensors()
    b = dict(a)
    x = a["step0.inputs.x"].copy()
    x[0, 0] += np.float32(0.5)
    b["step0.inputs.x"] = x
    spec = tmp_path / "tol.toml"
    spec.write_text('[tensors."*.inputs.*"]\natol = 5\n[tensors."*.never.*"]\natol = 1\n')
    proc = run_cli("compare", str(write("a.safetensors", a)), str(write("b.safetensors", b, "burn")),
                   "--tolerances", str(spec))
    verdict = next(line for line in proc.stdout.splitlines() if line.startswith("worst="))
    # inputs must still be bit-identical (a failed start), but the line names both tolerances used
    assert verdict == "worst=5.00e-01 tol=1e-06, *.inputs.*: tol=5 FAIL"
    doc = json.loads(run_cli("compare", str(tmp_path / "a.safetensors"), str(tmp_path / "b.safetensors"),
                             "--tolerances", str(spec), "--json").stdout)
    assert doc["tolerances"] == [{"glob": None, "atol": 1e-6, "rtol": 0.0, "ulps": None},
                                 {"glob": "*.inputs.*", "atol": 5.0, "rtol": 0.0, "ulps": None}]


def _exact_reference(a: np.ndarray, b: np.ndarray, atol: float, rtol: float, ulps: int | None) -> int:
    """Out-of-tolerance count by the slow, exact definition: rationals and Python-integer ULPs."""
    from fractions import Fraction

    bits = {np.float32: (np.int32, 31), np.float64: (np.int64, 63)}[a.dtype.type]
    ia, ib = a.view(bits[0]).astype(object), b.view(bits[0]).astype(object)

    def key(v):
        return -(v & ((1 << bits[1]) - 1)) if v < 0 else v

    out = 0
    for x, y, kx, ky in zip(a.tolist(), b.tolist(), ia, ib, strict=True):
        too_far = abs(Fraction(x) - Fraction(y)) > Fraction(atol) + Fraction(rtol) * abs(Fraction(y))
        if too_far and (ulps is None or abs(key(kx) - key(ky)) > ulps):
            out += 1
    return out


@pytest.mark.parametrize("np_dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("atol", "rtol", "ulps"), [(1e-6, 0.0, None), (1e-7, 1e-6, None), (0.0, 0.0, 3),
                                                    (1e-7, 1e-6, 2)])
def test_out_of_tolerance_matches_the_exact_definition_for_atol_rtol_and_ulps(np_dtype, atol, rtol, ulps):
    rng = np.random.default_rng(11)
    n = 20_000
    a = rng.uniform(-2, 2, n).astype(np_dtype)
    scale = atol + rtol * np.abs(a.astype(np.float64))
    b = (a.astype(np.float64) + rng.choice([-1, 1], n) * scale * rng.uniform(0.99999, 1.00001, n)).astype(np_dtype)
    step = np.int32 if np_dtype is np.float32 else np.int64
    b[:200] = (a[:200].view(step) + rng.integers(-5, 6, 200).astype(step)).view(np_dtype)  # a few ULPs
    stats = diff_arrays(a, b, "F32" if np_dtype is np.float32 else "F64", Tolerance(atol=atol, rtol=rtol, ulps=ulps))
    assert stats.out_of_tol == _exact_reference(a, b, atol, rtol, ulps)


def test_tensors_recorded_under_other_names_are_named_from_what_b_holds(write):
    """B records a norm's `gamma`/`beta` and an unknown `fc2.b` where A says `weight`/`bias`: each start tensor
    is named after A's tensor whose bytes it holds, and every stage naming the parameter follows (a correct
    port does not fail for a naming difference); the renames are said in one line."""
    a = a1_like_tensors()
    a |= {f"step0.{stage}.bn.{p}": np.full(3, 1.0 if p == "weight" else 0.5, np.float32)
          for stage in ("params_before", "grads", "params_after") for p in ("weight", "bias")}
    b = {k.replace("bn.weight", "bn.gamma").replace("bn.bias", "bn.beta"): v for k, v in a.items()}
    b = {k.replace("fc2.bias", "fc2.b"): v for k, v in b.items()}
    c = _compare(write, a, b)
    assert c.only_in_a == c.only_in_b == []
    assert c.renamed == {"bn.weight": "bn.gamma", "bn.bias": "bn.beta", "fc2.bias": "fc2.b"}
    assert {"step0.grads.bn.weight", "step0.params_after.fc2.bias"} <= {r.name for r in c.rows}
    proc = run_cli("compare", str(write("a.safetensors", a)), str(write("b.safetensors", b, "burn")))
    assert proc.returncode == 0, proc.stdout
    assert "named from what B loaded: 3 of B's tensors" in proc.stdout
    assert not any(line.startswith(("only in", "named differently")) for line in proc.stdout.splitlines())


def test_a_tensor_holding_other_values_under_another_name_is_still_listed(write):
    """Names are paired by what B holds: B's `fc2.b` holding values A has nowhere stays a tensor only in B."""
    a = a1_like_tensors()
    b = {k.replace("fc2.bias", "fc2.b"): (v + np.float32(1.0) if "fc2.bias" in k else v) for k, v in a.items()}
    proc = run_cli("compare", str(write("a.safetensors", a)), str(write("b.safetensors", b, "burn")))
    assert proc.returncode == 1
    assert "named from what B loaded" not in proc.stdout


def test_first_diverging_layer_is_named_with_its_class_and_agreeing_input(write):
    a = a1_like_tensors()
    rng = np.random.default_rng(3)
    layers = {"embed": "Embedding", "ln1": "LayerNorm", "attn.q": "Linear", "ln2": "LayerNorm", "head": "Linear"}
    for module in layers:
        a[f"step0.activations.{module}"] = rng.standard_normal((4, 3)).astype(np.float32)
    b = {k: v for k, v in a.items() if k != "step0.activations.attn.q"}  # the port taps fewer layers
    b["step0.activations.ln2"] = a["step0.activations.ln2"] + np.float32(1e-3)  # wrong epsilon, say
    b["step0.logits"] = a["step0.logits"] + np.float32(1e-3)
    meta = {"activations": list(layers), "modules": layers}
    proc = run_cli("compare", str(write("a.safetensors", a, **meta)),
                   str(write("b.safetensors", b, "burn", activations=[m for m in layers if m != "attn.q"])))
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    first = next(line for line in lines if line.startswith("first divergence"))
    assert first.startswith("first divergence: step0.activations.ln2 (LayerNorm, the layer before it, "
                            "step0.activations.ln1, agrees)")
    assert "not recorded in B (optional, not compared): 1 activations tensor: activations.attn.q" in proc.stdout
    assert not any(line.startswith("only in") for line in lines)  # an untapped layer is not a failure
    rows = [line.split()[0] for line in lines if line.startswith("activations.")]
    assert rows == ["activations.embed", "activations.ln1", "activations.ln2", "activations.head"]  # execution order


def test_junit_has_a_case_per_tensor_and_a_failure_per_diverging_one(tmp_path, write):
    import xml.etree.ElementTree as ET

    a = a1_like_tensors()
    b = dict(a)
    b["step0.logits"] = a["step0.logits"] + np.float32(0.01)
    b["step0.loss"] = a["step0.loss"] + np.float32(0.01)
    xml_path = tmp_path / "parity.xml"
    proc = run_cli("compare", str(write("a.safetensors", a)), str(write("b.safetensors", b, "burn")),
                   "--junit", str(xml_path))
    assert proc.returncode == 1
    suite = ET.parse(xml_path).getroot().find("testsuite")
    cases = suite.findall("testcase")
    assert int(suite.get("tests")) == len(cases) == len(a)
    failed = [c.get("name") for c in cases if c.find("failure") is not None]
    assert failed == ["step0.logits", "step0.loss"] and suite.get("failures") == "2"
    assert "first divergence: step0.logits" in suite.find("system-out").text


def test_a_layer_tapped_under_another_name_is_pointed_out(write):
    """A port's `tap.activation("fc_1", ..)` for PyTorch's `fc1` compares nothing for that layer: say so."""
    tensors = a1_like_tensors()
    out = np.ones((4, 8), dtype=np.float32)
    a = write("a.safetensors", tensors | {"step0.activations.fc1": out}, activations=["fc1"])
    b = write("b.safetensors", tensors | {"step0.activations.fc_1": out}, framework="burn", activations=["fc_1"])
    proc = run_cli("compare", str(a), str(b))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ('tapped under another name? A records the layer fc1, B fc_1 (1 step(s)), so it is not compared: '
            'name the tap by the PyTorch module\'s path, tap.activation("fc1", &x)') in proc.stdout
