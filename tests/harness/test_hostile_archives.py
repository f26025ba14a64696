"""Hostile archives for `dmlconform directml unpack` end in one clear error, and write nothing
outside DEST nor a half-unpacked DEST (backends/directml/unpack.py, unpack()).

Each archive is built here with tarfile (the 1 GiB bombs as concatenated compressed streams of
zeros, 0.2 MiB with xz and 5 MiB with gzip on disk). For every one of HOSTILE the command (`python -m harness.cli
directml unpack` in a subprocess for the main classes, pack.main in-process elsewhere):

- exits 2 with one line on stderr that holds the expected message, and no traceback;
- leaves a sentinel directory beside DEST (the symlinks' and hard links' target) unchanged, to
  its files' contents and times, and writes nothing in /etc;
- leaves no DEST (or DEST as it was) and no temporary directory beside it.

Also: setuid/setgid/sticky and group/world-write bits are stripped (such an archive unpacks), an
archive of in-tree relative symlinks unpacks and its links work, DEST that is not empty is refused
unless --force, and the kinds of input tried are counted (test_every_class_tries_several_inputs).
The real stack's archive (what pack writes) is unpacked by tests/harness/test_directml_portable.py.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import lzma
import os
import resource
import stat
import subprocess
import sys
import tarfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

from backends.directml import pack
from backends.directml import unpack as unpack_module
from backends.directml.stack import MANIFEST

ROOT = Path(__file__).resolve().parents[2]
GiB = 2**30
ETC_PROBE = f"dmlconform-hostile-{os.getpid()}"
MANIFEST_DATA = b'{"format": 1}\n'


# --- building archives ------------------------------------------------------------------------------

def _member(name: str, type_: bytes = tarfile.REGTYPE, data: bytes = b"", *, linkname: str = "", mode: int = 0o644,
            size: int | None = None) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode, info.mtime = type_, linkname, mode, 1_700_000_000
    info.size = len(data) if size is None else size
    if type_ in (tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE, tarfile.BLKTYPE, tarfile.FIFOTYPE):
        info.size = 0
    return info, data


def _file(name: str, data: bytes = b"data\n", mode: int = 0o644):
    return _member(name, data=data, mode=mode)


def _dir(name: str, mode: int = 0o755):
    return _member(name, tarfile.DIRTYPE, mode=mode)


def _symlink(name: str, target: str):
    return _member(name, tarfile.SYMTYPE, linkname=target, mode=0o777)


def _hardlink(name: str, target: str):
    return _member(name, tarfile.LNKTYPE, linkname=target)


def _manifest():
    return _file(MANIFEST, MANIFEST_DATA)


def _tar_bytes(members, fmt: int = tarfile.GNU_FORMAT) -> bytes:
    """A tar stream of the members, in order, exactly as given (tarfile normalizes nothing here)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=fmt) as tf:
        for info, data in members:
            tf.addfile(info, io.BytesIO(data) if info.size > 0 else None)
    return out.getvalue()


def _write(path: Path, members, compression: str = "xz", fmt: int = tarfile.GNU_FORMAT) -> Path:
    raw = _tar_bytes(members, fmt)
    path.write_bytes({"xz": lzma.compress, "gz": gzip.compress, "": bytes}[compression](raw))
    return path


def _header(info: tarfile.TarInfo, fmt: int = tarfile.GNU_FORMAT) -> bytes:
    return info.tobuf(format=fmt)


