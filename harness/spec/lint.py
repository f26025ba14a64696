"""`spec lint`: check spec files each on its own and collect every error, where load_specs stops.

Each file is built as load_specs builds it (harness.spec.load), its expressions are probed
(harness.spec.lint_probes.probe_spec: what reads well can still fail when generation evaluates
it), then its fused activations are resolved against the directory's other specs; a spec that
fails to build is reported once, at its own file, not again at each operator that may fuse it.
"""
from __future__ import annotations

from pathlib import Path

from harness.spec.catalog import load_catalog
from harness.spec.lint_probes import probe_spec
from harness.spec.load import build_file, operator_files, resolve_activations
from harness.spec.model import OperatorSpec
from harness.spec.source import SpecError


def lint_specs(paths: list[Path], specs_dir: Path) -> list[SpecError]:
    """Check each file independently, its expressions probed (probe_spec), and return every error
    found (one per file at most)."""
    errors: list[SpecError] = []
    try:
        catalog = load_catalog(specs_dir)
    except SpecError as exc:
        return [exc]
    built: dict[str, OperatorSpec] = {}
    for path in paths:
        try:
            spec = build_file(path, catalog)
            probe_spec(spec)
            built[spec.name] = spec
        except SpecError as exc:
            errors.append(exc)
    others: dict[str, OperatorSpec] = {}  # what fused activations may name: the directory's specs
    broken: set[str] = set()
    for path in operator_files(specs_dir):
        try:
            other = build_file(path, catalog)
            others[other.name] = other
        except SpecError:
            broken.add(path.stem)  # reported when that file is linted
    for name, spec in built.items():
        try:
            resolve_activations({**others, name: spec}, only=name, broken=frozenset(broken))
        except SpecError as exc:
            errors.append(exc)
    return errors
