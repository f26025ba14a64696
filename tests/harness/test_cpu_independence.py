"""The reference gives the same bits for the same case on every machine, whatever SIMD level NumPy
dispatches to (AVX-512, AVX2, the baseline).

NumPy's float64 transcendental functions are vectorised per CPU: their last bits, and the sign of
an out-of-domain NaN (arccos(2) is -NaN under AVX-512 and +NaN on the baseline), depend on the
path. harness.reference.rounding makes the reference independent of it: computed NaNs are
canonical, and results near a rounding boundary of the output type are decided exactly. This file
proves it by running the reference under two SIMD levels of one machine (NPY_DISABLE_CPU_FEATURES
switches NumPy's dispatch off in a subprocess), and checks both mechanisms against independent
values (mpmath, hand-written bit patterns).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import mpmath
import numpy as np
import pytest

from harness.generate.cases import case_from_arrays
from harness.model.descriptor import TensorDesc
from harness.reference.evaluate import expected_for
from tests.helpers import SPECS, run_reference

ROOT = Path(__file__).resolve().parents[2]
F32 = {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"}


def dispatched_features() -> list[str]:
    """The CPU features NumPy dispatches to on this machine beyond its compiled baseline: what
    NPY_DISABLE_CPU_FEATURES can switch off (empty on a CPU with nothing beyond the baseline)."""
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    return [name for name in __cpu_dispatch__ if __cpu_features__.get(name)]


def _reference_bits(tmp_path: Path, label: str, disable: list[str]) -> tuple[dict[str, str], Path]:
    env = {k: v for k, v in os.environ.items() if k != "NPY_DISABLE_CPU_FEATURES"}
    if disable:
        env["NPY_DISABLE_CPU_FEATURES"] = " ".join(disable)
    out = tmp_path / f"{label}.npz"
    proc = subprocess.run([sys.executable, "-m", "tests.harness.reference_bits", str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), out


def _first_difference(a_path: Path, b_path: Path, key: str) -> str:
    a, b = np.load(a_path), np.load(b_path)
    x, y = a[key.replace("/", "|")], b[key.replace("/", "|")]
    bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[x.itemsize]
    where = np.flatnonzero(x.view(bits) != y.view(bits))
    i = int(where[0])
    inputs = {k.split("|")[-1]: a[k] for k in a.files if k.startswith(key.replace("/", "|") + "|input|")}
    return (f"{key}: {where.size} element(s) differ; first at {i}: {x[i]!r} ({int(x.view(bits)[i]):#x}) with all "
            f"features vs {y[i]!r} ({int(y.view(bits)[i]):#x}) without; input bytes at {i}: "
            + ", ".join(f"{n} {v[i * x.itemsize:(i + 1) * x.itemsize].tobytes().hex()}" for n, v in inputs.items()))


def test_reference_bits_do_not_depend_on_numpy_simd_level(tmp_path):
    """Every transcendental element-wise operator (and REDUCE's logarithmic functions) at FLOAT32 and
    FLOAT16, over 2^16 random and special inputs each: the same output bits with NumPy's dispatched
    SIMD paths on and off."""
    features = dispatched_features()
    if not features:
        pytest.skip("this CPU has no NumPy dispatch target beyond the compiled baseline: only one SIMD path to run")
    with_simd, a = _reference_bits(tmp_path, "with", [])
    without, b = _reference_bits(tmp_path, "without", features)
    assert set(with_simd) == set(without)
    assert len(with_simd) >= 2 * 31, sorted(with_simd)  # every such operator of the specs, both float types
    differing = sorted(k for k in with_simd if with_simd[k] != without[k])
    assert not differing, f"reference bits differ with {' '.join(features)} off:\n" + "\n".join(
        _first_difference(a, b, k) for k in differing)


def _f32_bits(values: np.ndarray) -> list[int]:
    return [int(v) for v in np.asarray(values, dtype=np.float32).view(np.uint32)]


def test_computed_nans_are_canonical():
    """acos(2), asin(-3), log(-1), atanh(2): a computed NaN is 0x7FC00000 (D3D: any NaN is legal,
    the judge ignores payloads), whatever sign NumPy's path gave it."""
    x = np.array([2.0, -3.0, 1.5], np.float32)
    for op in ("ELEMENT_WISE_ACOS", "ELEMENT_WISE_ASIN", "ELEMENT_WISE_ATANH"):
        assert _f32_bits(run_reference(op, F32, {"InputTensor": x})) == [0x7FC00000] * 3, op
    assert _f32_bits(run_reference("ELEMENT_WISE_LOG", F32, {"InputTensor": -np.abs(x)})) == [0x7FC00000] * 3


def test_a_nan_input_to_arithmetic_comes_out_canonical():
    """-NaN with a payload into EXP: the result is a computed NaN, written canonical."""
    x = np.array([0xFFC12345, 0x7F800001], np.uint32).view(np.float32)
    assert _f32_bits(run_reference("ELEMENT_WISE_EXP", F32, {"InputTensor": x})) == [0x7FC00000, 0x7FC00000]


def test_data_movement_keeps_nan_payloads():
    """ELEMENT_WISE_IF compares bit for bit (kind: bitwise): its NaNs are data, moved as they are."""
    a = np.array([0xFFC12345, 0x7F800001], np.uint32).view(np.float32)
    b = np.zeros(2, np.float32)
    types = {"ConditionTensor": "UINT8", "ATensor": "FLOAT32", "BTensor": "FLOAT32", "OutputTensor": "FLOAT32"}
    out = run_reference("ELEMENT_WISE_IF", types, {"ConditionTensor": np.ones(2, np.uint8), "ATensor": a, "BTensor": b})
    assert _f32_bits(out) == [0xFFC12345, 0x7F800001]


def _nearest_f32(value: mpmath.mpf) -> int:
    """The float32 nearest to an mpmath value (ties to even), found independently of the harness:
    the two float32 neighbours of its float64 approximation compared exactly."""
    guess = np.float32(float(value))
    sign, man, exp, _ = mpmath.mpf(value)._mpf_  # (mpmath's man_exp drops the sign)
    exact = (-1 if sign else 1) * Fraction(int(man)) * Fraction(2) ** int(exp)
    best = None
    for c in (np.nextafter(guess, np.float32(-np.inf)), guess, np.nextafter(guess, np.float32(np.inf))):
        distance = abs(Fraction(float(c)) - exact)
        key = (distance, int(np.float32(c).view(np.uint32)) & 1)
        if best is None or key < best[0]:
            best = (key, int(np.float32(c).view(np.uint32)))
    assert best is not None
    return best[1]


@pytest.mark.parametrize("op,function", [("ELEMENT_WISE_EXP", mpmath.exp), ("ELEMENT_WISE_SIN", mpmath.sin),
                                         ("ELEMENT_WISE_TANH", mpmath.tanh), ("ELEMENT_WISE_ERF", mpmath.erf)])
def test_transcendentals_are_correctly_rounded(op, function):
    """2,000 random float32 inputs: each output is the float32 nearest to the exact value (mpmath at
    200 bits), so no SIMD path's float64 error can show."""
    rng = np.random.default_rng(29)
    x = rng.uniform(-10, 10, 2000).astype(np.float32)
    got = _f32_bits(run_reference(op, F32, {"InputTensor": x}))
    with mpmath.workprec(200):
        want = [_nearest_f32(function(mpmath.mpf(float(v)))) for v in x]
    assert got == want


def test_log_sum_exp_is_correctly_rounded():
    """REDUCE LOG_SUM_EXP over 500 groups of 4: log(sum(exp(x))) rounded once (mpmath at 200 bits)."""
    spec = SPECS.operator("REDUCE")
    rng = np.random.default_rng(30)
    x = rng.uniform(-20, 20, (500, 4)).astype(np.float32)
    layouts = {"InputTensor": TensorDesc("FLOAT32", [500, 4]), "OutputTensor": TensorDesc("FLOAT32", [500, 1])}
    case = case_from_arrays(spec, "6.4", {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"}, {"InputTensor": x},
                            layouts=layouts, attributes={"Function": spec.field("Function").enum["LOG_SUM_EXP"], "Axes": [1]})
    got = _f32_bits(expected_for(spec, case).outputs["OutputTensor"].reshape(-1))
    with mpmath.workprec(200):
        want = [_nearest_f32(mpmath.log(mpmath.fsum(mpmath.exp(mpmath.mpf(float(v))) for v in row))) for row in x]
    assert got == want


@pytest.mark.parametrize("op", ["ELEMENT_WISE_SIN", "ELEMENT_WISE_TANH", "ELEMENT_WISE_ATAN", "ELEMENT_WISE_ASINH",
                                "ELEMENT_WISE_ASIN", "ELEMENT_WISE_SINH", "ELEMENT_WISE_TAN"])
def test_negative_results_decided_exactly_keep_their_sign(op):
    """Hand-checked: for a denormal x (|x| < 2^-126) each of these functions is x (1 + O(x^2)), and
    x^2 < 2^-252 is far below half an ULP, so the correctly rounded result is x itself, sign
    included. Every output in the subnormal range goes through the exact path: it gave +|x| for a
    negative x (mpmath's man_exp is the magnitude's) before harness.spec.functions read the sign."""
    x = np.array([0x80000001, 0x800F4240, 0x807FFFFF, 0x00000001, 0x000F4240], np.uint32).view(np.float32)
    assert _f32_bits(run_reference(op, F32, {"InputTensor": x})) == _f32_bits(x)
