"""Parse one API page into a Page: Microsoft's docs markdown (front matter, `## -struct-fields` and
`### -field` sections or a `## Syntax` block, markdown tables) or the rendered text of a published
page (headings as lines of their own, tables with or without `|` separators), in English, French
or German.

Markdown is first turned into the rendered layout (markup dropped, each heading a line of its
own, the docs-source section names `-struct-fields` / `-field X` turned into a Members section);
one reader then takes the fields (from the `struct ... { ... };` syntax block when the page has
one, else from each member's `Type:` line), the sections, and the support tables.

A page is untrusted input (`spec import` and `spec check-docs` take any file): its size is checked
before it is read (MAX_PAGE_BYTES), every pattern runs in time linear in the text (no pattern has
two ways to match the same characters that a failing match would try one after the other), the
operator name it gives becomes a file name only when it is a plain name of at most
MAX_OPERATOR_CHARS characters, and a page naming two operator desc structs is refused. Every such
refusal is a PageError `page:line: message`."""
from __future__ import annotations

import re
import stat
from pathlib import Path

from harness.pages.page import Page, Row, Table
from harness.pages.vocabulary import (AND_WORDS, IN_PLACE, LEVEL, SIZE_OF, dims_of, guess_language, heading_section,
                                      is_array_kind, kind_of, level_name)

MAX_PAGE_BYTES = 256 << 10  # the longest API page is about 60 KB: a bigger file is not a page (checked before reading)
MAX_OPERATOR_CHARS = 64  # the longest operator name is 33 characters; a name becomes OPERATOR.yaml
OPERATOR_NAME = re.compile(r"[A-Z][A-Z0-9_]*")  # DML_<NAME>_OPERATOR_DESC's NAME: upper case, digits, underscores
# The patterns below match in time linear in the text: a name is read once (the atomic group),
# and a bracketed part stops at the next opening bracket, so that a run of unclosed brackets (or
# of `struct DML_..._OPERATOR_DESC {` without `};`) is not rescanned from each of them.
NAME = r"DML_(?=[A-Z0-9_]{15})(?>[A-Z0-9_]+)(?<=_OPERATOR_DESC)"  # DML_[A-Z0-9_]+_OPERATOR_DESC, read once
DESC = re.compile(rf"\b{NAME}\b")
SYNTAX = re.compile(rf"struct\s+({NAME})\s*\{{([^{{}}]*)\}}\s*;")
SAL = re.compile(r"(?<![A-Za-z0-9])_[A-Za-z]+(?:_[A-Za-z]+)*_(?:\([^()]*\))?")  # _Maybenull_, _Field_size_(N)
FIELD_SIZE = re.compile(r"_Field_size(?:_opt)?_\((\w+)\)")
ROW = re.compile(r"(\S+) (.+?) (?:(\{[^{}]*\}) )?(\d+(?: \S+ \d+)?) ([A-Z][A-Z0-9_]*(?: ?, ?[A-Z][A-Z0-9_]*)*)$")
MAX_ROW_CHARS = 4096  # a support table row without `|` separators: a name, kind words, dims and a dozen type names
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
TYPE_LINE = re.compile(r"^(?:type|typ)\s*:\s*(.*)$", re.I)
DEFAULT = re.compile(r"(?:default value (?:for this (?:value|parameter) )?is|Standardwert (?:für diesen Wert )?ist|"
                     r"valeur (?:par défaut|typique) (?:de cette valeur )?est)\s*(-?\d+(?:[.,]\d+)?)", re.I)
SOURCE_SECTIONS = {"-description": "", "-struct-fields": "Members", "-remarks": "Remarks", "-see-also": "See also"}


class PageError(ValueError):
    """A file that is no API page of an operator (no operator desc struct named, two named,
    unreadable, too big, an operator name that cannot be a file name): `page:line: message`."""


