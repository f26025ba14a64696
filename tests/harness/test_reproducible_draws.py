"""A derandomized cell draws the same cases whatever the process imported before it.

Hypothesis mixes literals harvested from imported non-library modules into its draws; the harness
pins that pool empty (harness/generate/reproducible.py). Without the pin, the same cell drew other
cases after a worker had imported more modules (CI runs of one tree met different divergences).
Two fresh interpreters draw one cell; the second first imports a local module full of literals.
"""
from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

from harness.generate.reproducible import local_constants_pinned, pin_local_constants

ROOT = Path(__file__).resolve().parents[2]

DRAW = """
import sys
sys.path[:0] = [{root!r}, {extra!r}]
if {import_extra}:
    import literal_rich_module  # a local module: Hypothesis would harvest its literals
from pathlib import Path
from hypothesis import settings
from harness.generate.strategies import valid_case_batches
from harness.run import drawn
from harness.run.profiles import register_profiles
from harness.spec.load import load_specs
register_profiles(Path({extra!r}))
settings.load_profile("ci")
spec = load_specs().operator("ACTIVATION_SCALED_ELU")
cases = drawn.drawn_cases(("cell",), lambda: valid_case_batches(spec, "6.4", "FLOAT32", per_descriptor=8),
                          settings())
print(" ".join(case.case_id for case in cases))
"""


def _draw(tmp_path: Path, import_extra: bool) -> list[str]:
    script = DRAW.format(root=str(ROOT), extra=str(tmp_path), import_extra=import_extra)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.split()


def test_a_derandomized_cell_draws_the_same_cases_after_other_imports(tmp_path):
    rng = random.Random(5)     # integers, floats and strings of every size Hypothesis might draw
    literals = [f"I{n} = {rng.choice([rng.randint(100, 5000), -rng.randint(100, 5000), rng.randint(2**20, 2**40)])}\n"
                f"F{n} = {rng.choice([rng.uniform(-5, 5), rng.uniform(1e-3, 1), 10 ** rng.uniform(-40, 38)])!r}\n"
                f"S{n} = 's{rng.randint(0, 10**6)}'\n" for n in range(300)]
    (tmp_path / "literal_rich_module.py").write_text("".join(literals))
    alone = _draw(tmp_path, import_extra=False)
    after_imports = _draw(tmp_path, import_extra=True)
    assert len(alone) >= 6
    assert alone == after_imports


def test_the_pin_is_idempotent_and_reported():
    pin_local_constants()
    pin_local_constants()
    assert local_constants_pinned()
