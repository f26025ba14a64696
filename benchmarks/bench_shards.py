"""What sharding buys: one unsharded run of a fixed selection, then the same selection as N shard
runs (`dmlconform run --shard I/N`), one after the other, each on one xdist worker, balanced by the
durations file the unsharded run wrote (`--no-durations`: the stable-hash split alone).

Prints, per shard, its wall time and the seconds its tests took (from its durations.json) against
the whole run's; the balance (slowest shard / mean shard, by wall time, by test time, and by what
the same tests took in the whole run: the split's own balance, free of the machine's load); and the
speed-up N shards run in parallel on N machines would give (the whole run's wall time over the
slowest shard's). Then it merges the shards and prints the gate's last line: the figures count only
if the shards make the whole run again.

    .venv/bin/python benchmarks/bench_shards.py [--shards 3] [--backend numpy] [--operator OP ...]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# a fixed selection, mixing cheap element-wise operators with the costlier families
SELECTION = ["ELEMENT_WISE_ADD", "ELEMENT_WISE_SIGN", "ELEMENT_WISE_BIT_NOT", "ACTIVATION_ELU", "CAST", "GEMM",
             "GATHER", "REDUCE", "SLICE1", "TOP_K1"]


def _run(reports: Path, args: argparse.Namespace, *extra: str) -> float:
    """Wall seconds of one `dmlconform run` of the selection (its exit code: 0 or 1, a failed gate
    is no reason to stop timing)."""
    command = [sys.executable, "-m", "harness.cli", "run", "--backend", args.backend, "--workers", "1",
               "--reports-dir", str(reports), *[a for op in args.operator for a in ("--operator", op)], *extra]
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        sys.exit(f"run failed ({proc.returncode}): {' '.join(command)}\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return seconds


def _durations(reports: Path) -> dict[str, float]:
    """The seconds each test of the run took (its durations.json)."""
    return json.loads((reports / "results" / "durations.json").read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", type=int, default=3, help="N (default 3)")
    parser.add_argument("--backend", default="numpy", help="default numpy")
    parser.add_argument("--operator", action="append", help=f"repeatable (default: {', '.join(SELECTION)})")
    parser.add_argument("--no-durations", action="store_true", help="split by the stable hash alone")
    parser.add_argument("--keep", default=None, help="write the reports under this directory (default: a temporary one)")
    args = parser.parse_args()
    args.operator = args.operator or SELECTION
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-shards-"))
    print(f"selection: {args.backend}, {len(args.operator)} operators, one xdist worker per run; reports under {base}")
    whole_wall = _run(base / "whole", args)
    whole = _durations(base / "whole")
    whole_seconds = sum(whole.values())
    print(f"whole run: {whole_wall:7.1f} s wall, {len(whole)} tests taking {whole_seconds:.1f} s")
    durations = [] if args.no_durations else ["--shard-durations", str(base / "whole" / "results" / "durations.json")]
    walls, seconds, estimates = [], [], []
    for index in range(1, args.shards + 1):
        reports = base / f"shard{index}"
        walls.append(_run(reports, args, "--shard", f"{index}/{args.shards}", *durations))
        tests = _durations(reports)
        seconds.append(sum(tests.values()))
        estimates.append(sum(whole.get(t, 0.0) for t in tests))  # what the same tests took in the whole run
        print(f"shard {index}/{args.shards}: {walls[-1]:7.1f} s wall ({walls[-1] / whole_wall:5.1%} of the whole), "
              f"{len(tests)} tests taking {seconds[-1]:.1f} s ({seconds[-1] / whole_seconds:5.1%}; "
              f"{estimates[-1]:.1f} s in the whole run)")
    print(f"balance (slowest / mean): {max(walls) / statistics.mean(walls):.2f} by wall time, "
          f"{max(seconds) / statistics.mean(seconds):.2f} by test time, "
          f"{max(estimates) / statistics.mean(estimates):.2f} by the whole run's times of the same tests")
    print(f"N shards in parallel: {max(walls):.1f} s against {whole_wall:.1f} s, a speed-up of "
          f"{whole_wall / max(walls):.2f}x ({whole_seconds / max(seconds):.2f}x counting test time only; "
          f"the rest is each run's start-up)")
    merged = subprocess.run([sys.executable, "-m", "harness.cli", "merge",
                             *[str(base / f"shard{i}") for i in range(1, args.shards + 1)], "--output", str(base / "merged")],
                            cwd=ROOT, capture_output=True, text=True)
    last = (merged.stdout.strip().splitlines() or [""])[-1]
    print(f"merge: exit {merged.returncode}, {last}" + (f"\n{merged.stderr.strip()}" if merged.returncode == 2 else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