def _zero_bomb(path: Path, compression: str, size: int = GiB, data: bool = True, header_type: bytes = tarfile.REGTYPE) -> Path:
    """A manifest, then a member (or extended header) declaring `size` bytes followed (if `data`) by
    `size` zeros, as a concatenation of compressed streams: one of the headers, one per MiB of
    zeros (the same few hundred bytes each) and one of the end blocks. Valid xz and gzip (both
    allow several streams in a file); built in milliseconds, 0.2 MiB (xz) or 5 MiB (gzip) on disk."""
    compress = {"xz": lambda b: lzma.compress(b, preset=0), "gz": lambda b: gzip.compress(b, 1)}[compression]
    head = _tar_bytes([_manifest()])[:512 + 512]  # the manifest's header and its one block of data (no end blocks)
    info = tarfile.TarInfo("zeros.bin" if header_type == tarfile.REGTYPE else "././@PaxHeader")
    info.type, info.size = header_type, size
    with open(path, "wb") as f:
        f.write(compress(head + _header(info, tarfile.GNU_FORMAT if header_type == tarfile.REGTYPE else tarfile.USTAR_FORMAT)))
        if data:
            chunk = compress(bytes(2**20))
            for _ in range(size // 2**20):
                f.write(chunk)
        f.write(compress(bytes(10240)))
    return path


# --- the world around DEST ------------------------------------------------------------------------------

@dataclass
class World:
    tmp: Path
    outside: Path  # the sentinel: every escape aims here (or at /etc)
    dest: Path
    archives: Path

    def snapshot(self) -> dict:
        """Everything under tmp except the archives: type, mode, size, mtime, content hash, link target."""
        found = {}
        for root, dirs, files in os.walk(self.tmp):
            if Path(root) == self.archives:
                dirs[:] = []
                continue
            for name in dirs + files:
                p = Path(root) / name
                st = os.lstat(p)
                digest = hashlib.sha256(p.read_bytes()).hexdigest() if stat.S_ISREG(st.st_mode) else None
                found[str(p)] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_size, st.st_mtime_ns, digest,
                                 os.readlink(p) if stat.S_ISLNK(st.st_mode) else None)
        return found


@pytest.fixture
def world(tmp_path) -> World:
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "victim.txt").write_text("do not touch\n")
    (outside / "sub" / "deep.txt").write_text("nor this\n")
    os.utime(outside / "victim.txt", (1_600_000_000, 1_600_000_000))
    archives = tmp_path / "archives"
    archives.mkdir()
    return World(tmp_path, outside, tmp_path / "dest", archives)


# --- the hostile inputs -----------------------------------------------------------------------------------

@dataclass
class Hostile:
    kind: str          # the class, counted by test_every_class_tries_several_inputs
    name: str
    build: Callable[[World], Path]
    message: str       # a stable substring of the one line on stderr
    options: list[str] = field(default_factory=list)
    cli: bool = False  # run the real command line in a subprocess (else pack.main in-process)


def _a(w: World, name: str, members, compression: str = "xz", fmt: int = tarfile.GNU_FORMAT) -> Path:
    return _write(w.archives / f"{name}.tar{'.' + compression if compression else ''}", members, compression, fmt)


