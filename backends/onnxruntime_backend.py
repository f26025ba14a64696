"""The ONNX Runtime backend: one small ONNX model per descriptor shape, on a chosen execution provider.

What ONNX cannot say the way the descriptor says it is adapted honestly or reported unsupported:
strided and broadcast inputs are materialised (ONNX tensors are dense); a full-shape
QuantizeLinear scale/zero point becomes per-tensor or per-axis where it is uniform along the other
axes, otherwise an equivalent Div/Round/Add/clamp decomposition (also used for INT32 inputs, which
QuantizeLinear does not take); BIT_NOT on float types runs BitwiseNot on the same bits viewed as
unsigned integers; an absent zero point is given as the zero the spec says it means; a
column-row-depth SPACE_TO_DEPTH1 regroups the channels of ONNX's SpaceToDepth (which writes the
other order only) with a Reshape, a Transpose and a Reshape. Types or ops
ONNX Runtime lacks come back `unsupported` with ONNX Runtime's own message. It does not validate
DirectML descriptors: invalid descriptors are `unsupported`, never a pass.
"""
from __future__ import annotations

import struct
from functools import lru_cache
import threading
from typing import Any, Callable

from pathlib import Path

import numpy as np

from harness.model.descriptor import Case, Descriptor, TensorDesc
from harness.spec.source import SpecError, load_yaml
from harness.model.blocks import spread_blocks
from harness.model.layout import output_buffer, read_tensor
from harness.spec.fused import activation_items, fused_choice
from harness.spec.load import load_specs
from harness.spec.model import OperatorSpec, SpecSet
from harness.model.validator import case_verdict
from harness.generate.types import primary_input
from harness.model.facts import attribute_names, constant_of_field, expression_scope
from harness.spec.context import formula_context
from harness.spec.shape_expr import parse_shape_expr

from harness.model.backend import Capabilities, Crashed, Outputs, RunResult, Unsupported

IR_VERSION = 10   # ONNX Runtime 1.31 reads models up to IR version 10
OPSET = 21

_ONNX_TYPES = {"FLOAT32": 1, "UINT8": 2, "INT8": 3, "UINT16": 4, "INT16": 5, "INT32": 6, "INT64": 7,
               "FLOAT16": 10, "FLOAT64": 11, "UINT32": 12, "UINT64": 13}
_ONNX_BOOL = 9  # TensorProto.BOOL
_ONNX_4BIT = {"UINT4": 21, "INT4": 22}  # TensorProto.UINT4, INT4: inside a graph only
_BYTE_CARRIER = {"UINT4": "UINT8", "INT4": "INT8"}  # the 8-bit type a 4-bit tensor is fed and read as
_BITS_TYPE = {8: "UINT8", 16: "UINT16", 32: "UINT32", 64: "UINT64"}
MAPPING_FILE = Path(__file__).resolve().parent / "onnxruntime_ops.yaml"
MAPPING_DIR = Path(__file__).resolve().parent / "onnxruntime_ops"  # more tables, one per operator family
# builder -> the keys its table entry must have (inputs: a list of tensor fields; the others: names)
_BUILDER_KEYS: dict[str, tuple[str, ...]] = {
    "node": ("op", "inputs"), "bitwise": ("op", "inputs"), "quantize": (),
    "quantize_blocks": ("op", "input", "scale", "zero_point", "absent_zero_point"),
    "reduce_index": ("op", "inputs", "axes", "select_last_index"),
    "reduce": ("inputs", "axes", "function", "ops"),
    "slice_window": ("inputs", "offsets", "sizes", "strides"),
    "top_k": ("inputs", "axis", "k", "largest", "values", "indices"),
    "pad": ("inputs", "mode", "value", "starts", "ends", "modes"),
    "matmul": ("inputs", "transpose_a", "transpose_b", "alpha", "beta"),
    "gather": ("inputs", "axis", "index_dimensions"),
    "gather_elements": ("inputs", "axis"),
    "gather_nd": ("inputs", "input_dimensions", "index_dimensions"),  # and `batch_dimensions`, optional (absent: 0)
    "scatter_elements": ("inputs", "axis"),
    "scatter_nd": ("inputs", "input_dimensions", "index_dimensions"),
    "unpool": ("inputs",),
    "window": ("inputs", "strides", "dilations", "starts", "ends", "output_padding", "groups", "transposed", "flip"),
    # and `dilations`, `include_padding` (AveragePool), `p` (LpPool), `indices` (MaxPool), optional
    "pool": ("op", "inputs", "window_size", "strides", "starts", "ends"),
    "col2im": ("inputs", "window_size", "strides", "dilations", "starts", "ends"),
    "nonzero": ("inputs", "count", "coordinates"),
    "join": ("inputs", "axis"),
    "split": ("inputs", "outputs", "axis"),
    "tile": ("inputs", "repeats"),
    "depth_space": ("op", "inputs", "block_size", "column_row_depth"),
    "scan": ("op", "inputs", "axis", "exclusive", "reverse"),
    "one_hot": ("inputs", "axis"),
    "reverse_sequence": ("inputs", "axis"),
    "normalize": ("op", "inputs"),  # the axes are the spec family's own (formula.family.axes)
    "quantized_node": ("op", "inputs"),  # and `domain`, `per_tensor`, optional
    "multi_output_node": ("op", "inputs", "results"),
    "resize": ("inputs", "modes"),  # the scales and offsets are the spec family's own (formula.family)
    "roi_pool": ("inputs", "spatial_scale"),
    "roi_align": ("inputs",),  # the scales, samples, offsets and modes are the spec family's own (formula.family)
    "recurrent": ("op", "inputs", "results", "activations"),  # the directions are the spec family's own (formula.family)
    "attention": ("op", "mask_types"),  # the tensors and attributes are the spec family's roles (formula.family)
}
_BUILDERS = set(_BUILDER_KEYS)


def load_mappings(path: Path = MAPPING_FILE, directory: Path | None = MAPPING_DIR) -> dict[str, dict]:
    """The main table and every `directory`/*.yaml (a family's operators), merged; an operator
    mapped in two files is an error (which line wins would otherwise depend on file order)."""
    table = load_mapping(path)
    where = {op: path for op in table}
    for extra in sorted(directory.glob("*.yaml")) if directory is not None and directory.is_dir() else []:
        for op, entry in load_mapping(extra).items():
            if op in where:
                raise SpecError(extra, None, (op,), f"{op} is also mapped in {where[op]}")
            where[op] = extra
            table[op] = entry
    return table


def load_mapping(path: Path) -> dict[str, dict]:
    """The operator table (backends/onnxruntime_ops.yaml), checked: a known builder per operator,
    the keys its builder reads (a node's op and inputs, ...), a node's `attribute_inputs` a list of
    field names; SpecError naming file, line and key otherwise (a malformed line would otherwise
    surface as a crash of every case of its operator, far from the line that caused it). A file
    already read with the same bytes is not parsed again (each backend instance reads the table:
    a replay, a probe and the harness's tests make hundreds)."""
    import hashlib
    try:
        key = (str(path), hashlib.sha256(Path(path).read_bytes()).hexdigest()) if Path(path).is_file() else None
    except OSError:
        key = None
    if key is not None and key in _MAPPINGS_READ:
        return dict(_MAPPINGS_READ[key])
    table = _read_mapping(path)
    if key is not None:
        _MAPPINGS_READ[key] = table
    return dict(table)


_MAPPINGS_READ: dict[tuple[str, str], dict[str, dict]] = {}  # (path, sha256 of its bytes) -> its checked table


def _read_mapping(path: Path) -> dict[str, dict]:
    """load_mapping's parse and checks, uncached."""
    src = load_yaml(path)
    if not isinstance(src.data, dict):
        raise src.error((), "expected a mapping of operator names")
    for op, entry in src.data.items():
        if not isinstance(entry, dict) or entry.get("builder") not in _BUILDERS:
            raise src.error((op,), f"builder must be one of {sorted(_BUILDERS)}")
        needs = _BUILDER_KEYS[entry["builder"]]
        kinds = {"inputs": list, "ops": dict, "modes": dict, "results": list, "mask_types": dict}
        missing = [k for k in needs if k not in entry or not isinstance(entry[k], kinds.get(k, str))]
        if missing:
            raise src.error((op,), f"a {entry['builder']} mapping needs {', '.join(needs)} (missing or mistyped: {', '.join(missing)})")
        if entry["builder"] == "node" and "attribute_inputs" in entry:
            fields = entry["attribute_inputs"]
            if not isinstance(fields, list) or not all(isinstance(f, str) for f in fields):
                raise src.error((op, "attribute_inputs"), f"attribute_inputs must be a list of field names, found {fields!r}")
    return dict(src.data)


