"""A matched control for every comparison, and seeds counted as seeds (issue 44; CONTRIBUTING.md,
"A chapter's claims").

Two rules, checked on every chapter notebook of ``book/``:

* **Controls.** A paragraph that says a trained model *prefers*, *favours*, *beats* or *is a
  previous-token / induction head*, and cites a glued number, also cites a glued
  ``<key>_baseline``: what chance or position alone would give, computed on the same data
  (chapter 11's rollout "preferred the strokes" against an even spread, while the mean map,
  blind to the picture, did as well). Each glued ``<key>_baseline`` is glued by the same
  cell as its claim ``<key>``, and every paragraph citing the claim cites the baseline too.
* **Seeds.** A chapter counts seeds, not runs: no glue key ``n_runs``, no "18 runs" or
  "6 of 18 runs" in its prose or in the strings its code glues, and "all N seeds" only for
  N >= ``spread.MIN_SEEDS``. Float paths and thread counts repeat a seed
  (``attnlib.chapters.spread``): they are reproducibility, not samples.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from attnlib.chapters import spread

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted(ROOT.glob("book/[0-9][0-9]-*.ipynb"))

COMPARISON = re.compile(
    r"\b(prefers?|preferred|preference|favou?rs?|favou?red|beats?|"
    r"previous-token heads?|induction heads?)\b",
    re.IGNORECASE,
)
_GLUE_ROLE = re.compile(r"\{glue(?::\w+)?\}`([^`:]+)(?::[^`]*)?`")
_GLUE_CALL = re.compile(r"""\bglue\(\s*f?["']([^"']+)["']""")
_NOT_PROSE = (
    re.compile(r"\{cite(?::\w+)?\}`[^`]*`"),  # a cited work's key is no claim
    re.compile(r"`[^`]*`(?<!\}`)"),
)
# run counts: "18 runs", "6 of 18 runs", "{n} recorded runs", "of {glue:text}`n_runs` runs"
RUN_COUNT = re.compile(
    r"\b(?:in|of|all|the|over)\s+(?:\d+|\{[^}]*\}|\{glue(?::\w+)?\}`[^`]*`)\s+(?:recorded\s+)?runs\b"
    r"|\bn_runs\b",
    re.IGNORECASE,
)
ALL_SEEDS = re.compile(r"\ball\s+(\d+)\s+seeds\b", re.IGNORECASE)


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def paragraphs(path: Path) -> list[str]:
    """Markdown paragraphs and bullets of a notebook, lines joined."""
    out = []
    for cell in cells(path):
        if cell["cell_type"] != "markdown":
            continue
        for block in re.split(r"\n\s*\n|\n(?=\s*[*-] )", "".join(cell["source"])):
            text = " ".join(block.split())
            if text:
                out.append(text)
    return out


def glued_by_cell(path: Path) -> list[set[str]]:
    """For each code cell, the keys it glues (f-string keys as written)."""
    return [set(_GLUE_CALL.findall("".join(c["source"]))) for c in cells(path) if c["cell_type"] == "code"]


# a key that names the control it glues: "<claim>_baseline", or a ceiling / chance / uniform level
_BASELINE_KEY = re.compile(r"_baseline$|ceiling|chance|uniform|control")
_NEGATED = re.compile(
    r"\b(?:no|not|nor|neither|never|without|for|whether)\b(?:\W+\w+){0,3}\W+$", re.IGNORECASE
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z*(`$\[{])")
# paragraphs whose comparison word is about a computation, not a trained model: (chapter, words)
NOT_A_TRAINED_MODEL = {
    ("03-queries-keys-values", "the dot product prefers long keys"): "random keys of unequal norm",
}


def comparison_without_control(paragraph: str, chapter: str = "") -> bool:
    """A paragraph that compares with a glued number but cites no baseline key.

    Sentences that cite a paper (a ``{cite}`` role) report the paper's claim, and a negated
    comparison ("has no induction heads", "does not beat") claims no preference: neither
    needs a control of the page's own.
    """
    if any(chapter == c and words in paragraph for (c, words) in NOT_A_TRAINED_MODEL):
        return False
    roles = _GLUE_ROLE.findall(paragraph)
    if not roles or any(_BASELINE_KEY.search(k) for k in roles):
        return False
    for sentence in _SENTENCE_END.split(paragraph):
        if "{cite" in sentence:
            continue
        prose = sentence
        for pattern in _NOT_PROSE:
            prose = pattern.sub(" ", prose)
        for match in COMPARISON.finditer(prose):
            if not _NEGATED.search(prose[: match.start()]):
                return True
    return False


def run_counts(path: Path) -> list[str]:
    """Run counts in the prose and in the glued strings' code, with "all N seeds" for N < 5."""
    found = []
    for cell in cells(path):
        text = "".join(cell["source"])
        if cell["cell_type"] == "code":
            # only the code that makes glued text or a glue key: comments and asserts may
            # speak of the record's runs (the check does run over every run)
            text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
            text = "\n".join(re.findall(r"""\bglue\([^\n]*(?:\n\s+[^\n]*)*""", text))
        for match in RUN_COUNT.finditer(text):
            found.append(text[max(0, match.start() - 40) : match.end() + 20].replace("\n", " "))
        for match in ALL_SEEDS.finditer(text):
            if int(match.group(1)) < spread.MIN_SEEDS:
                found.append(match.group(0))
    return found


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_every_comparison_cites_its_control(path):
    bad = [p for p in paragraphs(path) if comparison_without_control(p, path.stem)]
    assert not bad, (
        f"{path.name}: a paragraph claims a preference or a head's role with a glued number "
        "but cites no glued <key>_baseline (CONTRIBUTING.md, 'A matched control'):\n"
        + "\n".join(f"  {p[:200]}" for p in bad)
    )


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_every_baseline_sits_beside_its_claim(path):
    """``<key>_baseline`` is glued by the cell that glues ``<key>``; a paragraph citing the claim cites it."""
    problems = []
    for keys in glued_by_cell(path):
        for key in keys:
            if key.endswith("_baseline") and key[: -len("_baseline")] not in keys:
                problems.append(
                    f"{key} is glued without its claim {key[: -len('_baseline')]} in the same cell"
                )
    baselines = {k for keys in glued_by_cell(path) for k in keys if k.endswith("_baseline")}
    for paragraph in paragraphs(path):
        cited = set(_GLUE_ROLE.findall(paragraph))
        for base in baselines:
            claim = base[: -len("_baseline")]
            if claim in cited and base not in cited:
                problems.append(f"a paragraph cites {claim} without {base}: {paragraph[:160]}")
    assert not problems, f"{path.name}:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_claims_count_seeds_not_runs(path):
    found = run_counts(path)
    assert not found, (
        f"{path.name}: counts float-path and thread repeats as runs, or says 'all N seeds' "
        f"with N < {spread.MIN_SEEDS} (count seeds: spread.Spread.in_seeds):\n  " + "\n  ".join(found)
    )


def test_the_scanners_catch_what_they_should():
    """The rules' own examples."""
    assert comparison_without_control("The rollout prefers ink: {glue:text}`rollout_ink`.")
    assert not comparison_without_control(
        "The rollout prefers ink: {glue:text}`rollout_ink` ({glue:text}`rollout_ink_baseline`)."
    )
    assert not comparison_without_control("A penalty can make a head prefer recent keys.")  # no number
    assert comparison_without_control("Head 1 is a previous-token head ({glue:text}`prev_share`).")
    assert not comparison_without_control("Induction heads {cite}`olsson2022` read {glue:text}`x_baseline`.")
    # a cited work's name is not a claim
    assert not comparison_without_control("As {cite}`induction-heads` shows, {glue:text}`x`.")
    for text in ("in every one of the 18 recorded runs", "in 6 of 18 runs", "({glue:text}`n_runs` runs)"):
        assert RUN_COUNT.search(text), text
    assert not RUN_COUNT.search("in 3 of 3 seeds, each repeated on 3 float paths")
    assert not RUN_COUNT.search("the difference at step 120 runs from -0.1 to 0.2")  # a verb
    assert not comparison_without_control("It has no induction heads ({glue:text}`gap`).")
    assert not comparison_without_control("It does not beat the ceiling {glue:text}`acc_16`.")
    assert not comparison_without_control("It looks for previous-token heads. {glue:text}`t`")
    assert not comparison_without_control(
        "ALiBi scores {glue:text}`acc`, prefers x, ceiling {glue:text}`ceiling_16`."
    )
    assert [m.group(1) for m in ALL_SEEDS.finditer("in all 3 seeds; in all 5 seeds")] == ["3", "5"]
