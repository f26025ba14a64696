"""Report generation time for a run of 10,000 test results: the matrix (from 10,000 case records)
and the Allure 3 HTML report (from 10,000 Allure result files, a tenth of them failed with
attachments). Quoted in the closing note; the target is under a minute.

Run: .venv/bin/python benchmarks/bench_report.py [--results 10000]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.report.html import generate_report  # noqa: E402
from harness.report.matrix import build_matrix, write_matrix  # noqa: E402
from harness.run.results import CaseRecord, ResultWriter, read_records  # noqa: E402
from harness.spec.load import load_specs  # noqa: E402

SPECS = load_specs()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--results", type=int, default=10_000)
    args = parser.parse_args()
    ops = sorted(SPECS.operators)
    types = ["FLOAT32", "FLOAT16", "INT8", "UINT8", "INT32"]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        writer = ResultWriter(root / "results")
        alluredir = root / "allure-results"
        alluredir.mkdir()
        for i in range(args.results):
            op, t = ops[i % len(ops)], types[i % len(types)]
            status = "mismatch" if i % 10 == 0 else "pass"
            writer.write(CaseRecord("bench", op, "6.4", t, "valid", status, f"case{i}", "summary"))
            uid = str(uuid.uuid4())
            result = {"uuid": uid, "historyId": f"h{i}", "name": f"test_valid[{op}-{t}-{i}]", "fullName": f"bench#{i}",
                      "status": "failed" if status == "mismatch" else "passed", "start": 1, "stop": 2,
                      "labels": [{"name": "parentSuite", "value": "bench"}, {"name": "epic", "value": op},
                                 {"name": "feature", "value": "FL 6.4"}, {"name": "story", "value": t}],
                      "parameters": [{"name": "case", "value": str(i)}], "attachments": []}
            if status == "mismatch":
                result["statusDetails"] = {"message": f"{op} on bench at FL 6.4 (valid, {t}): mismatch: 1 of 4 elements differ"}
                (alluredir / f"{uid}-attachment.txt").write_text("index expected actual\n[0] 1.0 -1.0\n")
                result["attachments"] = [{"name": "mismatch table", "source": f"{uid}-attachment.txt", "type": "text/plain"}]
            (alluredir / f"{uid}-result.json").write_text(json.dumps(result))
        writer.close()
        start = time.perf_counter()
        cells = build_matrix(list(read_records(root / "results")), SPECS)
        write_matrix(cells, root)
        t_matrix = time.perf_counter() - start
        start = time.perf_counter()
        generate_report(alluredir, root / "allure-report", root / "history.jsonl")
        t_report = time.perf_counter() - start
        print(f"{args.results} results: matrix {t_matrix:.2f} s, Allure HTML report {t_report:.1f} s, total {t_matrix + t_report:.1f} s")


if __name__ == "__main__":
    main()
