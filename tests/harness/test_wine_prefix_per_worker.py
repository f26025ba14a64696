"""Each pytest-xdist worker's DirectML runners get a Wine prefix, hence a wineserver, of their own
(backends/directml/session.py: Wine 8 makes every wait a call to the prefix's one wineserver)."""
from __future__ import annotations

import os
import time
from pathlib import Path

from backends.directml.session import PRIVATE_PREFIX_STAMP, WineSession


class _Stack:
    def __init__(self, root: Path) -> None:
        self.prefix = root / "wineprefix"


def _prefix(root: Path) -> Path:
    base = root / "wineprefix"
    (base / "drive_c" / "windows").mkdir(parents=True)
    (base / "system.reg").write_text("WINE REGISTRY Version 2\n")
    (base / "drive_c" / "windows" / "a.dll").write_bytes(b"MZ")
    (base / "dosdevices").mkdir()
    os.symlink("../drive_c", base / "dosdevices" / "c:")
    return base


def test_a_worker_gets_a_hard_linked_copy_of_the_prefix(tmp_path):
    base = _prefix(tmp_path)
    session = WineSession(_Stack(tmp_path), vulkan=None, worker="gw3")  # type: ignore[arg-type]
    own = session.private_prefix()
    assert own == tmp_path / "wineprefix-gw3"
    assert (own / "drive_c" / "windows" / "a.dll").stat().st_ino == (base / "drive_c" / "windows" / "a.dll").stat().st_ino
    assert os.readlink(own / "dosdevices" / "c:") == "../drive_c"  # links stay links
    assert (own / PRIVATE_PREFIX_STAMP).read_text() == str(base)
    assert os.stat(own).st_ino != os.stat(base).st_ino  # another directory: another wineserver


def test_the_copy_is_made_again_when_the_prefix_is_newer(tmp_path):
    base = _prefix(tmp_path)
    session = WineSession(_Stack(tmp_path), vulkan=None, worker="gw0")  # type: ignore[arg-type]
    own = session.private_prefix()
    (own / "stale").write_text("x")
    assert session.private_prefix() == own and (own / "stale").exists()  # up to date: kept
    later = time.time() + 5
    os.utime(base / "system.reg", (later, later))
    assert session.private_prefix() == own and not (own / "stale").exists()


def test_no_worker_or_an_odd_name_shares_the_prefix(tmp_path):
    _prefix(tmp_path)
    assert WineSession(_Stack(tmp_path), vulkan=None, worker="").private_prefix() is None  # type: ignore[arg-type]
    assert WineSession(_Stack(tmp_path), vulkan=None, worker="../x").private_prefix() is None  # type: ignore[arg-type]
    assert not (tmp_path / "wineprefix-../x").exists()


def test_a_copy_in_use_is_set_aside_not_deleted_when_made_again(tmp_path):
    """Another run's runners of the same worker name may be using the old copy (their wineserver is
    keyed to its directory): it is renamed away, whole, and the new copy takes its name; set-aside
    copies go once they are old."""
    base = _prefix(tmp_path)
    session = WineSession(_Stack(tmp_path), vulkan=None, worker="gw1")  # type: ignore[arg-type]
    own = session.private_prefix()
    assert own is not None
    (own / "in-use").write_text("a live wineserver's prefix")
    old_inode = os.stat(own).st_ino
    later = time.time() + 5
    os.utime(base / "system.reg", (later, later))
    assert session.private_prefix() == own and not (own / "in-use").exists()
    aside = list(tmp_path.glob(".wineprefix-gw1.stale-*"))
    assert len(aside) == 1 and os.stat(aside[0]).st_ino == old_inode and (aside[0] / "in-use").exists()
    assert not list(tmp_path.glob(".wineprefix-gw1.new-*"))
    ancient = tmp_path / ".wineprefix-gw1.stale-1000-1"  # set aside in 1970: removed at the next refresh
    ancient.mkdir()
    os.utime(base / "system.reg", (later + 5, later + 5))
    session.private_prefix()
    assert not ancient.exists() and len(list(tmp_path.glob(".wineprefix-gw1.stale-*"))) == 2
