"""Parse one API page into a Page: Microsoft's docs markdown (front matter, `## -struct-fields` and
`### -field` sections or a `## Syntax` block, markdown tables) or the rendered text of a published
page (headings as lines of their own, tables with or without `|` separators), in English, French
or German.

Markdown is first turned into the rendered layout (markup dropped, each heading a line of its
own, the docs-source section names `-struct-fields` / `-field X` turned into a Members section);
one reader then takes the fields (from the `struct ... { ... };` syntax block when the page has
one, else from each member's `Type:` line), the sections, and the support tables."""
from __future__ import annotations

import re
from pathlib import Path

from harness.pages.page import Page, Row, Table
from harness.pages.vocabulary import (AND_WORDS, IN_PLACE, LEVEL, SIZE_OF, dims_of, guess_language, heading_section,
                                      is_array_kind, kind_of, level_name)

MAX_PAGE_BYTES = 1 << 20  # the longest API page is about 60 KB: a bigger file is not a page
DESC = re.compile(r"\bDML_[A-Z0-9_]+_OPERATOR_DESC\b")
SYNTAX = re.compile(r"struct\s+(DML_[A-Z0-9_]+_OPERATOR_DESC)\s*\{(.*?)\}\s*;", re.S)
SAL = re.compile(r"(?<![A-Za-z0-9])_[A-Za-z]+(?:_[A-Za-z]+)*_(?:\([^)]*\))?")  # _Maybenull_, _Field_size_(N)
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
TYPE_LINE = re.compile(r"^(?:type|typ)\s*:\s*(.*)$", re.I)
DEFAULT = re.compile(r"(?:default value (?:for this (?:value|parameter) )?is|Standardwert (?:für diesen Wert )?ist|"
                     r"valeur (?:par défaut|typique) (?:de cette valeur )?est)\s*(-?\d+(?:[.,]\d+)?)", re.I)
SOURCE_SECTIONS = {"-description": "", "-struct-fields": "Members", "-remarks": "Remarks", "-see-also": "See also"}


class PageError(ValueError):
    """A file that is no API page of an operator (no operator desc struct named, unreadable, too big)."""


