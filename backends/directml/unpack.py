"""`dmlconform directml unpack ARCHIVE DIR`: a stack archive from anywhere, unpacked so that a
hostile one can neither escape DIR nor exhaust the machine (its rules are at unpack()). Apart from
pack.py, which builds archives from a trusted set-up: this module trusts nothing it reads."""
from __future__ import annotations

import argparse
import bz2
import gzip
import io
import lzma
import os
import posixpath
import re
import shutil
import stat
import sys
import tarfile
import tempfile
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any, Callable, Self

from .stack import MANIFEST

# --- unpack: a hostile archive neither escapes DEST nor exhausts the machine ----------------------
#
# What `pack` writes (GNU tar, or tarfile where xz is missing, of a tree it built): directories,
# regular files and symlinks, each under "./"; every symlink relative and inside the tree (library
# .so links, the prefix's system32 links, dosdevices/c: -> ../drive_c) except the prefix's Z: drive,
# wineprefix/dosdevices/z: -> "/" (Wine's view of the Unix root); never a hard link, device, FIFO or
# sparse file. Unpack accepts exactly that and refuses everything else (see unpack()).

MAX_BYTES = 8 * 2**30          # the members' data in all (--max-bytes); the stack is about 130 MiB (1 GiB with LLVM)
MAX_MEMBER_BYTES = 4 * 2**30   # one member's data (the largest file of the stack: about 100 MiB, libLLVM)
MAX_MEMBERS = 200_000          # members (--max-members); the stack has about 900
MAX_PATH_BYTES = 1024          # a member's name, and a symlink's target (the stack's longest: 140)
MAX_NAME_BYTES = 255           # one component of a name (NAME_MAX)
MAX_DEPTH = 48                 # components of a name (the stack's deepest: 12)
MAX_HEADER_BYTES = 64 * 2**10  # one pax or GNU long-name header's data, which tarfile reads into memory
HEADER_ALLOWANCE = 512 * 2**20  # decompressed bytes beyond the members' data: headers, padding
Z_DRIVE = ("wineprefix/dosdevices/z:", "/")  # the one symlink allowed an absolute target
_CHUNK = 2**20
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# signatures of what unpack does not read (it reads xz, gzip, bzip2 and plain tar)
FOREIGN = ((b"\x28\xb5\x2f\xfd", "zstd-compressed"), (b"\x04\x22\x4d\x18", "lz4-compressed"), (b"LZIP", "lzip-compressed"),
           (b"\x1f\x9d", "compress(1)-compressed (.Z)"), (b"\x5d\x00\x00", "lzma-compressed (.lzma, not .xz)"),
           (b"PK\x03\x04", "a zip file"), (b"7z\xbc\xaf\x27\x1c", "a 7-Zip file"), (b"Rar!", "a RAR file"))
_TYPES = {tarfile.LNKTYPE: "a hard link (pack writes none)", tarfile.CHRTYPE: "a character device",
          tarfile.BLKTYPE: "a block device", tarfile.FIFOTYPE: "a FIFO", tarfile.CONTTYPE: "a contiguous file",
          tarfile.GNUTYPE_SPARSE: "a sparse file"}
_EXTENDED = (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE, tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK)


class UnpackError(RuntimeError):
    """The archive is refused (a member, a limit, its format) or cannot be unpacked; one line."""


@dataclass(frozen=True)
class Limits:
    """unpack's bounds, each checked before anything is written; the defaults are the module's
    constants at the time of the call."""
    max_bytes: int = field(default_factory=lambda: MAX_BYTES)
    max_members: int = field(default_factory=lambda: MAX_MEMBERS)
    max_member_bytes: int = field(default_factory=lambda: MAX_MEMBER_BYTES)
    max_path_bytes: int = field(default_factory=lambda: MAX_PATH_BYTES)
    max_depth: int = field(default_factory=lambda: MAX_DEPTH)
    max_header_bytes: int = field(default_factory=lambda: MAX_HEADER_BYTES)


def _human(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} GiB"  # not reached


def _shown(name: str) -> str:
    """A member's name for a message: quoted, and cut short when very long."""
    return repr(name) if len(name) <= 200 else repr(name[:200]) + f"... ({len(name)} characters)"