class OnnxRuntimeBackend:
    name = "onnxruntime"
    expectations_dir = Path(__file__).resolve().parent / "expectations"  # known divergences, per backend

    def __init__(self, specs: SpecSet | None = None, provider: str = "CPUExecutionProvider", **_: Any) -> None:
        self.specs = specs or load_specs()
        self.provider = provider
        self.mapping = load_mappings()
        self._sessions: dict[tuple, Any] = {}
        self._failures: dict[tuple, str] = {}
        self._lock = threading.Lock()

    # --- interface -----------------------------------------------------------------------------
    def version(self) -> str:
        import onnxruntime
        return f"onnxruntime {onnxruntime.__version__} ({self.provider})"

    def available(self) -> tuple[bool, str]:
        try:
            import onnx  # noqa: F401
            import onnxruntime
        except ImportError as exc:
            return False, f"not installed: {exc.name} (pip install onnx onnxruntime)"
        if self.provider not in onnxruntime.get_available_providers():
            return False, f"execution provider {self.provider} not available; have {', '.join(onnxruntime.get_available_providers())}"
        return True, ""

    def capabilities(self) -> Capabilities:
        return Capabilities(operators=set(self.mapping),
                            validates_descriptors=False,
                            notes=["strided/broadcast inputs are materialised", "does not validate DirectML descriptors",
                                   "operators mapped by backends/onnxruntime_ops.yaml"])

    def close(self) -> None:
        self._sessions.clear()

    def run(self, case: Case) -> RunResult:
        spec = self.specs.operators.get(case.operator)
        if spec is None:
            return Unsupported(f"no spec for operator {case.operator}")
        if case.operator not in self.capabilities().operators:  # type: ignore[operator]
            return Unsupported(f"no ONNX mapping for {case.operator}")
        if not case_verdict(spec, case).accepted:
            return Unsupported("onnxruntime does not validate DirectML descriptors")
        catalog = self.specs.catalog
        d = case.descriptor
        inputs = {}
        for f in spec.input_fields:
            desc = d.tensors.get(f.name)
            if desc is not None:
                inputs[f.name] = np.ascontiguousarray(read_tensor(case.inputs[f.name], desc, catalog.dtype(desc.data_type)))
        out_desc = d.tensors[spec.formula.output]
        assert out_desc is not None
        try:
            result = self._compute(spec.name, d, inputs, out_desc.data_type)
            result = self._fused_activations(spec, d, result, out_desc.data_type)
        except _Unsupported as exc:
            return Unsupported(str(exc))
        except Exception as exc:  # noqa: BLE001 - ORT errors are results of this case
            return Crashed(f"onnxruntime raised {type(exc).__name__}: {exc}")
        results = result if isinstance(result, dict) else {spec.formula.output: result}
        buffers = {}
        for name, values in results.items():  # one output, or each of several (TopK's values and indices)
            desc = d.tensors[name]
            assert desc is not None
            out_type = catalog.dtype(desc.data_type)
            values = np.asarray(values).astype(out_type.numpy, copy=False).reshape(desc.sizes)
            alias = d.aliases.get(name)
            buffers[name] = output_buffer(values, desc, out_type, case.inputs[alias] if alias else None)
        return Outputs(buffers)

    # --- models --------------------------------------------------------------------------------
    def _session(self, key: tuple, build) -> Any:
        """The session for `key`, built by `build()` on first use. `key` must name everything that
        changes the model; its floats are compared by their bits (see `_exact_key`)."""
        key = _exact_key(key)
        with self._lock:
            if key in self._failures:
                raise _Unsupported(self._failures[key])
            session = self._sessions.get(key)
        if session is not None:
            return session
        import onnxruntime as ort
        model = build()
        try:
            options = ort.SessionOptions()
            options.log_severity_level = 3
            # ORT's worker threads otherwise spin after each run, taking the cores the harness
            # needs for the reference and the diff (and other pytest-xdist workers need).
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            session = ort.InferenceSession(model.SerializeToString(), options, providers=[self.provider])
        except Exception as exc:  # noqa: BLE001 - e.g. NOT_IMPLEMENTED for a type
            message = f"onnxruntime cannot build this model: {str(exc).splitlines()[0][:300]}"
            with self._lock:
                self._failures[key] = message
            raise _Unsupported(message) from None
        with self._lock:
            self._sessions[key] = session
        return session

    def _compute(self, op: str, d: Descriptor, inputs: dict[str, np.ndarray], out_type: str) -> np.ndarray | dict[str, np.ndarray]:
        """The ONNX model of the operator's family builder (backends/onnxruntime_ops.yaml), run."""
        entry = self.mapping.get(op)
        if entry is None:
            raise _Unsupported(f"no ONNX mapping for {op}")
        only = entry.get("types")  # the primary input types the mapping covers (others: unsupported)
        if only is not None:
            spec = self.specs.operator(op)
            first = d.tensors[primary_input(spec)]
            if first is not None and first.data_type not in only:
                raise _Unsupported(f"the ONNX mapping of {op} covers {', '.join(only)} only "
                                   f"({entry.get('types_why', 'backends/onnxruntime_ops')})")
        if entry["builder"] == "quantize":
            return self._quantize(d, inputs, out_type)
        family_builders: dict[str, Callable[[dict, Descriptor, dict[str, np.ndarray]], np.ndarray | dict[str, np.ndarray]]] = {
            "reduce_index": self._reduce_index, "reduce": self._reduce, "slice_window": self._slice_window,
            "top_k": self._top_k, "pad": self._pad, "matmul": self._matmul, "gather": self._gather,
            "gather_elements": self._gather_elements, "gather_nd": self._gather_nd,
            "scatter_elements": self._scatter_elements, "scatter_nd": self._scatter_nd, "unpool": self._unpool,
            "window": self._window, "pool": self._pool, "col2im": self._col2im, "nonzero": self._nonzero,
            "join": self._join, "split": self._split,
            "quantize_blocks": self._quantize_blocks, "tile": self._tile, "depth_space": self._depth_space,
            "scan": self._scan, "one_hot": self._one_hot, "reverse_sequence": self._reverse_sequence,
            "normalize": self._normalize, "quantized_node": self._quantized_node,
            "multi_output_node": self._multi_output_node, "resize": self._resize, "roi_pool": self._roi_pool,
            "roi_align": self._roi_align, "recurrent": self._recurrent, "attention": self._attention}
        if entry["builder"] in family_builders:  # each reads its table entry, the descriptor and the inputs
            return family_builders[entry["builder"]](entry, d, inputs)
        names = entry["inputs"]
        arrays = [inputs[name] for name in names]
        types = [_tensor(d, name).data_type for name in names]
        if entry["builder"] == "bitwise":
            dtype = self.specs.catalog.dtype(types[0])
            if dtype.is_float:  # same bits, as unsigned integers
                bits = [a.view(dtype.bits_numpy) for a in arrays]
                return self._node(entry["op"], bits, [_BITS_TYPE[dtype.bits]] * len(bits), _BITS_TYPE[dtype.bits]).view(dtype.numpy)
            return self._node(entry["op"], arrays, types, out_type)
        spec = self.specs.operator(op)  # an absent attribute takes the spec's default
        attrs: dict[str, float | int] = {onnx_name: float(np.float32(d.attributes.get(field, spec.field(field).default)))
                                         for onnx_name, field in entry.get("attributes", {}).items()}
        if "output_type_attribute" in entry:  # Cast's `to`: the ONNX type of the output tensor
            if out_type not in _ONNX_TYPES:
                raise _Unsupported(f"ONNX has no {out_type}")
            attrs[entry["output_type_attribute"]] = _ONNX_TYPES[out_type]
        constants = [self._constant_input(d, field, types[0]) for field in entry.get("attribute_inputs", [])]
        prescale = None
        if "scale_bias" in entry and f"{entry['scale_bias']}.Scale" in d.attributes:  # x * Scale + Bias first
            if types[0] not in ("FLOAT32", "FLOAT16", "FLOAT64"):
                raise _Unsupported(f"ONNX: a scale and bias on {types[0]} tensors is not expressible (float constants)")
            prescale = (float(np.float32(d.attributes[f"{entry['scale_bias']}.Scale"])),
                        float(np.float32(d.attributes[f"{entry['scale_bias']}.Bias"])))
        bools = (frozenset(names.index(n) for n in entry.get("bool_inputs", [])), bool(entry.get("bool_output", False)))
        return self._node(entry["op"], arrays, types, out_type, attrs, prescale, tuple(constants), bools)

    def _constant_input(self, d: Descriptor, field: str, data_type: str) -> float | int:
        """A FLOAT field as the scalar ONNX input that takes its place (Clip's min and max), in the
        first input's type: a FLOAT16 tensor gets the nearest FLOAT16 (rounding being monotonic, a
        bound rounded first clamps as the exact bound rounded after); an integer tensor only a
        whole number within its type (ONNX has no FLOAT bound on integers; other values unsupported)."""
        spec = self.specs.operator(d.operator)
        default = spec.field(field).default
        value = float(np.float32(d.attributes.get(field, 0.0 if default is None else default)))
        dtype = self.specs.catalog.dtype(data_type)
        if dtype.is_float:
            with np.errstate(over="ignore"):
                return float(np.asarray(value).astype(dtype.numpy))
        assert dtype.min is not None and dtype.max is not None  # an integer type has a range
        if not (np.isfinite(value) and value == int(value) and dtype.min <= int(value) <= dtype.max):
            raise _Unsupported(f"ONNX: {field} {value!r} is not a value of {data_type}, and the ONNX op takes it in the tensor's type")
        return int(value)

    def _fused_activations(self, spec: OperatorSpec, d: Descriptor, result: Any, out_type: str) -> Any:
        """Each fused activation the descriptor names, as its own operator's ONNX node applied to
        the result: ORT runs them unfused (the sum rounded to the output type first), one of the
        results a D3D device may give."""
        for f in spec.attribute_fields:
            activation = fused_choice(spec, f, d.attributes) if f.is_fused_activation else None
            if activation is None:
                continue
            entry = self.mapping.get(activation.name)
            if entry is None or entry["builder"] != "node" or len(entry["inputs"]) != 1:
                raise _Unsupported(f"no single-node ONNX mapping for the fused activation {activation.name}")
            attrs = {onnx_name: float(np.float32(d.attributes[f"{f.name}.{field}"])) for onnx_name, field in entry.get("attributes", {}).items()}
            result = self._node(entry["op"], [np.asarray(result)], [out_type], out_type, attrs)
        return result

    def _node(self, onnx_op: str, xs: list[np.ndarray], types: list[str], out_type: str,
              attrs: dict | None = None, prescale: tuple[float, float] | None = None,
              constants: tuple[float | int, ...] = (),
              bools: tuple[frozenset[int], bool] = (frozenset(), False)) -> np.ndarray:
        """One ONNX node over dense inputs of the output's shape; `prescale` (scale, bias) puts a
        Mul and an Add on the first input (DirectML's DML_SCALE_BIAS); `constants` are scalar
        inputs after the tensors, in the first input's type (Clip's min and max); `bools` (input
        positions, output): inputs cast to ONNX bool first (non-zero is true, as DirectML's logical
        operators read them) and a bool output cast to the output type (true = 1)."""
        for t in types + [out_type]:
            if t not in _ONNX_TYPES:
                raise _Unsupported(f"ONNX has no {t}")
        shapes = [tuple(x.shape) for x in xs]
        key = (onnx_op, tuple(types), out_type, tuple(shapes), tuple(sorted((attrs or {}).items())), prescale, constants,
               tuple(sorted(bools[0])), bools[1])
        names = [f"x{i}" for i in range(len(xs))]

        def build() -> Any:
            from onnx import helper
            nodes, inits, node_inputs = [], [], list(names)
            if prescale is not None:
                nodes += [helper.make_node("Mul", [names[0], "scale"], ["scaled"]), helper.make_node("Add", ["scaled", "bias"], ["biased"])]
                inits += [helper.make_tensor("scale", _ONNX_TYPES[types[0]], [], [prescale[0]]),
                          helper.make_tensor("bias", _ONNX_TYPES[types[0]], [], [prescale[1]])]
                node_inputs[0] = "biased"
            for i, value in enumerate(constants):
                inits.append(helper.make_tensor(f"c{i}", _ONNX_TYPES[types[0]], [], [value]))
                node_inputs.append(f"c{i}")
            for i in sorted(bools[0]):
                nodes.append(helper.make_node("Cast", [node_inputs[i]], [f"b{i}"], to=_ONNX_BOOL))
                node_inputs[i] = f"b{i}"
            if bools[1]:
                nodes += [helper.make_node(onnx_op, node_inputs, ["y_bool"], **(attrs or {})),
                          helper.make_node("Cast", ["y_bool"], ["y"], to=_ONNX_TYPES[out_type])]
            else:
                nodes.append(helper.make_node(onnx_op, node_inputs, ["y"], **(attrs or {})))
            graph = helper.make_graph(nodes, onnx_op,
                                      [helper.make_tensor_value_info(n, _ONNX_TYPES[t], list(s)) for n, t, s in zip(names, types, shapes)],
                                      [helper.make_tensor_value_info("y", _ONNX_TYPES[out_type], list(shapes[0]))], initializer=inits)
            return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        return self._session(key, build).run(None, dict(zip(names, xs)))[0]

    def _family_operand(self, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray],
                        operand: int | None = None) -> tuple[Any, np.ndarray, str, dict[str, Any]]:
        """What every family builder starts from: the spec, its one input (or of several inputs the
        `operand`-th, the one whose type the graph carries) and that input's type (unsupported where
        ONNX has none), and the attributes by name as shape expressions see them."""
        spec = self.specs.operator(d.operator)
        if operand is None:
            (name,) = entry["inputs"]
        else:
            name = entry["inputs"][operand]
        x, in_type = inputs[name], d.tensors[name].data_type  # type: ignore[union-attr]
        if in_type not in _ONNX_TYPES:
            raise _Unsupported(f"ONNX has no {in_type}")
        return spec, x, in_type, attribute_names(spec, d.attributes)

    def _reduce(self, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """A reduction whose ONNX op the enum field `function` picks (`ops`: member -> ONNX op):
        ArgMax/ArgMin as reduce_index (first index), the Reduce* ops as one node over the `axes`
        (an int64 input since opset 18), keepdims, in the input's type."""
        spec, x, in_type, names = self._family_operand(entry, d, inputs)
        field = spec.field(entry["function"])
        member = next((m for m, v in (field.enum or {}).items() if v == names[entry["function"]]), None)
        op = entry["ops"].get(member)
        if op is None:
            raise _Unsupported(f"no ONNX op for {entry['function']} = {member}")
        if op in ("ArgMax", "ArgMin"):
            return self._reduce_index({**entry, "op": op, "select_last_index": "0"}, d, inputs)
        axes = sorted(set(names[entry["axes"]]))
        key = (op, in_type, tuple(x.shape), tuple(axes))

        def build() -> Any:
            from onnx import TensorProto, helper
            out_shape = [1 if i in axes else n for i, n in enumerate(x.shape)]
            node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=1)
            graph = helper.make_graph([node], op, [helper.make_tensor_value_info("x", _ONNX_TYPES[in_type], list(x.shape))],
                                      [helper.make_tensor_value_info("y", _ONNX_TYPES[in_type], out_shape)],
                                      initializer=[helper.make_tensor("axes", TensorProto.INT64, [len(axes)], axes)])
            return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        return self._session(key, build).run(None, {"x": x})[0]

    def _reduce_index(self, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """ArgMax/ArgMin over several axes: the reduced axes moved last (ascending) and flattened,
        so the index counts row-major over them as DirectML's does, then one ONNX node on the last
        axis (keepdims, select_last_index from the spec's expression). Int64 out; the caller casts."""
        spec, x, in_type, names = self._family_operand(entry, d, inputs)
        axes = sorted(set(names[entry["axes"]]))
        last = _flag(entry["select_last_index"], names)
        keep = [i for i in range(x.ndim) if i not in axes]
        grouped_shape = [x.shape[i] for i in keep] + [int(np.prod([x.shape[i] for i in axes]))]
        key = (entry["op"], in_type, tuple(x.shape), tuple(axes), last)

        def build() -> Any:
            from onnx import TensorProto, helper
            nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=keep + axes),
                     helper.make_node("Reshape", ["t", "grouped_shape"], ["g"]),
                     helper.make_node(entry["op"], ["g"], ["y"], axis=-1, keepdims=1, select_last_index=last)]
            inits = [helper.make_tensor("grouped_shape", TensorProto.INT64, [len(grouped_shape)], grouped_shape)]
            graph = helper.make_graph(nodes, entry["op"], [helper.make_tensor_value_info("x", _ONNX_TYPES[in_type], list(x.shape))],
                                      [helper.make_tensor_value_info("y", TensorProto.INT64, grouped_shape[:-1] + [1])], initializer=inits)
            return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        return self._session(key, build).run(None, {"x": x})[0]

    def _scan(self, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """One ONNX scan node (CumSum) on the `axis` field (ONNX takes it as an int64 input), its
        `exclusive` and `reverse` attributes from the entry's shape expressions."""
        spec, x, in_type, names = self._family_operand(entry, d, inputs)
        axis = int(names[entry["axis"]])
        exclusive, reverse = _flag(entry["exclusive"], names), _flag(entry["reverse"], names)
        key = (entry["op"], in_type, tuple(x.shape), axis, exclusive, reverse)

        def build() -> Any:
            from onnx import TensorProto, helper
            node = helper.make_node(entry["op"], ["x", "axis"], ["y"], exclusive=exclusive, reverse=reverse)
            graph = helper.make_graph([node], entry["op"], [helper.make_tensor_value_info("x", _ONNX_TYPES[in_type], list(x.shape))],
                                      [helper.make_tensor_value_info("y", _ONNX_TYPES[in_type], list(x.shape))],
                                      initializer=[helper.make_tensor("axis", TensorProto.INT64, [], [axis])])
            return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        return self._session(key, build).run(None, {"x": x})[0]

    def _normalize(self, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """One ONNX Softmax, LogSoftmax or Hardmax (`op`) over the spec family's axes, where ONNX
        says the same thing: one axis (opset 13+ semantics), or the trailing axes from some k on,
        which is opset < 13's coerce-to-2-D (written here as a Reshape to {before k, from k}, the
        op on axis 1, a Reshape back: the group's elements row-major, as DirectML counts them).
        Any other set of axes is unsupported: ONNX normalises no other group."""
        spec, x, in_type, names = self._family_operand(entry, d, inputs)
        family = spec.formula.family
        axes_expr = family.expression("axes") if family is not None else None
        if axes_expr is None:
            raise _Unsupported(f"{d.operator}: the normalize mapping needs the spec's family axes")
        axes = sorted({int(a) for a in axes_expr.evaluate(*expression_scope(spec, d))})
        rank = x.ndim
        if axes != list(range(axes[0], rank)) and len(axes) != 1:
            raise _Unsupported(f"ONNX {entry['op']} normalises one axis, or (opset < 13, coerced to 2-D) the trailing "
                               f"axes from one on; axes {axes} of a {rank}-D tensor are neither")
        for field in entry.get("zero_fields", []):  # a FLOAT field the ONNX op has no counterpart of (LpNormalization's)
            value = d.attributes.get(field, spec.field(field).default)
            if float(np.float32(0.0 if value is None else value)) != 0.0:
                raise _Unsupported(f"ONNX {entry['op']} has no {field}: only {field} 0 says the same thing")
        extra: dict[str, Any] = {"p": int(names[entry["p"]])} if "p" in entry else {}  # LpNormalization's order, from a UINT field
        start = axes[0]
        flat = [int(np.prod(x.shape[:start], dtype=np.int64)), int(np.prod(x.shape[start:], dtype=np.int64))]
        one_axis = len(axes) == 1
        key = (entry["op"], in_type, tuple(x.shape), tuple(axes), tuple(sorted(extra.items())))

        def build() -> Any:
            from onnx import TensorProto, helper
            if one_axis:
                nodes, inits = [helper.make_node(entry["op"], ["x"], ["y"], axis=start, **extra)], []
            else:
                nodes = [helper.make_node("Reshape", ["x", "flat"], ["x2"]),
                         helper.make_node(entry["op"], ["x2"], ["y2"], axis=1),
                         helper.make_node("Reshape", ["y2", "shape"], ["y"])]
                inits = [helper.make_tensor("flat", TensorProto.INT64, [2], flat),
                         helper.make_tensor("shape", TensorProto.INT64, [rank], list(x.shape))]
            graph = helper.make_graph(nodes, entry["op"], [helper.make_tensor_value_info("x", _ONNX_TYPES[in_type], list(x.shape))],
                                      [helper.make_tensor_value_info("y", _ONNX_TYPES[in_type], list(x.shape))], initializer=inits)
            return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        return self._session(key, build).run(None, {"x": x})[0]

    def _top_k(self, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One ONNX TopK (sorted; ONNX orders equal values by ascending index too): values and int64
        indices, returned per output field (the caller casts the indices)."""
        spec, x, in_type, names = self._family_operand(entry, d, inputs)
        axis, k = int(names[entry["axis"]]), int(names[entry["k"]])
        largest = _flag(entry["largest"], names)
        out_shape = list(x.shape)
        out_shape[axis] = k
        key = ("TopK", in_type, tuple(x.shape), axis, k, largest)

        def build() -> Any:
            from onnx import TensorProto, helper
            node = helper.make_node("TopK", ["x", "k"], ["values", "indices"], axis=axis, largest=largest, sorted=1)
            graph = helper.make_graph([node], "TopK", [helper.make_tensor_value_info("x", _ONNX_TYPES[in_type], list(x.shape))],
                                      [helper.make_tensor_value_info("values", _ONNX_TYPES[in_type], out_shape),
                                       helper.make_tensor_value_info("indices", TensorProto.INT64, out_shape)],
                                      initializer=[helper.make_tensor("k", TensorProto.INT64, [1], [k])])
            return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        values, indices = self._session(key, build).run(None, {"x": x})
        return {entry["values"]: values, entry["indices"]: indices}

    def _pad(self, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """One ONNX Pad: the enum field `mode`'s member picks the ONNX mode (`modes`; a member
        without one is unsupported: ONNX has no SYMMETRIC), the pads input is int64
        [starts..., ends...] from the two array fields, and in constant mode the scalar union
        `value` is the constant_value input, converted to the tensor's type as the reference
        converts it (harness.model.facts.constant_of_field). ONNX Runtime rejects a reflect pad that
        reaches the dimension's size (it mirrors once, the page folds periodically), so such
        a case is unsupported before it runs."""
        spec, x, in_type, names = self._family_operand(entry, d, inputs)
        field = spec.field(entry["mode"])
        member = next((m for m, v in (field.enum or {}).items() if v == names[entry["mode"]]), None)
        mode = entry["modes"].get(member)
        if mode is None:
            raise _Unsupported(f"ONNX Pad has no mode for {entry['mode']} = {member}")
        starts, ends = list(names[entry["starts"]]), list(names[entry["ends"]])
        if mode == "reflect":
            for axis, (n, before, after) in enumerate(zip(x.shape, starts, ends)):
                if max(before, after) >= n:
                    raise _Unsupported(f"ONNX Runtime's reflect Pad takes pads below the dimension's size only "
                                       f"(dimension {axis}: size {n}, pads {before} and {after})")
        constant = None
        if mode == "constant":
            constant = constant_of_field(spec, entry["value"], d.attributes.get(entry["value"], 0), self.specs.catalog.dtype(in_type).numpy)
        out_shape = [n + before + after for n, before, after in zip(x.shape, starts, ends)]
        key = ("Pad", mode, in_type, tuple(x.shape), tuple(starts), tuple(ends), None if constant is None else constant.tobytes())

        def build() -> Any:
            from onnx import TensorProto, helper, numpy_helper
            inits = [helper.make_tensor("pads", TensorProto.INT64, [2 * x.ndim], starts + ends)]
            if constant is not None:  # from the array itself: its bits, NaN payloads included
                inits.append(numpy_helper.from_array(constant, "constant_value"))
            node = helper.make_node("Pad", ["x"] + [i.name for i in inits], ["y"], mode=mode)
            graph = helper.make_graph([node], "Pad", [helper.make_tensor_value_info("x", _ONNX_TYPES[in_type], list(x.shape))],
                                      [helper.make_tensor_value_info("y", _ONNX_TYPES[in_type], out_shape)], initializer=inits)
            return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        return self._session(key, build).run(None, {"x": x})[0]

    def _matmul(self, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """alpha * op(A) x op(B) + beta * C as ONNX Transpose (last two dims, where the spec's
        expression holds), MatMul (batched over the leading dims), Mul and, with C, Mul and Add: each
        step rounded to the tensor type, one of the orders a D3D device may take. The scalars are
        constants of the tensor's type, so a FLOAT alpha or beta that the type cannot hold (1e-45 in
        FLOAT16) is not expressible: unsupported. Without C, beta is ignored, as the page says."""
        spec, names, a, b, c, dtype = self._two_operands_and_addend(entry, d, inputs)
        numpy_type = self.specs.catalog.dtype(dtype).numpy
        scalars = {}
        for key in ("alpha", "beta") if c is not None else ("alpha",):
            # the attribute itself: attribute_names() gives shape expressions whole numbers, -0.0 as 0
            value = np.float32(d.attributes.get(entry[key], spec.default_attributes().get(entry[key], 0.0)))
            with np.errstate(over="ignore"):
                held = np.asarray(value).astype(numpy_type)
            if not (held == value or (np.isnan(held) and np.isnan(value))):
                raise _Unsupported(f"ONNX: {entry[key]} {float(value)!r} is not a {dtype} value, and the ONNX Mul takes it in the tensor's type")
            scalars[key] = float(value)
        ta, tb = _flag(entry["transpose_a"], names), _flag(entry["transpose_b"], names)
        session_key = ("matmul", dtype, tuple(a.shape), tuple(b.shape), None if c is None else tuple(c.shape), ta, tb,
                       tuple(sorted(scalars.items())))

        def perm(x: np.ndarray) -> list[int]:
            return list(range(x.ndim - 2)) + [x.ndim - 1, x.ndim - 2]

        out_shape = list(d.tensors[spec.formula.output].sizes)  # type: ignore[union-attr]

        def build() -> Any:
            from onnx import helper
            t = _ONNX_TYPES[dtype]
            nodes, inits, a_in, b_in = [], [], "a", "b"
            if ta:
                nodes.append(helper.make_node("Transpose", ["a"], ["at"], perm=perm(a)))
                a_in = "at"
            if tb:
                nodes.append(helper.make_node("Transpose", ["b"], ["bt"], perm=perm(b)))
                b_in = "bt"
            nodes += [helper.make_node("MatMul", [a_in, b_in], ["ab"]), helper.make_node("Mul", ["ab", "alpha"], ["y0"])]
            inits.append(helper.make_tensor("alpha", t, [], [scalars["alpha"]]))
            graph_inputs = [helper.make_tensor_value_info("a", t, list(a.shape)), helper.make_tensor_value_info("b", t, list(b.shape))]
            if c is not None:
                nodes += [helper.make_node("Mul", ["c", "beta"], ["bc"]), helper.make_node("Add", ["y0", "bc"], ["y"])]
                inits.append(helper.make_tensor("beta", t, [], [scalars["beta"]]))
                graph_inputs.append(helper.make_tensor_value_info("c", t, list(c.shape)))
            else:
                nodes.append(helper.make_node("Identity", ["y0"], ["y"]))
            graph = helper.make_graph(nodes, "Gemm", graph_inputs, [helper.make_tensor_value_info("y", t, out_shape)], initializer=inits)
            return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        feeds = {"a": a, "b": b} if c is None else {"a": a, "b": b, "c": c}
        return self._session(session_key, build).run(None, feeds)[0]

    def _quantized_node(self, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """One ONNX node (`op`, in `domain`, default ONNX's) over the table entry's `inputs` in the
        node's order: the `operands` (default: the first two inputs; the matrices, or the input and
        filter) fed as they are, every other one (a scale or zero point) as a scalar where it holds
        one element, else flattened to 1-D (ONNX's per-row or per-column form, in the order it holds
        its elements). An absent optional input is left out (an empty name), or, where `zeros` names
        it, fed as a scalar 0 of the type of the field it maps to (a zero point ONNX requires). The
        fields under `per_tensor` must hold one element: ONNX Runtime takes no other (more:
        unsupported); those under `batched`, where the second operand has batch dims, are fed as
        {batch..., 1, elements} (ONNX Runtime's per-column form for a batched B: a 1-D one it
        takes only for a 2-D B). A field under `absent_only` makes the case unsupported where it is
        present (`absent_only_why` says why). `window` ({strides, dilations, starts, ends, groups}:
        the array and scalar fields) gives a convolution node its strides, dilations, pads and group;
        a pooling node's ({strides, starts, ends, window_size, include_padding: a shape expression,
        unit: array fields the node lacks, supported where all 1s}) its strides, pads, kernel_shape
        and count_include_pad. The fields under `rank0` are fed 0-d where they hold one element
        (the others {1}: a node may require either)."""
        names = list(entry["inputs"])
        operands = list(entry.get("operands", names[:2]))
        for name in entry.get("absent_only", []):
            if d.tensors.get(name) is not None:
                raise _Unsupported(f"ONNX Runtime's {entry['op']} has no {name} of this form ({entry.get('absent_only_why', 'see backends/onnxruntime_ops')})")
        zeros = dict(entry.get("zeros", {}))
        feeds: dict[str, np.ndarray] = {}
        types: dict[str, str] = {}
        for name in names:
            desc = d.tensors.get(name)
            if desc is None and name in zeros:  # required by ONNX: a 0 of the tensor's type it dequantizes
                like = d.tensors[zeros[name]]
                assert like is not None
                feeds[name], types[name] = np.zeros((), self.specs.catalog.dtype(like.data_type).numpy), like.data_type
                continue
            if desc is None:
                continue
            if desc.data_type not in _ONNX_TYPES:
                raise _Unsupported(f"ONNX has no {desc.data_type}")
            value = inputs[name]
            if name not in operands:
                if value.size != 1 and name in entry.get("per_tensor", []):
                    raise _Unsupported(f"ONNX Runtime's {entry['op']} takes a per-tensor {name} only ({value.size} elements)")
                value = value.reshape(()) if value.size == 1 else value.reshape(-1)
                if value.ndim == 1 and name in entry.get("batched", []) and inputs[operands[1]].ndim > 2:  # {batch..., 1, N}
                    second = inputs[operands[1]]
                    value = np.broadcast_to(value, second.shape[:-2] + (1, value.size))
            # np.ascontiguousarray gives at least 1-D ({1}: QLinearConv's bias needs it); `rank0` fields stay 0-d
            keep = value.ndim == 0 and name in entry.get("rank0", [])
            feeds[name], types[name] = value.copy() if keep else np.ascontiguousarray(value), desc.data_type
        out_name = self.specs.operator(d.operator).formula.output
        out_desc = d.tensors[out_name]
        assert out_desc is not None
        out_type = out_desc.data_type
        if out_type not in _ONNX_TYPES:
            raise _Unsupported(f"ONNX has no {out_type}")
        attrs: dict[str, Any] = {}
        if "window" in entry:  # a convolution's or a pooling's window, from the array and scalar fields the entry names
            names_ = attribute_names(self.specs.operator(d.operator), d.attributes)
            win = entry["window"]
            attrs = {"strides": [int(v) for v in names_[win["strides"]]],
                     "pads": [int(v) for v in names_[win["starts"]]] + [int(v) for v in names_[win["ends"]]]}
            for param, attr in (("dilations", "dilations"), ("window_size", "kernel_shape")):
                if param in win:
                    attrs[attr] = [int(v) for v in names_[win[param]]]
            if "groups" in win:
                attrs["group"] = int(names_[win["groups"]])
            if "include_padding" in win:
                attrs["count_include_pad"] = _flag(win["include_padding"], names_)
            for field in win.get("unit", []):  # the node has no such attribute: only its default, all 1s
                if any(int(v) != 1 for v in names_[field]):
                    raise _Unsupported(f"ONNX Runtime's {entry['op']} has no {field} (only 1s: {[int(v) for v in names_[field]]})")
        key = ("quantized_node", entry["op"], entry.get("domain", ""), tuple((n, types[n], feeds[n].shape) for n in feeds), out_type,
               tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in sorted(attrs.items())))

        def build() -> Any:
            from onnx import helper
            node = helper.make_node(entry["op"], [n if n in feeds else "" for n in names], ["y"], domain=entry.get("domain", ""),
                                    **attrs)
            while node.input and node.input[-1] == "":  # trailing absent inputs are left out
                node.input.pop()
            graph = helper.make_graph([node], entry["op"],
                                      [helper.make_tensor_value_info(n, _ONNX_TYPES[types[n]], list(feeds[n].shape)) for n in feeds],
                                      [helper.make_tensor_value_info("y", _ONNX_TYPES[out_type], None)])
            opsets = [helper.make_opsetid("", OPSET)] + ([helper.make_opsetid(entry["domain"], 1)] if entry.get("domain") else [])
            return helper.make_model(graph, opset_imports=opsets, ir_version=IR_VERSION)
        return self._session(key, build).run(None, feeds)[0]

    def _two_operands_and_addend(self, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray]) -> tuple:
        """What the matmul and window builders share: the spec, the attributes by name, the table
        entry's two operands and optional addend (None when absent), and the first one's type
        (unsupported where ONNX has none)."""
        spec = self.specs.operator(d.operator)
        first, second, addend = (entry["inputs"] + [None])[:3]
        dtype = d.tensors[first].data_type  # type: ignore[union-attr]
        if dtype not in _ONNX_TYPES:
            raise _Unsupported(f"ONNX has no {dtype}")
        return (spec, attribute_names(spec, d.attributes), inputs[first], inputs[second],
                inputs.get(addend) if addend else None, dtype)

    def _window(self, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """One ONNX Conv, or ConvTranspose where the `transposed` expression holds (its weights
        {C, M/G, k...} and output_padding are the transposed window's), on the input and filter
        fields, with pads [starts..., ends...], strides, dilations and group from the table's fields;
        a forward output padding as a Pad of zeros at the end of each spatial dimension (Conv has
        none); then, with the third input (a bias {1, M, 1...}), an Add: each step rounded to the tensor
        type, one of the orders a D3D device may take (ONNX's own B would join the accumulation).
        ONNX's Conv is a cross-correlation: where the `flip` expression holds the filter is fed
        reversed along each spatial dimension (a reindexing, no arithmetic)."""
        spec, names, x, w, bias, dtype = self._two_operands_and_addend(entry, d, inputs)
        spatial = x.ndim - 2
        if _flag(entry["flip"], names):
            w = np.ascontiguousarray(w[(slice(None), slice(None)) + (slice(None, None, -1),) * spatial])
        transposed = _flag(entry["transposed"], names)
        attrs: dict[str, Any] = {"strides": [int(v) for v in names[entry["strides"]]],
                                 "dilations": [int(v) for v in names[entry["dilations"]]],
                                 "pads": [int(v) for v in names[entry["starts"]]] + [int(v) for v in names[entry["ends"]]],
                                 "group": int(names[entry["groups"]])}
        output_padding = [int(v) for v in names[entry["output_padding"]]]
        if transposed:
            attrs["output_padding"] = output_padding
        op = "ConvTranspose" if transposed else "Conv"
        pad_after = not transposed and any(output_padding)  # Conv has none: zeros Pad-ded at the end
        out_shape = list(d.tensors[spec.formula.output].sizes)  # type: ignore[union-attr]
        key = ("window", op, dtype, tuple(x.shape), tuple(w.shape), None if bias is None else tuple(bias.shape),
               tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in sorted(attrs.items())), tuple(output_padding))

        def build() -> Any:
            from onnx import helper
            t = _ONNX_TYPES[dtype]
            graph_inputs = [helper.make_tensor_value_info("x", t, list(x.shape)), helper.make_tensor_value_info("w", t, list(w.shape))]
            conv_out = "xw" if bias is not None else "y"
            nodes = [helper.make_node(op, ["x", "w"], ["conv" if pad_after else conv_out], **attrs)]
            inits = []
            if pad_after:
                nodes.append(helper.make_node("Pad", ["conv", "pads"], [conv_out], mode="constant"))
                inits.append(helper.make_tensor("pads", 7, [2 * x.ndim], [0] * (x.ndim + 2) + output_padding))
            if bias is not None:
                nodes.append(helper.make_node("Add", ["xw", "b"], ["y"]))
                graph_inputs.append(helper.make_tensor_value_info("b", t, list(bias.shape)))
            graph = helper.make_graph(nodes, op, graph_inputs, [helper.make_tensor_value_info("y", t, out_shape)], initializer=inits)
            return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        feeds = {"x": x, "w": w} if bias is None else {"x": x, "w": w, "b": bias}
        return self._session(key, build).run(None, feeds)[0]

    def _pool(self, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One ONNX pooling node (`op`: MaxPool, AveragePool or LpPool) with kernel_shape, strides,
        pads [starts..., ends...] and dilations (absent: 1) from the table's array fields; where
        named, AveragePool's count_include_pad from the `include_padding` expression, LpPool's p from
        the `p` field, and MaxPool's Indices (int64, flat over the whole input: the caller casts)
        into the `indices` output field when the descriptor has it."""
        spec, x, in_type, names = self._family_operand(entry, d, inputs)
        rank = x.ndim - 2

        def ints(key: str, default: int) -> list[int]:
            return [int(v) for v in names[entry[key]]] if key in entry else [default] * rank
        attrs: dict[str, Any] = {"kernel_shape": ints("window_size", 1), "strides": ints("strides", 1),
                                 "pads": ints("starts", 0) + ints("ends", 0), "dilations": ints("dilations", 1)}
        if "include_padding" in entry:
            attrs["count_include_pad"] = _flag(entry["include_padding"], names)
        if "p" in entry:
            attrs["p"] = int(names[entry["p"]])
        indices = entry.get("indices") if entry.get("indices") and d.tensors.get(entry["indices"]) is not None else None
        out_shape = list(d.tensors[spec.formula.output].sizes)  # type: ignore[union-attr]
        key = ("pool", entry["op"], in_type, tuple(x.shape), tuple((k, tuple(v) if isinstance(v, list) else v)
                                                                  for k, v in sorted(attrs.items())), indices is not None)

        def build() -> Any:
            from onnx import TensorProto, helper
            outputs = [helper.make_tensor_value_info("y", _ONNX_TYPES[in_type], out_shape)]
            if indices is not None:
                outputs.append(helper.make_tensor_value_info("i", TensorProto.INT64, out_shape))
            node = helper.make_node(entry["op"], ["x"], [o.name for o in outputs], **attrs)
            graph = helper.make_graph([node], entry["op"], [helper.make_tensor_value_info("x", _ONNX_TYPES[in_type], list(x.shape))],
                                      outputs)
            return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        results = self._session(key, build).run(None, {"x": x})
        return {spec.formula.output: results[0], **({indices: results[1]} if indices is not None else {})}

    def _col2im(self, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """One ONNX Col2Im (opset 18): the columns {N, C x prod(block), L} summed back into the image
        whose spatial sizes are the output's; block_shape from the `window_size` field, strides,
        dilations and pads [starts..., ends...] from the table's array fields."""
        spec, x, in_type, names = self._family_operand(entry, d, inputs)
        out_shape = list(d.tensors[spec.formula.output].sizes)  # type: ignore[union-attr]
        rank = len(out_shape) - 2

        def ints(key: str, default: int) -> list[int]:
            return [int(v) for v in names[entry[key]]] if key in entry else [default] * rank
        attrs: dict[str, Any] = {"strides": ints("strides", 1), "dilations": ints("dilations", 1),
                                 "pads": ints("starts", 0) + ints("ends", 0)}
        image, block = np.array(out_shape[2:], dtype=np.int64), np.array(ints("window_size", 1), dtype=np.int64)
        key = ("Col2Im", in_type, tuple(x.shape), tuple(out_shape), tuple(block.tolist()),
               tuple((k, tuple(v)) for k, v in sorted(attrs.items())))

        def build() -> Any:
            from onnx import TensorProto, helper
            node = helper.make_node("Col2Im", ["x", "image_shape", "block_shape"], ["y"], **attrs)
            graph = helper.make_graph([node], "Col2Im",
                                      [helper.make_tensor_value_info("x", _ONNX_TYPES[in_type], list(x.shape)),
                                       helper.make_tensor_value_info("image_shape", TensorProto.INT64, [rank]),
                                       helper.make_tensor_value_info("block_shape", TensorProto.INT64, [rank])],
                                      [helper.make_tensor_value_info("y", _ONNX_TYPES[in_type], out_shape)])
            return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        return self._session(key, build).run(None, {"x": x, "image_shape": image, "block_shape": block})[0]

    def _resize(self, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """One ONNX Resize (opset 21) with the spec family's per-dimension scales as its `scales`
        input: `modes` maps the interpolation enum field's members to Resize's mode (nearest takes
        round_prefer_ceil, floor(x + 0.5)); offsets of 0.5 each (or none) are coordinate mode
        half_pixel, 0 each asymmetric, anything else is unsupported (a rounding `direction`: Resize's floor or
        ceil), as is an output whose Sizes
        differ from floor(input size * scale) (Resize derives its output's Sizes so). The family's
        stretched (antialiased) linear dimensions are Resize's `antialias` (the same normalised tent
        with the edges repeated), which stretches every downscale: only where the stretched
        dimensions are all the downscaled ones."""
        spec, x, in_type, names = self._family_operand(entry, d, inputs)
        family = spec.formula.family
        if family is None or family.expression("scales") is None:
            raise _Unsupported(f"{d.operator}: the resize mapping needs the spec's family scales")
        scope = expression_scope(spec, d)

        def floats(key: str, default: float) -> list[float]:
            expr = family.expression(key)
            return ([float(np.float32(v)) for v in expr.evaluate(*scope)] if expr is not None
                    else [default] * x.ndim)
        scales = floats("scales", 1.0)
        offsets = floats("input_offsets", 0.5) + floats("output_offsets", 0.5)
        if all(o == 0.5 for o in offsets):
            transform = "half_pixel"
        elif all(o == 0.0 for o in offsets):
            transform = "asymmetric"
        else:
            raise _Unsupported(f"ONNX Resize has no coordinate mode for pixel offsets {offsets}")
        field = spec.field(family.params["mode"]) if family.params["mode"] in names else None
        member = (next((m for m, v in (field.enum or {}).items() if v == names[field.name]), None) if field is not None
                  else family.params["mode"])
        mode = entry["modes"].get(member)
        if mode is None:
            raise _Unsupported(f"no ONNX Resize mode for {member}")
        wide_expr = family.expression("antialiased")
        wide = [bool(w) for w in wide_expr.evaluate(*scope)] if wide_expr is not None and mode == "linear" else []
        if any(wide) and any(s < 1 and not w for s, w in zip(scales, wide)):
            raise _Unsupported("a downscale the spec does not stretch next to one it does: ONNX Resize's antialias "
                               "stretches every dimension whose scale is below 1")
        out_shape = list(d.tensors[spec.formula.output].sizes)  # type: ignore[union-attr]
        if any(int(np.floor(size * np.float32(s))) != o for size, s, o in zip(x.shape, scales, out_shape)):
            raise _Unsupported(f"ONNX Resize's output Sizes are floor(input * scale), not {out_shape}")
        attrs: dict[str, Any] = {"mode": mode, "coordinate_transformation_mode": transform}
        if any(wide):  # the family's stretched tent (half-width 1 / scale, normalised, edges repeated): Resize's antialias
            attrs["antialias"] = 1
        if mode == "nearest":  # a rounding direction (the family's `direction`): floor or ceil
            direction = family.expression("direction")
            attrs["nearest_mode"] = ("round_prefer_ceil" if direction is None
                                     else "ceil" if direction.evaluate(*scope) else "floor")
        scale_bits = tuple(int(b) for b in np.asarray(scales, dtype=np.float32).view(np.uint32))
        key = ("Resize", in_type, tuple(x.shape), tuple(out_shape), scale_bits, tuple(sorted(attrs.items())))

        def build() -> Any:
            from onnx import TensorProto, helper
            node = helper.make_node("Resize", ["x", "", "scales"], ["y"], **attrs)
            graph = helper.make_graph([node], "Resize", [helper.make_tensor_value_info("x", _ONNX_TYPES[in_type], list(x.shape))],
                                      [helper.make_tensor_value_info("y", _ONNX_TYPES[in_type], out_shape)],
                                      [helper.make_tensor("scales", TensorProto.FLOAT, [len(scales)], scales)])
            return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        return self._session(key, build).run(None, {"x": x})[0]

    def _roi_pool(self, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """One ONNX MaxRoiPool on the `inputs` fields (the image, then the regions, fed as
        {NumROIs, 5} rows [batch, x1, y1, x2, y2]), `pooled_shape` the output's last two Sizes and
        `spatial_scale` the named FLOAT field. A region whose batch index ONNX Runtime cannot read
        (not finite, or truncated outside [0, N)) is unsupported: ORT fails the run there."""
        spec, x, in_type, names = self._family_operand(entry, d, inputs, operand=0)
        rois = np.asarray(inputs[entry["inputs"][1]])
        rows = rois.reshape(-1, rois.shape[-1])
        with np.errstate(invalid="ignore"):
            batch = rows[:, 0].astype(np.float64)
            if not (np.isfinite(batch) & (np.trunc(batch) >= 0) & (np.trunc(batch) < x.shape[0])).all():
                raise _Unsupported("a region's batch index lies outside the input's batches (ORT's MaxRoiPool fails the run)")
        out_sizes = list(d.tensors[spec.formula.output].sizes)  # type: ignore[union-attr]
        scale = float(np.float32(names[entry["spatial_scale"]]))
        if not scale > 0:
            raise _Unsupported(f"ONNX Runtime's MaxRoiPool requires spatial_scale > 0, not {scale}")
        key = ("MaxRoiPool", in_type, tuple(x.shape), tuple(rows.shape), tuple(out_sizes), scale)

        def build() -> Any:
            from onnx import helper
            node = helper.make_node("MaxRoiPool", ["x", "rois"], ["y"], pooled_shape=out_sizes[2:], spatial_scale=scale)
            graph = helper.make_graph([node], "MaxRoiPool",
                                      [helper.make_tensor_value_info("x", _ONNX_TYPES[in_type], list(x.shape)),
                                       helper.make_tensor_value_info("rois", _ONNX_TYPES[in_type], list(rows.shape))],
                                      [helper.make_tensor_value_info("y", _ONNX_TYPES[in_type], out_sizes)])
            return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        return self._session(key, build).run(None, {"x": x, "rois": np.ascontiguousarray(rows)})[0]

    def _roi_align(self, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """One ONNX RoiAlign (opset 16) on the `inputs` fields (the image, the regions fed as
        {NumROIs, 4}, the batch indices as {NumROIs} int64), where it says what the spec family says:
        mode avg (ONNX Runtime's max weighs before taking the maximum, not ONNX's maximum of the
        samples), bilinear samples, one sample count for every region and dimension (the family's
        clamped count, its ceiling: sampling_ratio), the corners fed scaled with spatial_scale 1
        (ONNX has one scale; the FLOAT32 products are the device's), pixel offsets 0.5 and -0.5 (half_pixel) or 0 and -0.5 (output_half_pixel),
        no corner alignment. ONNX reads 0 past [-1, size] where the family reads its out-of-bounds
        value: such samples lie outside [0, size - 1], which the family leaves open (past_edge), so
        the mapping holds wherever the spec says anything. Anything else is unsupported."""
        spec, x, in_type, names = self._family_operand(entry, d, inputs, operand=0)
        family = spec.formula.family
        if family is None:
            raise _Unsupported(f"{d.operator}: the roi_align mapping needs the spec's roi family")
        scope = expression_scope(spec, d)

        def value(key: str, default: Any) -> Any:
            expr = family.expression(key)
            return default if expr is None else expr.evaluate(*scope)
        if not value("average", True) or value("nearest", False) or value("align_corners", False):
            raise _Unsupported("ONNX RoiAlign is bilinear, and its max mode is ONNX Runtime's own: average only, no corner alignment")
        minimum, maximum = (int(v) for v in value("samples", [1, 1]))
        offsets = (float(np.float32(value("input_offset", 0.5))), float(np.float32(value("output_offset", -0.5))))
        transform = {(0.5, -0.5): "half_pixel", (0.0, -0.5): "output_half_pixel"}.get(offsets)
        if transform is None:
            raise _Unsupported(f"ONNX RoiAlign has no coordinate mode for pixel offsets {offsets}")
        scale_y, scale_x = (float(np.float32(v)) for v in value("spatial_scale", [1.0, 1.0]))
        # ONNX has one spatial_scale: the corners are fed scaled (the same FLOAT32 products), scale 1
        raw = np.asarray(inputs[entry["inputs"][1]]).reshape(-1, 4).astype(np.float32)
        with np.errstate(all="ignore"):
            rois = np.ascontiguousarray(raw * np.array([scale_x, scale_y, scale_x, scale_y], dtype=np.float32))
        out_sizes = list(d.tensors[spec.formula.output].sizes)  # type: ignore[union-attr]
        # one sampling_ratio for every region: the clamped count (its ceiling) where all agree
        with np.errstate(all="ignore"):
            sizes = np.abs(np.stack([rois[:, 3] - rois[:, 1], rois[:, 2] - rois[:, 0]], axis=1)).astype(np.float64)
            quotients = np.clip(sizes / np.array(out_sizes[2:], dtype=np.float64), minimum, maximum)
        counts = set(np.ceil(quotients).reshape(-1).tolist())
        if minimum < 1 or minimum > maximum or len(counts) != 1 or not np.isfinite(quotients).all():
            raise _Unsupported("ONNX RoiAlign takes one sample count for every region: the clamped counts differ here")
        ratio = int(counts.pop())
        batch = np.asarray(inputs[entry["inputs"][2]]).reshape(-1).astype(np.int64)
        if ((batch < 0) | (batch >= x.shape[0])).any():
            raise _Unsupported("a region's batch index lies outside the input's batches (ORT's RoiAlign fails the run)")
        attrs = {"mode": "avg", "output_height": out_sizes[2], "output_width": out_sizes[3], "sampling_ratio": ratio,
                 "spatial_scale": 1.0, "coordinate_transformation_mode": transform}
        key = ("RoiAlign", in_type, tuple(x.shape), tuple(rois.shape), tuple(sorted(attrs.items())))

        def build() -> Any:
            from onnx import TensorProto, helper
            node = helper.make_node("RoiAlign", ["x", "rois", "batch"], ["y"], **attrs)
            graph = helper.make_graph([node], "RoiAlign",
                                      [helper.make_tensor_value_info("x", _ONNX_TYPES[in_type], list(x.shape)),
                                       helper.make_tensor_value_info("rois", _ONNX_TYPES[in_type], list(rois.shape)),
                                       helper.make_tensor_value_info("batch", TensorProto.INT64, [len(batch)])],
                                      [helper.make_tensor_value_info("y", _ONNX_TYPES[in_type], out_sizes)])
            return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        return self._session(key, build).run(None, {"x": x, "rois": rois, "batch": batch})[0]

    def _multi_output_node(self, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One ONNX `op` node on the `inputs` fields, in the node's input order, whose outputs, in
        the node's order, are the `results` fields, each in its descriptor's type and Sizes (a node
        that computes several results at once). A type ONNX Runtime does not implement for the op
        makes the model fail to build: unsupported, with its message."""
        names, outs = list(entry["inputs"]), list(entry["results"])
        types = [_tensor(d, n).data_type for n in names + outs]
        missing = [t for t in types if t not in _ONNX_TYPES]
        if missing:
            raise _Unsupported(f"ONNX has no {missing[0]}")
        shapes = [list(_tensor(d, n).sizes) for n in names + outs]
        key = ("multi", entry["op"], tuple(types), tuple(tuple(s) for s in shapes))

        def build() -> Any:
            from onnx import helper
            node = helper.make_node(entry["op"], [f"i{k}" for k in range(len(names))], [f"o{k}" for k in range(len(outs))])
            graph = helper.make_graph(
                [node], entry["op"],
                [helper.make_tensor_value_info(f"i{k}", _ONNX_TYPES[types[k]], shapes[k]) for k in range(len(names))],
                [helper.make_tensor_value_info(f"o{k}", _ONNX_TYPES[types[len(names) + k]], None) for k in range(len(outs))])
            return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        results = self._session(key, build).run(None, {f"i{k}": inputs[n] for k, n in enumerate(names)})
        return {name: np.asarray(value).reshape(shapes[len(names) + k]) for k, (name, value) in enumerate(zip(outs, results))}

    def _recurrent(self, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One ONNX `op` node (RNN, GRU, LSTM) on `inputs` (X, W, R, B, sequence_lens, initial_h and for an
        LSTM initial_c and P: the spec's fields in ONNX's order, each less DirectML's leading 1s; an absent
        one left out), its outputs Y, Y_h (and Y_c) the `results` fields. The direction is the spec family's (`backward`, `bidirectional`); the activation
        array field `activations` gives ONNX's `activations` (each item's own single-node mapping's op)
        and `activation_alpha` / `activation_beta` (each item's fields its mapping names alpha and beta,
        in item order, only for the items that take them: how ONNX Runtime consumes the lists); `gates` (default 1)
        divides W's third size into hidden_size, and the family's `linear_before_reset` becomes GRU's attribute,
        its `use_clip` and `clip` LSTM's clip and its `couple_input_forget` LSTM's input_forget."""
        spec = self.specs.operator(d.operator)
        family = spec.formula.family
        assert family is not None
        names_, facts = expression_scope(spec, d)
        field = spec.field(entry["activations"])
        acts, alphas, betas = [], [], []
        for activation, values in activation_items(spec, field, d.attributes):
            mapped = self.mapping.get(activation.name)
            if mapped is None or mapped["builder"] != "node":
                raise _Unsupported(f"no single-node ONNX mapping for the activation {activation.name}")
            acts.append(mapped["op"])
            attrs = mapped.get("attributes", {})
            if "alpha" in attrs:
                alphas.append(float(np.float32(values[attrs["alpha"]])))
            if "beta" in attrs:
                betas.append(float(np.float32(values[attrs["beta"]])))
        bidirectional = bool(family.expression("bidirectional").evaluate(names_, facts))  # type: ignore[union-attr]
        backward = bool(family.expression("backward").evaluate(names_, facts))  # type: ignore[union-attr]
        direction = "bidirectional" if bidirectional else "reverse" if backward else "forward"
        lbr = family.expression("linear_before_reset")
        extra: dict[str, Any] = {"linear_before_reset": int(bool(lbr.evaluate(names_, facts)))} if lbr is not None else {}
        use_clip, couple = family.expression("use_clip"), family.expression("couple_input_forget")
        if use_clip is not None and bool(use_clip.evaluate(names_, facts)):
            extra["clip"] = float(np.float32(d.attributes[str(family.params["clip"])]))
        if couple is not None:
            extra["input_forget"] = int(bool(couple.evaluate(names_, facts)))
        x_name, w_name = entry["inputs"][0], entry["inputs"][1]
        in_type = _tensor(d, x_name).data_type
        if in_type not in _ONNX_TYPES:
            raise _Unsupported(f"ONNX has no {in_type}")
        hidden = int(_tensor(d, w_name).sizes[2]) // int(entry.get("gates", 1))
        fed: list[tuple[str, np.ndarray, str]] = []  # (ONNX input slot, value, type)
        drops = (1, 1, 1, 2, 3, 1, 1, 2)  # DirectML's leading 1s per input (X, W, R, B, sequence_lens, initial_h, initial_c, P)
        slots: list[str] = []
        for k, name in enumerate(entry["inputs"]):
            desc = d.tensors.get(name)
            if desc is None:
                slots.append("")
                continue
            value = np.asarray(inputs[name]).reshape(list(desc.sizes)[drops[k]:])
            if k == 4:
                if value.size and int(value.max()) > 2**31 - 1:
                    raise _Unsupported("ONNX's sequence_lens is int32: a length beyond 2^31 - 1")
                value, vtype = value.astype(np.int32), "INT32"
            else:
                vtype = desc.data_type
            slots.append(f"i{k}")
            fed.append((f"i{k}", value, vtype))
        while slots and not slots[-1]:
            slots.pop()
        outs = list(entry["results"])
        shapes = [list(_tensor(d, n).sizes) for n in outs]
        key = ("recurrent", entry["op"], direction, tuple(acts), tuple(alphas), tuple(betas), hidden, tuple(extra.items()),
               tuple((n, v.shape, t) for n, v, t in fed))

        def build() -> Any:
            from onnx import helper
            attrs: dict[str, Any] = {"direction": direction, "hidden_size": hidden, "activations": acts, **extra}
            if alphas:
                attrs["activation_alpha"] = alphas
            if betas:
                attrs["activation_beta"] = betas
            results_ = ["y", "y_h", "y_c"][:len(outs)]
            node = helper.make_node(entry["op"], slots, results_, **attrs)
            graph = helper.make_graph(
                [node], entry["op"], [helper.make_tensor_value_info(n, _ONNX_TYPES[t], list(v.shape)) for n, v, t in fed],
                [helper.make_tensor_value_info(o, _ONNX_TYPES[in_type], None) for o in results_])
            return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        results = self._session(key, build).run(None, {n: v for n, v, _ in fed})
        return {name: np.asarray(value).reshape(shape) for name, value, shape in zip(outs, results, shapes)}

    def _attention(self, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One com.microsoft MultiHeadAttention on the spec family's roles (backends/onnxruntime_attention.py)."""
        from backends.onnxruntime_attention import AttentionUnsupported, run_attention
        try:
            return run_attention(self.specs.operator(d.operator), entry, d, inputs, self._session, _ONNX_TYPES, OPSET, IR_VERSION)
        except AttentionUnsupported as exc:
            raise _Unsupported(str(exc)) from None

    def _nonzero(self, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One ONNX NonZero and a Transpose (its {rank, count} int64 indices as one row per element,
        in element order): the count into the `count` output, the rows' last N coordinates (N the
        `coordinates` output's last size) into its first rows, the rows past the count 0 (what the
        spec leaves open); int64, the caller casts."""
        spec, x, in_type, _ = self._family_operand(entry, d, inputs)
        count_desc, coords_desc = d.tensors[entry["count"]], d.tensors[entry["coordinates"]]
        assert count_desc is not None and coords_desc is not None
        sizes = list(coords_desc.sizes)
        rows, width = (sizes[-2], sizes[-1]) if len(sizes) >= 2 else (1, sizes[-1])
        key = ("NonZero", in_type, tuple(x.shape))

        def build() -> Any:
            from onnx import TensorProto, helper
            nodes = [helper.make_node("NonZero", ["x"], ["i"]), helper.make_node("Transpose", ["i"], ["y"], perm=[1, 0])]
            graph = helper.make_graph(nodes, "NonZero", [helper.make_tensor_value_info("x", _ONNX_TYPES[in_type], list(x.shape))],
                                      [helper.make_tensor_value_info("y", TensorProto.INT64, [None, x.ndim])])
            return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        found = self._session(key, build).run(None, {"x": x})[0].reshape(-1, x.ndim)
        out = np.zeros((rows, width), dtype=np.int64)
        kept = found[:rows, max(0, x.ndim - width):]
        out[:len(kept), width - kept.shape[1]:] = kept
        return {entry["count"]: np.full(list(count_desc.sizes), len(found), dtype=np.int64),
                entry["coordinates"]: out.reshape(sizes)}

    def _join(self, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """One ONNX Concat of the present items of a tensor array (`inputs` names the array) along
        the `axis` field, in item order: the array holds InputCount items, then nothing."""
        spec = self.specs.operator(d.operator)
        items = [name for array in entry["inputs"] for name in spec.tensor_arrays.get(array, [array])
                 if d.tensors.get(name) is not None]
        xs = [inputs[name] for name in items]
        in_type = d.tensors[items[0]].data_type  # type: ignore[union-attr]
        if in_type not in _ONNX_TYPES:
            raise _Unsupported(f"ONNX has no {in_type}")
        axis = int(attribute_names(spec, d.attributes)[entry["axis"]])
        out_sizes = list(d.tensors[spec.formula.output].sizes)  # type: ignore[union-attr]
        key = ("Concat", in_type, axis, tuple(tuple(x.shape) for x in xs))

        def build() -> Any:
            from onnx import helper
            names = [f"x{i}" for i in range(len(xs))]
            node = helper.make_node("Concat", names, ["y"], axis=axis)
            graph = helper.make_graph([node], "Concat",
                                      [helper.make_tensor_value_info(n, _ONNX_TYPES[in_type], list(x.shape)) for n, x in zip(names, xs)],
                                      [helper.make_tensor_value_info("y", _ONNX_TYPES[in_type], out_sizes)])
            return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        return self._session(key, build).run(None, {f"x{i}": x for i, x in enumerate(xs)})[0]

    def _split(self, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One ONNX Split of the input along the `axis` field into the present items of the output
        tensor array `outputs`, each as long there as its Sizes say (the `split` input)."""
        spec = self.specs.operator(d.operator)
        x = inputs[entry["inputs"][0]]
        in_type = d.tensors[entry["inputs"][0]].data_type  # type: ignore[union-attr]
        if in_type not in _ONNX_TYPES:
            raise _Unsupported(f"ONNX has no {in_type}")
        axis = int(attribute_names(spec, d.attributes)[entry["axis"]])
        items = [n for n in spec.tensor_arrays[entry["outputs"]] if d.tensors.get(n) is not None]
        sizes = [list(d.tensors[n].sizes) for n in items]  # type: ignore[union-attr]
        counts = [s[axis] for s in sizes]
        key = ("Split", in_type, axis, tuple(x.shape), tuple(tuple(s) for s in sizes))

        def build() -> Any:
            from onnx import TensorProto, helper
            names = [f"y{i}" for i in range(len(items))]
            split = helper.make_tensor("split", TensorProto.INT64, [len(counts)], counts)
            node = helper.make_node("Split", ["x", "split"], names, axis=axis)
            graph = helper.make_graph([node], "Split", [helper.make_tensor_value_info("x", _ONNX_TYPES[in_type], list(x.shape))],
                                      [helper.make_tensor_value_info(n, _ONNX_TYPES[in_type], s) for n, s in zip(names, sizes)],
                                      initializer=[split])
            return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        return dict(zip(items, self._session(key, build).run(None, {"x": x})))

    def _gather(self, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """One ONNX Gather on the `axis` field, the indices reshaped to their last
        `index_dimensions` sizes (a scalar for 0) as int64, then a Reshape to the output's Sizes
        (the same elements in the same order: only leading 1s differ). ONNX Runtime fails a run
        whose index lies outside [-size, size - 1], where DirectML promises no failure: such a
        case is unsupported, checked before the run. A negative index (signed types, FL 3.0 and
        above) counts from the end in ONNX as in DirectML."""
        spec = self.specs.operator(d.operator)
        source, index_name = entry["inputs"]
        x, in_type = inputs[source], d.tensors[source].data_type  # type: ignore[union-attr]
        if in_type not in _ONNX_TYPES:
            raise _Unsupported(f"ONNX has no {in_type}")
        names = attribute_names(spec, d.attributes)
        axis, index_dims = int(names[entry["axis"]]), int(names[entry["index_dimensions"]])
        raw = inputs[index_name]
        size = x.shape[axis]
        wide = _int64_indices(raw)
        if wide.size and (wide.min() < -size or wide.max() >= size):
            bad = wide[(wide < -size) | (wide >= size)].reshape(-1)[0]
            raise _Unsupported(f"ONNX Runtime's Gather fails on an index outside [-{size}, {size - 1}] (here {bad}); "
                               "DirectML leaves the output open there but must not fail")
        index_shape = list(raw.shape[raw.ndim - index_dims:]) if index_dims else []
        indices = wide.reshape(index_shape)
        out_sizes = list(d.tensors[spec.formula.output].sizes)  # type: ignore[union-attr]
        key = ("Gather", in_type, tuple(x.shape), tuple(index_shape), axis, tuple(out_sizes))

        def build() -> Any:
            from onnx import TensorProto, helper
            t = _ONNX_TYPES[in_type]
            shape = helper.make_tensor("shape", TensorProto.INT64, [len(out_sizes)], out_sizes)
            nodes = [helper.make_node("Gather", ["x", "i"], ["g"], axis=axis), helper.make_node("Reshape", ["g", "shape"], ["y"])]
            graph = helper.make_graph(nodes, "Gather", [helper.make_tensor_value_info("x", t, list(x.shape)),
                                                        helper.make_tensor_value_info("i", TensorProto.INT64, index_shape)],
                                      [helper.make_tensor_value_info("y", t, out_sizes)], initializer=[shape])
            return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        return self._session(key, build).run(None, {"x": x, "i": indices})[0]

    def _gather_elements(self, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """One ONNX GatherElements on the `axis` field, the indices as int64 (the output has their
        shape, as DirectML's has their Sizes). As for Gather, ONNX Runtime fails a run whose index
        lies outside [-size, size - 1] where DirectML's output is only open there: unsupported,
        checked before the run."""
        spec = self.specs.operator(d.operator)
        source, index_name = entry["inputs"]
        x, in_type = inputs[source], d.tensors[source].data_type  # type: ignore[union-attr]
        if in_type not in _ONNX_TYPES:
            raise _Unsupported(f"ONNX has no {in_type}")
        axis = int(attribute_names(spec, d.attributes)[entry["axis"]])
        size = x.shape[axis]
        indices = _int64_indices(inputs[index_name])
        _check_in_range("GatherElements", indices, np.asarray(size, dtype=np.int64))
        key = ("GatherElements", in_type, tuple(x.shape), tuple(indices.shape), axis)

        def build() -> Any:
            from onnx import TensorProto, helper
            t = _ONNX_TYPES[in_type]
            node = helper.make_node("GatherElements", ["x", "i"], ["y"], axis=axis)
            graph = helper.make_graph([node], "GatherElements", [helper.make_tensor_value_info("x", t, list(x.shape)),
                                                                 helper.make_tensor_value_info("i", TensorProto.INT64, list(indices.shape))],
                                      [helper.make_tensor_value_info("y", t, list(indices.shape))])
            return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        return self._session(key, build).run(None, {"x": x, "i": indices})[0]

    def _gather_nd(self, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """One ONNX GatherND (batch_dims from the `batch_dimensions` field, 0 without one) on the
        input reshaped to its last `input_dimensions` sizes and the indices to their last
        `index_dimensions` (int64; the dims before are leading 1s), then a Reshape to the output's
        Sizes (the same elements in the same order: only leading 1s differ). A coordinate outside
        its dimension fails ONNX Runtime's run where DirectML's output is only open there:
        unsupported, checked before the run."""
        spec = self.specs.operator(d.operator)
        source, index_name = entry["inputs"]
        x, in_type = inputs[source], d.tensors[source].data_type  # type: ignore[union-attr]
        if in_type not in _ONNX_TYPES:
            raise _Unsupported(f"ONNX has no {in_type}")
        names = attribute_names(spec, d.attributes)
        input_dims, index_dims = int(names[entry["input_dimensions"]]), int(names[entry["index_dimensions"]])
        batch = int(names[entry["batch_dimensions"]]) if "batch_dimensions" in entry else 0
        data = x.reshape(x.shape[x.ndim - input_dims:])
        raw = inputs[index_name]
        index_shape: tuple[int, ...] = tuple(raw.shape[raw.ndim - index_dims:])
        indices = _int64_indices(raw).reshape(index_shape)
        tuple_size = index_shape[-1]
        _check_in_range("GatherND", indices, np.asarray(data.shape[batch:batch + tuple_size], dtype=np.int64))
        out_sizes = list(d.tensors[spec.formula.output].sizes)  # type: ignore[union-attr]
        key: tuple = ("GatherND", in_type, tuple(data.shape), index_shape, batch, tuple(out_sizes))

        def build() -> Any:
            from onnx import TensorProto, helper
            t = _ONNX_TYPES[in_type]
            shape = helper.make_tensor("shape", TensorProto.INT64, [len(out_sizes)], out_sizes)
            nodes = [helper.make_node("GatherND", ["x", "i"], ["g"], batch_dims=batch),
                     helper.make_node("Reshape", ["g", "shape"], ["y"])]
            graph = helper.make_graph(nodes, "GatherND", [helper.make_tensor_value_info("x", t, list(data.shape)),
                                                          helper.make_tensor_value_info("i", TensorProto.INT64, list(indices.shape))],
                                      [helper.make_tensor_value_info("y", t, out_sizes)], initializer=[shape])
            return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        return self._session(key, build).run(None, {"x": data, "i": indices})[0]

    def _scatter_elements(self, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """One ONNX ScatterElements (reduction none) on the `axis` field, the indices as int64 (the
        updates have their shape, as DirectML's have their Sizes). ONNX Runtime fails a run whose
        index lies outside [-size, size - 1] where DirectML's output is only open: unsupported,
        checked before the run. Repeated indices run (the spec leaves those elements open)."""
        _, x, in_type, names = self._family_operand(entry, d, inputs, operand=0)
        _, index_name, updates_name = entry["inputs"]
        axis = int(names[entry["axis"]])
        indices = _int64_indices(inputs[index_name])
        _check_in_range("ScatterElements", indices, np.asarray(x.shape[axis], dtype=np.int64))
        updates = inputs[updates_name]
        key = ("ScatterElements", in_type, tuple(x.shape), tuple(indices.shape), axis)

        def build() -> Any:
            from onnx import TensorProto, helper
            t = _ONNX_TYPES[in_type]
            node = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=axis)
            graph = helper.make_graph([node], "ScatterElements", [
                helper.make_tensor_value_info("x", t, list(x.shape)),
                helper.make_tensor_value_info("i", TensorProto.INT64, list(indices.shape)),
                helper.make_tensor_value_info("u", t, list(indices.shape))],
                [helper.make_tensor_value_info("y", t, list(x.shape))])
            return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        return self._session(key, build).run(None, {"x": x, "i": indices, "u": updates})[0]

    def _unpool(self, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """One ONNX MaxUnpool (`inputs`: the values, then their flat indices into the whole output)
        with a 1-sized kernel and stride and the output's Sizes as its output_shape input: zeros, each
        value written at its index. ONNX Runtime's kernel takes float types only, the output's batch
        and channel sizes equal to the input's and spatial sizes no smaller, and does not check the
        indices: anything else is unsupported, checked before the run."""
        spec, x, in_type, _ = self._family_operand(entry, d, inputs, operand=0)
        if in_type not in ("FLOAT32", "FLOAT16", "FLOAT64"):
            raise _Unsupported(f"ONNX MaxUnpool takes float tensors only, not {in_type}")
        indices = _int64_indices(inputs[entry["inputs"][1]])
        out_sizes = list(d.tensors[spec.formula.output].sizes)  # type: ignore[union-attr]
        if len(out_sizes) != x.ndim or out_sizes[:2] != list(x.shape[:2]) or any(
                o < i for o, i in zip(out_sizes[2:], x.shape[2:])):
            raise _Unsupported(f"ONNX Runtime's MaxUnpool needs the input's batch and channel sizes and spatial sizes no "
                               f"smaller ({list(x.shape)} into {out_sizes})")
        total = int(np.prod(out_sizes, dtype=np.int64))
        if ((indices < 0) | (indices >= total)).any():  # ONNX Runtime would write past the output
            raise _Unsupported(f"an index outside [0, {total - 1}]: ONNX Runtime's MaxUnpool does not check it; "
                               "DirectML leaves the output open there but must not fail")
        rank = x.ndim - 2
        key: tuple = ("MaxUnpool", in_type, tuple(x.shape), tuple(out_sizes))

        def build() -> Any:
            from onnx import TensorProto, helper
            t = _ONNX_TYPES[in_type]
            shape = helper.make_tensor("shape", TensorProto.INT64, [len(out_sizes)], out_sizes)
            node = helper.make_node("MaxUnpool", ["x", "i", "shape"], ["y"], kernel_shape=[1] * rank, strides=[1] * rank)
            graph = helper.make_graph([node], "MaxUnpool", [
                helper.make_tensor_value_info("x", t, list(x.shape)),
                helper.make_tensor_value_info("i", TensorProto.INT64, list(x.shape))],
                [helper.make_tensor_value_info("y", t, out_sizes)], initializer=[shape])
            return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        return self._session(key, build).run(None, {"x": x, "i": indices.reshape(x.shape)})[0]

    def _scatter_nd(self, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """One ONNX ScatterND (reduction none) on the input reshaped to its last `input_dimensions`
        sizes, the indices to their last `index_dimensions` (int64) and the updates to the index
        dims before the tuple then the input's dims after the tuple's (the same elements in the
        same order: only leading 1s differ), then a Reshape to the output's Sizes. A coordinate
        outside its dimension fails ONNX Runtime's run where DirectML's output is only open:
        unsupported, checked before the run."""
        spec, x, in_type, names = self._family_operand(entry, d, inputs, operand=0)
        _, index_name, updates_name = entry["inputs"]
        input_dims, index_dims = int(names[entry["input_dimensions"]]), int(names[entry["index_dimensions"]])
        data = x.reshape(x.shape[x.ndim - input_dims:])
        raw = inputs[index_name]
        index_shape: tuple[int, ...] = tuple(raw.shape[raw.ndim - index_dims:])
        indices = _int64_indices(raw).reshape(index_shape)
        tuple_size = index_shape[-1]
        _check_in_range("ScatterND", indices, np.asarray(data.shape[:tuple_size], dtype=np.int64))
        update_shape = index_shape[:-1] + data.shape[tuple_size:]
        updates = inputs[updates_name].reshape(update_shape)
        out_sizes = list(d.tensors[spec.formula.output].sizes)  # type: ignore[union-attr]
        key: tuple = ("ScatterND", in_type, tuple(data.shape), index_shape, tuple(out_sizes))

        def build() -> Any:
            from onnx import TensorProto, helper
            t = _ONNX_TYPES[in_type]
            shape = helper.make_tensor("shape", TensorProto.INT64, [len(out_sizes)], out_sizes)
            nodes = [helper.make_node("ScatterND", ["x", "i", "u"], ["s"]), helper.make_node("Reshape", ["s", "shape"], ["y"])]
            graph = helper.make_graph(nodes, "ScatterND", [
                helper.make_tensor_value_info("x", t, list(data.shape)),
                helper.make_tensor_value_info("i", TensorProto.INT64, list(index_shape)),
                helper.make_tensor_value_info("u", t, list(update_shape))],
                [helper.make_tensor_value_info("y", t, out_sizes)], initializer=[shape])
            return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        return self._session(key, build).run(None, {"x": data, "i": indices, "u": updates})[0]

    def _slice_window(self, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """SLICE1 as one ONNX Slice: per dimension start at the window's beginning (its end for a
        negative stride), step by the stride, and stop after the output's size; an end before
        index 0 is INT64_MIN (ONNX reads a negative end as counted from the back)."""
        spec, x, in_type, names = self._family_operand(entry, d, inputs)
        out_sizes = list(d.tensors[spec.formula.output].sizes)  # type: ignore[union-attr]
        offsets, sizes, strides = (list(names[entry[k]]) for k in ("offsets", "sizes", "strides"))
        starts = [o + (n - 1 if s < 0 else 0) for o, n, s in zip(offsets, sizes, strides)]
        ends = [b + s * (k - 1) + (1 if s > 0 else -1) for b, s, k in zip(starts, strides, out_sizes)]
        ends = [e if e >= 0 else -(2**63) for e in ends]
        key = ("Slice", in_type, tuple(x.shape), tuple(starts), tuple(ends), tuple(strides))

        def build() -> Any:
            from onnx import TensorProto, helper
            consts = {"starts": starts, "ends": ends, "axes": list(range(x.ndim)), "steps": strides}
            inits = [helper.make_tensor(k, TensorProto.INT64, [len(v)], v) for k, v in consts.items()]
            node = helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])
            graph = helper.make_graph([node], "Slice", [helper.make_tensor_value_info("x", _ONNX_TYPES[in_type], list(x.shape))],
                                      [helper.make_tensor_value_info("y", _ONNX_TYPES[in_type], out_sizes)], initializer=inits)
            return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        return self._session(key, build).run(None, {"x": x})[0]

    def _one_hot(self, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """One ONNX OneHot on the `axis` field: the indices (the first input, size 1 along the axis)
        as int64 with that axis dropped, ONNX putting the one-hot sequences back there; depth the
        output's size along the axis; values the second input's first two elements in row-major
        order (a Reshape to 1-D and a Slice in the graph), [off, on] as in DirectML. ONNX reads a
        negative index from the end and one outside [-depth, depth - 1] as selecting none, as the
        page says of an index beyond the size. ONNX Runtime 1.31's CPU kernels are registered for
        int64 indices with an int64 depth (FLOAT32, FLOAT16, INT64 values) or a float depth (INT32
        values); the others fail to build and come back unsupported with its message."""
        spec, values, value_type, names = self._family_operand(entry, d, inputs, operand=1)
        axis = int(names[entry["axis"]])
        raw = inputs[entry["inputs"][0]]
        wide = _int64_indices(raw)
        # ONNX's OneHot takes indices of rank 1 or more: a 1-D output's single index keeps one
        # dimension (its one-hot sequence then comes out {depth, 1}), and a Reshape gives the output's Sizes
        indices = np.squeeze(wide, axis=axis) if wide.ndim > 1 else wide.reshape(1)
        onnx_axis = axis if wide.ndim > 1 else 0
        out_sizes = list(d.tensors[spec.formula.output].sizes)  # type: ignore[union-attr]
        depth_type = "FLOAT32" if value_type == "INT32" else "INT64"  # the kernel ORT registers for these values
        depth = np.asarray(out_sizes[axis], dtype=self.specs.catalog.dtype(depth_type).numpy)
        key = ("OneHot", value_type, tuple(indices.shape), tuple(values.shape), axis, tuple(out_sizes))

        def build() -> Any:
            from onnx import TensorProto, helper
            t = _ONNX_TYPES[value_type]
            consts = {"flat": [-1], "first": [0], "second_end": [2]}
            inits = [helper.make_tensor(k, TensorProto.INT64, [1], v) for k, v in consts.items()]
            inits.append(helper.make_tensor("out_shape", TensorProto.INT64, [len(out_sizes)], out_sizes))
            nodes = [helper.make_node("Reshape", ["v", "flat"], ["v1"]),
                     helper.make_node("Slice", ["v1", "first", "second_end"], ["off_on"]),
                     helper.make_node("OneHot", ["i", "depth", "off_on"], ["hot"], axis=onnx_axis),
                     helper.make_node("Reshape", ["hot", "out_shape"], ["y"])]
            graph = helper.make_graph(nodes, "OneHot", [helper.make_tensor_value_info("i", TensorProto.INT64, list(indices.shape)),
                                                        helper.make_tensor_value_info("depth", _ONNX_TYPES[depth_type], []),
                                                        helper.make_tensor_value_info("v", t, list(values.shape))],
                                      [helper.make_tensor_value_info("y", t, out_sizes)], initializer=inits)
            return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        return self._session(key, build).run(None, {"i": indices, "depth": depth, "v": values})[0]

    def _reverse_sequence(self, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """One ONNX ReverseSequence, which takes a {time, batch} (or {batch, time}) layout with one
        length per batch entry only: the input's `axis` is moved first (Transpose) and the other
        dims flattened into one batch dim (Reshape) in the graph, the lengths (size 1 along the
        axis) flattened in the same order as int64, and the result reshaped and transposed back
        (a reindexing, no arithmetic), so every DirectML layout maps. ONNX Runtime fails a run
        whose length lies beyond the axis, where DirectML clamps it: such a case is unsupported,
        checked before the run."""
        spec, x, in_type, names = self._family_operand(entry, d, inputs, operand=0)
        axis = int(names[entry["axis"]])
        raw = inputs[entry["inputs"][1]]
        wide = _int64_indices(raw)
        size = x.shape[axis]
        if wide.size and (wide.min() < 0 or wide.max() > size):
            bad = wide[(wide < 0) | (wide > size)].reshape(-1)[0]
            raise _Unsupported(f"ONNX Runtime's ReverseSequence fails on a sequence length outside [0, {size}] (here {bad}); "
                               "DirectML clamps it to the axis' size")
        lengths = np.moveaxis(wide, axis, 0).reshape(-1)
        perm = [axis] + [k for k in range(x.ndim) if k != axis]
        moved = [x.shape[k] for k in perm]
        back = [perm.index(k) for k in range(x.ndim)]
        key = ("ReverseSequence", in_type, tuple(x.shape), axis)

        def build() -> Any:
            from onnx import TensorProto, helper
            t = _ONNX_TYPES[in_type]
            inits = [helper.make_tensor("time_batch", TensorProto.INT64, [2], [size, lengths.size]),
                     helper.make_tensor("moved_shape", TensorProto.INT64, [len(moved)], moved)]
            nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=perm),
                     helper.make_node("Reshape", ["xt", "time_batch"], ["x2"]),
                     helper.make_node("ReverseSequence", ["x2", "l"], ["y2"], time_axis=0, batch_axis=1),
                     helper.make_node("Reshape", ["y2", "moved_shape"], ["yt"]),
                     helper.make_node("Transpose", ["yt"], ["y"], perm=back)]
            graph = helper.make_graph(nodes, "ReverseSequence", [helper.make_tensor_value_info("x", t, list(x.shape)),
                                                                 helper.make_tensor_value_info("l", TensorProto.INT64, [lengths.size])],
                                      [helper.make_tensor_value_info("y", t, list(x.shape))], initializer=inits)
            return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        return self._session(key, build).run(None, {"x": x, "l": lengths})[0]

    def _tile(self, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """One ONNX Tile, its repeats (an int64 input) from the `repeats` array field: ONNX's
        output is the input repeated repeats[i] times along dimension i, as DirectML's is."""
        spec, x, in_type, names = self._family_operand(entry, d, inputs)
        repeats = [int(r) for r in names[entry["repeats"]]]
        out_sizes = list(d.tensors[spec.formula.output].sizes)  # type: ignore[union-attr]
        key = ("Tile", in_type, tuple(x.shape), tuple(repeats))

        def build() -> Any:
            from onnx import TensorProto, helper
            node = helper.make_node("Tile", ["x", "repeats"], ["y"])
            graph = helper.make_graph([node], "Tile", [helper.make_tensor_value_info("x", _ONNX_TYPES[in_type], list(x.shape))],
                                      [helper.make_tensor_value_info("y", _ONNX_TYPES[in_type], out_sizes)],
                                      initializer=[helper.make_tensor("repeats", TensorProto.INT64, [len(repeats)], repeats)])
            return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        return self._session(key, build).run(None, {"x": x})[0]

    def _depth_space(self, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """One ONNX SpaceToDepth or DepthToSpace (`op`) with blocksize from the `block_size` field.
        Where the `column_row_depth` expression holds, depth is laid out (channel, block row,
        block column): DepthToSpace's mode CRD says so, and its DCR the other layout (block row,
        block column, channel), which is also the only layout ONNX's SpaceToDepth writes; so a
        column-row-depth SpaceToDepth regroups the channels after the node (a Reshape of the
        depth into {b * b, C}, a Transpose to {C, b * b} and a Reshape back: a reindexing, no
        arithmetic)."""
        spec, x, in_type, names = self._family_operand(entry, d, inputs)
        op, block = entry["op"], int(names[entry["block_size"]])
        crd = _flag(entry["column_row_depth"], names)
        out_sizes = list(d.tensors[spec.formula.output].sizes)  # type: ignore[union-attr]
        key = (op, in_type, tuple(x.shape), block, crd)

        def build() -> Any:
            from onnx import TensorProto, helper
            t = _ONNX_TYPES[in_type]
            attrs: dict[str, Any] = {"blocksize": block}
            if op == "DepthToSpace":
                attrs["mode"] = "CRD" if crd else "DCR"
            nodes, inits = [], []
            if op == "SpaceToDepth" and crd:
                n, c, h, w = out_sizes[0], out_sizes[1] // (block * block), out_sizes[2], out_sizes[3]
                nodes += [helper.make_node(op, ["x"], ["dcr"], **attrs),
                          helper.make_node("Reshape", ["dcr", "split_depth"], ["blocks_first"]),
                          helper.make_node("Transpose", ["blocks_first"], ["channels_first"], perm=[0, 2, 1, 3, 4]),
                          helper.make_node("Reshape", ["channels_first", "out_shape"], ["y"])]
                inits += [helper.make_tensor("split_depth", TensorProto.INT64, [5], [n, block * block, c, h, w]),
                          helper.make_tensor("out_shape", TensorProto.INT64, [4], out_sizes)]
            else:
                nodes.append(helper.make_node(op, ["x"], ["y"], **attrs))
            graph = helper.make_graph(nodes, op, [helper.make_tensor_value_info("x", t, list(x.shape))],
                                      [helper.make_tensor_value_info("y", t, out_sizes)], initializer=inits)
            return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        return self._session(key, build).run(None, {"x": x})[0]

    def _quantize(self, d: Descriptor, inputs: dict[str, np.ndarray], out_type: str) -> np.ndarray:
        x, scale = inputs["InputTensor"], inputs["ScaleTensor"]
        zp = inputs.get("ZeroPointTensor")
        if zp is None:  # an absent zero point takes the value the spec states for it
            formula = self.specs.operator("ELEMENT_WISE_QUANTIZE_LINEAR").formula
            variable = next(v for v, tensor in formula.inputs.items() if tensor == "ZeroPointTensor")
            zp = np.full(x.shape, formula.absent_inputs[variable], dtype=self.specs.catalog.dtype(out_type).numpy)
        in_type = _tensor(d, "InputTensor").data_type
        scale_type = _tensor(d, "ScaleTensor").data_type
        shape = tuple(x.shape)
        mode, axis = _scale_mode(scale, zp) if in_type != "INT32" else ("decomposed", None)
        key = ("QuantizeLinear", mode, axis, in_type, scale_type, out_type, shape)

        if mode == "decomposed":
            def build_decomposed() -> Any:
                from onnx import TensorProto, helper
                out = self.specs.catalog.dtype(out_type)
                assert out.min is not None and out.max is not None  # a quantized type is an integer type
                lo, hi = float(out.min), float(out.max)
                nodes = [
                    helper.make_node("Cast", ["x"], ["xd"], to=TensorProto.DOUBLE),
                    helper.make_node("Cast", ["s"], ["sd"], to=TensorProto.DOUBLE),
                    helper.make_node("Cast", ["z"], ["zd"], to=TensorProto.DOUBLE),
                    helper.make_node("Div", ["xd", "sd"], ["q"]),
                    helper.make_node("Round", ["q"], ["r"]),
                    helper.make_node("Add", ["r", "zd"], ["a"]),
                    helper.make_node("Max", ["a", "lo"], ["m"]),
                    helper.make_node("Min", ["m", "hi"], ["c"]),
                    helper.make_node("Cast", ["c"], ["y"], to=_ONNX_TYPES[out_type]),
                ]
                inits = [helper.make_tensor("lo", TensorProto.DOUBLE, [], [lo]), helper.make_tensor("hi", TensorProto.DOUBLE, [], [hi])]
                graph = helper.make_graph(nodes, "quantize_decomposed", [
                    helper.make_tensor_value_info("x", _ONNX_TYPES[in_type], list(shape)),
                    helper.make_tensor_value_info("s", _ONNX_TYPES[scale_type], list(shape)),
                    helper.make_tensor_value_info("z", _ONNX_TYPES[out_type], list(shape))],
                    [helper.make_tensor_value_info("y", _ONNX_TYPES[out_type], list(shape))], initializer=inits)
                return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
            return self._session(key, build_decomposed).run(None, {"x": x, "s": scale, "z": zp})[0]

        if mode == "per_tensor":
            s_in, z_in, s_shape = scale.reshape(-1)[:1].reshape(()), zp.reshape(-1)[:1].reshape(()), []
        else:
            assert axis is not None  # per_axis: _scale_mode names the axis
            index: list[int | slice] = [0] * len(shape)
            index[axis] = slice(None)
            s_in, z_in = scale[tuple(index)].copy(), zp[tuple(index)].copy()
            s_shape = [shape[axis]]

        def build() -> Any:
            from onnx import helper
            attrs: dict[str, Any] = {"axis": axis} if mode == "per_axis" else {}  # ONNX attributes
            node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], **attrs)
            graph = helper.make_graph([node], "quantize", [
                helper.make_tensor_value_info("x", _ONNX_TYPES[in_type], list(shape)),
                helper.make_tensor_value_info("s", _ONNX_TYPES[scale_type], s_shape),
                helper.make_tensor_value_info("z", _ONNX_TYPES[out_type], s_shape)],
                [helper.make_tensor_value_info("y", _ONNX_TYPES[out_type], list(shape))])
            return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        return self._session(key, build).run(None, {"x": x, "s": s_in, "z": z_in})[0]

    def _quantize_blocks(self, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """QuantizeLinear or DequantizeLinear (`op`) with one scale and zero point per element:
        the spec's blocks spread to the input's shape (harness.model.blocks), so ONNX's blocked
        form with block_size 1 reads them; an absent zero point is the formula constant that
        `absent_zero_point` names. A 4-bit tensor goes in and out as 8-bit values, cast to and
        from ONNX's INT4/UINT4 inside the graph (ONNX Runtime's Python API feeds no 4-bit arrays)."""
        spec = self.specs.operator(d.operator)
        x = inputs[entry["input"]]
        shape = tuple(x.shape)
        types = {n: t.data_type for n, t in d.tensors.items() if t is not None}
        scale = np.ascontiguousarray(spread_blocks(inputs[entry["scale"]], shape))
        integer = types[entry["input"]] if entry["op"] == "DequantizeLinear" else types[spec.formula.output]
        wide = self.specs.catalog.dtype(integer).numpy
        if entry["zero_point"] in inputs:
            zp = np.ascontiguousarray(spread_blocks(inputs[entry["zero_point"]], shape)).astype(wide)
        else:
            ctx = formula_context(spec, types, {}, d.attributes)
            zp = np.full(shape, int(ctx.variables[entry["absent_zero_point"]]), dtype=wide)
        narrow = _ONNX_4BIT.get(integer)
        carried = _ONNX_TYPES[_BYTE_CARRIER[integer]] if narrow else _ONNX_TYPES[integer]
        in_type, out_type = types[entry["input"]], types[spec.formula.output]
        per_element = list(shape) if x.size > 1 else []
        key = ("quantize_blocks", entry["op"], in_type, types[entry["scale"]], out_type, shape)

        def build() -> Any:
            from onnx import helper
            nodes, x_name, z_name = [], "x", "z"
            if narrow:
                nodes.append(helper.make_node("Cast", ["z"], ["zn"], to=narrow))
                z_name = "zn"
                if entry["op"] == "DequantizeLinear":
                    nodes.append(helper.make_node("Cast", ["x"], ["xn"], to=narrow))
                    x_name = "xn"
            quantize = entry["op"] == "QuantizeLinear"
            # block_size 1 along axis 0 is one scale per element; ONNX Runtime takes a one-element
            # scale as per-tensor, which must be a scalar without block_size
            blocked: dict[str, Any] = {"axis": 0, "block_size": 1} if x.size > 1 else {}  # ONNX attributes
            nodes.append(helper.make_node(entry["op"], [x_name, "s", z_name], ["yq" if narrow and quantize else "y"], **blocked))
            if narrow and quantize:
                nodes.append(helper.make_node("Cast", ["yq"], ["y"], to=carried))
            graph = helper.make_graph(nodes, "quantize_blocks", [
                helper.make_tensor_value_info("x", carried if not quantize else _ONNX_TYPES[in_type], list(shape)),
                helper.make_tensor_value_info("s", _ONNX_TYPES[types[entry["scale"]]], per_element),
                helper.make_tensor_value_info("z", carried, per_element)],
                [helper.make_tensor_value_info("y", carried if quantize else _ONNX_TYPES[out_type], list(shape))])
            return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        x_in = x.astype(wide) if entry["op"] == "DequantizeLinear" else x
        return self._session(key, build).run(None, {"x": x_in, "s": scale.reshape(per_element), "z": zp.reshape(per_element)})[0]


class _Unsupported(Exception):
    pass


def _int64_indices(raw: np.ndarray) -> np.ndarray:
    """Index values as ONNX takes them (int64): a UINT64 value beyond 2^63 - 1 saturates (it lies
    outside every dimension either way, and wrapping would make it a valid negative index)."""
    return np.minimum(raw, np.uint64(2**63 - 1)).astype(np.int64) if raw.dtype == np.uint64 else raw.astype(np.int64)


def _check_in_range(onnx_op: str, indices: np.ndarray, sizes: np.ndarray) -> None:
    """Unsupported where an index lies outside [-size, size - 1] of the dimension it indexes
    (`sizes` broadcasts over the indices' last dim: one size, or one per tuple coordinate): ONNX
    Runtime fails such a run, DirectML only leaves those elements open."""
    bad = (indices < -sizes) | (indices >= sizes)
    if bad.any():
        where = np.argwhere(bad)[0]
        size = int(np.broadcast_to(sizes, indices.shape)[tuple(where)])
        raise _Unsupported(f"ONNX Runtime's {onnx_op} fails on an index outside [-{size}, {size - 1}] "
                           f"(here {int(indices[tuple(where)])}); DirectML leaves the output open there but must not fail")


def _tensor(d: Descriptor, name: str) -> TensorDesc:
    """A tensor the case has (one whose values the builder was given)."""
    desc = d.tensors[name]
    assert desc is not None
    return desc


@lru_cache(maxsize=64)
def _parsed(text: str, names: frozenset[str]) -> Any:
    return parse_shape_expr(text, set(names), set())


def _flag(text: str, names: dict[str, Any]) -> int:
    """A table entry's shape expression over the attributes (parsed once per text), as 0 or 1."""
    return int(bool(_parsed(text, frozenset(names)).evaluate(names, {})))


def _exact_key(value: Any) -> Any:
    """A cache key in which floats are their IEEE bits, so that values which compare equal but
    build different models get different sessions: Python's `-0.0 == 0.0` (same hash) made a
    HardSigmoid session built with beta -0.0 serve beta +0.0, which rounds Alpha * x + Beta to -0.0
    where +0.0 is due; NaN (never equal to itself) would never hit the cache."""
    if isinstance(value, (float, np.floating)):
        return ("f64bits", struct.pack("<d", float(value)))
    if isinstance(value, tuple):
        return tuple(_exact_key(v) for v in value)
    return value


def _uniform_except(arr: np.ndarray, axis: int | None) -> bool:
    """True when arr is constant along every axis but `axis` (None: constant everywhere); NaN breaks it."""
    if axis is None:
        flat = arr.reshape(-1)
        return bool((flat == flat[0]).all())
    index: list[int | slice] = [0] * arr.ndim
    index[axis] = slice(None)
    line = arr[tuple(index)]
    expand: list[slice | None] = [np.newaxis] * arr.ndim
    expand[axis] = slice(None)
    return bool((arr == line[tuple(expand)]).all())


def _scale_mode(scale: np.ndarray, zp: np.ndarray) -> tuple[str, int | None]:
    if _uniform_except(scale, None) and _uniform_except(zp, None):
        return "per_tensor", None
    for axis in range(scale.ndim):
        if scale.shape[axis] > 1 and _uniform_except(scale, axis) and _uniform_except(zp, axis):
            return "per_axis", axis
    return "decomposed", None