def read_page(path: Path) -> Page:
    """The facts of the page at `path`; PageError when it is none."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise PageError(f"{path}: cannot read: {exc.strerror}") from None
    if len(raw) > MAX_PAGE_BYTES:
        raise PageError(f"{path}: {len(raw)} bytes is too big for an API page (at most {MAX_PAGE_BYTES})")
    text = raw.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\u00a0", " ").replace("&nbsp;", " ")
    if text.startswith("---\n") or "## -struct-fields" in text or "## -description" in text:
        return _markdown(path, text)
    return _read(path, "text", text.splitlines(), formula=None, defects=[])


def clean_markup(text: str) -> str:
    """Markdown and HTML markup off a line: links to their text, emphasis, code marks and escapes."""
    text = re.sub(r"<[^>]+>", "", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"(?<![\w*\\])\*([^*\s][^*]*?)\*(?![\w*])", r"\1", text)  # *emphasis* (an escaped \* is a star)
    text = text.replace("\\*", "*").replace("\\_", "_").replace("\\", "")
    return text.replace("**", "").replace("`", "").strip()


def c_type_of(text: str) -> str:
    """A field's C type as the page prints it, normalised: SAL annotations dropped, the pointer star
    attached (`const DML_TENSOR_DESC*`), scalar type names upper-case (a page's `float`)."""
    words = SAL.sub(" ", clean_markup(text)).replace("*", " * ").split()
    stars = words.count("*")
    words = [w for w in words if w != "*"]
    if len(words) == 1 and words[0].lower() in ("float", "uint", "int", "bool"):
        words = [words[0].upper()]
    return " ".join(words) + "*" * stars


# --- markdown: to the rendered layout ---------------------------------------------------------------

def _markdown(path: Path, text: str) -> Page:
    body, lines = text, []
    if text.startswith("---\n") and "\n---" in text[4:]:
        front, body = text[4:].split("\n---", 1)
        title = re.search(r"^title:\s*(.*)$", front, re.M)
        if title and not DESC.search(title.group(1)):
            raise PageError(f"{path}: titled {title.group(1).strip()!r}, no DML_..._OPERATOR_DESC: not an operator's API page")
        if title:
            lines.append(title.group(1).strip())  # the struct's name: old-layout pages name it nowhere else
    code: list[str]
    formula, code, fence = None, [], False
    in_description = True
    for line in body.splitlines():
        if line.strip().startswith("```"):
            if fence and code:
                block = "\n".join(code)
                if in_description and formula is None and not SYNTAX.search(block):
                    formula = block
                lines.extend(code)
            fence, code = not fence, []
            continue
        if fence:
            code.append(line)
            continue
        if line.startswith("#"):
            heading = line.strip("#").strip()
            if heading.startswith("-field "):
                lines.append(heading[len("-field "):].strip())  # a member's name, then its Type: line
                continue
            if heading in SOURCE_SECTIONS:
                lines.append(SOURCE_SECTIONS[heading])
                in_description = heading == "-description"
                continue
            if heading_section(heading) is not None:
                in_description = False
            lines.append(clean_markup(heading))
            continue
        lines.append(clean_markup(line.lstrip(">").strip()) if line.startswith(">") else clean_markup(line))
    defects = []
    if path.name.startswith("ns-directml-") and not path.name.endswith("_operator_desc.md"):
        defects.append(f"the file is named {path.name}, without `_operator_` (the docs name every other operator page "
                       f"ns-directml-dml_<operator>_operator_desc.md)")
    return _read(path, "markdown", lines, formula, defects)


# --- one reader for both layouts ---------------------------------------------------------------------

def _read(path: Path, layout: str, lines: list[str], formula: str | None, defects: list[str]) -> Page:
    text = "\n".join(lines)
    syntax = SYNTAX.search(text)
    # the page's own struct: its syntax block's, else its title's (an enum page names structs lower down)
    title = DESC.search("\n".join(lines[:6]))
    named = syntax.group(1) if syntax else title.group(0) if title else None
    if named is None:
        raise PageError(f"{path}: no DML_..._OPERATOR_DESC struct named: not an operator's API page")
    page = Page(path, layout, guess_language(text), named, defects=list(defects))
    if syntax:
        page.fields = _syntax_fields(syntax.group(2))
        page.counts = _syntax_counts(syntax.group(2))
        before = text[: syntax.start()].splitlines()
        after = text[syntax.end():].splitlines()
    else:
        before, after = [], lines
    page.formula = formula if formula is not None else _formula_lines(before)
    stream: list[tuple[str, str]] = [("description", line.strip()) for line in before]
    section, member, candidate = "description", None, None
    example: list[str] = []
    mentions: list[tuple[str, str]] = []  # (array, count field) from "determines the size of the X array"
    from_syntax = bool(page.fields)
    for line in after:
        stripped = line.strip()
        opened = heading_section(stripped)
        if opened is not None:
            if opened == "availability" and any(s == "availability" for s, _ in stream):
                page.defects.append("the page has a second Availability heading (the highest level it names is used)")
            if opened == "examples" and example:
                page.examples.append("\n".join(example).strip())
                example = []
            section = opened
            stream.append((section, ""))
            continue
        if section == "members":
            typed = TYPE_LINE.match(stripped)
            if typed and candidate is not None:
                if not from_syntax and all(n != candidate for n, _ in page.fields):
                    page.fields.append((candidate, c_type_of(typed.group(1))))
                    sized = re.search(r"_Field_size(?:_opt)?_\((\w+)\)", typed.group(1).replace("\\", ""))
                    if sized:
                        page.counts.setdefault(candidate, sized.group(1))
                member, candidate = candidate, None
            elif IDENTIFIER.fullmatch(stripped):
                candidate = stripped
            elif stripped and member is not None:
                default = DEFAULT.search(stripped)
                if default:
                    page.defaults[member] = default.group(1).replace(",", ".")
                sized = SIZE_OF.search(stripped)
                if sized:  # resolved once every member is known (the arrays follow their count)
                    mentions.extend((array, member) for array in IDENTIFIER.findall(next(g for g in sized.groups() if g)))
            continue
        if section == "examples":
            example.append(line.rstrip())
            continue
        stream.append((section, stripped))
    if "\n".join(example).strip():
        page.examples.append("\n".join(example).strip())
    names = {n for n, _ in page.fields}
    for array, count in mentions:
        if array in names and count in names:
            page.counts.setdefault(array, count)
    _common(page, stream)
    return page


def _syntax_counts(body: str) -> dict[str, str]:
    """Each array member of the syntax block and the member that holds its length
    (`_Field_size_(InputCount) const DML_TENSOR_DESC* InputTensors;`)."""
    out = {}
    for declaration in body.split(";"):
        sized = re.search(r"_Field_size(?:_opt)?_\((\w+)\)", declaration)
        name = IDENTIFIER.findall(declaration)
        if sized and name:
            out[name[-1]] = sized.group(1)
    return out


def _syntax_fields(body: str) -> list[tuple[str, str]]:
    """(name, C type) of each member of the `struct ... { ... };` block."""
    out = []
    for declaration in body.split(";"):
        declaration = " ".join(SAL.sub(" ", declaration).replace("*", " * ").split())
        words = declaration.split()
        if len(words) >= 2 and IDENTIFIER.fullmatch(words[-1]):
            out.append((words[-1], c_type_of(" ".join(words[:-1]))))
    return out


def _formula_lines(lines: list[str]) -> str | None:
    """The formula a rendered page prints before its syntax block: the first run of lines that
    read like one (`f(x) = ...`, `// comments`, continuation cases)."""
    out: list[str] = []
    for line in lines:
        s = line.strip()
        starts = bool(re.match(r"^(//|f\s*\(|[A-Za-z_]+\s*\([^)]*\)\s*=)", s))
        continues = bool(re.match(r"^(-?\d|[-+]|//)", s)) or "//" in s or ", if " in s or " = " in s
        if starts or (out and continues):
            out.append(s)
        elif out:
            break
    return "\n".join(out) or None


def _common(page: Page, stream: list[tuple[str, str]]) -> None:
    levels = [level_name(m) for s, line in stream if s == "availability" for m in LEVEL.finditer(line)]
    if levels:
        page.introduced = max(levels, key=lambda lv: tuple(int(p) for p in lv.split(".")))
    described = [line for s, line in stream if s in ("description", "remarks") and line]
    said = next((line for line in described if IN_PLACE[page.language].search(line) or IN_PLACE["en"].search(line)), None)
    page.in_place, page.in_place_text = said is not None, said
    page.summary = next((line for line in described if len(line.split()) >= 6 and not DESC.search(line)
                         and not line.lower().startswith(("note", "hinweis", "access", "für den zugriff", "l’accès", "freigeben"))), None)
    page.constraints = [line.lstrip("-* ").strip() for s, line in stream if s == "constraints" and line.strip()]
    body = " ".join(line for s, line in stream if s == "description" and not DESC.search(line)).strip()
    if body.upper().rstrip(".") == "TBD" or body.upper().startswith("TBD "):
        page.defects.append("the page's description is TBD")
    page.tables = _tables(page, [line for s, line in stream if s == "support"])


def _tables(page: Page, lines: list[str]) -> list[Table]:
    """Every support table: level headings, variant group headings, rows that start with a tensor
    field's name (the header row and the `---` rule start with none)."""
    tensors = {n for n, c in page.fields if "DML_TENSOR_DESC" in c}
    tables: list[Table] = []
    variant: tuple[str, ...]
    rows: list[Row]
    level, variant, rows, heading = None, (), [], True

    def close() -> None:
        nonlocal rows
        if rows:
            tables.append(Table(level or page.introduced or "?", tuple(rows), variant, heading and level is not None))
        rows = []

    for line in lines:
        text = line.strip()
        if not text:
            continue
        found = LEVEL.match(text)
        if found:
            close()
            level, heading = level_name(found), True
            continue
        members = _variant_heading(text)
        if members:
            close()
            variant, level = members, None
            continue
        row = _row(text, tensors)
        if row is not None:
            rows.append(row)
    close()
    return tables


def _variant_heading(text: str) -> tuple[str, ...]:
    """"A and B" / "A, B, C, and D" (et, und), each an upper-case enum member name: the enum members a
    group of tables is for; () for any other line."""
    members = [w for w in re.split(r"\s*,\s*|\s+", text) if w and w.lower() not in AND_WORDS]
    if members and all(re.fullmatch(r"[A-Z][A-Z0-9_]*", m) for m in members) and not text.startswith("DML_"):
        return tuple(members)
    return ()


def _row(text: str, tensors: set[str]) -> Row | None:
    """One table row: `Name | Kind | [Dimensions |] dims | types |` or, without separators,
    `Name Kind words [{ Dimensions }] dims TYPES, ...`."""
    if "|" in text:
        cells = [c.strip() for c in text.strip("|").split("|")]
        if len(cells) < 4 or cells[0] not in tensors:
            return None
        name, kind_words, dim_text, type_text = cells[0], cells[1], cells[-2], cells[-1]
        shape = cells[2] if len(cells) >= 5 else None
    else:
        match = re.match(r"^(\S+)\s+(.+?)\s+(?:(\{[^}]*\})\s+)?(\d+(?:\s+\S+\s+\d+)?)\s+"
                         r"([A-Z][A-Z0-9_]*(?:\s*,\s*[A-Z][A-Z0-9_]*)*)\s*$", text)
        if match is None or match.group(1) not in tensors:
            return None
        name, kind_words, shape, dim_text, type_text = match.groups()
    kind, dims = kind_of(kind_words), dims_of(dim_text)
    if kind is None or dims is None:
        return None
    return Row(name, kind, dims, tuple(t.strip() for t in type_text.split(",") if t.strip()), is_array_kind(kind_words), shape)
