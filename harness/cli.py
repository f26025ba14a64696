"""The `dmlconform` command line.

Every subcommand reports bad input as one clear line and a non-zero exit code, never a traceback:
argparse lists allowed values for choices, and spec problems print as `file:line: key: message`.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness.run.allocator import keep_freed_memory
from harness.run.record_schema import RunFileError
from harness.spec.lint import lint_specs
from harness.spec.load import DEFAULT_SPECS_DIR, load_specs, operator_files
from harness.spec.model import SpecSet
from harness.spec.show import render_spec
from harness.judge.expectations import ExpectationError
from harness.run.options import REPORT_DETAILS
from harness.spec.source import SpecError

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """A bad command-line input: printed as one line, exit 2."""


def _load(args: argparse.Namespace) -> SpecSet:
    specs_dir = Path(args.specs_dir)
    if not specs_dir.is_dir():
        raise UsageError(f"--specs-dir {specs_dir}: not a directory")
    return load_specs(specs_dir)


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


def _pages(paths: list[str]):
    """The operator pages among `paths` (harness.pages.collect); a missing path, a named file that
    is no operator page, or no page at all is a usage error."""
    from harness.pages.collect import Collected, collect_pages
    from harness.pages.parse import PageError
    try:
        collected: Collected = collect_pages(paths)
    except PageError as exc:
        raise UsageError(str(exc)) from None
    if not collected.pages:
        raise UsageError(f"no operator API page among {', '.join(paths)}")
    return collected


def _pages_by_spec(by_page_name: dict[str, list], operators: dict) -> dict[str, list]:
    """The pages keyed by the spec they document: a page names its operator after its desc
    struct, and a spec named after its DML_OPERATOR_TYPE where DirectML.h aliases that type to
    another struct name (the page's) is found by its desc_struct."""
    by_struct = {spec.desc_struct.removeprefix("DML_").removesuffix("_OPERATOR_DESC"): name
                 for name, spec in operators.items()}
    out: dict[str, list] = {}
    for name, pages in by_page_name.items():
        out.setdefault(name if name in operators else by_struct.get(name, name), []).extend(pages)
    return out


def cmd_spec_check_docs(args: argparse.Namespace) -> int:
    """Every spec whose operator has a page among the inputs, against those pages: drift (exit 1)
    or none (exit 0); differences a spec records under docs_drift are listed, not counted."""
    from harness.pages.drift import check_operator
    from harness.pages.report import report_json, report_markdown
    specs = _load(args)
    collected = _pages(args.pages)
    by_operator = _pages_by_spec(collected.by_operator(), specs.operators)
    checks = [check_operator(specs.operators[name], pages) for name, pages in sorted(by_operator.items()) if name in specs.operators]
    data = report_json(checks, sorted(set(by_operator) - set(specs.operators)),
                       sorted(set(specs.operators) - set(by_operator)), collected.skipped,
                       [f"{p.label}: {d}" for p in collected.pages for d in p.defects])
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=2) + "\n")
    print(json.dumps(data, indent=2) if args.format == "json" else report_markdown(data))
    return EXIT_FAIL if data["summary"]["drift"] else EXIT_OK


def cmd_spec_import(args: argparse.Namespace) -> int:
    """A spec skeleton per operator of the pages given (pages of one operator in several
    languages make one skeleton); an existing file is not overwritten without --force."""
    from harness.pages.parse import PageError
    from harness.pages.skeleton import skeleton, write_skeleton
    from harness.spec.catalog import load_catalog
    catalog = load_catalog(Path(args.specs_dir))
    collected = _pages(args.pages)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: not a directory")
    out.mkdir(parents=True, exist_ok=True)
    written = 0
    for operator, pages in sorted(collected.by_operator().items()):
        target = out / f"{operator}.yaml"
        if (target.exists() or target.is_symlink()) and not args.force:
            print(f"{target}: exists, left as it is (--force overwrites)", file=sys.stderr)
            continue
        try:
            write_skeleton(target, skeleton(pages, catalog), overwrite=args.force)
        except PageError as exc:
            raise UsageError(str(exc)) from None
        written += 1
        print(f"{target}: from {', '.join(p.label for p in pages)}")
    print(f"{written} skeleton(s) written; `dmlconform spec lint FILE` lists what is left to fill")
    return EXIT_OK