HOSTILE: list[Hostile] = [
    # a symlink (to outside, or inside), then a member written through it
    Hostile("symlink escape", "relative link to outside, then a file through it",
            lambda w: _a(w, "rel", [_manifest(), _symlink("evil", "../outside"), _file("evil/victim.txt", b"pwned")]),
            "member 'evil' refused: symlink to '../outside' leads outside the destination", cli=True),
    Hostile("symlink escape", "absolute link to the sentinel, then a file through it",
            lambda w: _a(w, "abs", [_manifest(), _symlink("evil", str(w.outside)), _file("evil/victim.txt", b"pwned")]),
            "an absolute target", cli=True),
    Hostile("symlink escape", "link to /etc, then a file through it",
            lambda w: _a(w, "etc", [_manifest(), _symlink("etc", "/etc"), _file(f"etc/{ETC_PROBE}", b"pwned")]),
            "member 'etc' refused: symlink to '/etc': an absolute target", cli=True),
    Hostile("symlink escape", "deep relative link climbing out",
            lambda w: _a(w, "deep", [_manifest(), _dir("a"), _dir("a/b"), _symlink("a/b/up", "../../../outside/sub"),
                                     _file("a/b/up/deep.txt", b"pwned")]),
            "member 'a/b/up' refused: symlink to '../../../outside/sub' leads outside"),
    Hostile("symlink escape", "in-tree link to a directory, then a file through it",
            lambda w: _a(w, "intree", [_manifest(), _dir("real"), _symlink("alias", "real"), _file("alias/x", b"x")]),
            "member 'alias/x' refused: its parent 'alias' is a symlink of this archive", cli=True),
    Hostile("symlink escape", "the prefix's Z: drive (-> /), then a file through it",
            lambda w: _a(w, "zdrive", [_manifest(), _dir("wineprefix"), _dir("wineprefix/dosdevices"),
                                       _symlink("wineprefix/dosdevices/z:", "/"),
                                       _file(f"wineprefix/dosdevices/z:{w.outside}/victim.txt", b"pwned")]),
            "its parent 'wineprefix/dosdevices/z:' is a symlink of this archive", cli=True),
    Hostile("symlink escape", "a second absolute link named z: elsewhere",
            lambda w: _a(w, "zelse", [_manifest(), _dir("d"), _symlink("d/z:", "/")]),
            "member 'd/z:' refused: symlink to '/': an absolute target"),
    Hostile("symlink escape", "Z: drive pointing elsewhere than /",
            lambda w: _a(w, "zother", [_manifest(), _symlink("wineprefix/dosdevices/z:", str(w.outside))]),
            "an absolute target"),
    # chains of links, each inside on its own
    Hostile("symlink chain", "up -> .., then esc -> up/.. (outside through up)",
            lambda w: _a(w, "chain1", [_manifest(), _dir("sub"), _symlink("sub/up", ".."), _symlink("sub/esc", "up/..")]),
            "member 'sub/esc' refused: symlink to 'up/..' leads outside the destination through other symlinks", cli=True),
    Hostile("symlink chain", "the same, the dangling link first",
            lambda w: _a(w, "chain2", [_manifest(), _dir("sub"), _symlink("sub/esc", "up/../outside"), _symlink("sub/up", "..")]),
            "member 'sub/esc' refused: symlink to 'up/../outside' leads outside the destination through other symlinks"),
    Hostile("symlink chain", "l1 -> l2, l2 -> ../outside, then a file through l1",
            lambda w: _a(w, "chain3", [_manifest(), _symlink("l1", "l2"), _symlink("l2", "../outside"), _file("l1/victim.txt", b"x")]),
            "member 'l2' refused: symlink to '../outside' leads outside"),
    Hostile("symlink chain", "a link through the Z: drive",
            lambda w: _a(w, "chain4", [_manifest(), _dir("wineprefix"), _dir("wineprefix/dosdevices"),
                                       _symlink("wineprefix/dosdevices/z:", "/"),
                                       _symlink("via", f"wineprefix/dosdevices/z:{w.outside}")]),
            "member 'via' refused: symlink to", cli=True),  # how it says so: Python's data filter may come first
    Hostile("symlink chain", "two links, then a file through the second",
            lambda w: _a(w, "chain5", [_manifest(), _dir("d"), _symlink("l1", "d"), _symlink("l2", "l1"), _file("l2/f", b"x")]),
            "member 'l2/f' refused: its parent 'l2' is a symlink"),
    # hard links
    Hostile("hard link", "to an absolute outside path",
            lambda w: _a(w, "hl1", [_manifest(), _hardlink("hl", str(w.outside / "victim.txt"))]),
            "member 'hl' refused: a hard link (pack writes none)", cli=True),
    Hostile("hard link", "to ../outside",
            lambda w: _a(w, "hl2", [_manifest(), _hardlink("hl", "../outside/victim.txt")]), "a hard link"),
    Hostile("hard link", "to an earlier member, then a regular member overwriting it",
            lambda w: _a(w, "hl3", [_manifest(), _file("a", b"a"), _hardlink("b", "a"), _file("b", b"pwned")]),
            "member 'b' refused: a hard link", cli=True),
    Hostile("hard link", "a symlink inside, then a regular member of its name",
            lambda w: _a(w, "hl4", [_manifest(), _symlink("x", MANIFEST), _file("x", b"pwned")]),
            "member 'x' refused: a second member of the same name"),
    Hostile("hard link", "a regular member twice",
            lambda w: _a(w, "hl5", [_manifest(), _file("a", b"a"), _file("a", b"b")]),
            "member 'a' refused: a second member of the same name"),
    # names
    Hostile("path", "../ name", lambda w: _a(w, "dotdot", [_manifest(), _file("../outside/victim.txt", b"pwned")]),
            "member '../outside/victim.txt' refused: '..' in the path", cli=True),
    Hostile("path", "a/../../ name", lambda w: _a(w, "dotdot2", [_manifest(), _file("a/../../outside/x", b"pwned")]),
            "'..' in the path"),
    Hostile("path", "absolute name", lambda w: _a(w, "absname", [_manifest(), _file(str(w.outside / "victim.txt"), b"pwned")]),
            "refused: an absolute path", cli=True),
    Hostile("path", "absolute name, pax format",
            lambda w: _a(w, "abspax", [_manifest(), _file(str(w.outside / "new.txt"), b"x")], fmt=tarfile.PAX_FORMAT),
            "refused: an absolute path"),
    Hostile("path", "name longer than the limit", lambda w: _a(w, "long", [_manifest(), _file("a/" * 600 + "x")]),
            "a name longer than 1024 bytes"),
    Hostile("path", "deeper than the limit", lambda w: _a(w, "depth", [_manifest(), _file("d/" * 60 + "x")]),
            "deeper than 48 directories"),
    Hostile("path", "a component over NAME_MAX", lambda w: _a(w, "comp", [_manifest(), _file("x" * 300)]),
            "a path component longer than 255 bytes"),
    # member types
    Hostile("special file", "character device", lambda w: _a(w, "chr", [_manifest(), _member("null", tarfile.CHRTYPE)]),
            "member 'null' refused: a character device; only regular files, directories and symlinks", cli=True),
    Hostile("special file", "block device", lambda w: _a(w, "blk", [_manifest(), _member("sda", tarfile.BLKTYPE)]),
            "member 'sda' refused: a block device"),
    Hostile("special file", "FIFO", lambda w: _a(w, "fifo", [_manifest(), _member("pipe", tarfile.FIFOTYPE)]),
            "member 'pipe' refused: a FIFO", cli=True),
    Hostile("special file", "contiguous file", lambda w: _a(w, "cont", [_manifest(), _member("c", tarfile.CONTTYPE, b"x")]),
            "member 'c' refused: a contiguous file"),
    Hostile("special file", "unknown type", lambda w: _a(w, "unknown", [_manifest(), _member("u", b"Q", b"x")]),
            "member 'u' refused: an unknown member type b'Q'"),
    Hostile("special file", "GNU sparse file", lambda w: _a(w, "volume", [_manifest(), _member("vol", tarfile.GNUTYPE_SPARSE, b"x")]),
            "member 'vol' refused: a sparse file"),
    # malformed members
    Hostile("malformed", "a negative size (GNU base-256)",
            lambda w: _a(w, "negative", [_manifest(), _member("neg", data=b"", size=-4096)]), "member 'neg' refused: a negative size"),
    Hostile("malformed", "the destination itself as a symlink",
            lambda w: _a(w, "rootlink", [_manifest(), _symlink(".", "sub")]), "refused: the destination itself as a non-directory"),
    Hostile("malformed", "a NUL byte in a pax path",
            lambda w: _a(w, "nul", [_manifest(), _pax(_file("ok", b"x"), path="ok\0/../../outside/x")],
                                    fmt=tarfile.PAX_FORMAT),
            "refused: a NUL byte in the name"),
    Hostile("malformed", "a directory member after a file of its name",
            lambda w: _a(w, "dirfile", [_manifest(), _file("x", b"x"), _dir("x")]), "member 'x' refused: a second member"),
    # bombs and bounds
    Hostile("bomb", "1 GiB of zeros, xz", lambda w: _zero_bomb(w.archives / "bomb.tar.xz", "xz"),
            "limit: member 'zeros.bin' (1.0 GiB) takes the unpacked data over the limit of 64.0 MiB (--max-bytes",
            ["--max-bytes", "64M"], cli=True),
    Hostile("bomb", "1 GiB of zeros, gzip", lambda w: _zero_bomb(w.archives / "bomb.tar.gz", "gz"),
            "limit: member 'zeros.bin' (1.0 GiB) takes the unpacked data over the limit of 64.0 MiB (--max-bytes",
            ["--max-bytes", "64M"], cli=True),
    Hostile("bomb", "a member declaring 9 GiB (no data): the default limits, nothing read",
            lambda w: _zero_bomb(w.archives / "declared.tar.xz", "xz", size=9 * GiB, data=False),
            "limit: member 'zeros.bin' (9.0 GiB) takes the unpacked data over the limit of 8.0 GiB (--max-bytes", cli=True),
    Hostile("bomb", "a member declaring 5 GiB (no data): the default one-member limit, nothing read",
            lambda w: _zero_bomb(w.archives / "declared5.tar.gz", "gz", size=5 * GiB, data=False),
            "limit: member 'zeros.bin' declares 5.0 GiB, over the limit of 4.0 GiB for one member"),
    Hostile("bomb", "many members over --max-bytes, some written before",
            lambda w: _a(w, "many", [_manifest()] + [_file(f"f{i}", bytes(300 * 1024)) for i in range(8)]),
            "limit: member 'f3' (300.0 KiB) takes the unpacked data over the limit of 1.0 MiB", ["--max-bytes", "1M"]),
    Hostile("bomb", "a pax header declaring 1 GiB",
            lambda w: _zero_bomb(w.archives / "pax.tar.xz", "xz", header_type=tarfile.XHDTYPE),
            "limit: an extended header at offset 1024 declares 1.0 GiB (at most 64.0 KiB)", cli=True),
    Hostile("bomb", "more members than --max-members",
            lambda w: _a(w, "count", [_manifest()] + [_file(f"f{i}", b"") for i in range(60)]),
            "limit: more than 50 members (--max-members)", ["--max-members", "50"], cli=True),
    Hostile("bomb", "a gzip stream of headers only (more than the member count)",
            lambda w: _a(w, "countgz", [_manifest()] + [_dir(f"d{i}") for i in range(300)], "gz"),
            "limit: more than 100 members", ["--max-members", "100"]),
    # truncated
    Hostile("truncated", "xz cut in half", lambda w: _cut(_a(w, "tx", _noise_members(), "xz"), 0.5),
            "truncated: the xz stream ends early", cli=True),
    Hostile("truncated", "gzip cut in half", lambda w: _cut(_a(w, "tg", _noise_members(), "gz"), 0.5),
            "truncated: the gzip stream ends early"),
    Hostile("truncated", "plain tar cut inside a member's data", lambda w: _cut(_a(w, "tp", _noise_members(), ""), 0.5),
            "truncated"),
    Hostile("truncated", "plain tar cut at a header (no end blocks)", lambda w: _cut_blocks(_a(w, "tb", _noise_members(), "")),
            "truncated: the archive ends after"),
    Hostile("truncated", "xz of a tar that lacks its end blocks",
            lambda w: _recompress(_cut_blocks(_a(w, "tbx", _noise_members(), ""))), "truncated: the archive ends after"),
    # not an archive
    Hostile("foreign", "a text file named .tar.xz", lambda w: _text(w.archives / "text.tar.xz", b"this is not an archive\n" * 40),
            "not a tar archive, and not xz, gzip or bzip2 compressed", cli=True),
    Hostile("foreign", "a short text file", lambda w: _text(w.archives / "short.tar.xz", b"hello\n"),
            "not a tar archive, and not xz, gzip or bzip2 compressed"),
    Hostile("foreign", "an empty file", lambda w: _text(w.archives / "empty.tar.xz", b""), "an empty file, not an archive"),
    Hostile("foreign", "xz of a text file", lambda w: _text(w.archives / "xztext.tar.xz", lzma.compress(b"plain text\n" * 100)),
            "not a tar archive inside the xz compression"),
    Hostile("foreign", "zstd signature", lambda w: _text(w.archives / "z.tar.zst", b"\x28\xb5\x2f\xfd" + bytes(600)),
            "zstd-compressed: unpack reads tar archives compressed with xz", cli=True),
    Hostile("foreign", "a zip file", lambda w: _text(w.archives / "a.zip", b"PK\x03\x04" + bytes(600)), "a zip file: unpack reads"),
    Hostile("foreign", "random bytes", lambda w: _text(w.archives / "random.tar.xz", os.urandom(4096)), "not a tar archive"),
    Hostile("foreign", "a directory", lambda w: w.archives, "not a file"),
    Hostile("foreign", "no such file", lambda w: w.archives / "missing.tar.xz", "not found or not a file"),
    Hostile("foreign", "a tar without the manifest", lambda w: _a(w, "nomanifest", [_file("readme", b"x")]),
            "not a dmlconform DirectML stack (no manifest.json); nothing unpacked"),
]


