"""The data movement family's layout modes: `tile`, `space_to_depth` and `depth_to_space` (with
the `order` of DML_DEPTH_SPACE_ORDER), from the family's index mapping to the specs that use them
(TILE, SPACE_TO_DEPTH(1), DEPTH_TO_SPACE(1)), their validator rules and ONNX Runtime's builders.

Every expected value below was worked out by hand from the pages' layouts, not taken from the
reference: DEPTH_COLUMN_ROW holds depth as [(BlockHeight, BlockWidth, Channels)], COLUMN_ROW_DEPTH
as [(Channels, BlockHeight, BlockWidth)], the space side as [Channels, (Height, BlockHeight),
(Width, BlockWidth)]; TILE's output position i reads input position i mod the input's size.
"""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from harness.generate.cases import case_from_arrays, output_values
from harness.judge.diff import judge
from harness.model.backend import Outputs
from harness.model.descriptor import Descriptor, TensorDesc
from harness.model.layout import output_buffers
from harness.model.validator import validate
from harness.reference.families.data_movement import _depth_to_space, _space_to_depth, _tile
from harness.spec.load import DEFAULT_SPECS_DIR, load_specs
from harness.spec.source import SpecError
from tests.helpers import SPECS, from_bits, run_reference

DCR, CRD = "depth_column_row", "column_row_depth"
# {1, 2, 2, 4}: channel 0 rows [0, 1, 2, 3], [4, 5, 6, 7]; channel 1 rows [10 .. 13], [14 .. 17]
SPACE = np.array([0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15, 16, 17]).reshape(1, 2, 2, 4)
# BlockSize 2 makes two 2 x 2 blocks per channel ([[0, 1], [4, 5]] and [[2, 3], [6, 7]] in channel 0);
# output channel (bh, bw, c) in DCR, (c, bh, bw) in CRD, each holding [left block, right block]
SPACE_DCR = [0, 2, 10, 12, 1, 3, 11, 13, 4, 6, 14, 16, 5, 7, 15, 17]
SPACE_CRD = [0, 2, 1, 3, 4, 6, 5, 7, 10, 12, 11, 13, 14, 16, 15, 17]


# --- the index mappings ---------------------------------------------------------------------------

def test_tile_reads_position_i_mod_the_input_size():
    x = np.array([[1, 2, 3], [4, 5, 6]])
    assert _tile(x, [2, 1]).tolist() == [[1, 2, 3], [4, 5, 6], [1, 2, 3], [4, 5, 6]]
    assert _tile(x, [1, 2]).tolist() == [[1, 2, 3, 1, 2, 3], [4, 5, 6, 4, 5, 6]]
    assert _tile(np.array([7]), [3]).tolist() == [7, 7, 7]


@pytest.mark.parametrize("order, expected", [(DCR, SPACE_DCR), (CRD, SPACE_CRD)])
def test_space_to_depth_lays_out_channels_by_order(order, expected):
    out = _space_to_depth(SPACE, 2, order)
    assert out.shape == (1, 8, 1, 2)
    assert out.reshape(-1).tolist() == expected


@pytest.mark.parametrize("order, depth", [(DCR, SPACE_DCR), (CRD, SPACE_CRD)])
def test_depth_to_space_puts_them_back(order, depth):
    out = _depth_to_space(np.array(depth).reshape(1, 8, 1, 2), 2, order)
    assert out.shape == (1, 2, 2, 4)
    assert out.tolist() == SPACE.tolist()


def test_the_orders_agree_with_one_channel():
    # with C = 1, (bh, bw, c) and (c, bh, bw) count alike: channel bh * 3 + bw
    x = np.arange(9).reshape(1, 1, 3, 3)
    assert _space_to_depth(x, 3, DCR).reshape(-1).tolist() == _space_to_depth(x, 3, CRD).reshape(-1).tolist() == list(range(9))