def cmd_spec_schema(args: argparse.Namespace) -> int:
    """The operator spec file's JSON Schema (draft 2020-12), for editors and other tools; the
    shipped copy is docs/spec.schema.json (a test keeps it equal to this)."""
    from harness.spec.schema import schema_document
    print(json.dumps(schema_document(), indent=2, sort_keys=True))
    return 0


def cmd_spec_table(args: argparse.Namespace) -> int:
    """The operator inventory by family, with how many ONNX Runtime maps (Markdown): the operators
    the onnxruntime backend's capabilities name (found, like any backend, by its entry point)."""
    from harness.run.registry import load_backend
    from harness.spec.inventory import inventory_markdown
    specs = _load(args)
    try:
        backend = load_backend("onnxruntime", specs=specs)
    except ValueError as exc:  # an installation without the onnxruntime backend
        raise UsageError(f"the ONNX Runtime column needs the onnxruntime backend: {exc}") from None
    try:
        mapped = set(backend.capabilities().operators or ())
    finally:
        backend.close()
    print(inventory_markdown(specs, mapped))
    return EXIT_OK


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


def cmd_backends(args: argparse.Namespace) -> int:
    from harness.run.registry import DEFAULT_BACKENDS, describe_backends
    specs = _load(args)
    infos = describe_backends(specs=specs)
    width = max(len(i.name) for i in infos)
    for info in infos:
        state = "available" if info.available else ("installed, not available" if info.loadable else "broken")
        default = " (default)" if info.name in DEFAULT_BACKENDS else ""
        detail = info.version if info.available else info.reason
        print(f"{info.name:<{width}}  {state:<24}  {detail}{default}")
    return EXIT_OK


def cmd_replay(args: argparse.Namespace) -> int:
    """Rerun one case file. The file is checked whole (format, types, ranges, buffer lengths, the
    operator and level against the specs) before any backend starts: a malformed file is one line,
    `cannot use case file FILE: key: message`, and exit 2, never a traceback or a read out of bounds."""
    from harness.model.descriptor import Case
    from harness.model.wellformed import CaseFormatError, check_case
    try:
        case = Case.load(Path(args.case_file))  # first: a malformed file needs neither the specs nor a backend
        specs = _load(args)
        if case.operator not in specs.operators:
            raise CaseFormatError("descriptor.operator", f"unknown operator {case.operator!r} (no spec in {specs.directory}; "
                                                         f"known: {', '.join(sorted(specs.operators))})")
        spec = specs.operator(case.operator)
        check_case(case, spec)
    except CaseFormatError as exc:
        print(f"cannot use case file {exc.in_file(args.case_file).render()}", file=sys.stderr)
        return EXIT_USAGE
    from harness.run.registry import expectations_for, load_backend
    from harness.run.case import run_case
    from harness.run.options import DIRECTML_TIMEOUT, directml_timeout_problem
    timeout = DIRECTML_TIMEOUT if args.directml_timeout is None else args.directml_timeout
    problem = directml_timeout_problem(timeout)
    if problem is None and args.directml_gpus is not None:
        from harness.run.options import directml_gpus_problem
        problem = directml_gpus_problem(args.directml_gpus)
    if problem:
        print(f"dmlconform replay: {problem}", file=sys.stderr)
        return EXIT_USAGE
    worst = EXIT_OK
    for name in args.backend or ["numpy"]:
        options: dict = {"specs": specs}
        if name.partition("@")[0] == "directml":
            options.update(dll=args.directml_dll, adapter=args.directml_adapter, warp=args.directml_warp,
                           debug_layer=args.directml_debug_layer, exec_flags=args.directml_exec_flags,
                           vulkan=args.directml_vulkan, stack=args.directml_stack, timeout=timeout,
                           gpus=args.directml_gpus)
        try:
            backend = load_backend(name, **options)
        except ValueError as exc:
            print(str(exc), file=sys.stderr)
            return EXIT_USAGE
        ok, reason = backend.available()
        if not ok:
            print(f"{name}: not available: {reason}")
            worst = EXIT_FAIL
            continue
        kind = "valid" if case.expect_valid else "invalid"
        known = expectations_for(name, _expectations_dir(args)).for_backend(backend.version)  # this device's
        outcome = run_case(backend, spec, case, kind, expectations=known)
        print(outcome.message)
        backend.close()
        if outcome.failed:
            worst = EXIT_FAIL
    return worst


