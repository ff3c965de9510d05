"""The layouts a download may have, and the one it has: decided once for all its members.

:data:`LAYOUTS` holds one of each (:class:`.canvas.Canvas`, :class:`.moodle.Moodle`,
:class:`.folder.Folder`), by the name an :class:`.base.Entry` records (``Entry.lms``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from coursetools.grade.lms.base import Layout, skipped
from coursetools.grade.lms.canvas import Canvas
from coursetools.grade.lms.folder import Folder
from coursetools.grade.lms.moodle import Moodle

FOLDER = Folder()  # also what a member no LMS claims is read as (the intake's plain learners)
LAYOUTS: dict[str, Layout] = {each.name: each for each in (Canvas(), Moodle(), FOLDER)}


def layout(lms: str) -> Layout:
    """The layout an entry's ``lms`` names (a plain folder's for any other name)."""
    return LAYOUTS.get(lms, FOLDER)


def names_a_learner(name: str, is_dir: bool) -> bool:
    """Whether a folder's or file's name is a learner's in some LMS's download (its prefix)."""
    return any(each.claims(name, is_dir) for each in LAYOUTS.values())


def upload_name(source: str, lms: str) -> str:
    """The name a learner gave a file of the download (``answers.pdf`` for Canvas's
    ``knuthdonald_45678_33333_answers.pdf``)."""
    return layout(lms).upload_name(source)


def layout_of(
    children: list[Path],
    problems: list[str] | None = None,
    refused: Sequence[tuple[str, str]] = (),
    aliases: dict[str, str] | None = None,
) -> str:
    """The layout of a download, decided once for all its members: ``canvas``, ``moodle`` or
    ``folder``.

    Each top-level member is classed by the patterns it matches: a Canvas file
    (``login_12345_67890_...``, no folder: Canvas's download is flat), a Moodle folder or
    file (``Full Name_12345_assignsubmission_...``), or both (an upload whose name the learner
    chose to look like the other LMS's: Canvas keeps the upload's name after its prefix).
    The layout is the LMS with more members that match it alone; a member that matches both
    counts for neither, and only when no member matches one alone does it decide (Canvas,
    whose prefix comes first: reported). A layout with no matching member is ``folder`` (no
    LMS id is taken from any name). The members the extraction ``refused`` count too (by
    their names: a class whose every upload was refused is still its LMS's)."""
    aliases = aliases or {}
    canvas = moodle = both = 0
    tops: list[tuple[str, bool]] = []
    for path in children:
        try:
            if skipped(path.name) or path.is_symlink():
                continue
            tops.append((aliases.get(path.name, path.name), path.is_dir()))
        except OSError:
            continue
    seen = {name for name, _ in tops}
    for member, _ in refused:
        top, in_folder = refused_name(member)
        if top and top not in seen and not skipped(top):
            seen.add(top)
            tops.append((top, in_folder))
    for name, is_dir in tops:
        as_canvas = LAYOUTS["canvas"].claims(name, is_dir)
        as_moodle = LAYOUTS["moodle"].claims(name, is_dir)
        if as_canvas and as_moodle:
            both += 1
        elif as_canvas:
            canvas += 1
        elif as_moodle:
            moodle += 1
    if canvas or moodle:
        if canvas == moodle:
            if problems is not None:
                problems.append(
                    f"the download holds {canvas} Canvas and {moodle} Moodle names: no LMS id is taken "
                    "from any name (graded as a plain folder)"
                )
            return "folder"
        return "canvas" if canvas > moodle else "moodle"
    if both:
        if problems is not None:
            problems.append(
                "every name of the download fits both Canvas's and Moodle's pattern: read as Canvas's"
            )
        return "canvas"
    return "folder"


def refused_name(member: str) -> tuple[str, bool]:
    """The name of a refused member that can carry its learner's LMS id, and whether it is a
    folder's: a Moodle folder on its path (``Full Name_12345_assignsubmission_file_/...``), else
    its last part (``/login_12345_67890_x.ipynb``, ``../login_12345_...``, a link's name)."""
    name = re.sub(r"^[A-Za-z]:", "", member.replace("\\", "/"))
    parts = [p for p in name.split("/") if p not in ("", ".", "..")]
    for part in parts:  # a file's name never matches a Moodle folder's (its extension)
        if names_a_learner(part, is_dir=True):
            return part, True
    if not parts:
        return "", False
    return parts[-1], len(parts) > 1 and not names_a_learner(parts[-1], is_dir=False)
