"""The error of a malformed case (file), `CaseFormatError`, and the two value helpers of its
messages (`short`, `is_integer`).

Both the case-file reader (descriptor.py: `Case.load`) and the well-formedness checks
(wellformed.py: `check_case`) raise it, so it lives below both: descriptor.py imports only this
module of the model, and wellformed.py (which asks the validator about cases without input
data) can import descriptor and the validator without an import cycle. `harness.model.wellformed`
re-exports the three names, which is where callers import them with `check_case`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


class CaseFormatError(ValueError):
    """A case (file) that is not well-formed: `key` names the field (`descriptor.tensors.InputTensor.
    Strides[1]`, `inputs.InputTensor`; empty for the whole file), `file` the case file when known."""

    def __init__(self, key: str, message: str, file: str | Path | None = None) -> None:
        self.key, self.message, self.file = key, message, file
        super().__init__(self.render())

    def render(self) -> str:
        """`FILE: key: message` (parts that are unknown are left out)."""
        parts = [str(p) for p in (self.file, self.key) if p not in (None, "")]
        return ": ".join(parts + [self.message])

    def in_file(self, file: str | Path) -> "CaseFormatError":
        """The same error, naming the file it was found in."""
        return CaseFormatError(self.key, self.message, file)


def short(value: Any, limit: int = 60) -> str:
    """repr(value), cut to `limit` characters: a hostile file's values go into one-line messages."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_integer(value: Any) -> bool:
    """A Python or NumPy integer, not a bool (YAML `true` must not pass as 1)."""
    if type(value) is int:  # the common case, first: this runs for every field of every case
        return True
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