def _read_bytes(path: Path) -> bytes:
    """The file's bytes, its size checked before anything is read (a sparse 9 GiB file is refused
    by its size), and never more than MAX_PAGE_BYTES + 1 of them read (a file that grows)."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise PageError(f"{path}: not a regular file")
        if info.st_size > MAX_PAGE_BYTES:
            raise PageError(f"{path}: {info.st_size:,} bytes is too big for an API page (at most {MAX_PAGE_BYTES:,})")
        with path.open("rb") as handle:
            raw = handle.read(MAX_PAGE_BYTES + 1)
    except OSError as exc:
        raise PageError(f"{path}: cannot read: {exc.strerror}") from None
    if len(raw) > MAX_PAGE_BYTES:
        raise PageError(f"{path}: more than {MAX_PAGE_BYTES:,} bytes is too big for an API page")
    return raw


def read_page(path: Path) -> Page:
    """The facts of the page at `path`; PageError when it is none."""
    raw = _read_bytes(path)
    text = raw.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\u00a0", " ").replace("&nbsp;", " ")
    if text.startswith("---\n") or "## -struct-fields" in text or "## -description" in text:
        return _markdown(path, text)
    return _read(path, "text", text.splitlines(), formula=None, defects=[], source=text)


def _line_of(source: str, pattern: str, start: int = 0) -> tuple[int, int]:
    """(line, offset) of the first match of `pattern` at or after `start` in the page's text, as
    the file numbers its lines ((0, len) where it is not found: a message then names no line)."""
    found = re.compile(pattern).search(source, start)
    if found is None:
        return 0, len(source)
    return source.count("\n", 0, found.start()) + 1, found.end()


def _at(path: Path, line: int) -> str:
    return f"{path}:{line}" if line else str(path)


def clean_markup(text: str) -> str:
    """Markdown and HTML markup off a line: links to their text, emphasis, code marks and escapes.
    A tag holds no `<`, a link's text no `[`, its target no `(`: each pattern stops at the next
    opening bracket, so a line of a million `[` is read once, not once per bracket."""
    text = re.sub(r"<[^<>]+>", "", text)
    text = re.sub(r"\[([^\[\]]*)\]\([^()]*\)", r"\1", text)
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
    named: list[tuple[str, str, int]] = []
    if text.startswith("---\n") and "\n---" in text[4:]:
        front, body = text[4:].split("\n---", 1)
        named = _front_names(text, front)
        title = re.search(r"^title:[ \t]*(.*)$", front, re.M)
        if title and not DESC.search(title.group(1)):
            title_line = text.count("\n", 0, 4 + title.start()) + 1
            raise PageError(f"{path}:{title_line}: titled {title.group(1).strip()[:80]!r}, no DML_..._OPERATOR_DESC: "
                            f"not an operator's API page")
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
    return _read(path, "markdown", lines, formula, defects, source=text, front=named)


# --- one reader for both layouts ---------------------------------------------------------------------

def _own_struct(path: Path, lines: list[str], text: str, source: str,
                front: list[tuple[str, str, int]] | None = None) -> tuple[str, re.Match | None]:
    """The page's own struct: its syntax block's, else its title's (an enum page names structs
    lower down), and the syntax block. A PageError when it names none; when its title, its syntax
    block(s) and a markdown page's front matter (title, UID, api_name) name two; or when the
    operator's name is no plain name of at most MAX_OPERATOR_CHARS characters (it becomes the
    skeleton's file name)."""
    blocks = list(SYNTAX.finditer(text))
    title = DESC.search("\n".join(lines[:6]))
    named: list[tuple[str, str, int]] = [(m.group(1), "its syntax block", _line_of(source, r"struct\s+" + re.escape(m.group(1)))[0])
                                         for m in blocks]
    if title:
        named.append((title.group(0), "its title", _line_of(source, re.escape(title.group(0)))[0]))
    named += front or []
    if not named:
        raise PageError(f"{path}: no DML_..._OPERATOR_DESC struct named: not an operator's API page")
    own = named[0][0]
    other = next((n for n in named if n[0] != own), None)
    if other is not None:
        first = next(n for n in named if n[0] == own)
        first, second = sorted((first, other), key=lambda n: (n[2] == 0, n[2]))
        raise PageError(f"{_at(path, second[2])}: the page names two operator desc structs: {first[0]} ({first[1]}"
                        f"{f', line {first[2]}' if first[2] else ''}) and {second[0]} ({second[1]}"
                        f"{f', line {second[2]}' if second[2] else ''}); a page describes one operator")
    operator = Page(path, "", "", own).operator
    if len(operator) > MAX_OPERATOR_CHARS or not OPERATOR_NAME.fullmatch(operator):
        line = min((n[2] for n in named if n[2]), default=0)
        shown = operator if len(operator) <= 40 else operator[:40] + "..."
        raise PageError(f"{_at(path, line)}: operator name {shown!r} ({len(operator)} characters) is not a plain operator "
                        f"name: at most {MAX_OPERATOR_CHARS} characters, an upper-case letter then upper-case letters, "
                        f"digits and underscores (it names the spec file)")
    return own, blocks[0] if blocks else None


def _front_names(text: str, front: str) -> list[tuple[str, str, int]]:
    """The operator desc structs a markdown page's front matter names as its own: in its title,
    UID and api_name entries, with their lines."""
    out: list[tuple[str, str, int]] = []
    in_api_name = False
    for number, line in enumerate(front.split("\n"), 2):  # the front matter starts on line 2, after `---`
        key = line.split(":", 1)[0].strip() if ":" in line and not line.startswith((" ", "-")) else None
        if key is not None:
            in_api_name = key == "api_name"
        if key in ("title", "UID") or (in_api_name and line.lstrip().startswith("-")):
            found = DESC.search(line)
            if found:
                out.append((found.group(0), f"its front matter's {key or 'api_name'}", number))
    return out


def _read(path: Path, layout: str, lines: list[str], formula: str | None, defects: list[str], source: str = "",
          front: list[tuple[str, str, int]] | None = None) -> Page:
    text = "\n".join(lines)
    named, syntax = _own_struct(path, lines, text, source or text, front)
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
                    sized = FIELD_SIZE.search(typed.group(1).replace("\\", ""))
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
        sized = FIELD_SIZE.search(declaration)
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
    members = [w for w in re.split(r"[\s,]+", text) if w and w.lower() not in AND_WORDS]
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
        # a row starts with a tensor field's name and is one short line: only then is the pattern
        # tried, on single spaces (runs of blanks would give its lazy kind words quadratic work)
        if len(text) > MAX_ROW_CHARS or text.split(None, 1)[0] not in tensors:
            return None
        match = ROW.match(" ".join(text.split()))
        if match is None:
            return None
        name, kind_words, shape, dim_text, type_text = match.groups()
    kind, dims = kind_of(kind_words), dims_of(dim_text)
    if kind is None or dims is None:
        return None
    return Row(name, kind, dims, tuple(t.strip() for t in type_text.split(",") if t.strip()), is_array_kind(kind_words), shape)
