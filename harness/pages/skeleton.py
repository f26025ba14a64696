"""A spec skeleton from an operator's API page(s) (`dmlconform spec import`): everything the page
says, transcribed (name, desc struct, fields in struct order with their C types and roles, the
introducing level, in-place permission, each tensor constraint as text with an id, every support
table cell for cell, the formula as printed, the page's examples as comments), and a value
starting with TODO wherever a person must decide what the page cannot say (DML_OPERATOR_TYPE, each
constraint's executable rule, the executable formula or reference family, the comparison).
`spec lint` refuses a file while any TODO is left, naming file, line and key.

Written as text, not dumped, so that the file reads like a hand-written spec: one line per field
and table row, comments where the page's words need a person's eye."""
from __future__ import annotations

import errno
import json
import os
import re
import stat
import unicodedata
from pathlib import Path

from harness.pages.page import Page, Table
from harness.pages.parse import PageError
from harness.spec.catalog import Catalog

TENSOR = "const DML_TENSOR_DESC*"


def _q(text: str) -> str:
    """A YAML double-quoted scalar (JSON strings are valid YAML)."""
    return json.dumps(text, ensure_ascii=False)


def todo(what: str, why: str) -> str:
    """A quoted TODO value: `spec lint` refuses the file until it is replaced."""
    return _q(f"TODO({what}): {why}")


def _primary(pages: list[Page]) -> Page:
    """The page the skeleton follows: the English one if any (the source the others translate),
    the markdown before rendered text."""
    return sorted(pages, key=lambda p: (p.language != "en", p.layout != "markdown", str(p.path)))[0]


def _roles(page: Page) -> dict[str, str]:
    """input or output for each tensor field, from the kind its rows print (the newest table first)."""
    out: dict[str, str] = {}
    for table in page.tables:
        for row in table.rows:
            out.setdefault(row.tensor, "output" if "output" in row.kind else "input")
    return out


def _field_line(page: Page, name: str, c_type: str, roles: dict[str, str], catalog: Catalog, arrays: dict[str, str]) -> str:
    if c_type == TENSOR:
        role = roles.get(name, todo("role", "input or output (no support table row names it)"))
        if name in arrays or any(r.tensor == name and r.array for t in page.tables for r in t.rows):
            count = arrays.get(name, todo("count", "the field that holds the number of items"))
            return (f"  - {{name: {name}, role: {role}, c_type: {_q(c_type)}, count: {count}, "
                    f"max_items: 3}}  # a tensor array: the most items generated")
        return f"  - {{name: {name}, role: {role}, c_type: {_q(c_type)}}}"
    extra = ""
    counted = [array for array, count in arrays.items() if count == name]
    if counted:
        extra = f", count_of: [{', '.join(counted)}]"
    elif name in arrays:
        extra = f", count: {arrays[name]}"
    elif c_type.startswith("const ") and c_type.endswith("*") and c_type[6:-1] in ("UINT", "INT", "FLOAT"):
        extra = ", count: " + todo("count", "the field that holds this array's length")
    elif c_type == "const DML_OPERATOR_DESC*":
        extra = ", activations: [" + todo("activations", "the activation operator specs it may name") + "]"
    elif c_type == "DML_SCALAR_UNION":
        extra = ", typed_by: " + todo("typed_by", "the DML_TENSOR_DATA_TYPE field that says which member it holds")
    elif c_type not in ("FLOAT", "UINT", "INT", "BOOL") and c_type not in catalog.enums and c_type not in catalog.structs \
            and not (c_type.startswith("const ") and c_type[6:-1] in catalog.structs):
        extra = f"  # TODO check: {c_type} is in no catalog file (specs/_enums.yaml, specs/_structs.yaml)"
        return f"  - {{name: {name}, role: attribute, c_type: {_q(c_type)}}}{extra}"
    if name in page.defaults:
        value = page.defaults[name]
        extra += f", default: {value}, source: {_q(f'docs ({page.language}): a typical default value is {value}')}"
    return f"  - {{name: {name}, role: attribute, c_type: {_q(c_type)}{extra}}}"


def _table_lines(table: Table) -> list[str]:
    out = [f"  - level: {_q(table.level)}"]
    if table.variant:
        out.append(f"    variant: [{', '.join(table.variant)}]")
    if not table.level_heading:
        out.append("    # the page prints this table without a level heading: it holds from the introducing level")
    out.append("    tensors:")
    for row in table.rows:
        dims = f"[{row.dims[0]}, {row.dims[1]}]"
        shape = f"  # {row.shape}" if row.shape else ""
        out.append(f"      {row.tensor}: {{kind: {row.kind}, dims: {dims}, types: [{', '.join(row.types)}]}}{shape}")
    return out