def _check_run_arguments(args: argparse.Namespace) -> str | None:
    """Everything `run` can check before it touches the reports directory: what is wrong, or None.

    A typo in a backend name must not wipe the last run's report, so the run's arguments and its
    specs are checked here, before pytest starts (which empties the results of the previous run).
    """
    from harness.run.registry import backend_entry_points
    from harness.run.options import option_problem
    reports = Path(args.reports_dir)
    if reports.exists() and not reports.is_dir():
        return f"--reports-dir {reports}: exists and is not a directory"
    problem = _shard_problem(args)
    if problem:
        return problem
    if str(args.workers) != "auto" and not (str(args.workers).isdigit()):
        return f"--workers {args.workers}: 'auto' or a whole number >= 0"
    if args.directml_timeout is not None:
        from harness.run.options import directml_timeout_problem
        problem = directml_timeout_problem(args.directml_timeout)
        if problem:
            return problem
    if args.directml_gpus is not None:
        from harness.run.options import directml_gpus_problem
        problem = directml_gpus_problem(args.directml_gpus)
        if problem:
            return problem
    specs_dir = Path(args.specs_dir)
    if not specs_dir.is_dir():
        return f"--specs-dir {specs_dir}: not a directory"
    try:
        specs = load_specs(specs_dir)
    except SpecError as exc:
        return f"--specs-dir {specs_dir}: {exc.render()}"
    problem = option_problem(specs, backends=args.backend or [], known_backends=backend_entry_points(),
                             levels=args.feature_level or [], operators=args.operator or [], dtypes=args.dtype or [],
                             max_examples=args.max_examples)
    if problem:
        return problem
    from harness.run.registry import instance_problem
    for name in args.backend or []:
        problem = instance_problem(name)
        if problem:
            return problem
    return _expectations_problem(args, specs)


def _shard_problem(args: argparse.Namespace) -> str | None:
    """A malformed --shard (0/4, 5/4, x/y, auto without CI variables) or an unreadable or malformed
    --shard-durations file, before anything starts (harness.run.shard)."""
    import os
    from harness.run.shard import ShardError, parse_shard, read_durations
    if args.shard is not None:
        try:
            parse_shard(args.shard, os.environ)
        except ShardError as exc:
            return str(exc)
    if args.shard_durations is not None:
        try:
            read_durations(Path(args.shard_durations))
        except RunFileError as exc:
            return f"--shard-durations {exc.render()}"
    return None


def _expectations_problem(args: argparse.Namespace, specs: SpecSet) -> str | None:
    """The first problem of the expectation files the run would read (--expectations-dir, else
    each backend's own), checked before pytest starts: a broken file must not cost the last run's
    reports, nor end the run with a traceback."""
    from harness.judge.expectations import check_expectation_files, expectation_files
    from harness.run.registry import DEFAULT_BACKENDS, expectations_dir, split_instance
    override = getattr(args, "expectations_dir", None)
    for name in args.backend or DEFAULT_BACKENDS:
        base, variant = split_instance(name)
        directory = Path(override) if override else expectations_dir(base)
        if directory is None or not directory.is_dir():
            continue  # a missing --expectations-dir is reported by _expectations_dir
        files = expectation_files(base, directory) + (expectation_files(name, directory) if variant else [])
        errors = check_expectation_files(files, specs)
        if errors:
            more = f" (and {len(errors) - 1} more problem(s) in the expectation files)" if len(errors) > 1 else ""
            return f"{errors[0].render()}{more}"
    return None


