"""The reachability answers a run will ask for, searched before its pytest-xdist workers start and
spread over processes.

Collecting the invalid cells asks, of every (operator, level, rule), whether a breaker can break
that rule alone (harness.generate.breakers.reachable_members): a search of mutated descriptors,
kept on disk by harness.generate.reachability_memo. With the memo cold (a fresh machine, or new
generation code) every xdist worker searched every answer itself at collection, all at the same
time, so sixteen workers took as long as one: on an NVIDIA H200 the 177-operator catalogue took
296 s of pytest instead of 170 s (docs/gpu-results.md, fifteenth session). Here the missing
answers are split over `processes` forked processes first, each appending what it finds to the
memo, and the workers then read them. The answers are the same whoever searches them."""
from __future__ import annotations

import multiprocessing
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.spec.model import SpecSet

_SPECS: "SpecSet | None" = None  # set before the fork: every child reads the same loaded specs


def missing_answers(specs: SpecSet, operators: Iterable[str] | None, ladder: bool) -> list[tuple[str, str, str]]:
    """(operator, level, rule) the memo has no answer for: each level where the operator's tables
    change with `ladder` (the ladder's invalid cells), else the newest level (a device's own)."""
    from harness.generate.breakers import candidate_rules
    from harness.generate.reachability_memo import memo_for_code
    from harness.spec.load import spec_digest
    memo = memo_for_code()
    if memo is None:
        return []
    chosen = set(operators or ())
    out = []
    for name in sorted(specs.operators):
        if chosen and name not in chosen:
            continue
        spec = specs.operators[name]
        digest = spec_digest(spec)
        if digest is None:
            continue
        levels = spec.table_change_levels if ladder else (specs.catalog.newest_level.name,)
        out += [(name, level, rule) for level in levels for rule in candidate_rules(spec)
                if memo.get(digest, name, level, rule) is None]
    return out


def _search(task: tuple[str, str, str]) -> None:
    from harness.generate.breakers import reachable_members
    assert _SPECS is not None
    name, level, rule = task
    reachable_members(_SPECS.operators[name], level, rule)  # appends its answer to the memo


def prefetch(specs_dir: Path, operators: Iterable[str] | None, ladder: bool, processes: int) -> int:
    """Search the answers the memo lacks in `processes` processes (none below 2: the one process
    that collects searches them anyway); the number searched."""
    global _SPECS
    if processes < 2:
        return 0
    from harness.spec.load import load_specs
    specs = load_specs(specs_dir)
    todo = missing_answers(specs, operators, ladder)
    if not todo:
        return 0
    _SPECS = specs
    try:
        with multiprocessing.get_context("fork").Pool(min(processes, len(todo))) as pool:
            for _ in pool.imap_unordered(_search, todo, chunksize=1):
                pass
    finally:
        _SPECS = None
    return len(todo)


def main(argv: list[str] | None = None) -> int:
    """`python -m harness.run.reachability_prefetch [--processes N]`: the ladder's answers (which
    include the newest level's) searched before a pytest run that does not start through
    `dmlconform run` (`make test`: its harness tests ask every level where a table changes)."""
    import argparse
    from harness.spec.load import DEFAULT_SPECS_DIR
    parser = argparse.ArgumentParser(prog="python -m harness.run.reachability_prefetch")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--specs-dir", type=Path, default=DEFAULT_SPECS_DIR)
    args = parser.parse_args(argv)
    prefetch_and_say(args.specs_dir, None, True, args.processes)
    return 0


def prefetch_and_say(specs_dir: Path, operators: Iterable[str] | None, ladder: bool, processes: int) -> None:
    """prefetch, and one line saying what it searched and how long it took (nothing when the memo
    held every answer)."""
    import time
    start = time.monotonic()
    searched = prefetch(specs_dir, operators, ladder, processes)
    if searched:
        print(f"reachability: {searched} answer(s) searched in {time.monotonic() - start:.1f} s on {processes} processes "
              "(kept in the memo for the workers and the next run)", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
