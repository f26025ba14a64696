"""Spec regression reports: what changed between two spec directories (or two git revisions),
per operator and feature level: data types, dimension counts, kinds, constraints, formulas,
tolerances, unspecified regions and availability."""
from __future__ import annotations

import shutil
import subprocess
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

from harness.spec.arithmetic import ARITHMETIC_FILE
from harness.spec.catalog import ENUMS_FILE, STRUCTS_FILE
from harness.spec.operator import DEFAULT_SPECS_DIR, OperatorSpec, SpecSet, load_specs


def load_spec_source(source: str, workdir: Path) -> SpecSet:
    """A spec directory, or a git revision of this repository's specs/ (e.g. HEAD~3, main)."""
    path = Path(source)
    if path.is_dir():
        return load_specs(path)
    root = DEFAULT_SPECS_DIR.parent  # the checkout whose specs/ a revision names
    try:
        data = subprocess.run(["git", "-C", str(root), "archive", source, "specs"], capture_output=True, check=True).stdout
    except (subprocess.CalledProcessError, FileNotFoundError) as exc:
        stderr = getattr(exc, "stderr", b"") or b""
        raise ValueError(f"{source!r} is neither a directory nor a git revision with specs/: {stderr.decode().strip()}") from None
    target = workdir / source.replace("/", "_")
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(target, filter="data")
    # Revisions older than a shared catalog file (the precision model, the enum catalog) lack it;
    # none changes a support table, formula or tolerance that a spec diff reports, so today's is used.
    for name in (ARITHMETIC_FILE, ENUMS_FILE, STRUCTS_FILE):
        if not (target / "specs" / name).exists() and (DEFAULT_SPECS_DIR / name).exists():
            shutil.copy(DEFAULT_SPECS_DIR / name, target / "specs" / name)
    return load_specs(target / "specs")


def _levels(a: OperatorSpec | None, b: OperatorSpec | None) -> list[str]:
    levels = set()
    for s in (a, b):
        if s is not None:
            levels |= {t.level for t in s.support}
    catalog = (a or b).catalog
    return sorted(levels, key=catalog.level_order)


def diff_operator(a: OperatorSpec, b: OperatorSpec) -> list[str]:
    out = []
    if a.introduced != b.introduced:
        out.append(f"introduced: FL {a.introduced} -> FL {b.introduced}")
    if a.in_place_allowed != b.in_place_allowed:
        out.append(f"in-place: {a.in_place_allowed} -> {b.in_place_allowed}")
    old_levels, new_levels = {t.level for t in a.support}, {t.level for t in b.support}
    for level in sorted(new_levels - old_levels, key=b.catalog.level_order):
        out.append(f"FL {level}: table added")
    for level in sorted(old_levels - new_levels, key=a.catalog.level_order):
        out.append(f"FL {level}: table removed")
    for level in _levels(a, b):
        ta, tb = a.table_at(level), b.table_at(level)
        if ta is None or tb is None:
            continue
        for tensor in sorted(set(ta.tensors) | set(tb.tensors)):
            ca, cb = ta.tensors.get(tensor), tb.tensors.get(tensor)
            if ca is None or cb is None:
                out.append(f"FL {level} {tensor}: tensor {'added' if ca is None else 'removed'}")
                continue
            added, removed = sorted(set(cb.types) - set(ca.types)), sorted(set(ca.types) - set(cb.types))
            if added:
                out.append(f"FL {level} {tensor}: data types added {', '.join(added)}")
            if removed:
                out.append(f"FL {level} {tensor}: data types removed {', '.join(removed)}")
            if ca.dims != cb.dims:
                out.append(f"FL {level} {tensor}: dimension counts {ca.dims[0]}..{ca.dims[1]} -> {cb.dims[0]}..{cb.dims[1]}")
            if ca.kind != cb.kind:
                out.append(f"FL {level} {tensor}: kind {ca.kind} -> {cb.kind}")
    ca_, cb_ = {c.id: c for c in a.constraints}, {c.id: c for c in b.constraints}
    for cid in sorted(set(ca_) | set(cb_)):
        if cid not in cb_:
            out.append(f"constraint {cid} removed")
        elif cid not in ca_:
            out.append(f"constraint {cid} added: {cb_[cid].text}")
        elif (ca_[cid].rule, ca_[cid].tensors, ca_[cid].types, ca_[cid].when) != (cb_[cid].rule, cb_[cid].tensors, cb_[cid].types, cb_[cid].when):
            out.append(f"constraint {cid} changed")
    if a.formula.expression.text != b.formula.expression.text:
        out.append(f"formula changed: {a.formula.expression.text} -> {b.formula.expression.text}")
    if a.formula.absent_inputs != b.formula.absent_inputs:
        out.append(f"absent inputs: {a.formula.absent_inputs} -> {b.formula.absent_inputs}")
    for key in sorted(set(a.comparison) | set(b.comparison)):
        x, y = a.comparison.get(key), b.comparison.get(key)
        describe = lambda c: "none" if c is None else f"{c.kind} max_ulp={c.max_ulp} atol={c.atol.text if c.atol else None} ties={c.ties.text if c.ties else None}"  # noqa: E731
        if describe(x) != describe(y):
            out.append(f"tolerance {key}: {describe(x)} -> {describe(y)}")
    ua, ub = {u.id: u.when.text for u in a.unspecified}, {u.id: u.when.text for u in b.unspecified}
    for uid in sorted(set(ua) | set(ub)):
        if ua.get(uid) != ub.get(uid):
            out.append(f"unspecified {uid}: {ua.get(uid, 'absent')} -> {ub.get(uid, 'absent')}")
    return out


def diff_specs(old: SpecSet, new: SpecSet) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name in sorted(set(old.operators) | set(new.operators)):
        if name not in new.operators:
            out[name] = ["operator removed"]
        elif name not in old.operators:
            out[name] = ["operator added"]
        else:
            changes = diff_operator(old.operators[name], new.operators[name])
            if changes:
                out[name] = changes
    return out


def render(changes: dict[str, list[str]]) -> str:
    if not changes:
        return "no differences"
    lines = []
    for op, items in changes.items():
        lines.append(op)
        lines += [f"  {item}" for item in items]
    return "\n".join(lines)


def diff_sources(old: str, new: str) -> dict[str, list[str]]:
    with tempfile.TemporaryDirectory() as tmp:
        return diff_specs(load_spec_source(old, Path(tmp)), load_spec_source(new, Path(tmp)))
