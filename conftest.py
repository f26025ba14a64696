"""Root pytest configuration: command-line options of the conformance suite live in tests/conftest.py."""
