"""The family references through the judge: what a device may legally do to an index-space
operator, and what it may not. Values are hand-checked; the backend outputs are built by hand."""
import numpy as np

from harness.generate.cases import case_from_arrays
from harness.judge.diff import judge
from harness.model.backend import Outputs
from harness.model.descriptor import TensorDesc
from harness.model.layout import output_buffers
from tests.helpers import SPECS


def _case(op, types, sizes, inputs, attributes):
    spec = SPECS.operator(op)
    layouts = {n: TensorDesc(t, list(sizes[n])) for n, t in types.items()}
    values = {n: np.asarray(v).astype(SPECS.catalog.dtype(types[n]).numpy).reshape(sizes[n]) for n, v in inputs.items()}
    return spec, case_from_arrays(spec, "6.4", types, values, attributes=attributes, layouts=layouts)


def _judge(spec, case, outputs):
    arrays = {n: np.asarray(v).astype(SPECS.catalog.dtype(case.descriptor.tensors[n].data_type).numpy).reshape(case.descriptor.tensors[n].sizes)
              for n, v in outputs.items()}
    return judge(spec, case, Outputs(output_buffers(spec, case, arrays)), backend_validates=True)


def test_argmax_over_a_flushed_denormal_is_legal_and_named():
    # [+0, 1e-45]: exactly, 1e-45 is the largest (index 1); a device that flushes fp32 denormal
    # inputs sees [+0, +0] and returns the first of equal maxima (index 0): legal, liberty named.
    spec, case = _case("ARGMAX", {"InputTensor": "FLOAT32", "OutputTensor": "UINT32"}, {"InputTensor": [2], "OutputTensor": [1]},
                       {"InputTensor": [0.0, 1.0e-45]}, {"Axes": [0], "AxisDirection": 0.0})
    assert _judge(spec, case, {"OutputTensor": [1]}).status == "pass"
    flushed = _judge(spec, case, {"OutputTensor": [0]})
    assert flushed.status == "pass" and flushed.legal_count == 1 and flushed.liberties, flushed.summary
    wrong = _judge(spec, case, {"OutputTensor": [2]})
    assert wrong.status == "mismatch"


def test_argmax_group_with_a_nan_is_unspecified_and_others_are_still_judged():
    spec, case = _case("ARGMAX", {"InputTensor": "FLOAT32", "OutputTensor": "UINT32"}, {"InputTensor": [2, 2], "OutputTensor": [2, 1]},
                       {"InputTensor": [np.nan, 1.0, 3.0, 2.0]}, {"Axes": [1], "AxisDirection": 0.0})
    assert _judge(spec, case, {"OutputTensor": [0, 0]}).status == "diverges-on-unspecified"  # row 0 holds the NaN
    assert _judge(spec, case, {"OutputTensor": [1, 1]}).status == "mismatch"                 # row 1 is [3, 2]: 0


def test_top_k_compares_both_outputs():
    # [3, 1, 2, 5], K 2, DECREASING: values [5, 3], indices [3, 0].
    types = {"InputTensor": "FLOAT32", "OutputValueTensor": "FLOAT32", "OutputIndexTensor": "UINT32"}
    sizes = {"InputTensor": [4], "OutputValueTensor": [2], "OutputIndexTensor": [2]}
    spec, case = _case("TOP_K1", types, sizes, {"InputTensor": [3.0, 1.0, 2.0, 5.0]}, {"Axis": 0.0, "K": 2.0, "AxisDirection": 1.0})
    good = _judge(spec, case, {"OutputValueTensor": [5.0, 3.0], "OutputIndexTensor": [3, 0]})
    assert good.status == "pass" and "OutputValueTensor" in good.summary and "OutputIndexTensor" in good.summary
    bad = _judge(spec, case, {"OutputValueTensor": [5.0, 3.0], "OutputIndexTensor": [3, 2]})
    assert bad.status == "mismatch" and bad.output == "OutputIndexTensor" and bad.mismatch_count == 1