def _prefetch_reachability(args: argparse.Namespace) -> None:
    """The invalid cells' reachability answers the memo lacks, searched over the workers' processes
    before they start (harness.run.reachability_prefetch: otherwise each worker searches all)."""
    import os
    from harness.run.reachability_prefetch import prefetch_and_say
    processes = (os.cpu_count() or 1) if str(args.workers) == "auto" else int(args.workers)
    prefetch_and_say(Path(args.specs_dir), args.operator, (args.feature_level or []) == ["ladder"], processes)


def cmd_run(args: argparse.Namespace, extra: list[str]) -> int:
    """The conformance run: the pytest suite with JUnit XML and Allure results under the reports dir."""
    import pytest
    problem = _check_run_arguments(args)
    if problem:
        print(f"dmlconform run: {problem}", file=sys.stderr)
        return EXIT_USAGE
    reports = Path(args.reports_dir)
    reports.mkdir(parents=True, exist_ok=True)
    from harness.run.plugin import CONFORMANCE_MODULE
    # Not pytest-xdist's `--dist worksteal`, though it moves a stuck worker's queue (call 16: 84 cells
    # waited five minutes behind one worker held by a new hang): an xdist worker runs an item only
    # once it holds the next one or a shutdown, and worksteal sends the shutdown only when nothing can be
    # stolen. On an NVIDIA H200 (call 17) one worker held its last cell, waiting, while every other
    # worker sat in a known hang's probe waiting for that cell (harness/run/hang_probes.py): five
    # minutes, until the probes' stall limit. `load` shuts every worker down once the last (probe)
    # items are handed out. A new hang now costs a worker about a minute (FAMILY_HANGS, no reruns of
    # cases held back), not five.
    # the CLI imported Hypothesis before pytest starts: its plugin cannot be assert-rewritten, harmlessly
    pytest_args = [str(CONFORMANCE_MODULE), "-q", "-W", "ignore::pytest.PytestAssertRewriteWarning", "-p", "no:cacheprovider", "-p", "no:benchmark",
                   f"--junitxml={reports / 'junit.xml'}", f"--alluredir={reports / 'allure-results'}",
                   f"--reports-dir={reports}", f"--specs-dir={args.specs_dir}",
                   *([f"--expectations-dir={_expectations_dir(args)}"] if args.expectations_dir else []),
                   f"--hypothesis-profile={args.profile}", "-n", str(args.workers)]
    for name in args.backend or []:
        pytest_args.append(f"--backend={name}")
    for level in args.feature_level or []:
        pytest_args.append(f"--feature-level={level}")
    for op in args.operator or []:
        pytest_args.append(f"--operator={op}")
    for t in args.dtype or []:
        pytest_args.append(f"--dtype={t}")
    if args.max_examples:
        pytest_args.append(f"--max-examples={args.max_examples}")
    if args.exhaustive:
        pytest_args.append("--exhaustive")
    pytest_args.append(f"--report-detail={args.report_detail}")
    if args.directml_timeout is not None:
        pytest_args.append(f"--directml-timeout={args.directml_timeout}")
    if args.directml_gpus is not None:
        pytest_args.append(f"--directml-gpus={args.directml_gpus}")
    pytest_args.append(f"--hang-probes={args.hang_probes}")
    if args.shard is not None:  # resolved here (auto: from the CI variables), so every worker gets the same
        import os
        from harness.run.shard import parse_shard
        pytest_args.append(f"--shard={parse_shard(args.shard, os.environ)}")
    if args.shard_durations is not None:
        pytest_args.append(f"--shard-durations={args.shard_durations}")
    _prefetch_reachability(args)
    code = int(pytest.main(pytest_args + extra))
    if code == int(pytest.ExitCode.INTERRUPTED):
        print("dmlconform run: interrupted; the run is incomplete and the gate will fail", file=sys.stderr)
    elif code == int(pytest.ExitCode.USAGE_ERROR):
        return EXIT_USAGE
    print(f"reports: {reports} (junit.xml, allure-results/, results/, cases/, results.csv.gz, failures.csv)")
    return code