def _refused(name: str, rule: str) -> UnpackError:
    return UnpackError(f"member {_shown(name)} refused: {rule}")


class _Decompressed(io.RawIOBase):
    """The archive's decompressed bytes for tarfile's stream mode: stops at `cap` bytes and turns
    the decompressors' errors (a truncated or damaged stream) into one-line UnpackErrors."""

    def __init__(self, stream: io.BufferedIOBase | IO[bytes], kind: str, cap: int):
        self.stream, self.kind, self.cap, self.count = stream, kind, cap, 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        want = self.cap + 1 - self.count if size is None or size < 0 else min(size, self.cap + 1 - self.count)
        try:
            data = self.stream.read(want)
        except EOFError:
            raise UnpackError(f"truncated: the {self.kind} stream ends early (after {_human(self.count)} of data)") from None
        except (lzma.LZMAError, zlib.error, OSError) as exc:
            raise UnpackError(f"damaged {self.kind} data after {_human(self.count)}: {exc}") from None
        self.count += len(data)
        if self.count > self.cap:
            raise UnpackError(f"limit: the archive decompresses to more than {_human(self.cap)} "
                              f"(the members' data limit plus {_human(HEADER_ALLOWANCE)} of headers; --max-bytes)")
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)


def _open_archive(raw: IO[bytes], limits: Limits) -> tuple[_Decompressed, str]:
    """The decompressed stream of `raw` (by signature, never by file name) and the format's name."""
    head = raw.read(512)
    raw.seek(0)
    if not head:
        raise UnpackError("an empty file, not an archive")
    stream: io.BufferedIOBase | IO[bytes]
    if head.startswith(b"\xfd7zXZ\x00"):
        stream, kind = lzma.LZMAFile(raw), "xz"
    elif head.startswith(b"\x1f\x8b"):
        stream, kind = gzip.GzipFile(fileobj=raw, mode="rb"), "gzip"
    elif head.startswith(b"BZh"):
        stream, kind = bz2.BZ2File(raw), "bzip2"
    else:
        for magic, what in FOREIGN:
            if head.startswith(magic):
                raise UnpackError(f"{what}: unpack reads tar archives compressed with xz (as pack writes them), gzip or bzip2, or plain")
        stream, kind = raw, "tar"
    return _Decompressed(stream, kind, limits.max_bytes + HEADER_ALLOWANCE), kind


def _member_class(kind: str, limits: Limits) -> type[tarfile.TarInfo]:
    """A TarInfo whose reading refuses what tarfile would take quietly: a damaged or missing header
    after the first (tarfile ends the archive there, as if complete), no tar header at all, and an
    extended (pax, GNU long name) header larger than limits.max_header_bytes (tarfile reads those
    into memory)."""
    not_tar = ("not a tar archive, and not xz, gzip or bzip2 compressed" if kind == "tar" else
               f"not a tar archive inside the {kind} compression")

    class Member(tarfile.TarInfo):
        @classmethod
        def fromtarfile(cls, tf: tarfile.TarFile) -> Self:  # tarfile.TarInfo.fromtarfile, checked
            assert tf.fileobj is not None
            first = tf.offset == 0
            buf = tf.fileobj.read(tarfile.BLOCKSIZE)
            if buf == tarfile.NUL * tarfile.BLOCKSIZE:
                return super().frombuf(buf, tf.encoding or "utf-8", tf.errors)  # raises the end of the archive
            if len(buf) < tarfile.BLOCKSIZE:
                if first:
                    raise UnpackError(f"{not_tar} (it holds {len(buf)} bytes)")
                raise UnpackError(f"truncated: the archive ends after {_human(tf.offset + len(buf))} without its end-of-archive blocks")
            try:
                obj = cls.frombuf(buf, tf.encoding or "utf-8", tf.errors)
            except tarfile.HeaderError as exc:
                if first:
                    raise UnpackError(f"{not_tar} ({exc})") from None
                raise UnpackError(f"damaged or truncated archive: bad tar header at offset {tf.offset} ({exc})") from None
            obj.offset = tf.fileobj.tell() - tarfile.BLOCKSIZE
            if obj.type in _EXTENDED and obj.size > limits.max_header_bytes:
                raise UnpackError(f"limit: an extended header at offset {obj.offset} declares {_human(obj.size)} "
                                  f"(at most {_human(limits.max_header_bytes)})")
            proc: Callable[[tarfile.TarFile], Self] = getattr(obj, "_proc_member")  # what TarInfo.fromtarfile does next
            return proc(tf)

    return Member


