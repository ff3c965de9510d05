"""Every quantified sentence of a chapter's Summary cites what guards it (issue 33).

The rule (CONTRIBUTING.md, "Summaries"): a sentence of a chapter's ``## Summary`` that
quantifies—one of the words *every, all, most, least, never, always, none*, or a number
written in the prose—contains a ``{glue}`` role (``{glue:text}`key``` and its kin). The key
is glued by a code cell of the same notebook: a value of the chapter's own run, a spread
("0.74 here; 0.70-0.86 over ..."), or the statement of a predicate that the same cell checks
with ``spread.check`` and an assert on the run (for example the glued conditions of the
spread, "{glue:text}`every_seed`", which ``Spread.check`` returns as "in all 5 seeds" or
"in 3 of 3 seeds": seeds, not runs, are counted; tests/chapters/test_controls.py).

Not prose, so not scanned: inline code, math (``$...$``), roles such as ``{cite}`` and
``{doc}``, links' targets, "chapter 01"/"chapters 02-06" and "Fig. 7" (a place in the course
or a paper, not a quantity), and the idiom "at all". The ``**References.**`` and
``**Exercises.**`` paragraphs that close a Summary are pointers, not claims, and are not
scanned either. A sentence that states a definition
or a shape has no quantifier to guard: write it with "each" or "a" (the quantifier words
are kept for claims about what a computation gives).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted(ROOT.glob("book/[0-9][0-9]-*.ipynb"))
NO_SUMMARY = {"00-how-to-use"}  # how to run the course: it teaches nothing to summarise

QUANTIFIERS = ("every", "all", "most", "least", "never", "always", "none")
_QUANTIFIER = re.compile(r"\b(" + "|".join(QUANTIFIERS) + r")\b", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?%?(?![\w])")
_GLUE_ROLE = re.compile(r"\{glue(?::\w+)?\}`([^`]+)`")
_GLUE_CALL = re.compile(r"""\bglue\(\s*(?:f?["'])([^"']+)["']""")
# what is not prose: roles with their argument, inline code, math, link targets, chapter numbers
_NOT_PROSE = (
    re.compile(r"\{[\w:-]+\}`[^`]*`"),
    re.compile(r"`[^`]*`"),
    re.compile(r"\$\$.*?\$\$", re.DOTALL),
    re.compile(r"\$[^$]*\$"),
    re.compile(r"\]\([^)]*\)"),
    re.compile(r"\b[Cc]hapters? \d\d(?:[-–]\d\d)?(?:(?:,| and) \d\d)*"),
    # a place in a paper
    re.compile(r"\b(?:Fig(?:ure)?s?|Tables?|Eqs?|Sections?|Algorithms?)\.? \d+(?:\.\d+)*"),
    re.compile(r"\bat all\b", re.IGNORECASE),  # "no vector at all": an idiom, not a count
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z*(`$\[{])")


def summary_text(path: Path) -> str:
    """The Summary of a chapter notebook: its ``## Summary`` section up to References/Exercises."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    markdown = "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    found = re.search(r"^## Summary[ \t]*\n(.*?)(?=^#{1,2} |\Z)", markdown, re.DOTALL | re.MULTILINE)
    if not found:
        return ""
    text = found.group(1)
    return re.split(r"^\*\*(?:References|Exercises|Further reading)[.:]?\*\*", text, flags=re.MULTILINE)[0]


def sentences(text: str) -> list[str]:
    """The Summary's sentences: bullets and paragraphs split at sentence ends, lines joined."""
    blocks = re.split(r"\n\s*\n|\n(?=\s*(?:[*-]|\d+\.) )", text)
    out = []
    for block in blocks:
        block = re.sub(r"^\s*(?:[*-]|\d+\.)\s+", "", block.strip())
        block = " ".join(block.split())
        if block:
            out.extend(s for s in _SENTENCE_END.split(block) if s.strip())
    return out


def prose(sentence: str) -> str:
    """The sentence without code, math, roles, link targets and chapter numbers."""
    for pattern in _NOT_PROSE:
        sentence = pattern.sub(" ", sentence)
    return sentence


def quantifiers(sentence: str) -> list[str]:
    """The quantifier words and numbers of the sentence's prose."""
    text = prose(sentence)
    return [m.group(0) for m in _QUANTIFIER.finditer(text)] + _NUMBER.findall(text)


def glued_keys(path: Path) -> set[str]:
    """Keys the notebook's code cells glue (``glue("key", ...)``; f-string keys as patterns)."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    return set(_GLUE_CALL.findall(code))


def _is_glued(key: str, keys: set[str]) -> bool:
    if key in keys:
        return True
    # an f-string key such as f"acc_{key}_{n}" glues acc_full_4
    return any("{" in k and re.fullmatch(re.sub(r"\\\{[^}]*\\\}", r"\\w+", re.escape(k)), key) for k in keys)


def unguarded(path: Path) -> list[tuple[str, list[str]]]:
    """The Summary's quantified sentences without a glue role, with what quantifies them."""
    out = []
    for sentence in sentences(summary_text(path)):
        found = quantifiers(sentence)
        if found and not _GLUE_ROLE.search(sentence):
            out.append((sentence, found))
    return out


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_quantified_summary_sentences_are_glued(path):
    """A Summary's claim of "every", "most", "never" or a number cites a glued value or check."""
    if path.stem in NO_SUMMARY:
        assert not summary_text(path).strip(), f"{path.name} has a Summary now: take it off NO_SUMMARY"
    else:
        assert summary_text(path).strip(), f"{path.name}: no '## Summary' section"
    bad = unguarded(path)
    assert not bad, f"{path.name}: quantified Summary sentences without a {{glue}} role:\n" + "\n".join(
        f"  [{', '.join(found)}] {sentence}" for sentence, found in bad
    )


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_summary_glue_keys_are_glued_by_the_chapter(path):
    """A Summary's glue role names a key that a code cell of the same chapter glues."""
    keys = glued_keys(path)
    missing = [
        key
        for sentence in sentences(summary_text(path))
        for key in _GLUE_ROLE.findall(sentence)
        if not _is_glued(key.split(":")[0], keys)
    ]
    assert not missing, f"{path.name}: the Summary cites glue keys no code cell glues: {missing}"


def test_the_scanner_finds_quantified_claims():
    """The rule's own examples: what counts as a quantified sentence and what guards it."""
    assert quantifiers("It reads most numbers of 8 digits right.") == ["most", "8"]
    assert quantifiers("Masks of shape `(B, 1, 1, S)` broadcast over $h = 4$ heads.") == []
    assert quantifiers("Chapter 01's model and chapters 02-06 describe it.") == []
    assert quantifiers("In float16 it overflows.") == []
    assert quantifiers("None of this depends on d_k.") == ["None"]
    assert quantifiers("It has no vector at all, unlike the paper's Fig. 7 and Table 2.") == []
    assert quantifiers("Nearly all of them, in Fig. 7 and 3 more.") == ["all", "3"]
    assert quantifiers("It drifts by up to 19% of its value.") == ["19%"]
    glued = "Its accuracy is {glue:text}`acc_7` at 7 pairs."
    assert _GLUE_ROLE.search(glued) and quantifiers(glued) == ["7"]
    assert sentences("* One. Two 3.\n* Three\n  goes on.\n") == ["One.", "Two 3.", "Three goes on."]
    assert _is_glued("acc_full_4", {"acc_{key}_{n}"}) and not _is_glued("loss", {"acc_{key}"})
