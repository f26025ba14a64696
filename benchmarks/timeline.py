"""Where `make test`'s time goes: a per-test timeline of each pytest-xdist worker, and its summary.

Why: on 2 cores `make test` is bound by CPU, not by any one test (the machine was 100% busy for
the whole run, /proc/stat), so the wall falls only as the CPU of everything it runs falls: the
tests' own, and their subprocesses' (`dmlconform run`, the DirectML runner). pytest's
`--durations` gives wall time per test, which on a loaded machine mixes a test's work with its
wait for a core. This plugin records, per test, its wall time, the worker's own CPU and the CPU
of the worker's children that ended during it (RUSAGE_CHILDREN: a runner that lives on is
counted when it exits).

    PYTHONPATH=benchmarks make test PYTEST_ARGS="-p timeline"   # writes $DMLCONFORM_TIMELINE_DIR or /tmp/dmlconform-timeline
    .venv/bin/python benchmarks/timeline.py [DIR]              # the summary: per worker, per file, the costliest tests
"""
from __future__ import annotations

import collections
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import IO, Any

DEFAULT_DIR = "/tmp/dmlconform-timeline"
_started: dict[str, tuple[float, float, float]] = {}
_out: list[IO[str]] = []


def _directory() -> Path:
    return Path(os.environ.get("DMLCONFORM_TIMELINE_DIR", DEFAULT_DIR))


def _cpu() -> tuple[float, float]:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    _started[nodeid] = (time.time(), *_cpu())


def pytest_runtest_logfinish(nodeid: str, location: Any) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None or nodeid not in _started:  # the controller sees every test too: the workers' lines suffice
        return
    t0, own0, children0 = _started.pop(nodeid)
    own1, children1 = _cpu()
    if not _out:
        _directory().mkdir(parents=True, exist_ok=True)
        _out.append((_directory() / f"{worker}.jsonl").open("a"))
    _out[0].write(json.dumps({"id": nodeid, "t0": t0, "t1": time.time(), "cpu": own1 - own0, "child": children1 - children0}) + "\n")
    _out[0].flush()


def _group(nodeid: str) -> str:
    """A test file; the conformance suite's per test function and backend."""
    path, _, rest = nodeid.partition("::")
    if "conformance" in path:
        return f"{path}::{rest.split('[')[0]} [{rest.rsplit('-', 1)[-1].rstrip(']')}]"
    return path


def summarize(directory: Path, top: int = 25) -> str:
    rows = {p.stem: [json.loads(line) for line in p.open()] for p in sorted(directory.glob("*.jsonl"))}
    if not rows:
        return f"no timeline in {directory}"
    start = min(r["t0"] for rs in rows.values() for r in rs)
    lines = []
    for worker, rs in rows.items():
        lines.append(f"{worker}: {len(rs)} tests, last ended at {max(r['t1'] for r in rs) - start:.0f} s; "
                     f"own CPU {sum(r['cpu'] for r in rs):.0f} s, children's {sum(r['child'] for r in rs):.0f} s")
    groups: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    for rs in rows.values():
        for r in rs:
            g = groups[_group(r["id"])]
            g[0] += 1
            g[1] += r["t1"] - r["t0"]
            g[2] += r["cpu"]
            g[3] += r["child"]
    lines.append(f"\n{'file (conformance: function [backend])':78} {'tests':>6} {'wall s':>7} {'cpu s':>7} {'child s':>7}")
    for name, (n, wall, cpu, child) in sorted(groups.items(), key=lambda kv: -(kv[1][2] + kv[1][3]))[:top]:
        lines.append(f"{name[:78]:78} {int(n):6d} {wall:7.0f} {cpu:7.0f} {child:7.0f}")
    every = [r for rs in rows.values() for r in rs]
    lines.append(f"\nall: wall {sum(r['t1'] - r['t0'] for r in every):.0f} s, own CPU {sum(r['cpu'] for r in every):.0f} s, "
                 f"children's {sum(r['child'] for r in every):.0f} s\n\nthe {top} costliest tests (own + children's CPU):")
    for r in sorted(every, key=lambda r: -(r["cpu"] + r["child"]))[:top]:
        lines.append(f"{r['cpu'] + r['child']:7.1f} s  (wall {r['t1'] - r['t0']:6.1f})  {r['id'][:140]}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(summarize(Path(sys.argv[1]) if len(sys.argv) > 1 else _directory()))
