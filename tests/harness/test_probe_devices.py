"""An expectation's probe on a device that cannot show the divergence: masked, not stale, where the
device conformed only through D3D liberties it took on the probe (a GPU flushes the denormal a probe
of 'denormal read as normal' feeds it); and an expectation seen only on named devices (`devices:`)
is neither probed nor used elsewhere. The worst-legal backend takes every liberty: it stands in
for a flushing GPU here."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from harness.judge.expectations import ExpectationSet, load_expectations
from harness.run.results import record_dicts

ROOT = Path(__file__).resolve().parents[2]

EXPECTATIONS = """\
backend: worst-legal
expectations:
  - id: reads-a-denormal-as-normal
    operator: ELEMENT_WISE_LOG
    data_types: [FLOAT32]
    when: "x < 1e-30"
    why: "A stand-in divergence whose probe feeds a denormal: a flushing device conforms through the flush."
    probe:
      types: {InputTensor: FLOAT32, OutputTensor: FLOAT32}
      inputs: {InputTensor: [1.401298464324817e-45]}
  - id: gone-for-good
    operator: ELEMENT_WISE_LOG
    data_types: [FLOAT32]
    when: "x == 2"
    why: "A stand-in divergence the backend does not show at all, with no liberty taken: stale."
    probe:
      types: {InputTensor: FLOAT32, OutputTensor: FLOAT32}
      inputs: {InputTensor: [2.0]}
  - id: seen-on-another-device
    operator: ELEMENT_WISE_LOG
    data_types: [FLOAT32]
    devices: [some-other-adapter]
    when: "x == 2"
    why: "Seen on another device only: not probed here."
    probe:
      types: {InputTensor: FLOAT32, OutputTensor: FLOAT32}
      inputs: {InputTensor: [2.0]}
"""


def _probe_run(tmp_path: Path, expectations_text: str) -> tuple[subprocess.CompletedProcess, dict[str, dict]]:
    """The suite's probes on the worst-legal backend with these expectations: the process and its
    probe records by expectation id."""
    expectations = tmp_path / "expectations"
    expectations.mkdir()
    (expectations / "worst-legal.yaml").write_text(expectations_text)
    proc = subprocess.run([sys.executable, "-m", "pytest", "harness/run/conformance.py", "-p", "no:cacheprovider", "-n", "0", "-q",
                           "--backend", "worst-legal", "--expectations-dir", str(expectations), "-k", "probe",
                           "--reports-dir", str(tmp_path / "reports")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    return proc, {r["expectation"]: r for r in record_dicts(tmp_path / "reports" / "results") if r.get("kind") == "probe"}


def test_a_masked_probe_is_unsupported_a_vanished_one_stale_another_devices_one_not_probed(tmp_path):
    proc, records = _probe_run(tmp_path, EXPECTATIONS)
    assert set(records) == {"reads-a-denormal-as-normal", "gone-for-good"}, proc.stdout[-3000:]
    masked = records["reads-a-denormal-as-normal"]
    assert masked["status"] == "unsupported" and "masked here, not stale" in masked["summary"]
    assert "fp32 denormal input flushed" in masked["summary"]
    assert records["gone-for-good"]["status"] == "stale-expectation"
    assert proc.returncode == 1 and "1 failed" in proc.stdout and "1 skipped" in proc.stdout


def test_devices_keep_an_expectation_to_the_devices_it_was_seen_on(tmp_path):
    (tmp_path / "worst-legal.yaml").write_text(EXPECTATIONS)
    known = load_expectations("worst-legal", tmp_path)
    assert isinstance(known, ExpectationSet) and len(known.items) == 3
    here = known.on_device("DirectML 1.15.4.0 on NVIDIA H200 (Vulkan: hardware)")
    assert [i.id for i in here.items] == ["reads-a-denormal-as-normal", "gone-for-good"]
    there = known.on_device("DirectML 1.15.4.0 on Some-Other-Adapter 2")  # case-insensitive
    assert len(there.items) == 3
    assert known.for_backend(lambda: "on NVIDIA H200").items == here.items
    everywhere = ExpectationSet("worst-legal", [i for i in known.items if not i.devices])

    def never_asked() -> str:  # no expectation names devices: the device is not asked (it may start one)
        raise AssertionError("version() asked")
    assert everywhere.for_backend(never_asked) is everywhere


HANG_EXPECTATIONS = """\
backend: worst-legal
expectations:
  - id: three-element-log-hangs
    operator: ELEMENT_WISE_LOG
    status: crashed
    hangs: true
    devices: [worst legal device]
    descriptor_when: "InputTensor.Sizes[0] == 3"
    reason_contains: "hang in execute"
    why: "A stand-in hang of three-element descriptors on this device: its own probe is sent (and, the device not hanging, is stale)."
    probe:
      types: {InputTensor: FLOAT32, OutputTensor: FLOAT32}
      tensor_sizes: {InputTensor: [3], OutputTensor: [3]}
      inputs: {InputTensor: [1.0, 2.0, 3.0]}
  - id: three-elements-wrong
    operator: ELEMENT_WISE_LOG
    data_types: [FLOAT32]
    when: "x == 2"
    why: "A stand-in divergence whose probe has a descriptor the device hangs on: not sent, masked, not stale."
    probe:
      types: {InputTensor: FLOAT32, OutputTensor: FLOAT32}
      tensor_sizes: {InputTensor: [3], OutputTensor: [3]}
      inputs: {InputTensor: [2.0, 2.0, 2.0]}
"""


def test_a_probe_whose_descriptor_is_a_known_hang_is_not_sent_and_masked(tmp_path):
    proc, records = _probe_run(tmp_path, HANG_EXPECTATIONS)
    assert set(records) == {"three-element-log-hangs", "three-elements-wrong"}, proc.stdout[-3000:]
    masked = records["three-elements-wrong"]
    assert masked["status"] == "unsupported", masked
    assert "known hang here (three-element-log-hangs)" in masked["summary"] and "not-run" in masked["tags"]
    assert records["three-element-log-hangs"]["status"] == "stale-expectation"  # its own probe was sent: no hang
