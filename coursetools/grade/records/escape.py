"""Learner text, made safe for where an instructor or a learner reads it.

Everything a learner controls (file and folder names, names in an LMS download,
printed output, exception text, the values a function returned) passes through one
of these before it is written:

* :func:`visible`: control characters (C0, DEL, C1: terminal escape sequences, a
  carriage return that overwrites a line) and bidirectional / invisible formatting
  characters (U+202A..U+202E, U+2066..U+2069, U+200B..U+200F, U+061C, U+FEFF) shown
  as ``\\x1b``, ``\\u202e``; a newline and a tab too unless ``keep_lines``;
* :func:`terminal`: a line for the instructor's terminal (:func:`visible`, one line);
* :func:`csv_cell`: a spreadsheet cell: :func:`visible`, then a cell that a
  spreadsheet would read as a formula (it starts with ``=``, ``+``, ``-``, ``@``, a
  tab or a carriage return) gets a leading ``'`` (OWASP's advice on CSV injection);
  numbers the grader wrote itself are left as they are;
* :func:`md_code`: an inline code span, its backtick fence longer than any run of
  backticks inside (so no Markdown, HTML or link inside is interpreted);
* :func:`md_block`: a fenced block, the same way.
"""

from __future__ import annotations

import re
import unicodedata

_FORMATTING = {0x061C, 0xFEFF, *range(0x200B, 0x2010), *range(0x202A, 0x202F), *range(0x2066, 0x206A)}
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


def _shown(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def unsafe(ch: str, keep_lines: bool = False) -> bool:
    """A character that must not reach a terminal, a spreadsheet or a page raw."""
    if keep_lines and ch in "\n\t":
        return False
    code = ord(ch)
    return (
        code < 0x20
        or 0x7F <= code < 0xA0
        or code in _FORMATTING
        or unicodedata.category(ch) in ("Cs", "Co", "Cn")  # lone surrogates, private use, unassigned
    )


def visible(text: object, keep_lines: bool = False) -> str:
    """``text`` with every unsafe character shown escaped (see the module's docstring)."""
    text = str(text)
    if not any(unsafe(ch, keep_lines) for ch in text):
        return text
    return "".join(_shown(ch) if unsafe(ch, keep_lines) else ch for ch in text)


def terminal(text: object, limit: int = 400) -> str:
    """One line for the instructor's terminal, escaped, at most ``limit`` characters."""
    line = visible(text)
    return line if len(line) <= limit else line[: limit - 3] + "..."


# a spreadsheet that splits fields on ";" (the list separator of many locales) makes a field
# of whatever follows one: each such field is guarded like the cell's own start (a tab never
# reaches a cell: visible() shows it as \x09)
_INNER = re.compile(r"(;)([ ]*)(?=['=+\-@])")
_INNER_GUARD = re.compile(r"(;)([ ]*)'(?=['=+\-@])")


def csv_cell(value: object) -> str:
    """A spreadsheet cell that shows ``value`` and never runs as a formula: a leading ``'``
    when it starts like one, and one after every ``;`` that a formula character
    (or a ``'``) follows, since a ``;``-separated spreadsheet splits the cell there.
    :func:`uncell` is its inverse on text it guarded."""
    if value is None:
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    text = str(value)
    if _NUMBER.match(text):
        return text
    shown = _INNER.sub(r"\1\2'", visible(text))
    if text.startswith(FORMULA_START) or shown.startswith(FORMULA_START):
        return "'" + shown
    return shown


def uncell(value: str) -> str:
    """A cell :func:`csv_cell` wrote, as it was meant (its formula guards removed): for a
    sheet the grader reads back (roster, score sheets), so that a guard never reaches a
    learner as text and is never doubled by writing the sheet again."""
    if value.startswith("'") and value[1:2] in ("=", "+", "-", "@", "\\"):
        value = value[1:]
    return _INNER_GUARD.sub(r"\1\2", value)


def _fence(text: str, char: str = "`", least: int = 1) -> str:
    longest = max((len(m) for m in re.findall(re.escape(char) + "+", text)), default=0)
    return char * max(least, longest + 1)


def md_code(text: object) -> str:
    """An inline Markdown code span holding ``text`` literally (on one line: its lines
    joined with `` / ``)."""
    body = visible(" / ".join(line.strip() for line in str(text).splitlines() if line.strip()))
    fence = _fence(body)
    pad = " " if body.startswith("`") or body.endswith("`") or not body.strip() else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def md_block(text: object) -> str:
    """A fenced Markdown block holding ``text`` literally (its lines kept)."""
    body = visible(text, keep_lines=True)
    fence = _fence(body, least=3)
    return f"{fence}text\n{body}\n{fence}"


def key_ok(key: str) -> bool:
    """A student key that is safe as a file name and a spreadsheet cell: it begins with
    an ASCII letter or digit and holds only letters, digits, ``.``, ``_`` and ``-``."""
    return bool(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", key or ""))