class _Tree:
    """What this extraction has written under its private directory `root`, and the writes: every
    path is opened relative to the root's descriptor, component by component with O_NOFOLLOW, and
    only through directories this extraction made (never through a symlink or anything that was
    there before); files are created with O_EXCL (never written through an existing name)."""

    def __init__(self, root: Path):
        self.root = root
        self.fd = os.open(root, _DIR_FLAGS)
        self.kinds: dict[str, str] = {"": "directory"}  # path -> "directory" | "file" | "symlink"
        self.seen: set[str] = set()  # names of members (a second member of one name is refused)
        self.dirs: dict[str, tuple[int, float | None]] = {}  # directory -> (mode, mtime), applied last
        self.links: list[tuple[str, str]] = []
        self._cached: tuple[str, int] | None = None

    def close(self) -> None:
        if self._cached is not None:
            os.close(self._cached[1])
            self._cached = None
        os.close(self.fd)

    def check_parents(self, name: str, parts: list[str]) -> None:
        """Refuse a member below anything of this archive but a directory (a symlink above all)."""
        for i in range(1, len(parts)):
            path = "/".join(parts[:i])
            kind = self.kinds.get(path)
            if kind is None:
                return
            if kind != "directory":
                raise _refused(name, f"its parent {_shown(path)} is a {kind} of this archive (nothing is written through a {kind})")

    def parent(self, name: str, parts: list[str]) -> int:
        """A descriptor of the member's parent directory (made, mode 0700, where absent)."""
        key = "/".join(parts[:-1])
        if not key:
            return self.fd
        if self._cached is not None and self._cached[0] == key:
            return self._cached[1]
        fd = self.fd
        try:
            for i, part in enumerate(parts[:-1]):
                path = "/".join(parts[:i + 1])
                kind = self.kinds.get(path)
                if kind is None:
                    os.mkdir(part, 0o700, dir_fd=fd)
                    self.kinds[path] = "directory"
                    self.dirs[path] = (0o755, None)
                elif kind != "directory":
                    raise _refused(name, f"its parent {_shown(path)} is a {kind} of this archive (nothing is written through a {kind})")
                try:
                    sub = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    raise _refused(name, f"its parent {_shown(path)} is not a directory of this extraction ({exc.strerror})") from None
                if fd != self.fd:
                    os.close(fd)
                fd = sub
        except BaseException:
            if fd != self.fd:
                os.close(fd)
            raise
        if self._cached is not None:
            os.close(self._cached[1])
        self._cached = (key, fd)
        return fd


def _check_name(member: tarfile.TarInfo, limits: Limits) -> list[str]:
    """The member's path components (relative to DEST, without "." components), or refused."""
    name = member.name
    if "\0" in name:
        raise _refused(name, "a NUL byte in the name")
    if name.startswith("/"):
        raise _refused(name, "an absolute path")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise _refused(name, "'..' in the path")
    if len(os.fsencode(name)) > limits.max_path_bytes:
        raise _refused(name, f"a name longer than {limits.max_path_bytes} bytes")
    if len(parts) > limits.max_depth:
        raise _refused(name, f"deeper than {limits.max_depth} directories")
    if any(len(os.fsencode(p)) > MAX_NAME_BYTES for p in parts):
        raise _refused(name, f"a path component longer than {MAX_NAME_BYTES} bytes")
    return parts


