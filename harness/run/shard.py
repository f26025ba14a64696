"""Shards across machines: which part of a run this process is (`--shard I/N`, or `auto` from CI
variables), and which cells belong to that part.

A sharded run is N invocations of the same command, each with its own `--shard I/N`, usually on
N machines; `dmlconform merge` (harness.run.merge) then checks that the shards together ran every
cell of the full plan exactly once and builds one reports directory from them. Nothing is
coordinated at run time, so the partition must come out the same on every machine and every
pytest-xdist worker from what each of them has alike: the collected test ids and the durations
file. That rules out Python's hash() (salted per process), set iteration and dict order of
anything not built in collection order; ties are broken by SHA-256 of the test id.

The partition is greedy longest-processing-time (LPT): units heaviest first, each to the shard
with the least work so far (fewest units, then the lowest index, on a tie). A unit is a group of
tests that should stay together: the conformance plugin groups a cell's backends, which share one
drawing of the cell's cases (harness.run.drawn). A test's weight is its seconds in the durations
file (`--shard-durations`: what a run wrote to `reports/results/durations.json`), the mean of the
known ones for a test the file lacks, or 1 when the file knows none of the tests collected.

Why not pytest-split (PyPI), which does LPT over the same {test id: seconds} format: it removes
the other groups' items in a `tryfirst` collection hook, before this plugin could record the full
plan each shard needs for the merge's completeness check; it reads its durations file with a bare
`json.load` (a malformed file is a traceback, against harness.run.record_schema's rule that every
run file is untrusted input); it splits single tests, so a cell's backends would draw the same
cases on several machines; its `--splits`/`--group` and the CI variables would still need this
module's parsing; and it would be one more wheel for the GPU route (`scripts/gpu_run.sh`). What
would be left of it is the loop in `partition`.
"""
from __future__ import annotations

import hashlib
import heapq
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.run.record_schema import MAX_PLAN_BYTES, RunFileError, kind_of, read_document

MAX_SHARDS = 10_000
DURATIONS_FILE = "durations.json"  # under a run's results directory
MAX_SECONDS = 1e7                  # as record_schema: more is not a duration a run measured
_SHARD = re.compile(r"([0-9]{1,6})/([0-9]{1,6})\Z")

# the CI variables `--shard auto` reads
GITLAB_INDEX, GITLAB_TOTAL = "CI_NODE_INDEX", "CI_NODE_TOTAL"       # GitLab `parallel:`, 1-based
K8S_INDEX, SHARD_TOTAL = "JOB_COMPLETION_INDEX", "DMLCONFORM_SHARD_TOTAL"  # Kubernetes Indexed Job, 0-based


class ShardError(ValueError):
    """A malformed --shard value or CI variable: one line saying what is wrong (a usage error)."""


@dataclass(frozen=True)
class Shard:
    """Shard `index` (1-based) of `total`."""

    index: int
    total: int

    def __str__(self) -> str:
        return f"{self.index}/{self.total}"


def _whole(name: str, text: str) -> int:
    """A CI variable's value as a whole number, or ShardError naming the variable."""
    if not re.fullmatch(r"[0-9]{1,6}", text.strip()):
        raise ShardError(f"{name}={text[:40]!r}: expected a whole number")
    return int(text.strip())


def _checked(index: int, total: int, given: str) -> Shard:
    if total < 1 or total > MAX_SHARDS:
        raise ShardError(f"{given}: the number of shards must be 1 to {MAX_SHARDS}")
    if not 1 <= index <= total:
        raise ShardError(f"{given}: the shard index must be 1 to {total} (it is 1-based)")
    return Shard(index, total)


def shard_from_environment(environ: Mapping[str, str]) -> Shard:
    """`--shard auto`: GitLab's `parallel:` (CI_NODE_INDEX, 1-based, of CI_NODE_TOTAL), else a
    Kubernetes Indexed Job (JOB_COMPLETION_INDEX, 0-based; Kubernetes gives no total, so the Job
    passes its `completions` as DMLCONFORM_SHARD_TOTAL). A GitHub Actions matrix has no variables
    of its own: it passes `--shard ${{ matrix.shard }}/N`."""
    if environ.get(GITLAB_TOTAL):
        total = _whole(GITLAB_TOTAL, environ[GITLAB_TOTAL])
        if GITLAB_INDEX not in environ:
            if total == 1:  # GitLab sets CI_NODE_TOTAL=1, and no index, for a job without `parallel:`
                return Shard(1, 1)
            raise ShardError(f"--shard auto: {GITLAB_TOTAL} is {total} but {GITLAB_INDEX} is not set")
        index = _whole(GITLAB_INDEX, environ[GITLAB_INDEX])
        return _checked(index, total, f"--shard auto ({GITLAB_INDEX}={index}, {GITLAB_TOTAL}={total})")
    if environ.get(K8S_INDEX):
        index = _whole(K8S_INDEX, environ[K8S_INDEX])
        if not environ.get(SHARD_TOTAL):
            raise ShardError(f"--shard auto: {K8S_INDEX} is set but {SHARD_TOTAL} is not "
                             f"(Kubernetes gives no total: set it to the Job's completions)")
        total = _whole(SHARD_TOTAL, environ[SHARD_TOTAL])
        return _checked(index + 1, total, f"--shard auto ({K8S_INDEX}={index} is 0-based, {SHARD_TOTAL}={total})")
    raise ShardError(f"--shard auto: no CI shard variables set ({GITLAB_INDEX} and {GITLAB_TOTAL} of GitLab's "
                     f"parallel:, or {K8S_INDEX} and {SHARD_TOTAL} of a Kubernetes Indexed Job); "
                     f"give the shard as --shard I/N")