def test_data_movement_must_not_flush_a_denormal():
    # Copying is not arithmetic: D3D forbids altering moved data, so no liberty applies.
    types = {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"}
    spec, case = _case("SLICE1", types, {"InputTensor": [2], "OutputTensor": [2]}, {"InputTensor": [1.0e-45, 1.0]},
                       {"InputWindowOffsets": [0], "InputWindowSizes": [2], "InputWindowStrides": [-1]})
    assert _judge(spec, case, {"OutputTensor": [1.0, 1.0e-45]}).status == "pass"
    assert _judge(spec, case, {"OutputTensor": [1.0, 0.0]}).status == "mismatch"


def test_every_declared_family_has_exactly_one_plugin():
    """harness.spec.families declares what a spec may say of each family; each plug-in module of
    harness.reference.families registers one FamilyPlugin pointing at its declaration: the
    registry and the declarations name the same families, each plug-in with its own declaration."""
    from harness.reference.families import PLUGINS
    from harness.spec.families import DECLARATIONS
    assert set(PLUGINS) == set(DECLARATIONS)
    for name, plugin in PLUGINS.items():
        assert plugin.declaration is DECLARATIONS[name] and callable(plugin.compute)
    assert PLUGINS["reduce"].device is not None  # the arithmetic reduction's legal device


def test_hardmax_over_a_flushed_denormal_is_legal_and_named():
    # [+0, 1e-45]: exactly, 1e-45 is the largest (1 at index 1); flushed, [+0, +0] ties and the
    # first wins (1 at index 0): legal, liberty named; a value that is neither 0 nor 1 is wrong.
    # (Alternatives are judged per element, so a mix of the two results, [1, 1], passes too: a
    # limit of the judge, which has no whole-output alternatives.)
    types = {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"}
    spec, case = _case("ACTIVATION_HARDMAX1", types, {"InputTensor": [2], "OutputTensor": [2]},
                       {"InputTensor": [0.0, 1.0e-45]}, {"Axes": [0]})
    assert _judge(spec, case, {"OutputTensor": [0.0, 1.0]}).status == "pass"
    flushed = _judge(spec, case, {"OutputTensor": [1.0, 0.0]})
    assert flushed.status == "pass" and flushed.liberties, flushed.summary
    assert _judge(spec, case, {"OutputTensor": [0.5, 0.0]}).status == "mismatch"


def test_softmax_bound_accepts_a_few_steps_and_a_nan_row_gets_no_slack():
    # Row [0, 1]: 1/(1+e) = 0.26894142..., e/(1+e) = 0.73105858... (N = 2: a bound of about 30
    # eps relative); 3 ULPs off is legal (liberty rounding), 1e-4 off is not. Row [NaN, 1]: NaN, exactly.
    types = {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"}
    spec, case = _case("ACTIVATION_SOFTMAX1", types, {"InputTensor": [2, 2], "OutputTensor": [2, 2]},
                       {"InputTensor": [0.0, 1.0, np.nan, 1.0]}, {"Axes": [1]})
    exact = np.array([0.2689414213699951, 0.7310585786300049], dtype=np.float32)
    near = [np.float32(exact[0]) + 3 * np.spacing(exact[0]), exact[1], np.nan, np.nan]
    within = _judge(spec, case, {"OutputTensor": near})
    assert within.status == "pass" and within.liberties, within.summary
    assert _judge(spec, case, {"OutputTensor": [exact[0] + 1e-4, exact[1], np.nan, np.nan]}).status == "mismatch"
    assert _judge(spec, case, {"OutputTensor": [exact[0], exact[1], 0.0, 1.0]}).status == "mismatch"


def test_log_softmax_keeps_minus_infinity():
    # Row [0, -inf]: [ln 1, ln 0] = [0, -inf]; a finite value for the -inf element is wrong
    # however large its magnitude (no bound widens an infinite exact value).
    types = {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"}
    spec, case = _case("ACTIVATION_LOG_SOFTMAX1", types, {"InputTensor": [2], "OutputTensor": [2]},
                       {"InputTensor": [0.0, -np.inf]}, {"Axes": [0]})
    assert _judge(spec, case, {"OutputTensor": [0.0, -np.inf]}).status == "pass"
    assert _judge(spec, case, {"OutputTensor": [0.0, -3.0e38]}).status == "mismatch"


def test_no_operator_is_named_in_the_harness_python():
    """Python holds mechanisms and one plug-in per family; what an operator is lives in its spec
    alone. An operator's name in harness/ (code, comment or docstring) is where an operator-specific
    rule would creep in: none is allowed (the family's lower-case mode names are the spec's words)."""
    import re
    from pathlib import Path
    pattern = re.compile(r"\b(" + "|".join(sorted(map(re.escape, SPECS.operators), key=len, reverse=True)) + r")\b")
    root = Path(__file__).resolve().parents[2] / "harness"
    named = [f"{path.relative_to(root)}:{number}: {match.group(1)}"
             for path in sorted(root.rglob("*.py"))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if (match := pattern.search(line))]
    assert not named, named
