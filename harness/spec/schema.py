"""The JSON Schema of an operator spec file.

Why JSON Schema (through `jsonschema`) rather than typed models: the spec is data written by
people, and a declarative schema reports every structural problem with the exact key path
(`error.absolute_path`), which maps straight onto the YAML line table of `harness.spec.source`.
Meaning-level checks (known types, level order, table coverage) live in `harness.spec.load` (build_operator) and its section readers `harness.spec.read_fields` and `harness.spec.read_formula`.
"""
from __future__ import annotations

_NAME = {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"}
_LEVEL = {"type": "string", "pattern": r"^\d+\.\d+$"}
_TYPE_LIST = {"type": "array", "minItems": 1, "items": {"type": "string"}, "uniqueItems": True}
_EXPR = {"type": "string", "minLength": 1}

_TENSOR_SUPPORT = {
    "type": "object",
    "additionalProperties": False,
    "required": ["kind", "dims", "types"],
    "properties": {
        "kind": {"enum": ["input", "optional_input", "output", "optional_output"]},
        "dims": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2},
        "types": _TYPE_LIST,
    },
}

_WHEN = {
    "type": "object",
    "additionalProperties": False,
    "required": ["tensor"],
    "properties": {"tensor": _NAME, "types": _TYPE_LIST, "types_not": _TYPE_LIST},
    "oneOf": [{"required": ["types"]}, {"required": ["types_not"]}],
}

_COMPARISON = {
    "type": "object",
    "additionalProperties": False,
    "required": ["kind"],
    "properties": {
        "kind": {"enum": ["exact", "bitwise", "ulp"]},
        "max_ulp": {"type": "integer", "minimum": 0},
        "atol": _EXPR,
        "ties": _EXPR,
        "nan_payload": {"enum": ["ignore", "exact"]},
    },
}

_EXAMPLE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "source", "types", "inputs", "expected"],
    "properties": {
        "name": _NAME,
        "source": {"type": "string"},
        "types": {"type": "object", "additionalProperties": {"type": "string"}},
        "sizes": {"type": "array", "items": {"type": "integer", "minimum": 1}},
        "tensor_sizes": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "integer", "minimum": 1}}},
        "attributes": {"type": "object", "additionalProperties": {
            "oneOf": [{"type": "number"}, {"type": "array", "items": {"type": "number"}}]}},
        "inputs": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "number"}}},
        "expected": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "number"}}},
    },
}

