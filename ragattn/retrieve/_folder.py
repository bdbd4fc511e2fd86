"""The files of a corpus folder that the folder reader may open, listed without trusting the folder.

A corpus folder may come from an archive, a clone or a shared drive, so its entries are taken
for what they are, not for what they are named:

* only regular files are documents; a FIFO, socket or device named like one (``notes.md``) is
  skipped without being opened (opening a FIFO blocks until a writer comes, which may be never);
* a symbolic link is resolved first: one that leads outside the folder's real path (to a file
  or a folder) is skipped, unless the caller opts in with ``follow_symlinks``, because the index
  would otherwise serve any file the indexing user can read under an innocent name;
* a link to a file inside the folder is read under the link's name, as before; a link to a
  folder inside it is not descended (its files are read where they are, once); with
  ``follow_symlinks`` a link to a folder outside is descended once, so no loop or chain of links
  is followed twice;
* hidden entries (a name starting with ``.``) are not listed, and a subfolder that cannot be
  listed is skipped.

Every skip is logged as a warning and returned with its reason, so the caller can record it.
"""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ragattn.errors import InvalidInputError

logger = logging.getLogger(__name__)

_FOLLOW_HINT = "not followed; follow_symlinks=True (--follow-symlinks) follows it"


@dataclass(frozen=True, slots=True)
class FolderEntry:
    """One candidate document of a folder: its id, and the real path to read or why it is skipped.

    Attributes:
        parts: the entry's path relative to the folder, one name per level (the id's parts).
        path: the file's real path (symbolic links resolved) to read, or None when skipped.
        reason: why the entry is skipped, or None when it is read.
    """

    parts: tuple[str, ...]
    path: str | None = None
    reason: str | None = None

    @property
    def rel(self) -> str:
        """The relative path with POSIX separators: the document's id (a byte of a name that is
        not UTF-8, which only a skipped entry has, shown as ``\\xNN``)."""
        return _printable("/".join(self.parts))


def list_folder(
    root: Path, *, suffixes: tuple[str, ...], follow_symlinks: bool = False
) -> list[FolderEntry]:
    """The entries under ``root`` named with one of ``suffixes`` (and skipped folders), sorted.

    Sorted by path parts (a folder's files come right after its name, as ``sorted(Path)``
    orders them). Read entries carry a real path; skipped ones a reason (see the module
    docstring), each logged as a warning.

    Raises:
        InvalidInputError: ``root`` itself cannot be listed.
    """
    walk = _Walk(os.path.realpath(root), suffixes=suffixes, follow_symlinks=follow_symlinks)
    try:
        walk.visit(walk.root, ())
    except OSError as exc:
        raise InvalidInputError(
            f"cannot read corpus folder {root}: {exc.strerror or exc}; check the path and its "
            "permissions"
        ) from exc
    while walk.pending:
        directory, parts = walk.pending.pop()
        try:
            walk.visit(directory, parts)
        except OSError as exc:
            walk.skip(parts, f"folder not readable ({exc.strerror or exc})")
    return sorted(walk.found, key=lambda entry: entry.parts)


class _Walk:
    """The state of one listing: the real root, the folders to visit, what was found."""

    def __init__(self, root: str, *, suffixes: tuple[str, ...], follow_symlinks: bool) -> None:
        self.root = root
        self.suffixes = suffixes
        self.follow = follow_symlinks
        self.pending: list[tuple[str, tuple[str, ...]]] = []
        self.found: list[FolderEntry] = []
        self.descended: set[str] = {root}  # real folders listed or queued: each at most once

    def skip(self, parts: tuple[str, ...], reason: str) -> None:
        skipped = FolderEntry(parts, reason=reason)
        logger.warning("skipping corpus entry %s: %s", skipped.rel, reason)
        self.found.append(skipped)

    def visit(self, directory: str, parts: tuple[str, ...]) -> None:
        with os.scandir(directory) as entries:
            for entry in entries:
                if not entry.name.startswith("."):
                    self._entry(entry, (*parts, entry.name))

    def _named_like_a_document(self, name: str) -> bool:
        return os.path.splitext(name)[1].lower() in self.suffixes

    def _entry(self, entry: os.DirEntry[str], parts: tuple[str, ...]) -> None:
        if _printable(entry.name) != entry.name:  # an id must be text: JSON, HTTP, the manifest
            if entry.is_dir() or self._named_like_a_document(entry.name):
                self.skip(parts, "its name is not valid UTF-8; rename it to read it")
        elif entry.is_symlink():
            self._link(entry, parts)
        elif entry.is_dir(follow_symlinks=False):
            self.pending.append((entry.path, parts))
        elif self._named_like_a_document(entry.name):
            mode = entry.stat(follow_symlinks=False).st_mode
            if stat.S_ISREG(mode):
                self.found.append(FolderEntry(parts, path=entry.path))
            else:
                self.skip(parts, f"not a regular file ({_kind(mode)}); only files are read")

    def _link(self, entry: os.DirEntry[str], parts: tuple[str, ...]) -> None:
        target = os.path.realpath(entry.path)
        inside = os.path.commonpath([self.root, target]) == self.root
        try:
            mode: int | None = os.stat(target).st_mode
        except OSError:
            mode = None  # dangling or a loop: reading it says why, if it is read at all
        if mode is not None and stat.S_ISDIR(mode):
            self._linked_folder(target, parts, inside=inside)
            return
        if not self._named_like_a_document(entry.name):
            return
        if not inside and not self.follow:
            logger.warning("symbolic link %s leads to %s", entry.path, target)
            self.skip(parts, f"symbolic link leading outside the corpus folder, {_FOLLOW_HINT}")
        elif mode is None or stat.S_ISREG(mode):
            self.found.append(FolderEntry(parts, path=target))
        else:
            self.skip(parts, f"symbolic link to {_kind(mode)}, not a regular file; not read")

    def _linked_folder(self, target: str, parts: tuple[str, ...], *, inside: bool) -> None:
        if inside:
            self.skip(
                parts,
                "symbolic link to a folder inside the corpus; its files are read where they are",
            )
        elif not self.follow:
            logger.warning("symbolic link %s leads to %s", "/".join(parts), target)
            self.skip(parts, f"symbolic link to a folder outside the corpus folder, {_FOLLOW_HINT}")
        elif target in self.descended:
            self.skip(parts, "symbolic link to a folder already read (a loop or a second link)")
        else:
            self.descended.add(target)
            self.pending.append((target, parts))


def _printable(name: str) -> str:
    """``name`` with each byte that is not UTF-8 (an ``os`` surrogate escape) shown as ``\\xNN``."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "a special file"


__all__ = ["FolderEntry", "list_folder"]
