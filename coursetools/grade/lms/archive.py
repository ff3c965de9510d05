"""Zips extracted safely: what an LMS's download may hold, and what the grader refuses.

:func:`safe_extract` refuses, member by member: an absolute path, a ``..``, a symbolic link
or device, an encrypted member, more than ``max_file_bytes`` in one file; and refuses the
archive as a whole (:class:`UnsafeArchive`) beyond ``max_files`` members or ``max_total_bytes``
in all, counted on the bytes actually written (a member whose header lies about its size is
cut and refused). A name part longer than the file system's 255 bytes is extracted under a
short alias when the caller asks for one (:func:`named` reads the long name back).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import time
import zipfile
from pathlib import Path, PurePosixPath

from coursetools.grade.records.escape import terminal

MAX_TOTAL_BYTES = 2 << 30
MAX_FILE_BYTES = 64 << 20
MAX_FILES = 20000

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")  # what an alias's extension may not hold


class UnsafeArchive(ValueError):
    """A zip the grader refuses to extract as a whole (too many members, too large)."""


def _unsafe_member(info: zipfile.ZipInfo) -> str | None:
    name = info.filename.replace("\\", "/")
    mode = info.external_attr >> 16
    if "\x00" in name or len(name) > 1024:
        return "a strange name"
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        return "an absolute path"
    if ".." in PurePosixPath(name).parts:
        return "a path that leaves the folder (..)"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_IFMT(mode) not in (0, stat.S_IFREG, stat.S_IFDIR):  # 0: no Unix mode recorded
        return "not a plain file"
    if info.flag_bits & 0x1:
        return "encrypted"
    return None


def safe_extract(
    archive: Path,
    dest: Path,
    max_total_bytes: int = MAX_TOTAL_BYTES,
    max_file_bytes: int = MAX_FILE_BYTES,
    max_files: int = MAX_FILES,
    refused: list[tuple[str, str]] | None = None,
    aliases: dict[str, str] | None = None,
) -> list[str]:
    """Extract ``archive`` into ``dest``, refusing unsafe members; return what was refused.

    Raises :class:`UnsafeArchive` when the archive as a whole is refused (not a
    zip, too many members, more than ``max_total_bytes``); ``dest`` then holds
    whatever was extracted before. ``refused``, when given, receives ``(member name,
    why)`` of each refused member (the intake gives its learner an ``unreadable`` row).
    ``aliases``, when given, lets a member with a name part longer than the file system's 255
    bytes (a long upload name, a long full name in another script) be extracted under a short
    name, ``{short: long}`` (the intake reads the long one); without it such a member is refused.
    """
    problems = _Refusals(refused)
    dest = Path(dest).resolve()
    dest.mkdir(parents=True, exist_ok=True)
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as exc:
        raise UnsafeArchive(f"{archive} is not a zip file: {exc}") from None
    with zf:
        members = zf.infolist()
        if len(members) > max_files:
            raise UnsafeArchive(f"{archive} has {len(members)} members, more than {max_files}")
        written = 0
        for info in members:
            problems.member(info.filename.replace("\\", "/"))
            shown = terminal(info.filename, 200)
            why = _unsafe_member(info)
            if why is not None:
                problems.append(f"{shown}: refused ({why})")
                continue
            try:
                target = (dest / info.filename.replace("\\", "/")).resolve()
            except (OSError, ValueError) as exc:
                problems.append(f"{shown}: refused ({terminal(exc, 120)})")
                continue
            if target != dest and dest not in target.parents:
                problems.append(f"{shown}: refused (a path that leaves the folder)")
                continue
            parts = target.relative_to(dest).parts
            if any(_too_long(part) for part in parts):
                if aliases is None:
                    problems.append(f"{shown}: refused (a name longer than 255 bytes)")
                    continue
                short = [_alias(part, aliases) if _too_long(part) else part for part in parts]
                target = dest.joinpath(*short)
            if info.is_dir():
                try:
                    target.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    problems.append(f"{shown}: refused ({terminal(exc.strerror or exc, 120)})")
                continue
            if info.file_size > max_file_bytes:
                problems.append(f"{shown}: refused (larger than {max_file_bytes} bytes)")
                continue
            if written + info.file_size > max_total_bytes:
                raise UnsafeArchive(f"{archive} holds more than {max_total_bytes} bytes")
            size = 0
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as src, open(target, "wb") as dst:
                    while True:
                        block = src.read(1 << 20)
                        if not block:
                            break
                        size += len(block)
                        if size > max_file_bytes or written + size > max_total_bytes:
                            raise UnsafeArchive("more bytes than its header says, or than allowed")
                        dst.write(block)
            except (UnsafeArchive, zipfile.BadZipFile, OSError, EOFError, NotImplementedError) as exc:
                try:
                    target.unlink(missing_ok=True)
                except OSError:
                    pass
                problems.append(f"{shown}: refused ({terminal(exc, 120)})")
                continue
            written += size
            try:
                stamp = time.mktime(info.date_time + (0, 0, -1))
                os.utime(target, (stamp, stamp))
            except (OverflowError, ValueError, OSError):
                pass  # a member with an impossible date keeps the time of its extraction
    return problems


def _too_long(part: str) -> bool:
    return len(part.encode("utf-8", "surrogateescape")) > 255


def _alias(part: str, aliases: dict[str, str]) -> str:
    """A short name for a name part longer than 255 bytes (kept in ``aliases``: short -> long):
    a digest of the long name, with its extension when that is short."""
    suffix = PurePosixPath(part).suffix
    suffix = suffix if suffix.isascii() and len(suffix) <= 16 and _UNSAFE.search(suffix[1:]) is None else ""
    short = f"~{hashlib.sha256(part.encode('utf-8', 'surrogateescape')).hexdigest()[:24]}{suffix}"
    aliases[short] = part
    return short


def named(path: Path, root: Path, aliases: dict[str, str]) -> str:
    """``path`` below ``root`` as the download named it (a long part's alias read back)."""
    return "/".join(aliases.get(part, part) for part in path.relative_to(root).parts)


class _Refusals(list):
    """The problems of :func:`safe_extract`, and the names of the members refused."""

    _WHY = re.compile(r"^(?P<name>.*): refused \((?P<why>.*)\)$", re.S)

    def __init__(self, names: list[tuple[str, str]] | None) -> None:
        super().__init__()
        self.names = names
        self._raw: str | None = None

    def member(self, raw: str) -> None:
        self._raw = raw

    def append(self, text: str) -> None:
        super().append(text)
        match = self._WHY.match(text)
        if self.names is not None and self._raw is not None and match:
            self.names.append((self._raw, match["why"]))