def _constraint_id(text: str, index: int, used: set[str]) -> str:
    """A readable id from the constraint's first words (accents dropped: ids are ASCII)."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    words = [w.lower() for w in re.findall(r"[A-Za-z]+", ascii_text)][:5]
    base = "_".join(words) or f"constraint_{index}"
    name, n = base, 2
    while name in used:
        name, n = f"{base}_{n}", n + 1
    used.add(name)
    return name


def skeleton(pages: list[Page], catalog: Catalog) -> str:
    """The YAML text of a spec skeleton for the operator of `pages` (one operator, any languages)."""
    page = _primary(pages)
    roles = _roles(page)
    arrays = dict(page.counts)
    tensors = [n for n, c in page.fields if c == TENSOR]
    languages = sorted({p.language for p in pages})
    lines = [f"# {page.desc_struct}: a skeleton written by `dmlconform spec import` from "
             f"{', '.join(p.label for p in pages)}.",
             "# Every value starting with TODO is a person's to fill; `dmlconform spec lint` names each one",
             "# (file, line, key) until none is left. Check the transcription against the page before trusting it.",
             f"operator: {page.operator}",
             "operator_type: " + todo("operator_type", "its DML_OPERATOR_TYPE value (DirectML.h; the page does not give it)"),
             f"desc_struct: {page.desc_struct}",
             f"summary: {_q(page.summary) if page.summary else todo('summary', 'one sentence')}",
             f"introduced: {_q(page.introduced) if page.introduced else todo('introduced', 'the page states no level')}",
             *([f"variant_key: {todo('variant_key', 'the enum field whose value picks the support tables (' + ', '.join(n for n, c in page.fields if c in catalog.enums) + ')')}"]
               if any(t.variant for t in page.tables) else []),
             "in_place:"]
    if page.in_place:
        named = set(re.findall(r"[A-Za-z]+", page.in_place_text or ""))  # "OutputTensor is permitted to alias InputTensor"
        outputs = [n for n in tensors if roles.get(n) == "output" and (n in named or not named & set(tensors))]
        inputs = [n for n in tensors if roles.get(n) == "input" and (n in named or not named & set(tensors))]
        pairs = (f"[{{output: {outputs[0]}, input: {inputs[0]}}}]" if len(outputs) == 1 and len(inputs) == 1
                 else todo("pairs", "which output may alias which input"))
        lines += ["  allowed: true", f"  pairs: {pairs}",
                  f"  source: {_q(f'docs ({page.language}): {page.in_place_text}')}"]
    else:
        lines += ["  allowed: false", "  pairs: []", f"  source: {_q(f'docs ({page.language}): the page says nothing about in-place execution')}"]
    lines += ["", "# the desc struct's members in struct order, as the page's syntax block (or member list) prints them", "fields:"]
    lines += [_field_line(page, name, c_type, roles, catalog, arrays) for name, c_type in page.fields]
    lines += ["", "# every support table of the page, newest first, cell for cell", "support:"]
    for table in page.tables:
        lines += _table_lines(table)
    lines += ["", "# the page's tensor constraints, one per sentence: each needs its executable rule", "constraints:"]
    used: set[str] = set()
    for i, text in enumerate(page.constraints):
        lines.append(f"  - {{id: {_constraint_id(text, i, used)}, rule: {todo('rule', 'same_data_type, same_shape, expression or shape')}, "
                     f"text: {_q(text)}}}")
    if not page.constraints:
        lines[-1] = "constraints: []  # the page states none"
    lines += ["", "formula:", f"  docs: {_q(page.formula) if page.formula else todo('docs', 'the page prints no formula')}",
              "  expression: " + todo("expression", "the executable formula (docs/spec-format.md), or a family's reference"),
              f"  inputs: {{{', '.join(f'x{i}: {n}' for i, n in enumerate(t for t in tensors if roles.get(t) == 'input'))}}}",
              f"  output: {next((n for n in tensors if roles.get(n) == 'output'), todo('output', 'the output tensor'))}",
              "", "comparison: " + todo("comparison", "the precision model's kind per data type (docs/spec-format.md)")]
    if page.examples:
        lines += ["", "# the page's examples, as printed: worked examples (`examples:`) are a person's transcription"]
        for example in page.examples:
            lines += [f"#   {line}" for line in example.splitlines()]
    lines += ["", "sources:", f"  - {{document: {_q(f'{page.desc_struct} structure (directml.h)')}, languages: [{', '.join(languages)}]}}"]
    return "\n".join(lines) + "\n"


def write_skeleton(target: Path, text: str, overwrite: bool = False) -> None:
    """Write a skeleton to `target` itself, never through a symbolic link placed there (which
    would write wherever it points) and never into a FIFO or device: the file is opened with
    O_NOFOLLOW, created exclusively unless `overwrite` (`spec import --force`), and must be a
    regular file. A refusal is a PageError `target: message` (nothing is written)."""
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    flags |= os.O_TRUNC if overwrite else os.O_EXCL
    if target.is_symlink():
        raise PageError(f"{target}: is a symbolic link (to {os.readlink(target)}); a skeleton is not written through one "
                        f"(remove it, or choose another --out)")
    try:
        info = target.lstat()
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise PageError(f"{target}: cannot write: {exc.strerror}") from None
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise PageError(f"{target}: exists and is not a regular file; a skeleton is not written there")
    try:
        fd = os.open(target, flags, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PageError(f"{target}: is a symbolic link; a skeleton is not written through one") from None
        if exc.errno == errno.EEXIST:
            raise PageError(f"{target}: exists (--force overwrites a regular file)") from None
        raise PageError(f"{target}: cannot write: {exc.strerror}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise PageError(f"{target}: is not a regular file; a skeleton is not written there")
        handle.write(text)
