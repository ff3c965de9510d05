"""Grade a class's exercise notebooks: ``python -m coursetools.grade ASSIGNMENT SUBMISSIONS --out OUT``.

The grader's floors are its folders, from the bottom: ``records/`` (the records, the events,
paths, the roster), ``sandbox/`` (isolation; the harness runs inside it), ``grading/`` (one
submission graded), ``outputs/`` (read OUT and render), ``lms/`` (an LMS's download and
gradebook); on top, the commands (``__main__``, ``commands``, ``batch``) and ``gradescope/``.
See ``book/instructor-guide.md`` and CONTRIBUTING.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from coursetools.grade.grading.runner import Settings
    from coursetools.grade.outputs.shard import Shard


def grade(
    assignment_spec: str,
    submissions: Path,
    out: Path,
    *,
    jobs: int | None = None,
    force: bool = False,
    settings: Settings | None = None,
    progress_stream=None,
    quiet: bool = False,
    zygotes: list | None = None,
    show_hidden_inputs: bool = False,
    overrides_csv: Path | None = None,
    shard: Shard | None = None,
) -> list[dict]:
    """Grade a folder of submissions: :func:`coursetools.grade.batch.grade` (imported when called:
    the grading run imports the checks and torch)."""
    from coursetools.grade.batch import grade as _grade

    return _grade(
        assignment_spec,
        submissions,
        out,
        jobs=jobs,
        force=force,
        settings=settings,
        progress_stream=progress_stream,
        quiet=quiet,
        zygotes=zygotes,
        show_hidden_inputs=show_hidden_inputs,
        overrides_csv=overrides_csv,
        shard=shard,
    )


__all__ = ["grade"]
