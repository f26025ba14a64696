"""Human-readable rendering of an operator spec at one feature level (`dmlconform spec show`)."""
from __future__ import annotations

from harness.spec.model import OperatorSpec


def render_spec(spec: OperatorSpec, level: str | None) -> str:
    """The effective support table at `level` (newest if None), the formula and the constraints."""
    level = level or spec.catalog.newest_level.name
    lines = [f"{spec.name} ({spec.desc_struct}, DML_OPERATOR_TYPE {spec.operator_type})",
             f"  {spec.summary}",
             f"  introduced: FL {spec.introduced}; in-place: {'allowed' if spec.in_place_allowed else 'not allowed'}"]
    tables = spec.tables_at(level)
    if not tables:
        lines.append(f"  not available at FL {level} (introduced at FL {spec.introduced})")
    if spec.variant_key is not None:
        lines.append(f"  support tables per {spec.variant_key} (the variant key): one series per group of members")
    for table in tables:  # one per variant group (a spec without a variant key has one)
        variant = f", {spec.variant_key} in {', '.join(table.variant)}" if table.variant else ""
        lines.append(f"  support at FL {level}{variant} (table 'FL {table.level} and above'):")
        width = max(len(n) for n in table.tensors)
        for f in spec.tensor_fields:
            cell = table.tensors[f.name]
            lo, hi = cell.dims
            dims = f"{lo}" if lo == hi else f"{lo} to {hi}"
            lines.append(f"    {f.name:<{width}}  {cell.kind:<14}  dims {dims:<6}  {', '.join(cell.types)}")
    if spec.attribute_fields:
        lines.append("  attributes:")
        for f in spec.attribute_fields:
            if f.is_array:
                pool = spec.attribute_values.get(f.name, {})
                if "subset_of" in pool:
                    drawn = f"drawn from subsets of {pool['subset_of'].text}"
                elif "each" in pool:
                    drawn = f"{pool['length'].text} items, item i drawn from {pool['each'].text}"
                else:
                    drawn = f"{pool['length'].text} items, each from {list(pool['ordinary']) + list(pool.get('edge', []))}"
                lines.append(f"    {f.name} ({f.c_type}, {f.count} items), {drawn}")
                continue
            if f.is_scalar_union:
                lines.append(f"    {f.name} ({f.c_type}), a value of the type {f.typed_by} names")
                continue
            if f.is_count:
                lines.append(f"    {f.name} ({f.c_type}), the length of {', '.join(f.count_of or ())}")
                continue
            if f.is_activation_array:
                lines.append(f"    {f.name} ({f.c_type}), {f.items} fused activations of: {', '.join(f.activations or ())}")
                continue
            if f.is_fused_activation:
                lines.append(f"    {f.name} ({f.c_type}), null or a fused activation: {', '.join(f.activations or ())}")
                continue
            default = "no documented default" if f.default is None else f"default {f.default}"
            lines.append(f"    {f.name} ({f.c_type}), {default}")
    lines.append("  formula:")
    lines.append(f"    {spec.formula.expression.text}")
    for var, tensor in spec.formula.inputs.items():
        absent = spec.formula.absent_inputs.get(var)
        suffix = f" (absent: {absent:g})" if absent is not None else ""
        lines.append(f"      {var} = {tensor}{suffix}")
    for name, const in spec.formula.constants.items():
        lines.append(f"      {name} = {const.text}")
    if spec.formula.operands == "raw_bits":
        lines.append("      operands are raw bit patterns (the data type gives only the width)")
    if spec.formula.rounding:
        lines.append(f"      rounding: {spec.formula.rounding}")
    family = spec.formula.family
    if family is not None:
        params = ", ".join(f"{k}={getattr(v, 'text', v)}" for k, v in family.params.items() if k != "bounds")
        lines.append(f"      family {family.name}: {params} (the expression is what each input element contributes)")
        for choice, bound in family.params.get("bounds", {}).items():
            lines.append(f"      bound {choice}: |device - exact| <= {bound.atol.text}")
    lines.append("  constraints:")
    for c in spec.constraints:
        lines.append(f"    [{c.rule_id}] {c.text}")
        for label, expr in (("when", c.guard), ("holds", c.check), ("sizes", c.sizes)):
            if expr is not None:
                lines.append(f"        {label}: {expr.text}")
    if spec.unspecified:
        lines.append("  unspecified by the docs:")
        for u in spec.unspecified:
            lines.append(f"    [{u.id}] when {u.when.text}")
    lines.append("  comparison:")
    for key, comp in spec.comparison.items():
        extra = []
        if comp.kind == "ulp":
            extra.append(f"max {comp.max_ulp} ULP")
        if comp.atol:
            extra.append(f"+ {comp.atol.text}")
        if comp.ties:
            extra.append(f"either neighbour at ties ({comp.ties.text})")
        lines.append(f"    {key}: {comp.kind}{' (' + '; '.join(extra) + ')' if extra else ''}")
    return "\n".join(lines)
