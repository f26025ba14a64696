"""What a ladder cell below its backend's own feature level draws: fewer data, every table cell.

On the level ladder (`--feature-level ladder`, make run's default) a device runs its valid cells
at its own level and at each lower level where the operator's tables start. One DLL computes the
same way whichever level's table a descriptor was drawn from, so what a lower level adds is which
descriptors must be accepted (its tables' types, dimension counts, optional tensors), not new
arithmetic: its own level's cells carry the numerics with the full data sets. Below the own level,
each drawn descriptor therefore gets one data set (a case still judged element by element), and
the reference's invalid cells there (the validator's own check of the level's rules; a device runs
invalid cells at its own level only) draw a third of the profile's descriptors. The descriptors
drawn per valid cell do not change, so every table cell is as likely to be reached as before.
Measured (docs/performance.md): the lower levels were 72% of make run's test time.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, cast

import pytest

from harness.model.validator import LEVEL_RULES
from harness.run.case import device_level
from harness.spec.model import level_names

if TYPE_CHECKING:
    from harness.run.plugin import DmlConfig
    from harness.spec.model import OperatorSpec

LOWER_LEVEL_DATA_SETS = 1        # data sets per valid descriptor below the own level
LOWER_LEVEL_INVALID_SHARE = 3    # the reference's invalid cells there: the profile's examples // 3


def below_own_level(config: pytest.Config, backend_name: str, level: str) -> bool:
    """Whether `level` is a ladder level below the backend's own (an explicit --feature-level
    list is run in full: whoever names a level wants it judged as the own one)."""
    if (config.getoption("feature_level") or ["own"]) != ["ladder"]:
        return False
    run = cast("DmlConfig", config)  # the attributes harness.run.plugin's pytest_configure sets
    specs = run.dml_specs
    backend = run.dml_backends.get(backend_name)
    own = device_level(backend, specs) if backend is not None else specs.catalog.newest_level.name
    return specs.catalog.level_order(level) < specs.catalog.level_order(own)


def data_sets_per_descriptor(config: pytest.Config, backend_name: str, level: str) -> int:
    """The data sets each valid descriptor of this cell gets (--data-per-descriptor at the own level)."""
    per = config.getoption("data_per_descriptor")
    return min(per, LOWER_LEVEL_DATA_SETS) if below_own_level(config, backend_name, level) else per


def invalid_examples(config: pytest.Config, backend_name: str, level: str, profile_examples: int) -> int | None:
    """The descriptors an invalid cell draws when fewer than the profile's (None: the profile's)."""
    if below_own_level(config, backend_name, level):
        return max(1, profile_examples // LOWER_LEVEL_INVALID_SHARE)
    return None


TABLE_RULES = LEVEL_RULES - {"operator.unavailable"}


def level_gated(spec: OperatorSpec, rule: str, level: str) -> bool:
    """Whether a descriptor that breaks `rule` at `level` may be one the newest level accepts: a
    level-gated rejection, what the ladder's lower levels and an older DirectML.dll are in a run for
    (harness.run.parametrize asks them only these). The operator's unavailability below its
    introduction; a table rule where the tables in force at `level` are not the newest level's; a
    constraint whose condition reads the feature level. Any other rule judges a descriptor alike at
    every level, so breaking it below the newest level only repeats the newest level's invalid cells
    (an older DLL's own bugs there are the newest DLL's business, or `--feature-level own`'s).
    (Here rather than beside the validator's LEVEL_RULES: a change to harness.model makes every
    reachability answer be searched again, harness/generate/reachability_memo.py.)"""
    newest = spec.catalog.newest_level.name
    if rule == "operator.unavailable":
        return not spec.has_table_at(level)
    if rule in TABLE_RULES:
        return [id(t) for t in spec.tables_at(level)] != [id(t) for t in spec.tables_at(newest)]
    if rule.startswith("constraint."):
        levels = level_names(spec.catalog)
        return any(c.rule_id == rule and c.guard is not None and bool(c.guard.names() & levels) for c in spec.constraints)
    return False
