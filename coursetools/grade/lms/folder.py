"""A plain folder: the course's own layouts, where no learner has an LMS id.

``<student>.ipynb``, or ``<student>/.../*.ipynb`` (nbgrader's exchange). In an LMS's download,
a member that is no learner of that LMS (a folder in Canvas's, a file without the prefix) is
read this way too. A file at the top that is not a notebook is no learner's (a stray).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from coursetools.grade.lms.base import Layout, fingerprint, slug
from coursetools.grade.lms.moodle import MOODLE_FILE
from coursetools.grade.records.paths import unreserved


class Folder(Layout):
    """A learner per notebook or folder at the top, named by it: no id is taken from any name.

    Two names that make the same key (``Ada.ipynb`` and ``ada.ipynb``) each get a key with a
    fingerprint of their own name instead of being merged into one learner.
    """

    name = "folder"

    def prefix(self, name: str) -> re.Match | None:
        # a file named with Moodle's prefix keeps only its upload name here too (a download whose
        # Canvas and Moodle names tie is read as a plain folder: :func:`.layouts.layout_of`)
        return MOODLE_FILE.match(name)

    def gather(self, plain: dict[str, list[tuple[str, Path]]], name: str, path: Path, is_dir: bool) -> bool:
        """Put a top-level member in ``plain`` (``{slug: [(name, path)]}``) by the name it is a
        learner by (a folder's, a notebook's stem); False for a file that is not a notebook."""
        if not is_dir:
            if PurePosixPath(name).suffix != ".ipynb":
                return False
            name = PurePosixPath(name).stem
        plain.setdefault(slug(name), []).append((name, path))
        return True

    def keys(self, plain: dict[str, list[tuple[str, Path]]]) -> Iterator[tuple[str, str, Path]]:
        """``(key, name, path)`` of each member of ``plain`` (``{slug: [(name, path)]}``)."""
        for key, named in plain.items():
            clash = len({raw for raw, _ in named}) > 1
            for raw, path in named:
                yield unreserved(f"{key[:70]}-{fingerprint(raw)}" if clash else key), raw, path
