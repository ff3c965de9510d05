"""What the grader prints: a progress line per learner while a class is graded, and the
summary at the end (statuses, means, what to look at, the written answers left to grade)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from coursetools.grade.records.escape import terminal
from coursetools.grade.records.record import Record, Status, number


class Progress:
    """A one-line progress bar on a terminal, one line per submission otherwise."""

    def __init__(self, total: int, stream=None):
        self.total = total
        self.done = 0
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.start = time.monotonic()

    def update(self, record: Record, skipped: bool = False, grade=None) -> None:
        """One more submission; ``grade`` (its :class:`~coursetools.grade.outputs.scores.Grade`) gives the
        final total out of every item's points, as grades.csv and the feedback show it (the
        automatic total beside it when they differ: written answers, overrides, a late penalty)."""
        self.done += 1
        elapsed = time.monotonic() - self.start
        width = 24
        filled = int(width * self.done / max(self.total, 1))
        bar = "#" * filled + "-" * (width - filled)
        what = "kept (already graded)" if skipped else record.status.value
        if grade is not None:
            score = f"{number(grade.total) or '-'}/{number(grade.max)}"
            if (grade.total, grade.max) != (record.total, record.max):
                score += f" (automatic {number(record.total) or '-'}/{number(record.max)})"
        else:
            score = f"{number(record.total) or '-'}/{number(record.max)}"
        line = f"[{bar}] {self.done}/{self.total} {elapsed:5.1f}s  {terminal(record.student)}: {what} {score}"
        if self.tty:
            self.stream.write("\r\x1b[K" + line[:160])
            if self.done == self.total:
                self.stream.write("\n")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def written_left(scores) -> dict[str, int]:
    """``{question: learners whose answer is not scored yet}`` of the written questions
    graded by hand that still wait for a score (empty when every answer is scored)."""
    left = {q: sum(g.scores.get(q) is None for g in scores.grades) for q in scores.info.manual}
    return {q: n for q, n in left.items() if n}


def written_next(out: Path | str | None, left: dict[str, int], learners: int) -> list[str]:
    """What to run next while written answers wait for their scores (empty when none wait)."""
    if not left:
        return []
    where = terminal(str(out)) if out else "OUT"
    which = ", ".join(f"{terminal(q)} ({n} of {learners})" for q, n in left.items())
    return [
        f"written answers not scored yet: {which}; the totals are not final until they are:",
        f"  1. python -m coursetools.grade manual {where}   (a review page and a score sheet per question)",
        f"  2. fill points and comment in {where}/manual/<question>.csv",
        f"  3. python -m coursetools.grade overrides {where}   (merges them into every output)",
    ]


def summary(scores, isolation: str, seconds: float, out: Path | None = None) -> str:
    """The command line's summary, from the class's final scores (the same as report.html);
    ``out``: the output folder, named in what to run next."""
    counts: dict[Status, int] = {}
    for grade in scores.grades:
        counts[grade.status] = counts.get(grade.status, 0) + 1
    left = written_left(scores)
    lines = ["", "status        count  meaning"]
    for status in sorted(counts, key=list(Status).index):
        meaning = status.meaning
        if status is Status.GRADED and left:  # never "final" while a written answer waits
            meaning = "ran to the end; the total waits for the written answers graded by hand"
        lines.append(f"{status.value:<13} {counts[status]:>5}  {meaning}")
    lines.append("")
    lines.append(f"{'exercise':<13} {'mean':>6} {'max':>5}  (final scores, over submissions with a score)")
    for item in scores.items:
        vals = [g.scores[item] for g in scores.grades if g.scores.get(item) is not None]
        mean = number(sum(vals) / len(vals)) if vals else "-"
        top = scores.info.points.get(item, scores.info.manual.get(item, 0))
        lines.append(f"{terminal(item)[:13]:<13} {mean:>6} {number(top):>5}")
    lines.append("")
    lines.append(scores.mean_text())
    adjusted = [g for g in scores.grades if g.changes]  # a written answer graded is not a change
    if adjusted:
        lines.append(
            f"{len(adjusted)} learners with a score changed by the instructor (grades.csv: adjustments)"
        )
    attention = [g for g in scores.grades if g.status is not Status.GRADED]
    if attention:
        lines.append("")
        lines.append(
            "to look at: " + ", ".join(f"{terminal(g.student)} ({g.status.value})" for g in attention[:30])
        )
        if len(attention) > 30:
            lines.append(f"... and {len(attention) - 30} more (see grades.csv)")
    if scores.info.strays:
        lines.append("")
        lines.append(
            "not submissions (not graded, listed in strays.txt): "
            + ", ".join(terminal(s) for s in scores.info.strays[:20])
        )
    for problem in scores.problems:
        lines.append(f"problem: {terminal(problem)}")
    if left:
        lines.append("")
        lines += written_next(out, left, len(scores.grades))
    lines.append("")
    lines.append(f"{len(scores.grades)} submissions in {seconds:.1f} s; isolation: {terminal(isolation)}")
    return "\n".join(lines)
