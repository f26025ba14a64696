"""The drift between a spec and its API pages, cell by cell: the field list and C types, the
introducing level, in-place permission, and every support table (a table missing on either side,
per tensor: a row missing, its kind, dimension range and data types). A difference the spec
records under `docs_drift` (with the reason the spec keeps its value) is reported as recorded, not
as drift. When pages in several languages of one operator disagree, each difference says which
page says what.

Keys are stable strings a spec's `docs_drift` names: `fields`, `field.<Name>.c_type`,
`introduced`, `in_place`, `table[FL 5.0]`, `table[MEMBER_A MEMBER_B / FL 4.1]` (a variant group by
its enum members), and for a cell
`table[FL 5.0].InputTensor.kind` (`.dims`, `.types`; `.row` when the row is missing)."""
from __future__ import annotations

from dataclasses import dataclass, field

from harness.pages.page import Page, Row
from harness.spec.model import OperatorSpec


@dataclass(frozen=True)
class Difference:
    """One key on which the spec and a page differ: what each says."""

    key: str
    spec: str
    page: str
    page_label: str
    language: str


@dataclass
class OperatorCheck:
    """The outcome for one operator: its pages, the counts checked, and each key that differs,
    with the spec's value and every page's (pages that agree with the spec are listed too when
    another page disagrees, so a reader sees which says what)."""

    operator: str
    pages: list[str]
    tables: int = 0
    cells: int = 0
    drift: dict[str, dict] = field(default_factory=dict)  # key -> {"spec", "pages": {label: value}, "recorded"}

    @property
    def unrecorded(self) -> list[str]:
        return [k for k, d in self.drift.items() if not d["recorded"]]


def _table_key(level: str, variant: tuple[str, ...] | None) -> str:
    return f"table[{' '.join(sorted(variant))} / FL {level}]" if variant else f"table[FL {level}]"


def _dims(dims: tuple[int, int]) -> str:
    return str(dims[0]) if dims[0] == dims[1] else f"{dims[0]} to {dims[1]}"


def spec_tables(spec: OperatorSpec) -> dict[str, dict[str, Row]]:
    """The spec's tables as the page prints them: a tensor array once, under its name (item 0's
    cell, which every item shares), keyed like the pages'."""
    out = {}
    for table in spec.support:
        rows = {}
        for name, cell in table.tensors.items():
            f = spec.field(name)
            if f.array_of is not None and f.slot != 0:
                continue
            shown = f.array_of or name
            rows[shown] = Row(shown, cell.kind, cell.dims, tuple(cell.types))  # dims: already a tuple
        out[_table_key(table.level, table.variant)] = rows
    return out


def page_tables(page: Page) -> dict[str, dict[str, Row]]:
    return {_table_key(t.level, t.variant or None): {r.tensor: r for r in t.rows} for t in page.tables}


def differences(spec: OperatorSpec, page: Page) -> tuple[list[Difference], int, int]:
    """Every difference between `spec` and `page`, with the number of tables and cells compared
    (a cell: one tensor's kind, dimension range or data types in one table)."""
    out: list[Difference] = []

    def add(key: str, spec_value: str, page_value: str) -> None:
        if spec_value != page_value:
            out.append(Difference(key, spec_value, page_value, page.label, page.language))

    add("fields", ", ".join(spec.struct_field_names), ", ".join(n for n, _ in page.fields))
    page_types = dict(page.fields)
    for name in spec.struct_field_names:
        f = next((f for f in spec.fields if name in (f.name, f.array_of, f.member_of)), None)
        if f is not None and name in page_types:
            c_type = f.c_type if f.member_of is None else name_c_type(spec, name)
            add(f"field.{name}.c_type", c_type, page_types[name])
    add("introduced", spec.introduced, page.introduced or "(none)")
    add("in_place", "allowed" if spec.in_place_allowed else "not allowed", "allowed" if page.in_place else "not allowed")
    ours, theirs = spec_tables(spec), page_tables(page)
    tables = cells = 0
    for key in sorted(set(ours) | set(theirs)):
        if key not in theirs:
            add(key, "present", "absent")
            continue
        if key not in ours:
            add(key, "absent", "present")
            continue
        tables += 1
        for tensor in sorted(set(ours[key]) | set(theirs[key])):
            a, b = ours[key].get(tensor), theirs[key].get(tensor)
            if a is None or b is None:
                add(f"{key}.{tensor}.row", "present" if a else "absent", "present" if b else "absent")
                continue
            cells += 3
            add(f"{key}.{tensor}.kind", a.kind, b.kind)
            add(f"{key}.{tensor}.dims", _dims(a.dims), _dims(b.dims))
            add(f"{key}.{tensor}.types", ", ".join(sorted(a.types)), ", ".join(sorted(b.types)))
    return out, tables, cells


def name_c_type(spec: OperatorSpec, name: str) -> str:
    """The C type of a struct field held by value: the struct's name (the model splits it into members)."""
    members = [f for f in spec.fields if f.member_of == name]
    for struct, layout in spec.catalog.structs.items():
        if tuple(m for m, _ in layout) == tuple(f.name.removeprefix(name + "_") for f in members):
            return struct
    return "?"


def _recorded(spec: OperatorSpec, key: str, language: str, label: str) -> str | None:
    """The reason the spec records for keeping its value against this page, or None."""
    for item in spec.docs_drift:
        pages = item.get("pages", ["*"])
        if item["key"] == key and ("*" in pages or language in pages or label.split(":", 1)[1] in pages):
            return item["resolution"]
    return None


def check_operator(spec: OperatorSpec, pages: list[Page]) -> OperatorCheck:
    """The spec against every page of its operator (any layout, any language)."""
    result = OperatorCheck(spec.name, [p.label for p in pages])
    for page in pages:
        found, tables, cells = differences(spec, page)
        result.tables += tables
        result.cells += cells
        for d in found:
            entry = result.drift.setdefault(d.key, {"spec": d.spec, "pages": {}, "recorded": {}})
            entry["pages"][d.page_label] = d.page
            reason = _recorded(spec, d.key, d.language, d.page_label)
            if reason is not None:
                entry["recorded"][d.page_label] = reason
    for entry in result.drift.values():
        entry["recorded"] = entry["recorded"] if set(entry["recorded"]) == set(entry["pages"]) else {}
        if len(pages) > 1:  # which page says what: the pages that agree with the spec too
            for page in pages:
                entry["pages"].setdefault(page.label, entry["spec"])
    return result