def _expectations_dir(args: argparse.Namespace) -> Path | None:
    """--expectations-dir, checked; None: each backend's own expectation files."""
    value = getattr(args, "expectations_dir", None)
    if value is None:
        return None
    if not Path(value).is_dir():
        raise UsageError(f"--expectations-dir {value}: not a directory")
    return Path(value)


def _reports_dir(args: argparse.Namespace) -> Path:
    """The reports directory of matrix/report/gate; a missing one is a usage error."""
    reports = Path(args.reports_dir)
    if not reports.is_dir():
        raise UsageError(f"--reports-dir {reports}: no such directory (run `dmlconform run` first)")
    return reports


def _records(reports: Path):
    from harness.run.results import read_records
    return list(read_records(reports / "results"))


def cmd_matrix(args: argparse.Namespace) -> int:
    from harness.report.matrix import build_matrix, liberty_totals, write_matrix
    reports = _reports_dir(args)
    records = _records(reports)
    cells = build_matrix(records, _load(args))
    paths = write_matrix(cells, reports, liberty_totals(records))
    print(f"matrix: {len(cells)} cells -> {paths['html']}, {paths['md']}, {paths['json']}")
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    """The matrix, results.csv and failures.csv, and the HTML report (Allure 3, one self-contained
    file) under the reports dir. Then what CI uploads is made small (docs/reports.md): a finished
    run's records gzip-compressed, and the Allure result files packed into allure-results.zip once
    the report is built from them (a later `report` reads the archive; unless the run or this
    report asked for `--report-detail full`, the archive keeps the reported tests only)."""
    import time
    from harness.report.csv_results import write_csv_results
    from harness.report.html import allure_results, generate_report, kept_tests, pack_allure_results, report_summary, run_detail
    from harness.report.matrix import build_matrix, liberty_totals, write_matrix
    reports = _reports_dir(args)
    start = time.perf_counter()
    records = _records(reports)
    write_matrix(build_matrix(records, _load(args)), reports, liberty_totals(records))
    write_csv_results(reports, records)
    _compress_finished_records(reports / "results")
    try:
        with allure_results(reports) as results:
            if results is None:
                raise RuntimeError(f"no Allure results in {reports} (allure-results/ or allure-results.zip): run `dmlconform run` first")
            run_asked = run_detail(results)
            detail = args.report_detail or run_asked or "failures"
            partial = kept_tests(results) if detail == "full" else None
            index = generate_report(results, reports / "allure-report", reports / "history.jsonl", detail=detail)
        pack_allure_results(reports, everything="full" in (detail, run_asked))
    except (FileNotFoundError, RuntimeError) as exc:
        print(f"report: {exc}", file=sys.stderr)
        return EXIT_FAIL
    stats = report_summary(reports / "allure-report").get("stats", {})
    print(f"report: {index} ({stats.get('total', '?')} tests, --report-detail {detail}), {reports / 'matrix.html'}, "
          f"{reports / 'results.csv.gz'} in {time.perf_counter() - start:.1f} s")
    if partial:
        print(f"report: the packed Allure results hold only the tests of the run's report ({partial})")
    return EXIT_OK


def _compress_finished_records(results: Path) -> None:
    """gzip the records of a run that has ended (its completion marker is there): never those of a
    run still writing them, nor an interrupted run's (the gate names its torn files)."""
    from harness.run.manifest import COMPLETE_FILE
    from harness.run.results import compress_records
    if (results / COMPLETE_FILE).is_file():
        try:
            compress_records(results)
        except OSError as exc:
            print(f"report: the records stay uncompressed: {exc.strerror or exc}", file=sys.stderr)