def parse_shard(value: str, environ: Mapping[str, str]) -> Shard:
    """`I/N` (1-based) or `auto` (harness.run.shard.shard_from_environment); ShardError otherwise."""
    text = value.strip()
    if text == "auto":
        return shard_from_environment(environ)
    match = _SHARD.match(text)
    if not match:
        raise ShardError(f"--shard {value[:40]!r}: expected I/N (shard I of N, 1-based, e.g. 2/4) or auto")
    return _checked(int(match.group(1)), int(match.group(2)), f"--shard {text}")


# --- the durations file ------------------------------------------------------------------------

def check_durations(value: object) -> dict[str, float]:
    """{test id: seconds}: non-empty string keys, finite non-negative numbers; ValueError otherwise."""
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object of test id: seconds, found {kind_of(value)}")
    out: dict[str, float] = {}
    for key, seconds in value.items():
        if not key:
            raise ValueError("an empty test id")
        if type(seconds) not in (int, float) or not 0 <= seconds <= MAX_SECONDS:
            raise ValueError(f"{key[:200]}: expected seconds (0 to {MAX_SECONDS:g}), found {seconds!r:.40}")
        out[key] = float(seconds)
    return out


def read_durations(path: Path) -> dict[str, float]:
    """A durations file read as untrusted input (bounded, strict JSON, checked): RunFileError
    `path:1: message` for a malformed one, `path: cannot read: ...` for a missing one."""
    value = read_document(path, MAX_PLAN_BYTES)
    try:
        return check_durations(value)
    except ValueError as exc:
        raise RunFileError(path, 1, str(exc)) from None


def write_durations(path: Path, durations: Mapping[str, float]) -> Path:
    """{test id: seconds} sorted by test id (the format pytest-split reads too), replaced whole."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({k: round(v, 6) for k, v in sorted(durations.items())}, indent=0) + "\n")
    tmp.replace(path)
    return path


def durations_digest(durations: Mapping[str, float]) -> str:
    """What a shard's partition depended on besides the test ids ("" without a durations file):
    shards split with different files cover the plan unevenly, and the merge says so."""
    if not durations:
        return ""
    return hashlib.sha256(json.dumps(sorted(durations.items())).encode()).hexdigest()


# --- what makes two shards parts of one run ----------------------------------------------------

SOURCE_SUFFIXES = (".py", ".yaml", ".c")


def plan_digest(cells: Iterable[Mapping[str, object]]) -> str:
    """The full plan's cells (PlannedCell fields), skip reasons aside: a backend unavailable on one
    machine is the merge's own question, not a different plan."""
    rows = sorted(json.dumps({k: v for k, v in cell.items() if k != "skip"}, sort_keys=True) for cell in cells)
    return hashlib.sha256("\n".join(rows).encode("utf-8")).hexdigest()


def source_digest(roots: Iterable[Path]) -> str:
    """The code, specs and expectation files a run ran (every .py, .yaml and .c file under
    `roots`, by path relative to its root and content): shards of another commit differ here even
    when their cells are the same. Where the roots lie is left out (each machine has its own)."""
    parts = []
    for root in {Path(r).resolve() for r in roots}:
        digest = hashlib.sha256()
        for path in sorted(p for p in root.rglob("*") if p.suffix in SOURCE_SUFFIXES and "__pycache__" not in p.parts):
            if path.is_file():
                digest.update(path.relative_to(root).as_posix().encode("utf-8", "surrogateescape") + b"\0")
                digest.update(hashlib.sha256(path.read_bytes()).digest())
        parts.append(f"{root.name}:{digest.hexdigest()}")
    return hashlib.sha256("\n".join(sorted(parts)).encode("utf-8")).hexdigest()


# --- the partition -----------------------------------------------------------------------------

def stable_hash(text: str) -> str:
    """The same on every machine and process (unlike hash(), salted per process)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def weights(test_ids: Sequence[str], durations: Mapping[str, float]) -> dict[str, float]:
    """Each test's seconds from `durations`; the mean of the known ones for the others (1 each
    when none is known). Durations of tests not collected are ignored: a file of a larger run
    must not move the mean."""
    known = [durations[t] for t in sorted(set(test_ids)) if t in durations]
    default = sum(known) / len(known) if known else 1.0
    return {t: durations.get(t, default) for t in test_ids}


def partition(test_ids: Sequence[str], durations: Mapping[str, float], total: int,
              group_of: Callable[[str], str] | None = None) -> dict[str, int]:
    """test id -> shard (1-based) by greedy LPT over groups (`group_of(test id)`, each test its own
    group by default); the same answer for any order of `test_ids`, on any machine."""
    if total < 1:
        raise ValueError("total must be at least 1")
    weight = weights(test_ids, durations)
    groups: dict[str, list[str]] = {}
    for test_id in sorted(set(test_ids)):
        groups.setdefault(group_of(test_id) if group_of else test_id, []).append(test_id)
    units = sorted(((sum(weight[t] for t in members), stable_hash("\n".join(members)), members)
                    for members in groups.values()), key=lambda unit: (-unit[0], unit[1]))
    load = [(0.0, 0, shard) for shard in range(1, total + 1)]  # (seconds, units, shard): a heap, lightest first
    out: dict[str, int] = {}
    for seconds, _, members in units:
        done, count, shard = heapq.heappop(load)
        heapq.heappush(load, (done + seconds, count + 1, shard))
        for test_id in members:
            out[test_id] = shard
    return out

