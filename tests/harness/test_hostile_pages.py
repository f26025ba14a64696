"""Hostile API pages and command arguments end in one clear error, fast, writing nothing.

What this module proves, for `spec check-docs`, `spec import` and `spec diff` (harness.pages,
harness.spec.compare):

- a page over MAX_PAGE_BYTES (a 1 MiB line of brackets, a 1 MiB `_Field_size_(`, a sparse 9 GiB
  file made with truncate()) is refused by its size, before it is read: `page: N bytes is too big`,
  exit 2, within SECONDS;
- pages just under the limit built from the inputs that made the old patterns backtrack (runs of
  `[`, `<`, `[a](`, `_a_(`, `struct DML_X_OPERATOR_DESC {` without `};`, repeated "determines
  the size of", a table row of blanks) are read in time linear in their size: within SECONDS;
- a page whose operator name is no plain name of at most MAX_OPERATOR_CHARS characters (300
  characters, or `_DATA_TYPES`, which would be a shared catalog file's name) and a page naming two
  operator desc structs are refused as `page:line: message` naming what is wrong (both structs),
  exit 2, no file written;
- `spec diff` never hands git an argument it could read as an option: `--output=FILE` exits 2
  with a clear message and no file is written;
- a skeleton is never written through a symbolic link placed at its target (harness.pages.skeleton
  write_skeleton, which `spec import` uses).

Every command runs in-process through harness.cli.main: a traceback would fail the test.
"""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from harness.cli import main
from harness.pages.collect import collect_pages
from harness.pages.parse import MAX_OPERATOR_CHARS, MAX_PAGE_BYTES, PageError, read_page
from harness.pages.skeleton import write_skeleton
from harness.spec.compare import diff_sources, resolve_revision
from harness.spec.load import DEFAULT_SPECS_DIR

PAGES = Path(__file__).resolve().parents[1] / "fixtures" / "pages"
MD = (PAGES / "ns-directml-dml_element_wise_twiddle_operator_desc.md").read_text(encoding="utf-8")
TXT = (PAGES / "twiddle-fr.txt").read_text(encoding="utf-8")
STRUCT = "DML_ELEMENT_WISE_TWIDDLE_OPERATOR_DESC"
OTHER = "DML_ELEMENT_WISE_OTHER_OPERATOR_DESC"
SECONDS = 5.0
MIB = 1 << 20
NEAR = MAX_PAGE_BYTES - 8192  # a hostile page just under the size limit (room for the fixture around it)


def run(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, float]:
    """`dmlconform ARGS` in-process: (exit code, stderr, seconds)."""
    started = time.monotonic()
    code = main(["--specs-dir", str(DEFAULT_SPECS_DIR), *args])
    seconds = time.monotonic() - started
    return code, capsys.readouterr().err, seconds