def cmd_gate(args: argparse.Namespace) -> int:
    from harness.report.gate import evaluate_gate
    from harness.run.manifest import load_manifest
    reports = _reports_dir(args)
    result = evaluate_gate(_records(reports), load_manifest(reports / "results"), _expectations_dir(args))
    print("\n".join(result.summary))
    return EXIT_OK if result.passed else EXIT_FAIL


def cmd_merge(args: argparse.Namespace) -> int:
    """Join the reports directories of a run's shards (harness.run.merge): a shard missing,
    interrupted, duplicated or of another run is one line each and exit 2, with nothing written;
    else the merged reports directory, its matrix, and the gate's verdict as the exit code."""
    from harness.report.gate import evaluate_gate
    from harness.report.matrix import build_matrix, liberty_totals, write_matrix
    from harness.run.manifest import load_manifest
    from harness.run.merge import MergeError, merge_shards
    expectations = _expectations_dir(args)  # checked before anything is written
    specs = _load(args)
    out = Path(args.output)
    try:
        shards, run_id = merge_shards([Path(d) for d in args.directories], out)
    except MergeError as exc:
        for line in exc.lines:
            print(f"dmlconform merge: {line}", file=sys.stderr)
        return EXIT_USAGE
    for shard in shards:
        print(f"shard {shard.index}/{shard.total}: {shard.directory} (host {shard.manifest.host or 'unknown'}, "
              f"run id {shard.run_id}, {len(shard.manifest.cells)} cells)")
    records = _records(out)
    paths = write_matrix(build_matrix(records, specs), out, liberty_totals(records))
    print(f"merged: {out} (run id {run_id}); matrix: {paths['html']}, {paths['md']}, {paths['json']}")
    result = evaluate_gate(records, load_manifest(out / "results"), expectations)
    print("\n".join(result.summary))
    return EXIT_OK if result.passed else EXIT_FAIL


def cmd_compare(args: argparse.Namespace) -> int:
    """Diff two matrix.json files; an unreadable file, invalid JSON or a structure that is not a
    matrix is one line, `compare: cannot use matrix FILE: reason`, and exit 2."""
    from harness.report.matrix import compare_matrices, load_matrix
    matrices = []
    for path in (args.base, args.new):
        try:
            matrices.append(load_matrix(Path(path)))
        except ValueError as exc:
            print(f"compare: cannot use matrix {path}: {exc}", file=sys.stderr)
            return EXIT_USAGE
    base, new = matrices
    changes = compare_matrices(base, new)
    for section, items in changes.items():
        print(f"{section}: {len(items)}")
        for item in items:
            print(f"  {item}")
    return EXIT_FAIL if changes["new failures"] else EXIT_OK


def cmd_spec_diff(args: argparse.Namespace) -> int:
    from harness.spec.compare import diff_sources, render
    try:
        changes = diff_sources(args.old, args.new)
    except ValueError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_USAGE
    print(render(changes))
    return EXIT_OK


def add_backend_commands(sub: argparse._SubParsersAction) -> None:
    """The subcommands backends declare in the dmlconform.commands entry points (harness/commands.py;
    DirectML: `directml pack|unpack`). One that is documented but not installed, or whose entry
    point does not load, stays a subcommand that says so: one line, exit 2."""
    from harness.commands import subcommands
    for name, register, why in subcommands():
        if register is not None:
            try:
                register(sub)
                continue
            except Exception as exc:  # noqa: BLE001 - a broken plugin makes its command unavailable, not the CLI
                if name in sub.choices:
                    continue
                why = " ".join(f"unavailable: its register function failed: {type(exc).__name__}: {exc}".split())
        unavailable = sub.add_parser(name, add_help=False, help=why)
        unavailable.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        unavailable.set_defaults(func=_unavailable(why))


