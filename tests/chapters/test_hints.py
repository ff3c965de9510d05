"""Hints never print the answer (issue 25, item 9): no hint holds a line of the solution's code."""

import re
from pathlib import Path

import nbformat
import pytest

from attnlib.checks.exercise import all_exercises

ROOT = Path(__file__).resolve().parents[2]


def _normalise(code: str) -> str:
    return re.sub(r"\s+", "", code)


def _solution_lines() -> dict[str, list[str]]:
    """The answer lines (between ### BEGIN / ### END SOLUTION) of every exercise, by id."""
    lines: dict[str, list[str]] = {}
    for path in sorted((ROOT / "solutions").glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            exercise = (cell.metadata.get("attnlib") or {}).get("exercise")
            if cell.cell_type != "code" or not exercise:
                continue
            inside, body = False, []
            for line in cell.source.splitlines():
                if "### BEGIN SOLUTION" in line:
                    inside = True
                elif "### END SOLUTION" in line:
                    inside = False
                elif inside:
                    body.append(line.split("#")[0].strip())
            lines[exercise] = [line for line in body if len(_normalise(line)) >= 16]
    return lines


SOLUTIONS = _solution_lines()


@pytest.mark.parametrize("exercise_id", sorted(all_exercises()))
def test_no_hint_holds_a_line_of_the_answer(exercise_id):
    exercise = all_exercises()[exercise_id]
    answer = SOLUTIONS.get(exercise_id, [])
    for tier, hint in enumerate(exercise.hints, start=1):
        flat = _normalise(hint)
        for line in answer:
            assert _normalise(line) not in flat, (
                f"{exercise_id}: hint {tier} of {len(exercise.hints)} prints the answer's line {line!r}"
            )


def test_the_mask_hints_point_at_the_idea():
    """ex-05-1 and ex-05-2's last tier used to be the one-line solution."""
    hints = {ex: all_exercises()[ex].hints[-1] for ex in ("ex-05-1", "ex-05-2")}
    assert "arange(max_len)[None, :] < lengths[:, None]" not in hints["ex-05-1"]
    assert "torch.tril(" not in hints["ex-05-2"]


def test_the_check_catches_a_hint_that_prints_the_answer(monkeypatch):
    answer = "mask = torch.arange(max_len)[None, :] < lengths[:, None]"
    assert _normalise(answer) in _normalise(f"hint: {answer}, of shape (B, max_len)")
