"""The one classification of a case's result, used by every stage after the judge.

A `StrEnum`, so that records stay plain JSON strings and a status read back from a results file
compares equal to its member. `FAILURES` are what fail the gate; a status this version does not
know is treated as a failure too (`is_failure`), never as a pass.
"""
from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    PASS = "pass"                                # outputs conform
    REJECTED_INVALID = "rejected-invalid"        # an invalid descriptor was rejected, as it must be
    UNSPECIFIED = "diverges-on-unspecified"      # differs only where the docs leave the result open
    UNSUPPORTED = "unsupported"                  # the backend cannot express the case: not a pass
    EXPECTED_DIVERGENCE = "expected-divergence"  # a mismatch a backend's expectation file explains
    MISMATCH = "mismatch"                        # outputs differ beyond the spec's comparison
    REJECTED_VALID = "rejected-valid"            # a valid descriptor was rejected
    ACCEPTED_INVALID = "accepted-invalid"        # an invalid descriptor was accepted
    CRASHED = "crashed"                          # the backend crashed, hung or lost its device
    FLAKY = "flaky"                              # an unexpected failure whose rerun came out otherwise
    STALE = "stale-expectation"                  # an expectation's probe no longer diverges


FAILURES = frozenset({Status.MISMATCH, Status.REJECTED_VALID, Status.ACCEPTED_INVALID, Status.CRASHED, Status.FLAKY,
                      Status.STALE})

# worst first: several records of one case count as the first of these they hold
SEVERITY = (Status.CRASHED, Status.FLAKY, Status.MISMATCH, Status.REJECTED_VALID, Status.ACCEPTED_INVALID, Status.STALE,
            Status.EXPECTED_DIVERGENCE, Status.UNSUPPORTED, Status.UNSPECIFIED, Status.REJECTED_INVALID, Status.PASS)

DESCRIPTIONS = {
    Status.MISMATCH: "outputs differ from the reference under the spec's comparison",
    Status.REJECTED_VALID: "a descriptor valid at the device's feature level was rejected",
    Status.ACCEPTED_INVALID: "a descriptor that breaks a rule was accepted",
    Status.CRASHED: "the backend crashed, hung or lost its device on this case",
    Status.FLAKY: "an unexpected failure that came out otherwise when run again in the same shard",
    Status.STALE: "a known divergence no longer reproduces on its probe: remove the expectation",
    Status.EXPECTED_DIVERGENCE: "explained by the backend's expectations file",
    Status.UNSUPPORTED: "the backend cannot express these cases (not a pass)",
    Status.UNSPECIFIED: "differences only where the docs leave the result open (informational)",
}


def is_failure(status: str) -> bool:
    """Whether `status` fails the gate: a failure, or anything that is not a known status."""
    return status in FAILURES or status not in Status._value2member_map_


def severity(status: str) -> int:
    """Lower is worse; an unknown status is the worst of all."""
    return SEVERITY.index(Status(status)) if status in Status._value2member_map_ else -1


def status_tag(status: str) -> str:
    """The first words of a test's message, by which the Allure categories sort results."""
    return f"[{status}]"
