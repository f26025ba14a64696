"""The fast paths of the harness give the same answers as the plain ones.

Branch-free selection, literals typed like the output, comparison rules evaluated on the
differing elements only, the per-case reference memo, the prefetch thread and the remembered
case id exist for speed (benchmarks/bench_pipeline.py, section 3); each is checked here against
the straightforward computation it replaces.
"""
from __future__ import annotations

import platform
import sys
import threading
from dataclasses import replace

import numpy as np

from harness.spec.expr import COORDINATE_NAMES, LINEAR_INDEX
import pytest

import harness.reference.evaluate as reference
from harness.model.backend import Outputs
from harness.run.allocator import keep_freed_memory
from harness.generate.cases import case_from_arrays
from harness.model.descriptor import Case, TensorDesc
from harness.judge.diff import judge
from harness.spec.expr import EvalContext, _select, parse_formula
from harness.model.layout import pack_buffer
from harness.reference.prefetch import PREFETCH_MIN_ELEMENTS, start_reference
from harness.reference.evaluate import expected_for
from harness.spec.families import bound_variables, element_variables, formula_variables
from harness.spec.model import enum_members, struct_variables
from tests.helpers import SPECS

N = 5000  # above the size where the branch-free selection is used

TYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64"]


def _special_values(dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    width = dtype.itemsize * 8
    patterns = rng.integers(0, 2**63, N, dtype=np.uint64) % (1 << width) if width < 64 else rng.integers(0, 2**63, N, dtype=np.uint64) * 2 + 1
    values = patterns.astype(f"uint{width}").view(dtype)
    if dtype.kind == "f":  # NaN payloads, both zeros and infinities among random bit patterns
        values[:6] = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, -np.nan], dtype=dtype)
    return values


@pytest.mark.parametrize("type_name", TYPES)
def test_branch_free_select_matches_numpy_where_bit_for_bit(type_name):
    dtype = np.dtype(type_name)
    rng = np.random.default_rng(7)
    a, b = _special_values(dtype, rng), _special_values(dtype, rng)
    condition = rng.integers(0, 2, N).astype(bool)
    width = f"uint{dtype.itemsize * 8}"
    for x, y in [(a, b), (a, dtype.type(1)), (dtype.type(0), b), (dtype.type(1), dtype.type(0))]:
        got, want = _select(condition, x, y), np.where(condition, x, y)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert np.array_equal(got.view(width), want.view(width))


def test_select_falls_back_to_where_when_types_differ_or_condition_broadcasts():
    condition = np.array([True, False] * N)
    assert _select(condition, 1, np.zeros(2 * N, np.int8)).tolist() == np.where(condition, 1, np.zeros(2 * N, np.int8)).tolist()
    narrow = np.array([True])  # broadcasts against the values: np.where does it
    assert _select(narrow, np.arange(2 * N), np.zeros(2 * N, np.int64)).tolist() == list(range(2 * N))


def test_selected_literals_take_the_output_type_only_when_exact():
    formula = parse_formula("where(x < 0, -1, where(x > 0, 1, 0))")
    x32 = np.arange(-N, N, dtype=np.int32)
    narrowed = formula.evaluate(EvalContext(variables={"x": x32}, literal_dtype=np.int32))
    plain = formula.evaluate(EvalContext(variables={"x": x32}))
    assert narrowed.dtype == np.int32 and plain.dtype == np.int64  # the point: no int64 temporaries
    assert np.array_equal(narrowed, plain)
    x8 = np.arange(0, 256, dtype=np.uint8).repeat(40)  # -1 does not fit UINT8: left as a Python int
    assert np.array_equal(formula.evaluate(EvalContext(variables={"x": x8}, literal_dtype=np.uint8)),
                          formula.evaluate(EvalContext(variables={"x": x8})))


