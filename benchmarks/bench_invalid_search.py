"""The invalid-case search: how fast the generator draws invalid cases that break one expression
or shape rule alone (harness.generate.expression_breakers: mutate a valid descriptor until the
validator reports exactly that rule), per operator with such rules, and how long the validator
takes per descriptor it tries. This search is the costliest generation of the suite (the
conformance invalid cells and the generator tests draw every reachable rule of every operator).

    .venv/bin/python benchmarks/bench_invalid_search.py [--examples N] [--operator OP ...]

Prints, per operator: the rules drawn, invalid cases/s over all of them (N derandomized
Hypothesis examples per rule at the newest level), and validate() calls/s on one valid descriptor.
"""
from __future__ import annotations

import argparse
import time

import common  # noqa: F401  (puts the checkout on sys.path)
from hypothesis import HealthCheck, given, settings

from harness.generate.breakers import candidate_rules, invalid_cases, rule_reachable
from harness.generate.strategies import valid_descriptors
from harness.model.validator import validate
from harness.spec.load import DEFAULT_SPECS_DIR, load_specs


def _draw(strategy, examples: int) -> int:
    drawn = []

    @settings(max_examples=examples, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(value):
        drawn.append(value)
    collect()
    return len(drawn)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=10, help="examples per rule (default: %(default)s)")
    parser.add_argument("--operator", action="append", help="operators (default: every operator with expression or shape rules)")
    args = parser.parse_args()
    specs = load_specs(DEFAULT_SPECS_DIR)
    level = specs.catalog.newest_level.name
    chosen = args.operator or sorted(n for n, s in specs.operators.items() if any(c.rule in ("expression", "shape") for c in s.constraints))
    print(f"{'operator':<30} {'rules':>5} {'invalid cases/s':>16} {'validate/s':>11}")
    for name in chosen:
        spec = specs.operator(name)
        rules = [r for r in candidate_rules(spec) if r.startswith("constraint.") and rule_reachable(spec, level, r)
                 and any(c.rule_id == r and c.rule in ("expression", "shape") for c in spec.constraints)]
        started = time.perf_counter()
        cases = sum(_draw(invalid_cases(spec, level, rule), args.examples) for rule in rules)
        search = time.perf_counter() - started
        descriptor = []

        @settings(max_examples=1, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
        @given(valid_descriptors(spec, level))
        def one(d):
            descriptor.append(d)
        one()
        started, calls = time.perf_counter(), 0
        while time.perf_counter() - started < 1.0:
            validate(spec, descriptor[0], level)
            calls += 1
        per_second = calls / (time.perf_counter() - started)
        print(f"{name:<30} {len(rules):>5} {cases / search if search else 0:>16.1f} {per_second:>11.0f}")


if __name__ == "__main__":
    main()