def page(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --- pages too big: refused by their size --------------------------------------------------------

BIG = {
    "brackets_1MiB.md": MD + "[" * MIB + "\n",
    "field_size_1MiB.md": MD.replace("Type: \\_Maybenull\\_", "Type: _Field_size_(" + "a" * MIB, 1),
    "syntax_block_1MiB.txt": TXT.replace("FLOAT Gain;", "FLOAT Gain;" + " x;" * (MIB // 3)),
}


@pytest.mark.parametrize("command", ["check-docs", "import"])
@pytest.mark.parametrize("name", sorted(BIG))
def test_a_page_over_the_limit_is_refused_by_its_size(capsys, tmp_path, name, command):
    path = page(tmp_path, name, BIG[name])
    out = tmp_path / "out"
    args = ("spec", command, str(path)) + (("--out", str(out)) if command == "import" else ())
    code, err, seconds = run(capsys, *args)
    assert code == 2, err
    assert f"{path}: {path.stat().st_size:,} bytes is too big for an API page (at most {MAX_PAGE_BYTES:,})" in err
    assert "Traceback" not in err and seconds < SECONDS
    assert not out.exists() or not any(out.iterdir())


def test_a_sparse_9_GiB_file_is_refused_without_reading_it(capsys, tmp_path):
    path = tmp_path / "sparse.md"
    with path.open("wb") as handle:
        handle.truncate(9 << 30)
    code, err, seconds = run(capsys, "spec", "check-docs", str(path))
    assert code == 2, err
    assert f"{path}: 9,663,676,416 bytes is too big for an API page" in err
    assert "MemoryError" not in err and seconds < SECONDS
    # in a directory, it is skipped (counted) like any file that is no page; the others are read
    shutil.copy(PAGES / "twiddle-fr.txt", tmp_path / "twiddle-fr.txt")
    started = time.monotonic()
    collected = collect_pages([str(tmp_path)])
    assert collected.skipped == [str(path)] and [p.path.name for p in collected.pages] == ["twiddle-fr.txt"]
    assert time.monotonic() - started < 1.0


def test_a_page_that_is_no_regular_file_is_refused(tmp_path):
    fifo = tmp_path / "pipe.md"
    os.mkfifo(fifo)
    with pytest.raises(PageError, match="not a regular file"):
        read_page(fifo)  # would block reading, were it opened


# --- pages under the limit: read in linear time -------------------------------------------------

NEAR_LIMIT = {
    "bracket_line.md": MD + "[" * NEAR + "\n",
    "angle_line.md": MD + "<" * NEAR + "\n",
    "unclosed_links.md": MD + "[a](" * (NEAR // 4) + "\n",
    "field_size.md": MD + "\nType: _Field_size_(" + "a" * NEAR + "\n",
    "sal_parens.txt": TXT.replace("const DML_TENSOR_DESC *InputTensor;", "_a_(" * (NEAR // 4) + " const DML_TENSOR_DESC *InputTensor;"),
    "unclosed_structs.txt": TXT + ("struct DML_B_OPERATOR_DESC { x" * (NEAR // 32)),
    "size_of_repeated.md": MD.replace("The factor applied", "determines the size of " * (NEAR // 23)),
    "row_of_blanks.txt": TXT + "\nInputTensor" + " " * NEAR + "x\n",
    "variant_of_blanks.txt": TXT + "\nA" + " " * NEAR + "B\n",
    "many_lines.txt": TXT + "\n" * NEAR,
}


@pytest.mark.parametrize("name", sorted(NEAR_LIMIT))
def test_pages_just_under_the_limit_are_read_in_linear_time(tmp_path, name):
    path = page(tmp_path, name, NEAR_LIMIT[name])
    assert path.stat().st_size <= MAX_PAGE_BYTES
    started = time.monotonic()
    read = read_page(path)
    assert read.operator == "ELEMENT_WISE_TWIDDLE"
    assert time.monotonic() - started < SECONDS


# --- operator names that cannot be file names; two structs on one page ----------------------------

BAD = {
    "long_name.md": (MD.replace(STRUCT, "DML_" + "A" * 300 + "_OPERATOR_DESC"), 2,
                     "operator name 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA...' (300 characters) is not a plain operator name: "
                     f"at most {MAX_OPERATOR_CHARS} characters"),
    "long_name.txt": (TXT.replace(STRUCT, "DML_" + "B" * 300 + "_OPERATOR_DESC"), 1,
                      "operator name 'BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB...' (300 characters) is not a plain operator name"),
    "shared_file_name.txt": (TXT.replace(STRUCT, "DML__DATA_TYPES_OPERATOR_DESC"), 1,
                             "operator name '_DATA_TYPES' (11 characters) is not a plain operator name"),
    "title_and_syntax.txt": (TXT.replace(f"struct {STRUCT} {{", f"struct {OTHER} {{"), 6,
                             f"the page names two operator desc structs: {STRUCT} (its title, line 1) and {OTHER} "
                             f"(its syntax block, line 6)"),
    "two_syntax_blocks.txt": (TXT + f"\nstruct {OTHER} {{\n FLOAT X;\n}};\n", len(TXT.splitlines()) + 2,
                              f"the page names two operator desc structs: {STRUCT} (its syntax block, line 6) and {OTHER} "
                              f"(its syntax block, line {len(TXT.splitlines()) + 2})"),
    "front_matter_and_title.md": (MD.replace(f"title: {STRUCT}", f"title: {OTHER}"), 3,
                                  f"the page names two operator desc structs: {STRUCT} (its front matter's UID, line 2) and "
                                  f"{OTHER} (its title, line 3)"),
}


@pytest.mark.parametrize("command", ["check-docs", "import"])
@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_names_and_two_structs_are_clear_errors(capsys, tmp_path, name, command):
    text, line, message = BAD[name]
    path = page(tmp_path, name, text)
    out = tmp_path / "out"
    args = ("spec", command, str(path)) + (("--out", str(out)) if command == "import" else ())
    code, err, seconds = run(capsys, *args)
    assert code == 2, err
    assert f"{path}:{line}: {message}" in err, err
    assert "Traceback" not in err and "OSError" not in err and seconds < SECONDS
    assert not out.exists() or not any(out.iterdir())


# --- spec diff: no argument reaches git as an option --------------------------------------------

@pytest.mark.parametrize("old", ["--output={file}", "-o{file}", "--remote=/nonexistent", "-"])
def test_spec_diff_never_passes_an_option_to_git(capsys, tmp_path, old):
    written = tmp_path / "written"
    argument = old.format(file=written)
    code, err, seconds = run(capsys, "spec", "diff", "--", argument, "HEAD")
    assert code == 2, err
    assert f"{argument!r} is neither a directory nor a git revision: a revision never starts with '-'" in err
    assert "Traceback" not in err and seconds < SECONDS
    assert not written.exists() and list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="never starts with '-'"):
        diff_sources(argument, "HEAD")  # the hostile side first: refused before git runs at all
    assert not written.exists()


def test_spec_diff_options_after_the_revisions_are_usage_errors(capsys, tmp_path):
    written = tmp_path / "written"
    with pytest.raises(SystemExit) as exited:
        main(["--specs-dir", str(DEFAULT_SPECS_DIR), "spec", "diff", "HEAD", f"--output={written}"])
    assert exited.value.code == 2
    assert not written.exists()


def test_a_revision_is_resolved_before_git_archive_sees_it(tmp_path):
    root = DEFAULT_SPECS_DIR.parent
    if not (root / ".git").exists():
        pytest.skip("not a git checkout")
    for bad in ("--output=x", "-c", "", "HEAD\n--output=x"):
        with pytest.raises(ValueError):
            resolve_revision(bad, root)
    with pytest.raises(ValueError, match="git does not know it|not a valid|unknown"):
        resolve_revision("no-such-revision-anywhere", root)


# --- skeletons are not written through symbolic links ------------------------------------------

def test_write_skeleton_refuses_a_symbolic_link_at_its_target(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("a person's file\n")
    target = tmp_path / "ELEMENT_WISE_TWIDDLE.yaml"
    target.symlink_to(outside)
    for overwrite in (False, True):
        with pytest.raises(PageError, match="is a symbolic link"):
            write_skeleton(target, "operator: X\n", overwrite=overwrite)
    assert outside.read_text() == "a person's file\n"
    dangling = tmp_path / "GATHER.yaml"
    dangling.symlink_to(tmp_path / "created-through-the-link")
    with pytest.raises(PageError, match="is a symbolic link"):
        write_skeleton(dangling, "operator: X\n")
    assert not (tmp_path / "created-through-the-link").exists()
    regular = tmp_path / "REDUCE.yaml"
    write_skeleton(regular, "one\n")
    with pytest.raises(PageError, match="exists"):
        write_skeleton(regular, "two\n")
    write_skeleton(regular, "three\n", overwrite=True)
    assert regular.read_text() == "three\n"


def test_spec_import_force_does_not_write_through_a_symbolic_link(capsys, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("a person's file\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "ELEMENT_WISE_TWIDDLE.yaml").symlink_to(outside)
    code, err, _ = run(capsys, "spec", "import", str(PAGES / "twiddle-fr.txt"), "--out", str(out), "--force")
    assert outside.read_text() == "a person's file\n"
    assert code == 2 and "is a symbolic link" in err