def _check_link(member: tarfile.TarInfo, path: str, limits: Limits) -> None:
    """A symlink's target, resolved against the link's own place: relative and inside DEST (the
    Z: drive excepted). The finished tree is checked again (_check_links), through other links."""
    target = member.linkname
    if not target or "\0" in target:
        raise _refused(member.name, "a symlink with an empty target or a NUL byte in it")
    if len(os.fsencode(target)) > limits.max_path_bytes:
        raise _refused(member.name, f"a symlink target longer than {limits.max_path_bytes} bytes")
    if (path, target) == Z_DRIVE:
        return
    if target.startswith("/"):
        raise _refused(member.name, f"symlink to {_shown(target)}: an absolute target (only {Z_DRIVE[0]} -> / may have one)")
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
    if resolved == ".." or resolved.startswith("../"):
        raise _refused(member.name, f"symlink to {_shown(target)} leads outside the destination")


def _write_file(tree: _Tree, member: tarfile.TarInfo, parts: list[str], data: IO[bytes]) -> int:
    """Stream a regular member into a new file (O_EXCL, O_NOFOLLOW); returns the bytes written."""
    fd = os.open(parts[-1], _FILE_FLAGS, 0o600, dir_fd=tree.parent(member.name, parts))
    written = 0
    try:
        while written < member.size:
            try:
                chunk = data.read(min(_CHUNK, member.size - written))
            except tarfile.TarError as exc:
                raise UnpackError(f"truncated or damaged: member {_shown(member.name)} after {written} of its {member.size} bytes ({exc})") from None
            if not chunk:
                raise UnpackError(f"truncated: member {_shown(member.name)} ends after {written} of its {member.size} bytes")
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view):]
            written += len(chunk)
        os.fchmod(fd, (member.mode & 0o755) | 0o600)  # no setuid/setgid/sticky, no group/world write
        try:
            os.utime(fd, (member.mtime, member.mtime))
        except (OSError, OverflowError, ValueError):
            pass
    finally:
        os.close(fd)
    return written


def _extract(archive: Path, root: Path, limits: Limits) -> _Tree:
    """Every member of `archive` into `root` (a new, private, empty directory), checked (see unpack)."""
    data_filter = getattr(tarfile, "data_filter", None)  # 3.12, and 3.11.4+: an extra layer
    with open(archive, "rb") as raw:
        stream, kind = _open_archive(raw, limits)
        tree = _Tree(root)
        try:
            with tarfile.open(fileobj=stream, mode="r|", tarinfo=_member_class(kind, limits)) as tf:
                total = count = 0
                while (member := tf.next()) is not None:
                    getattr(tf, "members").clear()  # stream mode keeps every TarInfo otherwise
                    count += 1
                    if count > limits.max_members:
                        raise UnpackError(f"limit: more than {limits.max_members} members (--max-members)")
                    parts = _check_name(member, limits)
                    path = "/".join(parts)
                    if path in tree.seen:
                        raise _refused(member.name, "a second member of the same name (nothing is overwritten)")
                    tree.seen.add(path)
                    if member.isdir():
                        pass
                    elif member.type in (tarfile.REGTYPE, tarfile.AREGTYPE):
                        if member.size < 0:
                            raise _refused(member.name, "a negative size")
                        if total + member.size > limits.max_bytes:
                            raise UnpackError(f"limit: member {_shown(member.name)} ({_human(member.size)}) takes the unpacked data over "
                                              f"the limit of {_human(limits.max_bytes)} (--max-bytes; {_human(total)} before it)")
                        if member.size > limits.max_member_bytes:
                            raise UnpackError(f"limit: member {_shown(member.name)} declares {_human(member.size)}, "
                                              f"over the limit of {_human(limits.max_member_bytes)} for one member")
                    elif member.issym():
                        _check_link(member, path, limits)
                    else:
                        what = _TYPES.get(member.type, f"an unknown member type {member.type!r}")
                        raise _refused(member.name, f"{what}; only regular files, directories and symlinks are unpacked")
                    if not parts:
                        if not member.isdir():
                            raise _refused(member.name, "the destination itself as a non-directory")
                        tree.dirs[""] = ((member.mode & 0o755) | 0o700, member.mtime)
                        continue
                    tree.check_parents(member.name, parts)
                    if member.issym():
                        _check_resolved(root, path, member.linkname)
                    if data_filter is not None and not (member.issym() and (path, member.linkname) == Z_DRIVE):
                        try:
                            data_filter(member, str(root))
                        except tarfile.FilterError as exc:
                            raise _refused(member.name, f"Python's tarfile data filter: {exc}") from None
                    if path in tree.kinds:  # an implicit parent, made for an earlier member
                        if not member.isdir() or tree.kinds[path] != "directory":
                            raise _refused(member.name, "a second member of the same name (nothing is overwritten)")
                        tree.dirs[path] = ((member.mode & 0o755) | 0o700, member.mtime)
                        continue
                    parent = tree.parent(member.name, parts)
                    if member.isdir():
                        os.mkdir(parts[-1], 0o700, dir_fd=parent)
                        tree.kinds[path] = "directory"
                        tree.dirs[path] = ((member.mode & 0o755) | 0o700, member.mtime)
                    elif member.issym():
                        os.symlink(member.linkname, parts[-1], dir_fd=parent)
                        try:
                            os.utime(parts[-1], (member.mtime, member.mtime), dir_fd=parent, follow_symlinks=False)
                        except (OSError, OverflowError, ValueError):
                            pass
                        tree.kinds[path] = "symlink"
                        tree.links.append((path, member.linkname))
                    else:
                        source = tf.extractfile(member)
                        assert source is not None
                        total += _write_file(tree, member, parts, source)
                        tree.kinds[path] = "file"
        except BaseException:
            tree.close()
            raise
        tree.close()
    return tree


