"""The whole catalogue, timed stage by stage: for every operator of specs/ at the newest level,
draw its valid cells' cases (one cell per primary data type, as the suite does) and its invalid
cells' cases (one per reachable rule), then run every case on each backend, and report where the
time goes: generation, the backend call, the reference, the diff (judging), per backend, with
cases/s. Reporting (matrix, Allure) is bench_report.py's.

    .venv/bin/python benchmarks/bench_catalogue.py [--examples N] [--backend NAME ...] [--operator OP ...]

`--examples` is per cell (default 3: a quick picture; the ci profile draws 10). The reference is
computed for every valid case on every backend except the NumPy reference backend, which
computes it in its own call (its `reference` column is then ~0: the memo is hit). Each backend
gets fresh copies of the cases (the per-case reference memo is never carried over)."""
from __future__ import annotations

import argparse
import time
from collections import defaultdict

import common  # noqa: F401  (puts the checkout on sys.path)
from common import fresh
from hypothesis import HealthCheck, given, settings

from harness.generate.breakers import candidate_rules, invalid_cases, rule_reachable
from harness.generate.strategies import valid_case_batches
from harness.generate.types import coverage_plan, primary_type
from harness.judge.diff import judge
from harness.reference.evaluate import expected_for
from harness.run.allocator import keep_freed_memory
from harness.run.registry import load_backend
from harness.spec.load import DEFAULT_SPECS_DIR, load_specs


def _draw(strategy, examples: int) -> list:
    drawn: list = []

    @settings(max_examples=examples, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(value):
        drawn.extend(value if isinstance(value, list) else [value])
    collect()
    return drawn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=3, help="Hypothesis examples per cell (default: %(default)s)")
    parser.add_argument("--backend", action="append", help="backends (default: numpy, onnxruntime, directml where available)")
    parser.add_argument("--operator", action="append", help="operators (default: all)")
    args = parser.parse_args()
    keep_freed_memory()
    specs = load_specs(DEFAULT_SPECS_DIR)
    level = specs.catalog.newest_level.name
    cases: list[tuple[str, object, str]] = []  # (operator, case, kind)
    generation: dict[str, float] = {}
    for name in args.operator or sorted(specs.operators):
        spec = specs.operator(name)
        started = time.perf_counter()
        if spec.has_table_at(level):
            # the suite's cells: one per primary data type (the output's where the primary input is an
            # absent optional tensor: primary_type, as the plugin names its cells)
            for dtype in sorted({primary_type(spec, cell[0]) for cell in coverage_plan(spec, level)} - {None}):
                cases += [(name, c, "valid") for c in _draw(valid_case_batches(spec, level, dtype), args.examples)]
        for rule in candidate_rules(spec):
            if rule_reachable(spec, level, rule):
                cases += [(name, c, "invalid") for c in _draw(invalid_cases(spec, level, rule), args.examples)]
        generation[name] = time.perf_counter() - started
    total_generation = sum(generation.values())
    print(f"generation: {len(cases)} cases of {len(generation)} operators in {total_generation:.1f} s "
          f"({len(cases) / total_generation:.0f} cases/s); slowest: "
          + ", ".join(f"{n} {s:.1f} s" for n, s in sorted(generation.items(), key=lambda kv: -kv[1])[:5]))
    print(f"{'backend':<12} {'cases':>6} {'backend s':>10} {'reference s':>12} {'diff s':>7} {'cases/s':>8}  slowest operators (backend + reference + diff)")
    for backend_name in args.backend or ["numpy", "onnxruntime", "directml"]:
        backend = load_backend(backend_name, specs=specs)
        ok, why = backend.available()
        if not ok:
            print(f"{backend_name:<12} unavailable: {why}")
            continue
        capabilities = backend.capabilities()
        totals, per_op = defaultdict(float), defaultdict(float)
        try:
            for name, case, kind in cases:
                spec = specs.operator(name)
                case = fresh(case)
                t0 = time.perf_counter()
                result = backend.run(case)
                t1 = time.perf_counter()
                if kind == "valid" and result.kind == "outputs":
                    expected_for(spec, case)
                t2 = time.perf_counter()
                judge(spec, case, result, capabilities.validates_descriptors, capabilities.max_feature_level or level)
                t3 = time.perf_counter()
                totals["backend"] += t1 - t0
                totals["reference"] += t2 - t1
                totals["diff"] += t3 - t2
                per_op[name] += t3 - t0
        finally:
            backend.close()
        whole = sum(totals.values())
        slowest = ", ".join(f"{n} {s:.1f} s" for n, s in sorted(per_op.items(), key=lambda kv: -kv[1])[:4])
        print(f"{backend_name:<12} {len(cases):>6} {totals['backend']:>10.1f} {totals['reference']:>12.1f} {totals['diff']:>7.1f} "
              f"{len(cases) / whole if whole else 0:>8.0f}  {slowest}")


if __name__ == "__main__":
    main()
