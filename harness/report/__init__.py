"""Stage 7, reporting: the conformance matrix, the gate, Allure results and the HTML report."""