OPERATOR_SCHEMA: dict = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "required": ["operator", "operator_type", "desc_struct", "summary", "introduced", "in_place",
                 "fields", "support", "constraints", "formula", "comparison", "sources"],
    "properties": {
        "operator": {"type": "string", "pattern": "^[A-Z][A-Z0-9_]*$"},
        "operator_type": {"type": "integer", "minimum": 0},
        "desc_struct": {"type": "string", "pattern": "^DML_[A-Z0-9_]+_OPERATOR_DESC$"},
        "summary": {"type": "string"},
        "introduced": _LEVEL,
        # the enum attribute whose value picks the support tables (each table names its `variant`)
        "variant_key": _NAME,
        "in_place": {
            "type": "object",
            "additionalProperties": False,
            "required": ["allowed", "pairs", "source"],
            "properties": {
                "allowed": {"type": "boolean"},
                "pairs": {"type": "array", "items": {
                    "type": "object", "additionalProperties": False, "required": ["output", "input"],
                    "properties": {"output": _NAME, "input": _NAME}}},
                "source": {"type": "string"},
            },
        },
        "fields": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name", "role", "c_type"],
                "properties": {
                    "name": _NAME,
                    "role": {"enum": ["input", "output", "attribute"]},
                    "c_type": {"type": "string"},
                    "default": {"type": "number"},
                    "count": _NAME,
                    "max_items": {"type": "integer", "minimum": 1, "maximum": 8},
                    "count_of": {"oneOf": [_NAME, {"type": "array", "items": _NAME, "minItems": 1}]},
                    "activations": {"type": "array", "items": _NAME, "minItems": 1, "uniqueItems": True},
                    "items": {"type": "string"},
                    "typed_by": _NAME,
                    "source": {"type": "string"},
                },
            },
        },
        "support": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["level", "tensors"],
                "properties": {
                    "level": _LEVEL,
                    "variant": {"type": "array", "minItems": 1, "uniqueItems": True,
                                "items": {"type": "string", "pattern": "^[A-Z][A-Z0-9_]*$"}},
                    "tensors": {"type": "object", "minProperties": 1, "additionalProperties": _TENSOR_SUPPORT},
                },
            },
        },
        "constraints": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["id", "rule", "text"],
                "properties": {
                    "id": _NAME,
                    "rule": {"enum": ["same_data_type", "same_shape", "data_type_in", "expression", "shape"]},
                    "tensors": {"type": "array", "items": _NAME, "minItems": 2},
                    "tensor": _NAME,
                    "types": _TYPE_LIST,
                    "when": {"oneOf": [_WHEN, _EXPR]},
                    "expression": _EXPR,
                    "sizes": _EXPR,
                    "bound": {"enum": ["upper"]},
                    "align": {"enum": ["right", "left", "leading_ones"]},
                    "text": {"type": "string"},
                },
            },
        },
        "formula": {
            "type": "object",
            "additionalProperties": False,
            "required": ["docs", "expression", "operands", "inputs", "output"],
            "properties": {
                "docs": {"type": "string"},
                "expression": _EXPR,
                "operands": {"enum": ["value", "raw_bits"]},
                "inputs": {"type": "object", "additionalProperties": _NAME},  # {}: an operator that generates its output
                "attributes": {"type": "array", "items": _NAME},
                "constants": {"type": "object", "additionalProperties": _EXPR},
                # a per-element item of an array attribute: {b: {array: Bias, index: coord2}}
                "items": {"type": "object", "additionalProperties": {
                    "type": "object", "additionalProperties": False, "required": ["array", "index"],
                    "properties": {"array": _NAME, "index": _NAME}}},
                "absent_inputs": {"type": "object", "additionalProperties": {
                    "type": "object", "additionalProperties": False, "required": ["value", "source"],
                    "properties": {"value": {"type": "number"}, "source": {"type": "string"}}}},
                # inputs whose sizes divide the output's, an element per block: {inputs: [scale], source: ...}
                "blocked": {"type": "object", "additionalProperties": False, "required": ["inputs", "source"],
                            "properties": {"inputs": {"type": "array", "items": _NAME, "minItems": 1, "uniqueItems": True},
                                           "source": {"type": "string"}}},
                "rounding": {"type": "object", "additionalProperties": False, "required": ["mode", "source"],
                             "properties": {"mode": {"enum": ["half_to_even"]}, "source": {"type": "string"}}},
                "output": _NAME,
                # the other outputs of an elementwise formula: {OutputFirstMomentTensor: "..."}
                "other_outputs": {"type": "object", "additionalProperties": _EXPR},
                "family": {"type": "object", "required": ["name"],
                           "properties": {"name": _NAME, "bounds": {"type": "object", "additionalProperties": {
                               "type": "object", "additionalProperties": False, "required": ["atol", "why"],
                               "properties": {"atol": _EXPR, "why": {"type": "string"}}}}},
                           "additionalProperties": {"type": ["string", "boolean", "integer"]}},
            },
        },
        "special_cases": {"type": "array", "items": {
            "type": "object", "additionalProperties": False, "required": ["input", "result", "source"],
            "properties": {"input": {"type": "string"}, "result": {"type": "string"}, "source": {"type": "string"}}}},
        "unspecified": {"type": "array", "items": {
            "type": "object", "additionalProperties": False, "required": ["id", "when", "why"],
            "properties": {
                "id": _NAME, "when": _EXPR, "why": {"type": "string"},
                "applies_to": _TYPE_LIST, "handled_by": {"enum": ["comparison"]},
                "outputs": {"type": "array", "items": _NAME, "minItems": 1},
                "undefined_behaviour": {"type": "boolean"}}}},
        "comparison": {
            "type": "object",
            "required": ["default"],
            "additionalProperties": _COMPARISON,
        },
        "attribute_values": {"type": "object", "additionalProperties": {"oneOf": [
            {"type": "object", "additionalProperties": False, "required": ["ordinary", "edge"],
             "properties": {"ordinary": {"type": "array", "items": {"type": "number"}, "minItems": 1},
                            "edge": {"type": "array", "items": {"type": "number"}}}},
            {"type": "object", "additionalProperties": False, "required": ["subset_of"],
             "properties": {"subset_of": _EXPR, "min_length": {"type": "integer", "minimum": 0},
                            "order": {"enum": ["ascending", "any"]}, "why": {"type": "string"}}},
            {"type": "object", "additionalProperties": False, "required": ["length", "each"],
             "properties": {"length": _EXPR, "each": _EXPR, "why": {"type": "string"}}},
            # a FLOAT array: `length` items, each drawn from the pools as a FLOAT scalar is
            {"type": "object", "additionalProperties": False, "required": ["length", "ordinary", "edge"],
             "properties": {"length": _EXPR, "ordinary": {"type": "array", "items": {"type": "number"}, "minItems": 1},
                            "edge": {"type": "array", "items": {"type": "number"}}, "why": {"type": "string"}}},
            {"type": "object", "additionalProperties": False, "required": ["one_of"],
             "properties": {"one_of": _EXPR, "why": {"type": "string"}}}]}},
        "examples": {"type": "array", "items": _EXAMPLE},
        "generation": {"type": "object", "additionalProperties": False, "properties": {
            "favour": {"type": "array", "items": {
                "type": "object", "additionalProperties": False, "required": ["tensor", "expression", "why"],
                "properties": {"tensor": _NAME, "expression": _EXPR, "why": {"type": "string"},
                               "k": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2}}}},
            "limits": {"type": "array", "items": {
                "type": "object", "additionalProperties": False, "required": ["tensor", "bits", "why"],
                "properties": {"tensor": _NAME, "bits": _EXPR, "when": _EXPR, "applies_to": _TYPE_LIST,
                               "why": {"type": "string"}}}},
            "data_ranges": {"type": "array", "items": {
                "type": "object", "additionalProperties": False, "required": ["tensor", "min", "max", "why"],
                "properties": {"tensor": _NAME, "min": _EXPR, "max": _EXPR, "when": _EXPR, "applies_to": _TYPE_LIST,
                               "outside": {"type": "number", "minimum": 0, "maximum": 1},
                               "distinct": {"type": "object", "additionalProperties": False,
                                            "required": ["within", "axis", "modulo"],
                                            "properties": {"within": {"enum": ["lines", "tensor", "blocks"]},
                                                           "axis": _EXPR, "modulo": _EXPR}},
                               "why": {"type": "string"}}}}}},
        # differences from the API pages kept on purpose; `spec check-docs` reports them as recorded
        "docs_drift": {"type": "array", "items": {
            "type": "object", "additionalProperties": False, "required": ["key", "pages", "resolution"],
            "properties": {"key": {"type": "string", "minLength": 1},
                           "pages": {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}},
                           "resolution": {"type": "string", "minLength": 1}}}},
        "sources": {"type": "array", "minItems": 1, "items": {
            "type": "object", "additionalProperties": False, "required": ["document", "languages"],
            "properties": {"document": {"type": "string"}, "languages": {"type": "array", "items": {"type": "string"}},
                           "note": {"type": "string"}}}},
    },
}