def _unavailable(why: str):
    def cmd_unavailable(args: argparse.Namespace) -> int:
        raise UsageError(why)
    return cmd_unavailable


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dmlconform", description="DirectML operator conformance harness")
    parser.add_argument("--specs-dir", default=str(DEFAULT_SPECS_DIR), help="directory of operator specs (default: %(default)s)")
    parser.add_argument("--expectations-dir", default=None,
                        help="directory of BACKEND.yaml expectation files (default: the one each backend ships)")
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
    schema = spec_sub.add_parser("schema", help="print the JSON Schema of an operator spec file (docs/spec.schema.json)")
    schema.set_defaults(func=cmd_spec_schema)
    imp = spec_sub.add_parser("import", help="write a spec skeleton per operator from its API page(s)")
    imp.add_argument("pages", nargs="+", help="API pages (docs markdown or rendered text, en/fr/de) or directories of them")
    imp.add_argument("--out", default=".", help="directory for OPERATOR.yaml files (default: the current one)")
    imp.add_argument("--force", action="store_true", help="overwrite existing files")
    imp.set_defaults(func=cmd_spec_import)
    docs = spec_sub.add_parser("check-docs", help="compare every spec with its API page(s), cell by cell: exit 1 on drift")
    docs.add_argument("pages", nargs="+", help="API pages (docs markdown or rendered text, en/fr/de) or directories of them")
    docs.add_argument("--format", choices=["markdown", "json"], default="markdown", help="what to print (default: %(default)s)")
    docs.add_argument("--json", default=None, help="also write the JSON report to this file")
    docs.set_defaults(func=cmd_spec_check_docs)
    table = spec_sub.add_parser("table", help="print the operator inventory by family (the README's table)")
    table.set_defaults(func=cmd_spec_table)
    sdiff = spec_sub.add_parser("diff", help="what changed between two spec directories or git revisions")
    sdiff.add_argument("old", help="a specs directory or a git revision (e.g. HEAD~1)")
    sdiff.add_argument("new", help="a specs directory or a git revision")
    sdiff.set_defaults(func=cmd_spec_diff)

    backends = sub.add_parser("backends", help="list installed backends, whether they can run here, and why not")
    backends.set_defaults(func=cmd_backends)

    replay = sub.add_parser("replay", help="rerun one case file on backends and print the diff")
    replay.add_argument("case_file")
    replay.add_argument("--backend", action="append", help="backend name (repeatable; default numpy)")
    replay.add_argument("--directml-dll", default=None, help="path or version name of DirectML.dll (as in the run)")
    replay.add_argument("--directml-adapter", type=int, default=0, help="DXGI adapter index")
    replay.add_argument("--directml-warp", action="store_true", help="the WARP software adapter (Windows)")
    replay.add_argument("--directml-debug-layer", action="store_true", help="the DirectML debug layer")
    replay.add_argument("--directml-exec-flags", default="", help="e.g. ALLOW_HALF_PRECISION_COMPUTATION|DISABLE_META_COMMANDS")
    replay.add_argument("--directml-vulkan", default=None, help="auto (default), lavapipe, or a Vulkan ICD json path")
    replay.add_argument("--directml-stack", default=None, help="an unpacked portable DirectML stack")
    replay.add_argument("--directml-gpus", default=None, help="the Vulkan device number the case ran on (as in the run)")
    replay.add_argument("--directml-timeout", type=float, default=None,
                        help="seconds the case may take on DirectML before its runner is stopped (default 60, as in a run)")
    replay.set_defaults(func=cmd_replay)

    run = sub.add_parser("run", help="the conformance run (pytest suite) with reports; extra args go to pytest")
    run.add_argument("--backend", action="append", help="backend (repeatable; default: numpy, onnxruntime)")
    run.add_argument("--feature-level", action="append", help="feature level(s) to generate at, or ladder (each level where an operator's tables change, up to the device's own) or own (default: each backend's own)")
    run.add_argument("--operator", action="append", help="operator(s) (default: all)")
    run.add_argument("--dtype", action="append", help="primary input data type(s) (default: all)")
    run.add_argument("--max-examples", type=int, help="Hypothesis examples per test")
    run.add_argument("--exhaustive", action="store_true", help="add the chunked fp32 sweeps")
    run.add_argument("--profile", choices=["ci", "dev", "thorough"], default="ci", help="Hypothesis profile (default: ci)")
    run.add_argument("--workers", default="auto", help="pytest-xdist workers (default: auto; 0 = in process)")
    run.add_argument("--hang-probes", choices=("last", "skip"), default="last",
                     help="known hangs' probes: `last` (default) after every other cell, so that a hung GPU channel "
                          "stalls nothing else; `skip` leaves them out, each recorded unsupported (not probed)")
    run.add_argument("--directml-timeout", type=float, default=None,
                     help="seconds one DirectML case may take before its runner is stopped and restarted (default 60)")
    run.add_argument("--directml-gpus", default=None,
                     help="on a host with several GPUs: all (pytest-xdist worker K uses GPU K mod n) or Vulkan device "
                          "numbers, e.g. 1 (default: the drivers' first; docs/sharding.md)")
    run.add_argument("--reports-dir", default="reports", help="where the run writes (default: ./reports)")
    run.add_argument("--report-detail", choices=REPORT_DETAILS, default="failures",
                     help="Allure attachments and report: failures (default: failures and divergences only) or full "
                          "(passing cases' attachments too, and every test in `dmlconform report`)")
    run.add_argument("--shard", default=None,
                     help="run shard I of N (I/N, 1-based) of the planned cells, or auto (GitLab CI_NODE_INDEX/CI_NODE_TOTAL, "
                          "Kubernetes JOB_COMPLETION_INDEX with DMLCONFORM_SHARD_TOTAL); join the shards with `merge` "
                          "(docs/sharding.md)")
    run.add_argument("--shard-durations", default=None,
                     help="balance --shard with a durations file (a run writes REPORTS/results/durations.json; pass the "
                          "last run's; default: none)")
    run.set_defaults(func=cmd_run)

    add_backend_commands(sub)  # directml (pack, unpack): declared by the DirectML backend

    reports_default = "reports"
    for name, func, text in [("matrix", cmd_matrix, "write the conformance matrix (HTML, Markdown, JSON) from a run's results"),
                             ("report", cmd_report, "build the HTML report (Allure 3) and the matrix under the reports dir"),
                             ("gate", cmd_gate, "exit non-zero on unexpected failures or stale expectations")]:
        p = sub.add_parser(name, help=text)
        p.add_argument("--reports-dir", default=reports_default)
        p.set_defaults(func=func)
    sub.choices["report"].add_argument(
        "--report-detail", choices=REPORT_DETAILS, default=None,
        help="the tests the HTML report holds: failures (failures and divergences) or full (every test); "
             "default: what the run was asked for (`run --report-detail`), else failures")
    merge = sub.add_parser("merge", help="join the reports directories of a run's shards (run --shard I/N) into one, "
                                          "check every planned cell ran once, write the matrix and gate it")
    merge.add_argument("directories", nargs="+", metavar="DIR", help="a shard's reports directory (its results/, "
                                                                     "allure-results/, cases/)")
    merge.add_argument("--output", required=True, help="the merged reports directory (absent or empty)")
    merge.set_defaults(func=cmd_merge)
    compare = sub.add_parser("compare", help="compare two runs' matrix.json: new failures, fixed and vanished cells")
    compare.add_argument("base")
    compare.add_argument("new")
    compare.set_defaults(func=cmd_compare)
    return parser


def main(argv: list[str] | None = None) -> int:
    keep_freed_memory()
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and args.func is not cmd_run:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        if args.func is cmd_run:
            return cmd_run(args, extra)
        return args.func(args)
    except ExpectationError as exc:  # a broken expectation file: an input of the command, like its options
        print(f"dmlconform {args.command}: {exc.render()}", file=sys.stderr)
        return EXIT_USAGE
    except RunFileError as exc:  # a malformed results, plan, cells or completion file: one line, exit 2
        print(f"dmlconform {args.command}: {exc.render()}", file=sys.stderr)
        return EXIT_USAGE
    except SpecError as exc:
        print(exc.render(), file=sys.stderr)
        return EXIT_FAIL
    except UsageError as exc:
        print(f"dmlconform {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `dmlconform ... | head`: the reader left; nothing more to say
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main())