def _pax(member, **headers):
    """The member with pax headers (written as given, a NUL byte too)."""
    member[0].pax_headers = headers
    return member


def _noise_members():
    return [_manifest(), _dir("d")] + [_file(f"d/f{i}", os.urandom(20_000)) for i in range(6)]


def _cut(path: Path, fraction: float) -> Path:
    data = path.read_bytes()
    cut = int(len(data) * fraction)
    path.write_bytes(data[:cut - cut % 512 + 100] if path.suffix == ".tar" else data[:cut])
    return path


def _cut_blocks(path: Path) -> Path:
    """A plain tar without its end blocks (and padding), cut right after a member's data."""
    data = path.read_bytes()
    with tarfile.open(path) as tf:
        last = tf.getmembers()[-1]
    path.write_bytes(data[:last.offset_data + (last.size + 511) // 512 * 512])
    return path


def _recompress(path: Path) -> Path:
    out = path.with_suffix(".tar.xz")
    out.write_bytes(lzma.compress(path.read_bytes()))
    return out


def _text(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


# --- running unpack ---------------------------------------------------------------------------------

def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 * GiB, 2 * GiB))


def _unpack_cli(archive: Path, dest: Path, *options: str) -> tuple[int, str, str]:
    out = subprocess.run([sys.executable, "-m", "harness.cli", "directml", "unpack", str(archive), str(dest), *options],
                         capture_output=True, text=True, cwd=ROOT, timeout=60, preexec_fn=_limit_memory)
    return out.returncode, out.stdout, out.stderr


def _unpack_inprocess(archive: Path, dest: Path, *options: str, capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    code = pack.main(["unpack", str(archive), str(dest), *options])
    out = capsys.readouterr()
    return code, out.out, out.err


def _tried() -> Counter:
    return Counter(h.kind for h in HOSTILE)


@pytest.mark.parametrize("hostile", HOSTILE, ids=[f"{h.kind}: {h.name}" for h in HOSTILE])
def test_hostile_archive_is_refused_with_one_clear_line(hostile: Hostile, world: World, capsys):
    archive = hostile.build(world)
    before = world.snapshot()
    start = time.perf_counter()
    if hostile.cli:
        code, out, err = _unpack_cli(archive, world.dest, *hostile.options)
    else:
        code, out, err = _unpack_inprocess(archive, world.dest, *hostile.options, capsys=capsys)
    elapsed = time.perf_counter() - start
    assert code == 2, (code, out, err)
    assert "Traceback" not in out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"dmlconform directml unpack: {archive}: "), err
    assert hostile.message in lines[0], lines[0]
    assert world.snapshot() == before  # nothing outside DEST changed, no temporary directory left beside it
    assert not world.dest.exists()  # nor a half-written DEST
    assert not Path("/etc", ETC_PROBE).exists()
    assert elapsed < 30


def test_every_class_tries_several_inputs():
    tried = _tried()
    assert set(tried) == {"symlink escape", "symlink chain", "hard link", "path", "special file", "malformed", "bomb", "truncated",
                          "foreign"}
    assert all(n >= 3 for n in tried.values()), tried
    assert sum(h.cli for h in HOSTILE) >= 15


def test_bombs_are_what_they_claim(world):
    """The 1 GiB archives are small on disk and hold a valid tar header declaring 1 GiB of data
    (the check reads the headers only)."""
    for compression in ("xz", "gz"):
        bomb = _zero_bomb(world.archives / f"b.tar.{compression}", compression)
        assert bomb.stat().st_size < 6 * 2**20  # deflate's ratio is at most about 1000:1; xz: 0.2 MiB
        with tarfile.open(bomb, f"r|{compression}") as tf:
            first, second = tf.next(), tf.next()
            assert first is not None and first.name == MANIFEST
            assert second is not None and second.name == "zeros.bin" and second.size == GiB


def test_a_bomb_within_its_limits_streams_its_zeros(world, capsys):
    """The same construction at 8 MiB unpacks when the limit allows it (so the refusals above come
    from the limit, not from a malformed archive), and stops at a lower limit."""
    bomb = _zero_bomb(world.archives / "small.tar.gz", "gz", size=8 * 2**20)
    code, _, err = _unpack_inprocess(bomb, world.dest, "--max-bytes", "16M", capsys=capsys)
    assert code == 0, err
    assert (world.dest / "zeros.bin").stat().st_size == 8 * 2**20
    code, _, err = _unpack_inprocess(bomb, world.tmp / "dest2", "--max-bytes", "4M", capsys=capsys)
    assert code == 2 and "over the limit of 4.0 MiB" in err and not (world.tmp / "dest2").exists()


def test_stream_cap_stops_a_stream_of_headers(world, capsys, monkeypatch):
    """Bytes that are neither members' data nor counted members (long-name headers here) stop at
    --max-bytes plus HEADER_ALLOWANCE (lowered here)."""
    monkeypatch.setattr(unpack_module, "HEADER_ALLOWANCE", 64 * 1024)
    archive = _a(world, "headers", [_manifest()] + [_dir(f"{'n' * 200}{i}") for i in range(200)])
    before = world.snapshot()
    code, _, err = _unpack_inprocess(archive, world.dest, "--max-bytes", "1K", capsys=capsys)
    assert code == 2 and "limit: the archive decompresses to more than 65.0 KiB" in err, err
    assert world.snapshot() == before and not world.dest.exists()


def test_member_count_limit_is_a_module_constant_too(world, monkeypatch):
    monkeypatch.setattr(unpack_module, "MAX_MEMBERS", 10)
    archive = _a(world, "count2", [_manifest()] + [_file(f"f{i}") for i in range(20)])
    with pytest.raises(unpack_module.UnpackError, match="more than 10 members"):
        unpack_module.unpack(archive, world.dest)
    assert not world.dest.exists()


def test_default_limits():
    limits = unpack_module.Limits()
    assert (limits.max_bytes, limits.max_members, limits.max_member_bytes) == (8 * GiB, 200_000, 4 * GiB)


def test_setuid_setgid_sticky_and_world_write_bits_are_stripped(world, capsys):
    archive = _a(world, "modes", [_manifest(), _file("suid", b"#!/bin/sh\n", 0o4755), _file("sgid", b"x", 0o2755),
                                  _file("world", b"x", 0o666 | 0o002), _file("readonly", b"x", 0o444),
                                  _dir("sticky", 0o1777), _file("sticky/f", b"x", 0o6777)])
    code, _, err = _unpack_inprocess(archive, world.dest, capsys=capsys)
    assert code == 0, err
    modes = {p: stat.S_IMODE(os.lstat(world.dest / p).st_mode) for p in ("suid", "sgid", "world", "readonly", "sticky", "sticky/f")}
    assert modes == {"suid": 0o755, "sgid": 0o755, "world": 0o644, "readonly": 0o644, "sticky": 0o755, "sticky/f": 0o755}


def test_in_tree_symlinks_unpack_and_work(world):
    """What pack writes: relative links inside (a library's soname link, a directory link, the
    prefix's c: and Z: drives), directories, files; through the real command line."""
    archive = _a(world, "good", [
        _dir("."), _manifest(), _dir("lib"), _file("lib/libfoo.so.1.0", b"ELF..."), _symlink("lib/libfoo.so.1", "libfoo.so.1.0"),
        _dir("wineprefix"), _dir("wineprefix/drive_c"), _file("wineprefix/drive_c/hello.txt", b"hi"),
        _dir("wineprefix/dosdevices"), _symlink("wineprefix/dosdevices/c:", "../drive_c"),
        _symlink("wineprefix/dosdevices/z:", "/"), _dir("wineprefix/drive_c/windows"),
        _dir("wineprefix/drive_c/windows/system32"),
        _symlink("wineprefix/drive_c/windows/system32/libfoo.dll", "../../../../lib/libfoo.so.1"),
        _file("later/implicit/parent.txt", b"p"), _dir("later"),
    ])
    before = world.snapshot()
    code, out, err = _unpack_cli(archive, world.dest)
    assert code == 0, err
    assert "unpacked to" in out and not err
    d = world.dest
    assert (d / "lib/libfoo.so.1").read_bytes() == b"ELF..."
    assert os.readlink(d / "lib/libfoo.so.1") == "libfoo.so.1.0"
    assert (d / "wineprefix/dosdevices/c:/hello.txt").read_text() == "hi"
    assert os.readlink(d / "wineprefix/dosdevices/z:") == "/"
    assert (d / "wineprefix/drive_c/windows/system32/libfoo.dll").read_bytes() == b"ELF..."
    assert (d / "later/implicit/parent.txt").read_bytes() == b"p"
    assert (d / MANIFEST).read_bytes() == MANIFEST_DATA
    after = {k: v for k, v in world.snapshot().items() if not k.startswith(str(d))}
    assert after == before
    assert sorted(p.name for p in world.tmp.iterdir()) == ["archives", "dest", "outside"]


def test_dest_not_empty_is_refused_unless_force(world, capsys):
    archive = _a(world, "ok", [_manifest(), _file("new.txt", b"new")])
    world.dest.mkdir()
    (world.dest / "mine.txt").write_text("keep")
    before = world.snapshot()
    code, _, err = _unpack_cli(archive, world.dest)
    assert code == 2 and "exists and is not empty (--force replaces it)" in err and "Traceback" not in err
    assert world.snapshot() == before
    code, _, err = _unpack_inprocess(archive, world.dest, "--force", capsys=capsys)
    assert code == 0, err
    assert sorted(p.name for p in world.dest.iterdir()) == [MANIFEST, "new.txt"]
    assert sorted(p.name for p in world.tmp.iterdir()) == ["archives", "dest", "outside"]  # the old tree is gone too


def test_dest_empty_is_used_and_dest_a_file_is_refused(world, capsys):
    archive = _a(world, "ok2", [_manifest()])
    world.dest.mkdir()
    code, _, err = _unpack_inprocess(archive, world.dest, capsys=capsys)
    assert code == 0 and (world.dest / MANIFEST).is_file(), err
    other = world.tmp / "afile"
    other.write_text("x")
    code, _, err = _unpack_inprocess(archive, other, capsys=capsys)
    assert code == 2 and "exists and is not a directory" in err and other.read_text() == "x"


def test_a_failure_into_an_empty_dest_leaves_it_empty_and_a_failed_force_keeps_the_old_tree(world, capsys):
    bad = _a(world, "bad", [_manifest(), _symlink("evil", "../outside"), _file("evil/x", b"x")])
    world.dest.mkdir()
    code, _, err = _unpack_inprocess(bad, world.dest, capsys=capsys)
    assert code == 2 and list(world.dest.iterdir()) == []
    (world.dest / "old.txt").write_text("old")
    before = world.snapshot()
    code, _, err = _unpack_inprocess(bad, world.dest, "--force", capsys=capsys)
    assert code == 2 and "leads outside" in err
    assert world.snapshot() == before


def test_bad_options_exit_2_without_traceback(world):
    code, out, err = _unpack_cli(world.archives / "x.tar.xz", world.dest, "--max-bytes", "lots")
    assert code == 2 and "not a size" in err and "Traceback" not in err
