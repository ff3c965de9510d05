"""'Check your understanding' questions numbered per chapter: Check 11.1, 11.2, not 12 and 13.

Sphinx numbers an enumerable node (figure, table, sphinx-exercise's exercise) with one
counter for the whole book when the toctree has no section numbers, so chapter 11's
first question was "Exercise 12". After Sphinx has assigned its numbers
(``env-get-updated``), this renumbers each chapter's exercises from 1 under the
chapter's own number (the two digits its file name starts with): "Check 11.1"
(the title is _config.yml's ``numfig_format``, so not the notebooks' "Exercise 11.1").
The solutions ("Solution to Check 11.1") read the same table, so they follow.
Pages whose names do not start with a number keep Sphinx's numbers.
"""

from __future__ import annotations

import re

CHAPTER = re.compile(r"(?:^|/)(\d{2})-[^/]*$")


def chapter_numbers(fignumbers: dict, docname: str) -> dict:
    """The exercise numbers of one page, renumbered per chapter.

    ``fignumbers`` is Sphinx's ``{figtype: {node id: number tuple}}`` for ``docname``;
    returns the new ``{node id: (chapter, k)}``, ordered by Sphinx's own numbers
    (the order on the page), or the old mapping for a page without a chapter number.
    """
    numbers = fignumbers.get("exercise", {})
    match = CHAPTER.search(docname)
    if not match:
        return dict(numbers)
    chapter = int(match.group(1))
    ordered = sorted(numbers, key=lambda node_id: numbers[node_id])
    return {node_id: (chapter, k) for k, node_id in enumerate(ordered, start=1)}


def _renumber(app, env) -> list[str]:
    for docname, fignumbers in env.toc_fignumbers.items():
        if "exercise" in fignumbers:
            fignumbers["exercise"] = chapter_numbers(fignumbers, docname)
    return []


def setup(app) -> dict:
    # after Sphinx's own TocTreeCollector (priority 500) has assigned the book-wide numbers
    app.connect("env-get-updated", _renumber, priority=900)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