def _check_resolved(root: Path, path: str, target: str) -> None:
    """A symlink (about to be made, or made) resolved through the links already there stays inside
    `root` (the Z: drive excepted): a link that is inside on its own may lead out through another."""
    if (path, target) == Z_DRIVE:
        return
    real = os.path.realpath(root)
    resolved = os.path.realpath(os.path.join(real, posixpath.dirname(path), target))
    if resolved != real and not resolved.startswith(real + os.sep):
        raise _refused(path, f"symlink to {_shown(target)} leads outside the destination through other symlinks")


def _check_links(tree: _Tree) -> None:
    """Each symlink of the finished tree, resolved through all the others (also those that came
    after it), stays inside it."""
    for path, target in tree.links:
        _check_resolved(tree.root, path, target)


def _finish(tree: _Tree) -> None:
    """Directory modes and times, deepest first (their files are written)."""
    for path, (mode, mtime) in sorted(tree.dirs.items(), key=lambda item: -item[0].count("/") - bool(item[0])):
        full = tree.root / path if path else tree.root
        if not stat.S_ISDIR(os.lstat(full).st_mode):
            raise UnpackError(f"{_shown(path)} is no longer a directory")  # nothing else writes in our private directory
        os.chmod(full, mode)
        if mtime is not None:
            try:
                os.utime(full, (mtime, mtime))
            except (OSError, OverflowError, ValueError):
                pass


