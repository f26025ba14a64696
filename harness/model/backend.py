"""The interface every backend implements, and the four shapes of a run result.

A backend receives a Case (descriptor + whole input buffers) and answers with the whole output
buffers, a rejection (the descriptor was refused, as DirectML's CreateOperator does with
E_INVALIDARG), `unsupported` (the backend cannot express this case: not a pass, not a failure of
the operator), or `crashed` (the backend failed; the run goes on).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from harness.model.descriptor import Case


@dataclass(frozen=True)
class Outputs:
    buffers: dict[str, bytes]
    kind: str = "outputs"


@dataclass(frozen=True)
class Rejected:
    reason: str
    kind: str = "rejected"


@dataclass(frozen=True)
class Unsupported:
    reason: str
    kind: str = "unsupported"


@dataclass(frozen=True)
class Crashed:
    """The backend died, hung or broke on the case. `sent` is False when it never received the case
    (its descriptor or family hung earlier in the run): such a case is not run again to tell a
    flake, which would only cost another hang (16 reruns of 14.5 s each on an NVIDIA H200)."""
    reason: str
    kind: str = "crashed"
    sent: bool = True


RunResult = Outputs | Rejected | Unsupported | Crashed


@dataclass(frozen=True)
class Timing:
    """How long a backend took on one case: the wall seconds, and where the backend can say so,
    its stages (DirectML: create, compile, initialize, upload, execute, readback; a batch's one
    submit is shared evenly among its cases). Records carry both, so a slow or hung stage is named."""

    seconds: float = 0.0
    stages: dict[str, float] = field(default_factory=dict)


TimedResult = tuple[RunResult, Timing]


@dataclass
class Capabilities:
    """What a backend can do; the suite uses it to report `unsupported` without running."""

    operators: set[str] | None = None            # None: every operator
    data_types: set[str] | None = None           # None: every data type
    max_feature_level: str | None = None         # None: the newest level
    strides: bool = True
    in_place: bool = True
    validates_descriptors: bool = False          # True: rejects invalid descriptors like DirectML
    is_reference: bool = False                   # True: its run computes the harness's reference itself
    notes: list[str] = field(default_factory=list)


@runtime_checkable
class Backend(Protocol):
    name: str

    def version(self) -> str: ...

    def available(self) -> tuple[bool, str]:
        """(True, "") when it can run here, else (False, why not)."""
        ...

    def capabilities(self) -> Capabilities: ...

    def run(self, case: Case) -> RunResult: ...

    def close(self) -> None: ...


@runtime_checkable
class BatchBackend(Backend, Protocol):
    """A backend that runs many cases per call (DirectML: one runner request, each descriptor
    compiled once, one submit and fence), answering for each case in order; a crash or hang in
    the batch costs only the case that caused it."""

    def run_batch(self, cases: list[Case]) -> list[TimedResult]: ...
