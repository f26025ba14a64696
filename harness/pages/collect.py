"""The pages a command is given: files, or directories whose *.md and *.txt files are read (a
directory also holds enum and helper-struct pages, which are no operator's: they are skipped and
counted; a file named on its own that is no operator page is an input error)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.pages.page import Page
from harness.pages.parse import PageError, read_page

PAGE_SUFFIXES = (".md", ".txt")


@dataclass
class Collected:
    pages: list[Page] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # files of a directory that are no operator page

    def by_operator(self) -> dict[str, list[Page]]:
        out: dict[str, list[Page]] = {}
        for page in self.pages:
            out.setdefault(page.operator, []).append(page)
        return out


def collect_pages(paths: list[str]) -> Collected:
    """Read every page named or found; raises PageError (an input error) for a missing path or a
    named file that is no operator page."""
    out = Collected()
    for name in paths:
        path = Path(name)
        if path.is_dir():
            for child in sorted(p for p in path.iterdir() if p.is_file() and p.suffix in PAGE_SUFFIXES):
                try:
                    out.pages.append(read_page(child))
                except PageError:
                    out.skipped.append(str(child))
        elif path.is_file():
            out.pages.append(read_page(path))
        else:
            raise PageError(f"{path}: no such file or directory")
    return out
