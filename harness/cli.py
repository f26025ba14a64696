"""The `dmlconform` command line.

Every subcommand reports bad input as one clear line and a non-zero exit code, never a traceback:
argparse lists allowed values for choices, and spec problems print as `file:line: key: message`.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .spec import DEFAULT_SPECS_DIR, SpecSet, lint_specs, load_specs, operator_files
from .spec_show import render_spec
from .yamlsource import SpecError

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def _load(args: argparse.Namespace) -> SpecSet:
    return load_specs(Path(args.specs_dir))


def cmd_spec_lint(args: argparse.Namespace) -> int:
    specs_dir = Path(args.specs_dir)
    files = [Path(f) for f in args.files] if args.files else operator_files(specs_dir)
    if not files:
        print(f"no operator spec files found in {specs_dir}", file=sys.stderr)
        return EXIT_FAIL
    errors = lint_specs(files, specs_dir)
    for error in errors:
        print(error.render(), file=sys.stderr)
    if not errors and not args.files:
        try:
            load_specs(specs_dir)  # cross-file checks (unique operator types)
        except SpecError as exc:
            print(exc.render(), file=sys.stderr)
            return EXIT_FAIL
    print(f"{len(files) - len(errors)} of {len(files)} spec file(s) OK")
    return EXIT_FAIL if errors else EXIT_OK


def cmd_spec_show(args: argparse.Namespace) -> int:
    specs = _load(args)
    if args.operator not in specs.operators:
        print(f"unknown operator {args.operator!r}; known: {', '.join(sorted(specs.operators))}", file=sys.stderr)
        return EXIT_USAGE
    if args.feature_level and not specs.catalog.has_level(args.feature_level):
        allowed = ", ".join(level.name for level in specs.catalog.levels)
        print(f"unknown feature level {args.feature_level!r}; allowed: {allowed}", file=sys.stderr)
        return EXIT_USAGE
    print(render_spec(specs.operators[args.operator], args.feature_level))
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dmlconform", description="DirectML operator conformance harness")
    parser.add_argument("--specs-dir", default=str(DEFAULT_SPECS_DIR), help="directory of operator specs (default: %(default)s)")
    sub = parser.add_subparsers(dest="command", required=True)

    spec = sub.add_parser("spec", help="check and show operator specs")
    spec_sub = spec.add_subparsers(dest="spec_command", required=True)
    lint = spec_sub.add_parser("lint", help="validate spec files (all of specs/ by default)")
    lint.add_argument("files", nargs="*", help="spec files to check")
    lint.set_defaults(func=cmd_spec_lint)
    show = spec_sub.add_parser("show", help="print an operator's support table, formula and constraints")
    show.add_argument("operator")
    show.add_argument("--feature-level", help="level such as 4.1 (default: newest)")
    show.set_defaults(func=cmd_spec_show)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except SpecError as exc:
        print(exc.render(), file=sys.stderr)
        return EXIT_FAIL
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