@pytest.mark.parametrize("order", [DCR, CRD])
@pytest.mark.parametrize("shape, block", [((2, 3, 4, 6), 2), ((1, 2, 3, 3), 3), ((3, 1, 5, 5), 5), ((2, 2, 2, 2), 1)])
def test_depth_to_space_inverts_space_to_depth(order, shape, block):
    x = np.arange(int(np.prod(shape))).reshape(shape)
    depth = _space_to_depth(x, block, order)
    assert depth.shape == (shape[0], shape[1] * block * block, shape[2] // block, shape[3] // block)
    assert np.array_equal(_depth_to_space(depth, block, order), x)


def test_block_size_one_is_a_copy():
    x = np.arange(24).reshape(2, 3, 2, 2)
    for order in (DCR, CRD):
        assert np.array_equal(_space_to_depth(x, 1, order), x) and np.array_equal(_depth_to_space(x, 1, order), x)


# --- the operators through the reference ----------------------------------------------------------

def _layouts(types: dict, sizes: dict) -> dict:
    return {n: TensorDesc(t, list(sizes[n])) for n, t in types.items()}


@pytest.mark.parametrize("op, order, expected", [
    ("SPACE_TO_DEPTH", None, SPACE_DCR),        # no Order field: the DEPTH_COLUMN_ROW layout (its page's example)
    ("SPACE_TO_DEPTH1", 0, SPACE_DCR),
    ("SPACE_TO_DEPTH1", 1, SPACE_CRD),
])
def test_space_to_depth_operators(op, order, expected):
    types = {"InputTensor": "UINT16", "OutputTensor": "UINT16"}
    attributes = {"BlockSize": 2} | ({} if order is None else {"Order": order})
    out = run_reference(op, types, {"InputTensor": SPACE}, attributes=attributes,
                        layouts=_layouts(types, {"InputTensor": [1, 2, 2, 4], "OutputTensor": [1, 8, 1, 2]}))
    assert out.reshape(-1).tolist() == expected


@pytest.mark.parametrize("op, order, depth", [
    ("DEPTH_TO_SPACE", None, SPACE_DCR),
    ("DEPTH_TO_SPACE1", 0, SPACE_DCR),
    ("DEPTH_TO_SPACE1", 1, SPACE_CRD),
])
def test_depth_to_space_operators(op, order, depth):
    types = {"InputTensor": "INT64", "OutputTensor": "INT64"}
    attributes = {"BlockSize": 2} | ({} if order is None else {"Order": order})
    out = run_reference(op, types, {"InputTensor": np.array(depth).reshape(1, 8, 1, 2)}, attributes=attributes,
                        layouts=_layouts(types, {"InputTensor": [1, 8, 1, 2], "OutputTensor": [1, 2, 2, 4]}))
    assert out.reshape(-1).tolist() == SPACE.reshape(-1).tolist()


def test_tile_of_three_dimensions():
    # {2, 1, 2} [[[1, 2]], [[3, 4]]], Repeats {1, 2, 2}: each row [1, 2] -> [1, 2, 1, 2], twice per batch
    types = {"InputTensor": "INT8", "OutputTensor": "INT8"}
    out = run_reference("TILE", types, {"InputTensor": np.array([1, 2, 3, 4]).reshape(2, 1, 2)}, attributes={"Repeats": [1, 2, 2]},
                        layouts=_layouts(types, {"InputTensor": [2, 1, 2], "OutputTensor": [2, 2, 4]}))
    assert out.reshape(-1).tolist() == [1, 2, 1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4, 3, 4]


def test_nan_payloads_are_moved_and_an_altered_one_is_a_mismatch():
    # bitwise: a device that quiets the signalling NaN 0x7F800001 (to 0x7FC00001) alters moved data
    spec = SPECS.operator("DEPTH_TO_SPACE1")
    types = {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"}
    x = from_bits([0x7F800001, 0x00000001, 0x80000000, 0x3F800000], np.float32).reshape(1, 4, 1, 1)
    case = case_from_arrays(spec, "6.4", types, {"InputTensor": x}, attributes={"BlockSize": 2, "Order": 1},
                            layouts=_layouts(types, {"InputTensor": [1, 4, 1, 1], "OutputTensor": [1, 1, 2, 2]}))
    good = from_bits([0x7F800001, 0x00000001, 0x80000000, 0x3F800000], np.float32).reshape(1, 1, 2, 2)
    quieted = from_bits([0x7FC00001, 0x00000001, 0x80000000, 0x3F800000], np.float32).reshape(1, 1, 2, 2)
    for values, status in ((good, "pass"), (quieted, "mismatch")):
        result = judge(spec, case, Outputs(output_buffers(spec, case, {"OutputTensor": values})), backend_validates=True)
        assert result.status == status, result.summary


# --- the rules the specs state ---------------------------------------------------------------------

def _descriptor(op: str, in_sizes: list[int], out_sizes: list[int], **attributes) -> Descriptor:
    return Descriptor(op, {"InputTensor": TensorDesc("FLOAT32", in_sizes), "OutputTensor": TensorDesc("FLOAT32", out_sizes)},
                      {k: (list(v) if isinstance(v, list) else float(v)) for k, v in attributes.items()})


@pytest.mark.parametrize("op, in_sizes, out_sizes, attributes, rules", [
    ("SPACE_TO_DEPTH", [1, 2, 4, 6], [1, 8, 2, 3], {"BlockSize": 2}, set()),
    ("SPACE_TO_DEPTH", [1, 2, 4, 5], [1, 8, 2, 2], {"BlockSize": 2}, {"constraint.spatial_divisible"}),    # 5 is no whole block
    ("SPACE_TO_DEPTH", [1, 2, 4, 6], [1, 2, 8, 12], {"BlockSize": 2}, {"constraint.output_sizes"}),       # the page's printed sizes
    ("SPACE_TO_DEPTH", [1, 2, 4, 6], [1, 2, 4, 6], {"BlockSize": 0}, {"constraint.block_size_positive"}),
    ("DEPTH_TO_SPACE", [1, 8, 2, 3], [1, 2, 4, 6], {"BlockSize": 2}, set()),
    ("DEPTH_TO_SPACE", [1, 6, 2, 3], [1, 1, 4, 6], {"BlockSize": 2}, {"constraint.input_sizes"}),         # 6 channels: no whole 2 x 2
    ("DEPTH_TO_SPACE", [1, 8, 2, 3], [1, 2, 4, 7], {"BlockSize": 2}, {"constraint.output_spatial_multiple"}),
    ("DEPTH_TO_SPACE1", [1, 8, 2, 3], [1, 2, 4, 6], {"BlockSize": 2, "Order": 2}, {"attribute.enum_value"}),
    ("TILE", [2, 3], [4, 9], {"Repeats": [2, 3]}, set()),
    ("TILE", [2, 3], [2, 3], {"Repeats": [1, 0]}, {"constraint.repeats_positive"}),
    ("TILE", [2, 3], [4, 3], {"Repeats": [2]}, {"constraint.repeats_count"}),
    ("TILE", [2, 3], [4, 6], {"Repeats": [2, 1]}, {"constraint.output_sizes"}),
])
def test_the_rules(op, in_sizes, out_sizes, attributes, rules):
    assert validate(SPECS.operator(op), _descriptor(op, in_sizes, out_sizes, **attributes), "6.4").rule_ids == rules


# --- the family's parameters in a spec ----------------------------------------------------------------

@pytest.mark.parametrize("op, old, new, message", [
    ("SPACE_TO_DEPTH1", "order: Order}", "order: BlockSize}", "order: 'BlockSize' is not one of depth_column_row, column_row_depth"),
    ("SPACE_TO_DEPTH1", "order: Order}", "order: row_column_depth}", "order: 'row_column_depth' is not one of"),
    ("SPACE_TO_DEPTH1", "block_size: BlockSize, order: Order}", "order: Order}", "needs 'block_size'"),
    ("TILE", "repeats: Repeats}", "repeats: Repeats, order: depth_column_row}", "'order' is only for mode space_to_depth, depth_to_space"),
    ("TILE", "repeats: Repeats}", "repeats: RepeatsCount}", "repeats: 'RepeatsCount' is not an array field"),
])
def test_the_family_parameters_are_checked(tmp_path, op, old, new, message):
    specs = tmp_path / "specs"
    shutil.copytree(DEFAULT_SPECS_DIR, specs)
    path = specs / f"{op}.yaml"
    text = path.read_text()
    assert text.count(old) == 1
    path.write_text(text.replace(old, new))
    with pytest.raises(SpecError) as raised:
        load_specs(specs)
    assert message in str(raised.value)


def test_order_by_enum_field_or_fixed():
    # the *1 operators name their enum field, whose value picks the order; the older ones fix it
    family = SPECS.operator("SPACE_TO_DEPTH1").formula.family
    assert family is not None and family.enum_choices["order"] == ("Order", {0: DCR, 1: CRD})
    assert family.choice("order", {"Order": 1}) == CRD
    fixed = SPECS.operator("DEPTH_TO_SPACE").formula.family
    assert fixed is not None and fixed.choice("order", {}) == DCR


def test_order_left_out_is_depth_column_row(tmp_path):
    specs_dir = tmp_path / "specs"
    shutil.copytree(DEFAULT_SPECS_DIR, specs_dir)
    path = specs_dir / "SPACE_TO_DEPTH.yaml"
    text = path.read_text()
    assert text.count(", order: depth_column_row}") == 1
    path.write_text(text.replace(", order: depth_column_row}", "}"))
    specs = load_specs(specs_dir)
    spec = specs.operator("SPACE_TO_DEPTH")
    assert spec.formula.family is not None and "order" not in spec.formula.family.params
    from backends.numpy_reference import NumpyReferenceBackend
    types = {"InputTensor": "INT32", "OutputTensor": "INT32"}
    case = case_from_arrays(spec, "6.4", types, {"InputTensor": SPACE}, attributes={"BlockSize": 2},
                            layouts=_layouts(types, {"InputTensor": [1, 2, 2, 4], "OutputTensor": [1, 8, 1, 2]}))
    result = NumpyReferenceBackend(specs).run(case)
    assert result.kind == "outputs", result
    assert output_values(spec, case, result.buffers)["OutputTensor"].reshape(-1).tolist() == SPACE_DCR


# --- ONNX Runtime ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ort():
    pytest.importorskip("onnxruntime")
    from backends.onnxruntime_backend import OnnxRuntimeBackend
    return OnnxRuntimeBackend(SPECS)


def _run_ort(ort, op: str, data_type: str, x: np.ndarray, out_sizes: list[int], attributes: dict):
    spec = SPECS.operator(op)
    types = {"InputTensor": data_type, "OutputTensor": data_type}
    case = case_from_arrays(spec, "6.4", types, {"InputTensor": x}, attributes=attributes,
                            layouts=_layouts(types, {"InputTensor": list(x.shape), "OutputTensor": out_sizes}))
    result = ort.run(case)
    return result, (output_values(spec, case, result.buffers)["OutputTensor"].reshape(-1).tolist() if result.kind == "outputs" else None)


@pytest.mark.parametrize("op, attributes, expected", [
    ("SPACE_TO_DEPTH", {"BlockSize": 2}, SPACE_DCR),
    ("SPACE_TO_DEPTH1", {"BlockSize": 2, "Order": 0}, SPACE_DCR),
    ("SPACE_TO_DEPTH1", {"BlockSize": 2, "Order": 1}, SPACE_CRD),   # SpaceToDepth, then the channels regrouped
])
def test_onnx_runtime_space_to_depth(ort, op, attributes, expected):
    result, out = _run_ort(ort, op, "FLOAT32", SPACE.astype(np.float32), [1, 8, 1, 2], attributes)
    assert result.kind == "outputs", result
    assert out == expected


@pytest.mark.parametrize("op, attributes, depth", [
    ("DEPTH_TO_SPACE", {"BlockSize": 2}, SPACE_DCR),
    ("DEPTH_TO_SPACE1", {"BlockSize": 2, "Order": 0}, SPACE_DCR),     # mode DCR
    ("DEPTH_TO_SPACE1", {"BlockSize": 2, "Order": 1}, SPACE_CRD),     # mode CRD
])
def test_onnx_runtime_depth_to_space(ort, op, attributes, depth):
    result, out = _run_ort(ort, op, "UINT8", np.array(depth, dtype=np.uint8).reshape(1, 8, 1, 2), [1, 2, 2, 4], attributes)
    assert result.kind == "outputs", result
    assert out == SPACE.reshape(-1).tolist()


def test_onnx_runtime_tile(ort):
    result, out = _run_ort(ort, "TILE", "UINT64", np.array([[1, 2**64 - 1]], dtype=np.uint64), [2, 4], {"Repeats": [2, 2]})
    assert result.kind == "outputs", result
    assert out == [1, 2**64 - 1, 1, 2**64 - 1] * 2


def test_a_type_onnx_runtime_cannot_move_is_unsupported_with_its_message(ort):
    # ONNX Runtime's CPU DepthToSpace has no INT32 kernel: unsupported, never a crash or a pass
    result, _ = _run_ort(ort, "DEPTH_TO_SPACE1", "INT32", np.arange(8, dtype=np.int32).reshape(1, 8, 1, 1), [1, 2, 2, 2],
                         {"BlockSize": 2, "Order": 1})
    assert result.kind == "unsupported" and "DepthToSpace" in result.reason, result