DATA_TYPES_SCHEMA: dict = {
    "type": "object",
    "additionalProperties": False,
    "required": ["data_types"],
    "properties": {"data_types": {"type": "array", "minItems": 1, "items": {
        "type": "object", "additionalProperties": False,
        "required": ["name", "enum", "bits", "numpy", "class", "since"],
        "properties": {
            "name": {"type": "string"}, "enum": {"type": "integer"}, "bits": {"enum": [4, 8, 16, 32, 64]},
            "numpy": {"type": ["string", "null"]}, "class": {"enum": ["float", "signed", "unsigned"]},
            "min": {"type": "integer"}, "max": {"type": "integer"}, "since": _LEVEL}}}},
}

FEATURE_LEVELS_SCHEMA: dict = {
    "type": "object",
    "additionalProperties": False,
    "required": ["feature_levels"],
    "properties": {"feature_levels": {"type": "array", "minItems": 1, "items": {
        "type": "object", "additionalProperties": False, "required": ["name", "enum", "directml"],
        "properties": {"name": _LEVEL, "enum": {"type": "integer"}, "directml": {"type": "string"}}}}},
}

_ROUNDING = {"enum": ["nearest", "faithful", "within_1ulp"]}
_FLOAT_TYPE_NAME = {"enum": ["FLOAT16", "FLOAT32", "FLOAT64"]}

