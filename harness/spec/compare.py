"""Spec regression reports: what changed between two spec directories (or two git revisions),
per operator and feature level: data types, dimension counts, kinds, constraints, formulas,
tolerances, unspecified regions and availability."""
from __future__ import annotations

import re
import shutil
import subprocess
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

from harness.spec.arithmetic import ARITHMETIC_FILE
from harness.spec.catalog import ENUMS_FILE, STRUCTS_FILE
from harness.spec.load import DEFAULT_SPECS_DIR, load_specs
from harness.spec.model import OperatorSpec, SpecSet


def _git(root: Path, *args: str) -> bytes:
    """`git -C root ARGS`'s output; a ValueError with git's message when it fails."""
    try:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, check=True).stdout
    except (subprocess.CalledProcessError, FileNotFoundError) as exc:
        stderr = getattr(exc, "stderr", b"") or b""
        raise ValueError(stderr.decode(errors="replace").strip()
                         or ("git is not installed" if isinstance(exc, FileNotFoundError) else "git does not know it")) from None


def resolve_revision(source: str, root: Path) -> str:
    """The tree a git revision names (40 hex digits), for `git archive`. The revision is user
    input: one starting with '-' is refused (git would read it as an option: `--output=FILE`
    makes git write a file), and it reaches git only after --end-of-options, as `REV^{tree}` in
    `git rev-parse --verify`; git archive is then given the resolved name alone."""
    if not source or source.startswith("-") or any(c in source for c in "\0\n\r"):
        raise ValueError(f"{source!r} is neither a directory nor a git revision: a revision never starts with '-' "
                         f"(give a specs directory, or a revision such as HEAD~1 or main)")
    try:
        name = _git(root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{source}^{{tree}}").decode().strip()
    except ValueError as exc:
        raise ValueError(f"{source!r} is neither a directory nor a git revision with specs/: {exc}") from None
    if not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", name):
        raise ValueError(f"{source!r} is neither a directory nor a git revision with specs/")
    return name


def load_spec_source(source: str, workdir: Path) -> SpecSet:
    """A spec directory, or a git revision of this repository's specs/ (e.g. HEAD~3, main)."""
    path = Path(source)
    if path.is_dir():
        return load_specs(path)
    root = DEFAULT_SPECS_DIR.parent  # the checkout whose specs/ a revision names
    tree = resolve_revision(source, root)
    try:
        data = _git(root, "archive", "--end-of-options", tree, "specs")
    except ValueError as exc:
        raise ValueError(f"{source!r} is neither a directory nor a git revision with specs/: {exc}") from None
    target = Path(tempfile.mkdtemp(prefix="revision-", dir=workdir))  # not a name made of the revision
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(target, filter="data")
    if not (target / "specs").is_dir():
        raise ValueError(f"{source!r} is neither a directory nor a git revision with specs/")
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
    either = a or b
    assert either is not None  # an operator compared exists on one side at least
    catalog = either.catalog
    return sorted(levels, key=catalog.level_order)


def _members(spec: OperatorSpec) -> list[str | None]:
    """One entry per table series: each member of the variant key ([None] without one)."""
    return list(spec.variant_members) if spec.variant_key is not None else [None]


def _levels_of(spec: OperatorSpec, member: str | None) -> set[str]:
    """The levels of the tables of `member`'s series (None: a spec without a variant key)."""
    if member is None:
        return {t.level for t in spec.support} if spec.variant_key is None else set()
    return {t.level for t in spec.support if t.variant and member in t.variant}


def _table(spec: OperatorSpec, level: str, member: str | None):
    if member is None or spec.variant_key is None:
        return spec.table_at(level, {}) if spec.variant_key is None else None
    return spec.table_at(level, spec.variant_attributes(member)) if member in spec.variant_members else None


def _table_changes(a: OperatorSpec, b: OperatorSpec) -> list[str]:
    """Per level (and per member of the variant key, where the tables depend on one): tables added
    or removed, and each cell's types, dimension counts and kind."""
    out = []
    if a.variant_key != b.variant_key:
        out.append(f"variant key: {a.variant_key} -> {b.variant_key}")
    members = list(dict.fromkeys(_members(a) + _members(b)))
    for member in members:
        where = f" {a.variant_key or b.variant_key}={member}" if member is not None else ""
        old_levels, new_levels = _levels_of(a, member), _levels_of(b, member)
        for level in sorted(new_levels - old_levels, key=b.catalog.level_order):
            out.append(f"FL {level}{where}: table added")
        for level in sorted(old_levels - new_levels, key=a.catalog.level_order):
            out.append(f"FL {level}{where}: table removed")
        for level in _levels(a, b):
            ta, tb = _table(a, level, member), _table(b, level, member)
            if ta is not None and tb is not None:
                out += _cell_changes(f"FL {level}{where}", ta, tb)
    return out


def _cell_changes(label: str, ta, tb) -> list[str]:
    out = []
    for tensor in sorted(set(ta.tensors) | set(tb.tensors)):
        ca, cb = ta.tensors.get(tensor), tb.tensors.get(tensor)
        if ca is None or cb is None:
            out.append(f"{label} {tensor}: tensor {'added' if ca is None else 'removed'}")
            continue
        added, removed = sorted(set(cb.types) - set(ca.types)), sorted(set(ca.types) - set(cb.types))
        if added:
            out.append(f"{label} {tensor}: data types added {', '.join(added)}")
        if removed:
            out.append(f"{label} {tensor}: data types removed {', '.join(removed)}")
        if ca.dims != cb.dims:
            out.append(f"{label} {tensor}: dimension counts {ca.dims[0]}..{ca.dims[1]} -> {cb.dims[0]}..{cb.dims[1]}")
        if ca.kind != cb.kind:
            out.append(f"{label} {tensor}: kind {ca.kind} -> {cb.kind}")
    return out


def _bounds(spec: OperatorSpec) -> dict[str, str]:
    """A family's error bounds per choice, as text."""
    family = spec.formula.family
    return {k: v.atol.text for k, v in (family.params.get("bounds", {}) if family else {}).items()}


def _constraint_key(c) -> tuple:
    """What makes a constraint what it is, for comparing two versions of it."""
    texts = tuple(e.text if e is not None else None for e in (c.check, c.sizes, c.guard))
    return (c.rule, c.tensors, c.types, c.when, texts, c.bound, c.align)


def diff_operator(a: OperatorSpec, b: OperatorSpec) -> list[str]:
    out = []
    if a.introduced != b.introduced:
        out.append(f"introduced: FL {a.introduced} -> FL {b.introduced}")
    if a.in_place_allowed != b.in_place_allowed:
        out.append(f"in-place: {a.in_place_allowed} -> {b.in_place_allowed}")
    out += _table_changes(a, b)
    ca_, cb_ = {c.id: c for c in a.constraints}, {c.id: c for c in b.constraints}
    for cid in sorted(set(ca_) | set(cb_)):
        if cid not in cb_:
            out.append(f"constraint {cid} removed")
        elif cid not in ca_:
            out.append(f"constraint {cid} added: {cb_[cid].text}")
        elif _constraint_key(ca_[cid]) != _constraint_key(cb_[cid]):
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
    ba, bb = _bounds(a), _bounds(b)
    for key in sorted(set(ba) | set(bb)):
        if ba.get(key) != bb.get(key):
            out.append(f"bound {key}: {ba.get(key, 'none')} -> {bb.get(key, 'none')}")
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
