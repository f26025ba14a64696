"""The conformance suite of this checkout: the tests themselves live in the product
(harness/run/conformance.py, parametrized by the dmlconform pytest plugin), so that `dmlconform run`
from an installed package and `pytest tests/conformance` here collect the same cells."""
from harness.run.conformance import (test_example, test_expectation_probe, test_invalid,  # noqa: F401
                                     test_sweep, test_valid)