ARITHMETIC_SCHEMA: dict = {
    "type": "object",
    "additionalProperties": False,
    "required": ["compute_in", "types", "conversion_to_compute", "liberties"],
    "properties": {
        "compute_in": {"type": "object", "minProperties": 1, "propertyNames": _FLOAT_TYPE_NAME,
                       "additionalProperties": {"type": "array", "minItems": 1, "items": _FLOAT_TYPE_NAME}},
        "types": {"type": "object", "minProperties": 1, "propertyNames": _FLOAT_TYPE_NAME, "additionalProperties": {
            "type": "object", "additionalProperties": False,
            "required": ["add_sub_mul", "division", "flush_denormals", "min_max_nan", "convert_from_wider",
                         "convert_from_integer", "source"],
            "properties": {
                "add_sub_mul": _ROUNDING,
                "division": {"type": "object", "additionalProperties": False, "required": ["direct"], "properties": {
                    "direct": _ROUNDING,
                    "reciprocal": {"type": "object", "additionalProperties": False, "required": ["rcp", "multiply"],
                                   "properties": {"rcp": _ROUNDING, "multiply": _ROUNDING}}}},
                "flush_denormals": {"type": "boolean"},
                "min_max_nan": {"enum": ["other_operand", "nan"]},
                "convert_from_wider": _ROUNDING,
                "convert_from_integer": _ROUNDING,
                "fp32_conversion_flush": {"type": "boolean"},
                # exp(x) = exp(x) * e^(+-argument * |x|) * (1 +- relative), rounded outward
                "exp": {"type": "object", "additionalProperties": False, "required": ["relative", "argument"],
                        "properties": {"relative": {"type": "number", "minimum": 0, "maximum": 0.5},
                                       "argument": {"type": "number", "minimum": 0, "maximum": 0.5}}},
                # the other transcendental functions: absolute + relative * |f| + ulp spacings (FunctionBound)
                "functions": {"type": "object", "additionalProperties": {
                    "type": "object", "additionalProperties": False, "required": ["source"],
                    "properties": {"absolute": {"type": "number", "minimum": 0, "maximum": 1},
                                   "relative": {"type": "number", "minimum": 0, "maximum": 0.5},
                                   "ulp": {"type": "number", "minimum": 0, "maximum": 1048576},
                                   "log2_times_exponent": {"type": "number", "minimum": 0, "maximum": 0.5},
                                   "quadratic": {"type": "number", "minimum": 0, "maximum": 1},
                                   "source": {"type": "string"}}}},
                "source": {"type": "string"}}}},
        "conversion_to_compute": _ROUNDING,
        "liberties": {"type": "object", "additionalProperties": False,
                      "required": ["rounding", "fp16_in_fp32", "attribute_narrowed", "reciprocal_division", "fp32_input_flush",
                                   "fp32_attribute_flush", "fp32_result_flush", "min_max_nan", "exp_error", "function_error"],
                      "properties": {name: {"type": "string"} for name in
                                     ["rounding", "fp16_in_fp32", "attribute_narrowed", "reciprocal_division", "fp32_input_flush",
                                      "fp32_attribute_flush", "fp32_result_flush", "min_max_nan", "exp_error", "function_error"]}},
    },
}

ENUMS_SCHEMA: dict = {
    "type": "object",
    "additionalProperties": False,
    "required": ["enums"],
    "properties": {"enums": {"type": "object", "propertyNames": {"pattern": "^DML_[A-Z0-9_]+$"},
                             "additionalProperties": {"type": "object", "minProperties": 1,
                                                      "propertyNames": {"pattern": "^[A-Z][A-Z0-9_]*$"},
                                                      "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 4294967295}}}},
}

STRUCTS_SCHEMA: dict = {
    "type": "object",
    "additionalProperties": False,
    "required": ["structs"],
    "properties": {"structs": {"type": "object", "propertyNames": {"pattern": "^DML_[A-Z0-9_]+$"},
                               "additionalProperties": {"type": "array", "minItems": 1, "items": {
                                   "type": "object", "additionalProperties": False, "required": ["name", "c_type"],
                                   "properties": {"name": {"type": "string", "pattern": "^[A-Z][A-Za-z0-9]*$"},
                                                  "c_type": {"enum": ["FLOAT", "UINT", "INT"]}}}}}},
}


def schema_document() -> dict:
    """OPERATOR_SCHEMA as a standalone JSON Schema document (what `dmlconform spec schema` prints
    and docs/spec.schema.json holds)."""
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "https://dmlconform.invalid/spec.schema.json",
            "title": "dmlconform operator spec (specs/OPERATOR.yaml)",
            "description": "Structure only; meaning-level checks (known types and levels, names, formulas) are `dmlconform spec lint`'s.",
            **OPERATOR_SCHEMA}
