"""Grade the independent answer banks (tests/checks/banks_independent/, #25).

The banks were written from the exercise notebooks' text alone, before their
author read any check, solution or the other banks. Each module defines

* ``WRONG``: :class:`bank.Wrong` entries; ``mistake`` is the author's own
  description of the slip (not the checks' vocabulary);
* ``RIGHT``: :class:`bank.Right` entries, correct answers written differently
  (some follow the text to the letter in ways the author of the checks may not
  have expected);
* ``NAMED``: a dict ``{function name: phrase or None}`` for the wrong answers.
  A phrase is what the feedback must contain for the mistake to count as
  named (the check's vocabulary, chosen after reading the feedback); ``None``
  records a known gap: the answer loses marks but no feedback names its
  mistake. (This extends bank.py's format here only.)

Run ``python tests/checks/independent_banks.py`` from the repository root
for the report: false passes (a wrong answer given full marks), false fails
(a right answer losing marks), and the named share, per exercise and in total.
``--feedback`` prints every wrong answer's feedback too.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
if str(HERE.parents[1]) not in sys.path:
    sys.path.insert(0, str(HERE.parents[1]))

from bank import Right, Wrong  # noqa: E402

from attnlib.checks import evaluate  # noqa: E402

BANK_MODULES = sorted(p.stem for p in (HERE / "banks_independent").glob("ch*.py"))


def load():
    """-> (wrong entries, right entries, NAMED phrases keyed by (exercise, function name))."""
    wrong, right, named = [], [], {}
    for name in BANK_MODULES:
        module = importlib.import_module(f"banks_independent.{name}")
        for entry in module.WRONG:
            assert isinstance(entry, Wrong), f"banks_independent/{name}.py: WRONG holds {entry!r}"
            wrong.append(entry)
        for entry in module.RIGHT:
            assert isinstance(entry, Right), f"banks_independent/{name}.py: RIGHT holds {entry!r}"
            right.append(entry)
        for fn_name, phrase in getattr(module, "NAMED", {}).items():
            named[(name, fn_name)] = phrase
    return wrong, right, named


def module_of(entry) -> str:
    return entry.fn.__module__.rsplit(".", 1)[-1]


def grade(entry):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # overflow warnings of the wrong answers are expected
        return evaluate(entry.exercise, entry.fn, include_hidden=True)


def tally(wrong, right, named):
    """-> dict exercise -> counts, plus the lists of false passes, false fails, unnamed."""
    per = defaultdict(lambda: {"wrong": 0, "right": 0, "false_pass": 0, "false_fail": 0, "named": 0})
    false_pass, false_fail, unnamed, wrongly_named = [], [], [], []
    for entry in wrong:
        result = grade(entry)
        row = per[entry.exercise]
        row["wrong"] += 1
        label = f"{entry.exercise}:{entry.fn.__name__}"
        if result.fraction == 1.0:
            row["false_pass"] += 1
            false_pass.append(label)
            continue
        phrase = named.get((module_of(entry), entry.fn.__name__))
        if phrase is not None and phrase.lower() in result.report().lower():
            row["named"] += 1
        else:
            unnamed.append(label)
            if phrase is not None:
                wrongly_named.append(label)
    for entry in right:
        row = per[entry.exercise]
        row["right"] += 1
        if grade(entry).fraction < 1.0:
            row["false_fail"] += 1
            false_fail.append(f"{entry.exercise}:{entry.fn.__name__}")
    return dict(per), false_pass, false_fail, unnamed, wrongly_named


def main(argv):
    wrong, right, named = load()
    if "--feedback" in argv:
        only = [a for a in argv if a.startswith("ex-")]
        for entry in wrong + right:
            if only and entry.exercise not in only:
                continue
            kind = "WRONG" if isinstance(entry, Wrong) else "RIGHT"
            what = f" ({entry.mistake})" if kind == "WRONG" else ""
            print(f"=== {kind} {entry.exercise}:{entry.fn.__name__}{what}")
            print(grade(entry).report())
        return
    per, fp, ff, unnamed, wrongly = tally(wrong, right, named)
    print(f"{'exercise':<9} " + " ".join(f"{h:>5}" for h in ("wrong", "fp", "named", "right", "ff")))
    chapters = defaultdict(lambda: [0, 0, 0])
    for ex in sorted(per):
        r = per[ex]
        counts = (r["wrong"], r["false_pass"], r["named"], r["right"], r["false_fail"])
        print(f"{ex:<9} " + " ".join(f"{c:>5}" for c in counts))
        ch = chapters[ex[:5]]
        ch[0] += r["wrong"]
        ch[1] += r["named"]
        ch[2] += r["false_pass"]
    total_w = sum(r["wrong"] for r in per.values())
    total_n = sum(r["named"] for r in per.values())
    print(
        "per chapter (named / wrong):",
        ", ".join(f"{c}: {n}/{w}" for c, (w, n, _) in sorted(chapters.items())),
    )
    print(f"total: {total_w} wrong, {len(fp)} false passes, {total_n} named ({total_n / total_w:.0%});")
    print(f"       {sum(r['right'] for r in per.values())} right, {len(ff)} false fails")
    for title, items in (("false passes", fp), ("false fails", ff), ("named wrongly", wrongly)):
        if items:
            print(f"{title}: {', '.join(items)}")
    if "--unnamed" in argv:
        print("unnamed:", ", ".join(unnamed))


if __name__ == "__main__":
    main(sys.argv[1:])
