"""Grade a class's exercise notebooks: ``python -m coursetools.grade ASSIGNMENT SUBMISSIONS --out OUT``.

Each submission runs in its own sandboxed Python process (:mod:`.harness`,
:mod:`.sandbox`); its outputs are judged in the grader's process against
attnlib's reference (:mod:`.runner`); the results are written atomically per
student (:mod:`.report`). See ``book/instructor-guide.md``.
"""


def grade(*args, **kwargs):
    """Grade a folder of submissions; see :func:`coursetools.grade.batch.grade`."""
    from coursetools.grade.batch import grade as _grade

    return _grade(*args, **kwargs)


__all__ = ["grade"]
