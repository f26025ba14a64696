"""What one API page says, in the terms a spec uses (levels as "5.0", kinds as input /
optional_input / output / optional_output, dimension ranges as (low, high)), whatever its layout
and language: the common ground of the parsers, the importer and the drift check."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Row:
    """One row of a support table: a tensor field (or tensor array), its kind, dimension counts
    and data types, as printed."""

    tensor: str
    kind: str
    dims: tuple[int, int]
    types: tuple[str, ...]
    array: bool = False  # the kind column says "Array of inputs/outputs": a tensor array's one row
    shape: str | None = None  # the Dimensions column some pages print ({ BatchCount, ChannelCount, M, K })


@dataclass(frozen=True)
class Table:
    """One support table: its feature level ("FL X and above"; the introducing level where the
    page prints one table without a level heading) and, on pages that group tables by an enum
    attribute (a `Function` field, say), the members of its group."""

    level: str
    rows: tuple[Row, ...]
    variant: tuple[str, ...] = ()
    level_heading: bool = True


@dataclass
class Page:
    """The facts of one page. `defects` are the page's own faults (a second Availability heading,
    a body that is TBD, a file named without `_operator_`): reported as page defects, never as
    drift."""

    path: Path
    layout: str  # markdown | text
    language: str  # en | fr | de
    desc_struct: str
    fields: list[tuple[str, str]] = field(default_factory=list)  # (name, C type as the syntax block prints it)
    introduced: str | None = None
    in_place: bool = False
    constraints: list[str] = field(default_factory=list)
    formula: str | None = None
    tables: list[Table] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)
    defaults: dict[str, str] = field(default_factory=dict)  # attribute -> a default value the page states
    counts: dict[str, str] = field(default_factory=dict)  # array field -> its count field (`_Field_size_(Count)`)
    summary: str | None = None  # the description's first sentence
    in_place_text: str | None = None  # the sentence that permits in-place execution, as printed
    defects: list[str] = field(default_factory=list)

    @property
    def operator(self) -> str:
        """DML_<NAME>_OPERATOR_DESC -> <NAME> (the spec's `operator`)."""
        name = self.desc_struct.removeprefix("DML_")
        return name.removesuffix("_OPERATOR_DESC").removesuffix("_DESC")

    @property
    def label(self) -> str:
        """How a report names the page: its language and file name."""
        return f"{self.language}:{self.path.name}"
