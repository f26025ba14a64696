"""A pytest plugin for tests/harness/test_run_keeps_previous.py: after the run's first test, every
write to its results file fails as on a file system remounted read-only (root writes through file
modes, so a chmod cannot show it)."""
import errno

_CONFIG = []


def pytest_configure(config):
    _CONFIG.append(config)


class _ReadOnly:
    def write(self, text):
        raise OSError(errno.EROFS, "Read-only file system")

    def flush(self):
        pass

    def close(self):
        pass


def pytest_runtest_logfinish(nodeid, location):
    config = _CONFIG[-1]
    writer = getattr(config, "dml_writer", None)
    if writer is not None:
        writer._file = _ReadOnly()
