"""The largest error devices made, beside the bound that accepted it: per operator and data type,
from the records of one or more runs (`max_ulps`, `max_abs`, `bound_use`: harness.judge.diff._error_seen),
over the cases where an accepted element differed from the reference: the most ULPs and the
largest absolute difference an accepted element had, and the largest share of an explicit bound
(the spec's atol, an ULP comparison's max_ulp, a family's error bound) it used. A bound whose share stays far below
1 on every device is looser than the evidence needs; one near 1 is what a device really uses.

    python -m harness.report.error_seen lavapipe=reports/test-run H200=/tmp/catalogue > table.md

Each argument is LABEL=REPORTS_DIR (a run's reports directory); only backends other than the
reference are read (the reference's answers are the expected ones)."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from harness.run.results import read_records

REFERENCE = "numpy"


@dataclass
class Seen:
    """One (label, backend, operator, data type): cases with an accepted difference, the most ULPs,
    the largest share of a bound (None: no explicit bound was involved)."""

    cases: int = 0
    ulps: int = 0
    largest: float = 0.0
    share: float | None = None

    def add(self, ulps: int | None, largest: float | None, share: float | None) -> None:
        self.cases += 1
        self.ulps = max(self.ulps, ulps or 0)
        self.largest = max(self.largest, largest or 0.0)
        if share is not None:
            self.share = max(self.share or 0.0, share)


def collect(runs: list[tuple[str, Path]]) -> dict[tuple[str, str], dict[str, Seen]]:
    """(operator, data type) -> column ("label backend") -> what was seen there."""
    table: dict[tuple[str, str], dict[str, Seen]] = {}
    for label, reports in runs:
        for record in read_records(reports / "results"):
            if record.backend == REFERENCE or (record.max_ulps is None and record.bound_use is None):
                continue
            column = f"{label} {record.backend}"
            seen = table.setdefault((record.operator, record.data_type), {}).setdefault(column, Seen())
            seen.add(record.max_ulps, record.max_abs, record.bound_use)
    return table


def render(table: dict[tuple[str, str], dict[str, Seen]]) -> str:
    columns = sorted({c for row in table.values() for c in row})
    head = "| operator | type | " + " | ".join(f"{c}: cases, ULPs, abs, share" for c in columns) + " |"
    lines = [head, "| --- | --- | " + " | ".join("---" for _ in columns) + " |"]
    for (operator, data_type), row in sorted(table.items()):
        cells = []
        for c in columns:
            seen = row.get(c)
            cells.append("" if seen is None else
                         f"{seen.cases}, {seen.ulps:,}, {seen.largest:.3g}, {'-' if seen.share is None else f'{seen.share:.3g}'}")
        lines.append(f"| {operator} | {data_type} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    runs = []
    for arg in argv:
        label, sep, where = arg.partition("=")
        if not sep or not label or not Path(where, "results").is_dir():
            print(f"error_seen: expected LABEL=REPORTS_DIR with a results/ folder, got {arg!r}", file=sys.stderr)
            return 2
        runs.append((label, Path(where)))
    if not runs:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    sys.stdout.write(render(collect(runs)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
