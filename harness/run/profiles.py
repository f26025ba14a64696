"""Hypothesis profiles shared by the test suite and the CLI.

ci: derandomized (the same examples on every run) and bounded, so CI is reproducible.
dev: random, moderate, with the example database under the run's output directory.
thorough: many examples, for release and vendor qualification runs.
"""
from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from harness.generate.reproducible import pin_local_constants

# ci: 10 examples per cell (each a descriptor with its data sets; every cell still runs) keeps
# make test under its 20-minute budget with 22 operators (docs/performance.md: 15 took 19m57s)
PROFILES = {"ci": 10, "dev": 50, "thorough": 1000}
_SUPPRESS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
             HealthCheck.function_scoped_fixture, HealthCheck.differing_executors]


def register_profiles(output_dir: Path) -> None:
    """Register the profiles, and pin Hypothesis's draws to the strategy and seed alone (a
    derandomized cell must draw the same cases whatever ran before it: harness/generate/reproducible.py)."""
    pin_local_constants()
    database = DirectoryBasedExampleDatabase(str(output_dir / "hypothesis"))
    # ci does not shrink: a failing case is reported at once (its data is seed-based, so shrinking
    # seldom makes it simpler) and a slow backend is not re-run hundreds of times.
    settings.register_profile("ci", max_examples=PROFILES["ci"], derandomize=True, deadline=None, database=None,
                              suppress_health_check=_SUPPRESS, print_blob=True,
                              phases=[Phase.explicit, Phase.reuse, Phase.generate])
    settings.register_profile("dev", max_examples=PROFILES["dev"], deadline=None, database=database,
                              suppress_health_check=_SUPPRESS, print_blob=True)
    settings.register_profile("thorough", max_examples=PROFILES["thorough"], deadline=None, database=database,
                              suppress_health_check=_SUPPRESS, print_blob=True)