def unpack(archive: Path, dest: Path, force: bool = False, limits: Limits | None = None) -> Path:
    """Unpack a stack archive into `dest`, which must be absent or empty (or, with `force`, is
    replaced whatever it holds). Raises UnpackError, with one line, for anything refused.

    The archive is read as a stream (xz, gzip, bzip2 or plain tar, by signature) into a private
    temporary directory beside `dest`, which is renamed into place only when every member was
    unpacked and the tree holds the stack's manifest; on any error it is removed, so `dest` is
    never left half-written. Rules, each checked before anything of the member is written:

    - names: no absolute path, no '..', no NUL; at most limits.max_path_bytes bytes and
      limits.max_depth components; a name only once (nothing is overwritten);
    - types: directories, regular files and symlinks; hard links, devices, FIFOs, sparse and
      unknown types are refused; modes lose setuid/setgid/sticky and group/world write;
    - symlinks: a relative target that, resolved against the link's place, stays inside `dest`
      (the prefix's Z: drive, wineprefix/dosdevices/z: -> /, is the one absolute target allowed),
      and, once all are written, still stays inside resolved through the other links; nothing is
      ever written through a symlink: each parent of a member must be a directory that this
      extraction made (opened with O_NOFOLLOW), files are created with O_EXCL;
    - bounds: limits.max_members members, limits.max_member_bytes for one member and
      limits.max_bytes in all (from the declared sizes, before reading the data), extended headers
      of at most limits.max_header_bytes, the decompressed stream at most limits.max_bytes plus
      HEADER_ALLOWANCE;
    - Python's tarfile.data_filter, where present, as one more check of every member.
    """
    limits = limits or Limits()
    archive, dest = Path(archive), Path(dest).resolve()
    if dest.parent == dest:
        raise UnpackError(f"refusing to unpack into {dest}")
    exists = dest.is_dir()
    if dest.exists() and not exists:
        raise UnpackError(f"{dest} exists and is not a directory")
    if exists and any(dest.iterdir()) and not force:
        raise UnpackError(f"{dest} exists and is not empty (--force replaces it)")
    if not archive.is_file():
        raise UnpackError("not found or not a file" if not archive.exists() else "not a file")
    made = [p for p in reversed(dest.parents) if not p.exists()]
    dest.parent.mkdir(parents=True, exist_ok=True)
    in_place = exists and os.path.ismount(dest)  # a mount point cannot be renamed: work inside it
    work = Path(tempfile.mkdtemp(prefix=f".{dest.name}.unpacking-", dir=dest if in_place else dest.parent))
    try:
        tree = _extract(archive, work, limits)
        _check_links(tree)
        if tree.kinds.get(MANIFEST) != "file":
            raise UnpackError(f"not a dmlconform DirectML stack (no {MANIFEST}); nothing unpacked")
        tree.dirs.setdefault("", (0o755, None))
        _finish(tree)
        _move_into_place(work, dest, exists, in_place)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        for parent in reversed(made):
            try:
                parent.rmdir()
            except OSError:
                break
        raise
    return dest


def _move_into_place(work: Path, dest: Path, exists: bool, in_place: bool) -> None:
    if in_place:  # dest is a mount point and work lies inside it
        for entry in dest.iterdir():
            if entry != work:
                shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
        for entry in work.iterdir():
            os.rename(entry, dest / entry.name)
        os.chmod(dest, stat.S_IMODE(os.lstat(work).st_mode))
        work.rmdir()
        return
    if exists and any(dest.iterdir()):  # --force
        old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.replaced-", dir=dest.parent))
        os.rename(dest, old / "old")
        try:
            os.rename(work, dest)
        except BaseException:
            os.rename(old / "old", dest)
            raise
        shutil.rmtree(old, ignore_errors=True)
        return
    os.rename(work, dest)  # over an empty directory, too


def parse_size(text: str) -> int:
    """A byte count: 8589934592, 8G, 8GiB, 512M, 1.5G (K, M, G, T are powers of 1024)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", text, flags=re.I)
    if not m or float(m.group(1)) * 1024 ** "_kmgt".index(m.group(2).lower() or "_") < 1:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 8G, 512M, 1000000)")
    return int(float(m.group(1)) * 1024 ** "_kmgt".index(m.group(2).lower() or "_"))


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"not a positive whole number: {text!r}")
    return int(text)



def run_unpack(args: argparse.Namespace) -> int:
    """unpack: one line on stderr and exit 2 for anything refused or failed, never a traceback."""
    overrides = {k: v for k, v in (("max_bytes", args.max_bytes), ("max_members", args.max_members)) if v is not None}
    limits = Limits(**overrides)
    if args.max_bytes is not None:
        limits = replace(limits, max_member_bytes=min(limits.max_member_bytes, args.max_bytes))
    try:
        dest = unpack(Path(args.archive), Path(args.dir), force=args.force, limits=limits)
    except UnpackError as exc:
        message = str(exc)
    except tarfile.TarError as exc:
        message = f"damaged or truncated archive ({exc})"
    except OSError as exc:
        message = f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else "")
    except Exception as exc:  # a hostile archive must not end in a traceback
        message = f"{type(exc).__name__}: {exc}"
    else:
        print(f"unpacked to {dest}: run with --directml-stack {dest} (or DMLCONFORM_DIRECTML_STACK={dest})")
        return 0
    print(f"dmlconform directml unpack: {args.archive}: {message.replace(chr(10), ' ')}", file=sys.stderr)
    return 2