def _quantize_case(n: int = 64) -> tuple:
    spec = SPECS.operator("ELEMENT_WISE_QUANTIZE_LINEAR")
    rng = np.random.default_rng(3)
    x = (rng.integers(-300, 300, (2, n)) + 0.5).astype(np.float32) * np.float32(0.25)
    scale = np.array([[0.25], [0.5]], np.float32)  # per row: broadcast in the comparison expressions
    case = case_from_arrays(spec, "6.4", {"InputTensor": "FLOAT32", "ScaleTensor": "FLOAT32", "OutputTensor": "INT8"},
                            {"InputTensor": x, "ScaleTensor": np.broadcast_to(scale, x.shape)}, sizes=[2, n])
    return spec, case


def test_comparison_expressions_on_a_subset_equal_the_full_ones_indexed():
    spec, case = _quantize_case()
    expected = expected_for(spec, case)
    index = np.array([0, 5, 63, 64, 100, 127])
    assert np.array_equal(expected.ties("OutputTensor", index), expected.ties("OutputTensor").reshape(-1)[index])
    assert np.array_equal(expected.unspecified("OutputTensor", index), expected.unspecified("OutputTensor").reshape(-1)[index])
    hs = SPECS.operator("ACTIVATION_HARD_SIGMOID")
    values = np.linspace(-8, 8, 999, dtype=np.float32)
    hs_case = case_from_arrays(hs, "6.4", {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"}, {"InputTensor": values})
    hs_expected = expected_for(hs, hs_case)
    picks = np.array([1, 400, 998])
    everything = np.arange(values.size)
    up = np.nextafter(hs_expected.outputs["OutputTensor"].reshape(-1), np.float32(np.inf))
    on_subset = hs_expected.legal("OutputTensor", picks, up[picks])
    on_all = hs_expected.legal("OutputTensor", everything, up)
    assert np.array_equal(on_subset[0], on_all[0][picks]) and np.array_equal(on_subset[1], on_all[1][picks])


@pytest.mark.parametrize("sizes", [[1], [1, 1], [2, 1, 3]])
def test_one_ulp_off_output_passes_whatever_the_shape(sizes):
    """The atol expression, gathered on the differing elements, keeps their shape (a [1, 1]
    input once broadcast to two dimensions there)."""
    spec = SPECS.operator("ACTIVATION_HARD_SIGMOID")
    values = np.full(sizes, 0.3, np.float32)
    case = case_from_arrays(spec, "6.4", {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"}, {"InputTensor": values}, sizes=sizes)
    want = expected_for(spec, case).outputs["OutputTensor"]
    off = np.nextafter(want, np.float32(np.inf))
    buffers = {"OutputTensor": pack_buffer(off, case.descriptor.tensors["OutputTensor"], SPECS.catalog.dtype("FLOAT32"))}
    diff = judge(spec, case, Outputs(buffers), True)
    assert diff.status == "pass" and diff.mismatch_count == 0
    far = want + np.float32(0.01)  # far beyond one ULP and the atol: a mismatch in every element
    buffers = {"OutputTensor": pack_buffer(far, case.descriptor.tensors["OutputTensor"], SPECS.catalog.dtype("FLOAT32"))}
    diff = judge(spec, case, Outputs(buffers), True)
    assert diff.status == "mismatch" and diff.mismatch_count == values.size and diff.bad_mask.shape == tuple(sizes)
    assert diff.ulp_errors.min() > 1000 and diff.first[0].index == (0,) * len(sizes)


def test_tie_rounded_the_other_way_is_still_found_among_many_equal_elements():
    spec, case = _quantize_case(4096)
    expected = expected_for(spec, case).outputs["OutputTensor"].copy()
    ties = expected_for(spec, case).ties("OutputTensor")
    where = tuple(int(i) for i in np.argwhere(ties)[0])
    original = int(expected[where])
    expected[where] = original + 1 if original < 127 else original - 1
    buffers = {"OutputTensor": pack_buffer(expected, case.descriptor.tensors["OutputTensor"], SPECS.catalog.dtype("INT8"))}
    diff = judge(spec, case, Outputs(buffers), True)
    assert diff.status == "diverges-on-unspecified" and diff.tie_count == 1 and diff.first[0].index == where
    expected[where] = original + 3 if original < 100 else original - 3  # no tie: a mismatch there only
    buffers = {"OutputTensor": pack_buffer(expected, case.descriptor.tensors["OutputTensor"], SPECS.catalog.dtype("INT8"))}
    diff = judge(spec, case, Outputs(buffers), True)
    assert diff.status == "mismatch" and diff.mismatch_count == 1 and diff.bad_mask.sum() == 1 and diff.bad_mask[where]


def test_reference_is_computed_once_per_case_and_again_for_a_new_one(monkeypatch):
    calls = []
    real = reference._compute_expected
    monkeypatch.setattr(reference, "_compute_expected", lambda spec, case: calls.append(case) or real(spec, case))
    spec, case = _quantize_case()
    first = expected_for(spec, case)
    assert expected_for(spec, case) is first and len(calls) == 1
    copy = fresh_copy(case)
    assert expected_for(spec, copy) is not first and len(calls) == 2
    case.descriptor = case.descriptor.with_tensor("ZeroPointTensor", TensorDesc("INT8", [2, 64]))
    case.inputs = {**case.inputs, "ZeroPointTensor": bytes(128)}
    assert expected_for(spec, case) is not first and len(calls) == 3


def test_concurrent_askers_share_one_computation(monkeypatch):
    calls = []
    gate = threading.Event()
    real = reference._compute_expected

    def slow(spec, case):
        calls.append(case)
        gate.wait(5)
        return real(spec, case)
    monkeypatch.setattr(reference, "_compute_expected", slow)
    spec, case = _quantize_case()
    results = []
    threads = [threading.Thread(target=lambda: results.append(expected_for(spec, case))) for _ in range(4)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join(10)
    assert len(calls) == 1 and len(results) == 4 and all(r is results[0] for r in results)


def fresh_copy(case: Case) -> Case:
    return Case(case.descriptor, case.feature_level, dict(case.inputs))


def _blocking_prefetch(monkeypatch, gate: threading.Event):
    """Start a prefetch whose work waits for `gate`."""
    import harness.reference.prefetch as prefetch
    monkeypatch.setattr(prefetch, "_warm", lambda spec, case: gate.wait(30))
    spec = SPECS.operator("ELEMENT_WISE_SIGN")
    values = np.zeros(PREFETCH_MIN_ELEMENTS, np.float32)
    return start_reference(spec, case_from_arrays(spec, "6.4", {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"},
                                                  {"InputTensor": values}), "6.4")


def test_prefetch_only_for_large_valid_cases(monkeypatch):
    calls = []
    real = reference._compute_expected
    monkeypatch.setattr(reference, "_compute_expected", lambda spec, case: calls.append(case) or real(spec, case))
    spec = SPECS.operator("ELEMENT_WISE_SIGN")
    small = case_from_arrays(spec, "6.4", {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"}, {"InputTensor": np.ones(16, np.float32)})
    assert start_reference(spec, small, "6.4") is None
    big_values = np.linspace(-1, 1, PREFETCH_MIN_ELEMENTS, dtype=np.float32)
    big = case_from_arrays(spec, "6.4", {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"}, {"InputTensor": big_values})
    invalid = replace(big, descriptor=big.descriptor.with_tensor("OutputTensor", TensorDesc("INT8", [PREFETCH_MIN_ELEMENTS])))
    assert start_reference(spec, invalid, "6.4") is None
    future = start_reference(spec, big, "6.4")
    assert future is not None
    future.result(30)
    assert len(calls) == 1
    gate = threading.Event()
    blocker = _blocking_prefetch(monkeypatch, gate)
    assert blocker is not None and start_reference(spec, fresh_copy(big), "6.4") is None  # one in flight at most
    gate.set()
    blocker.result(30)
    assert np.array_equal(expected_for(spec, big).outputs["OutputTensor"], np.sign(big_values)) and len(calls) == 1


def test_case_id_is_remembered_and_follows_replacements():
    spec, case = _quantize_case()
    first = case.case_id
    assert case.case_id == first
    case.feature_level = "6.2"
    assert case.case_id != first
    case.feature_level = "6.4"
    assert case.case_id == first


def test_allocator_tuning_takes_effect_on_glibc_and_is_idempotent():
    took = keep_freed_memory()
    assert keep_freed_memory() == took
    if sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc":
        assert took


@pytest.mark.parametrize("operator", sorted(SPECS.operators))
def test_evaluation_in_place_never_writes_the_variables(operator):
    """The evaluator reuses its own temporaries (`_apply`); the bound inputs must stay untouched,
    so evaluating a formula twice gives the same result."""
    spec = SPECS.operator(operator)
    rng = np.random.default_rng(11)
    # (formula, the data type its tensors are given: a rule that applies to some types only gets one of them)
    formulas = [(spec.formula.expression, "FLOAT32")] + [(r.when, r.applies_to[0] if r.applies_to else "FLOAT32")
                                                         for r in spec.unspecified]
    for comparison in spec.comparison.values():
        formulas += [(f, "FLOAT32") for f in (comparison.atol, comparison.ties) if f is not None]
    family = spec.formula.family
    formulas += [(bound.atol, "FLOAT32") for bound in (family.params.get("bounds", {}) if family else {}).values()]
    variables = {var: rng.standard_normal(N) * 50 for var in spec.formula.inputs}
    # a family's facts about each element's group (unspecified rules) and its bound variables
    variables.update({name: rng.integers(0, 3, N) for name in element_variables(family.name if family else None)})
    variables.update({name: np.abs(rng.standard_normal(N)) * 50 for name in bound_variables(family.name if family else None)})
    # values a family computes for the formula (matmul's dot product `ab`)
    variables.update({name: rng.standard_normal(N) * 50 for name in formula_variables(family.name if family else None)})
    variables.update({name: rng.integers(0, 8, N) for name in (*COORDINATE_NAMES, LINEAR_INDEX)})  # element coordinates
    variables.update({name: np.float64(0.25) for name in spec.formula.attributes})
    variables.update({name: rng.standard_normal(N) for name in spec.formula.items})  # an array attribute's item per element
    variables.update({name: np.float64(0) for name in spec.formula.constants})  # the spec's constants (an output's midpoint)
    variables.update({"Min": -128, "Max": 127})
    variables.update(enum_members(spec.fields))
    variables.update({name: np.float64(0.25 if member else 1.0) for name, member in struct_variables(spec.attribute_fields).items()})
    snapshot = {k: np.array(v, copy=True) for k, v in variables.items()}
    for formula, data_type in formulas:
        ctx = EvalContext(variables=variables, tensor_types={f.name: data_type for f in spec.tensor_fields},
                          type_ranges=SPECS.catalog.type_ranges())
        if spec.formula.operands == "raw_bits" and formula is spec.formula.expression:
            continue  # bitnot() needs integer bits; covered by the reference vectors
        first = np.array(formula.evaluate(ctx), copy=True)
        second = formula.evaluate(ctx)
        assert np.array_equal(first, second, equal_nan=first.dtype.kind == "f"), formula.text
        for name, before in snapshot.items():
            assert np.array_equal(np.asarray(variables[name]), before, equal_nan=True), (formula.text, name)


def test_run_case_prefetches_for_other_backends_only(monkeypatch):
    """The reference backend computes the reference in its own call: a prefetch thread would only
    add a hand-off. Any other backend gets the reference started before its call."""
    import harness.run.case as suite
    from harness.model.backend import Capabilities
    from tests.helpers import REFERENCE

    started = []
    monkeypatch.setattr(suite, "start_reference", lambda spec, case, level: started.append(case))

    class Mirror:  # a backend that answers what the reference answers, but is not the reference
        name = "mirror"

        def capabilities(self) -> Capabilities:
            return Capabilities(validates_descriptors=True)

        def run(self, case):
            return REFERENCE.run(case)

    spec = SPECS.operator("ELEMENT_WISE_SIGN")
    case = case_from_arrays(spec, "6.4", {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"}, {"InputTensor": np.ones(8, np.float32)})
    assert suite.run_case(REFERENCE, spec, case, "valid").status == "pass" and started == []
    assert suite.run_case(Mirror(), spec, case, "valid").status == "pass" and started == [case]
