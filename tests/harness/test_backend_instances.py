"""Backend instances (`--backend directml@1.10.1`): one backend class, several variants side by side
in one run, each under its own name in records, expectations and the matrix."""
import pytest

from harness.run.options import option_problem
from harness.run.registry import backend_entry_points, expectations_for, load_backend, split_instance
from harness.spec.load import load_specs

SPECS = load_specs()


def test_an_instance_name_is_the_backend_and_its_variant():
    assert split_instance("directml@1.10.1") == ("directml", "1.10.1")
    assert split_instance("directml") == ("directml", None)
    assert split_instance("directml@") == ("directml", None)


def test_a_backend_without_variants_refuses_one():
    with pytest.raises(ValueError, match="takes no variant"):
        load_backend("numpy@2", specs=SPECS)


def test_the_directml_instance_carries_its_dll_and_name():
    backend = load_backend("directml@1.10.1", specs=SPECS)
    assert backend.name == "directml@1.10.1" and backend.dll_name == "1.10.1"


def test_a_version_known_not_to_run_is_unavailable_with_the_reason():
    backend = load_backend("directml@1.5.1", specs=SPECS)
    ok, reason = backend.available()
    assert not ok and "1.5.1 does not run here" in reason and "wave lane count" in reason


def test_an_instance_has_its_backends_expectations():
    base = {e.id for e in expectations_for("directml").items}
    instance = expectations_for("directml@1.8.0")
    assert base and base <= {e.id for e in instance.items} and instance.backend == "directml@1.8.0"


@pytest.mark.parametrize("name,message", [("nosuch@1.0", "installed backends"), ("directml@", "names a variant")])
def test_bad_instance_names_are_refused_with_what_is_allowed(name, message):
    problem = option_problem(SPECS, backends=[name], known_backends=backend_entry_points())
    assert problem is not None and message in problem


def test_an_instance_probes_its_own_divergences_not_its_backends(tmp_path):
    """directml@1.10.1 inherits the DirectML expectations (a divergence it shares is explained), but
    their probes run on the newest DLL only: one an older DLL does not show is not stale there."""
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    def probes(backend: str) -> list[str]:
        proc = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--backend", backend, "--operator", "ELEMENT_WISE_POW",
                               "--reports-dir", str(tmp_path / backend), "--collect-only"],
                              cwd=root, capture_output=True, text=True, timeout=300)
        return [line for line in proc.stdout.splitlines() if "test_expectation_probe[" in line and "[NOTSET]" not in line]
    base_ids = {i.id for i in expectations_for("directml").items if i.operator == "ELEMENT_WISE_POW" and i.probe is not None}
    assert base_ids and all(any(i in line for line in probes("directml")) for i in base_ids)
    assert probes("directml@1.10.1") == []
