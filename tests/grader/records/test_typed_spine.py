"""The typed spine of issue 24: no module of the grader spells a status or a kind as a string.

The grader's vocabulary lives in two modules: ``coursetools/grade/records/record.py`` (a
submission's ``Status``, a case's ``CaseStatus``, ...) and
``coursetools/grade/records/events.py`` (the channel's ``EventKind``, ``StepKind``,
``RunEnd``, ``CaseKind``, ...). Each is a ``str`` Enum whose members compare equal
to their wire words, so ``record["status"] == "graded"`` still works when a module
forgets the member; this test reads every other module's syntax tree and finds
those words where a status or a kind is meant:

* compared (``==``, ``!=``, ``is``, ``in`` a tuple, a ``match`` case) with a
  status-like expression: a name or attribute ``status``, ``kind``, ``end``,
  ``state``, ``op``, ``phase`` (or ``*_status``, ``*_kind``), a subscript or
  ``.get()`` of such a key, or ``str()`` / ``.value`` of one of these;
* passed as such a keyword (``status=``, ``kind=``, ``t=``, ``end=``, ...),
  assigned to such a name or subscript, the value of such a key in a dict
  literal, the default of such a parameter;
* returned by a function annotated to return one of the Enums, or passed by
  position where a dataclass of the grader declares a field of an Enum type
  (``RunOutcome("died")``).

A word is only a status where it stands in one of these places: ``"error"`` as a
dict key, ``("value", x)`` as a tag, ``"done"`` in a message stay ordinary strings.
"""

from __future__ import annotations

import ast
import enum
import functools
import json
from pathlib import Path

import pytest

from coursetools.grade.records import events, record

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "coursetools" / "grade"
DEFINITIONS = {"record.py", "events.py"}  # where the words are spelled, once each

# names and keys that hold a status or a kind; "t" is the channel's event kind
CONTEXT_KEYS = frozenset({"status", "kind", "t", "end", "state", "op", "phase"})
CONTEXT_SUFFIXES = ("_status", "_kind")


def vocabulary_enums() -> dict[str, type[enum.Enum]]:
    """Every ``str`` Enum that record.py and events.py define, by class name."""
    found = {}
    for module in (record, events):
        for name, value in vars(module).items():
            if (
                isinstance(value, type)
                and issubclass(value, enum.Enum)
                and issubclass(value, str)
                and value.__module__ == module.__name__
                and list(value)  # not an abstract base such as events._Word
            ):
                found[name] = value
    return found


ENUMS = vocabulary_enums()
VOCABULARY = frozenset(member.value for enum_type in ENUMS.values() for member in enum_type)


def _named(node: ast.AST) -> str | None:
    """The name of a Name or the attribute of an Attribute (``a.b.status`` -> ``status``)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _is_context_name(name: str | None) -> bool:
    return name is not None and (name in CONTEXT_KEYS or name.endswith(CONTEXT_SUFFIXES))


def _key(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _status_like(node: ast.AST) -> bool:
    """An expression that holds a status or a kind (see the module's docstring)."""
    if isinstance(node, (ast.Name, ast.Attribute)):
        if isinstance(node, ast.Attribute) and node.attr == "value":
            return _status_like(node.value)  # Status.GRADED.value, record.status.value
        return _is_context_name(_named(node))
    if isinstance(node, ast.Subscript):
        return _key(node.slice) in CONTEXT_KEYS
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "get" and node.args:
            return _key(node.args[0]) in CONTEXT_KEYS
        if isinstance(func, ast.Name) and func.id == "str" and len(node.args) == 1:
            return _status_like(node.args[0])
    return False


def _words(node: ast.AST | None) -> list[ast.Constant]:
    """The vocabulary words an expression evaluates to (through ``a if c else b`` and ``a or b``)."""
    if node is None:
        return []
    if isinstance(node, ast.Constant):
        return [node] if isinstance(node.value, str) and node.value in VOCABULARY else []
    if isinstance(node, ast.IfExp):
        return _words(node.body) + _words(node.orelse)
    if isinstance(node, ast.BoolOp):
        return [word for value in node.values for word in _words(value)]
    return []


def _members(node: ast.AST) -> list[ast.Constant]:
    """The vocabulary words of a container that ``in`` reads (a tuple, list or set literal)."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [word for element in node.elts for word in _words(element)]
    return _words(node)


def _annotates_enum(annotation: ast.AST | None) -> bool:
    """An annotation that names one of the Enums (``Status``, ``CaseKind | None``, ``"RunEnd"``)."""
    if annotation is None:
        return False
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return False
    return any(_named(node) in ENUMS for node in ast.walk(annotation))


def _typed_positions(tree: ast.Module) -> dict[str, set[int]]:
    """Dataclass name -> the positions of its fields annotated with one of the Enums."""
    found: dict[str, set[int]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        decorators = {_named(d.func if isinstance(d, ast.Call) else d) for d in node.decorator_list}
        if "dataclass" not in decorators:
            continue
        fields = [s for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
        typed = {i for i, field in enumerate(fields) if _annotates_enum(field.annotation)}
        if typed:
            found[node.name] = typed
    return found


def _assigned(target: ast.AST, value: ast.AST | None) -> list[ast.Constant]:
    """Words assigned to a status-like target (pairs of ``a, b = x, y`` included)."""
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)):
        if len(target.elts) == len(value.elts):
            return [w for t, v in zip(target.elts, value.elts, strict=True) for w in _assigned(t, v)]
        return []
    return _words(value) if _status_like(target) else []


def literal_statuses(source: str, typed_positions: dict[str, set[int]] | None = None) -> list[str]:
    """Where ``source`` spells a word of the vocabulary as a status or a kind: ``"line: word"``.

    ``typed_positions`` (dataclass name -> positions of its Enum-typed fields) adds the
    grader's own dataclasses to those of ``source``.
    """
    tree = ast.parse(source)
    positions = {**(typed_positions or {}), **_typed_positions(tree)}
    found: list[ast.Constant] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for left, op, right in zip(operands, node.ops, operands[1:], strict=False):
                if isinstance(op, (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)):
                    if _status_like(left):
                        found += _words(right)
                    if _status_like(right):
                        found += _words(left)
                elif isinstance(op, (ast.In, ast.NotIn)) and _status_like(left):
                    found += _members(right)
        elif isinstance(node, ast.Match) and _status_like(node.subject):
            for case in node.cases:
                found += [
                    word
                    for pattern in ast.walk(case.pattern)
                    if isinstance(pattern, ast.MatchValue)
                    for word in _words(pattern.value)
                ]
        elif isinstance(node, ast.keyword) and _is_context_name(node.arg):
            found += _words(node.value)
        elif isinstance(node, ast.Assign):
            found += [word for target in node.targets for word in _assigned(target, node.value)]
        elif isinstance(node, ast.AnnAssign):
            if _annotates_enum(node.annotation):
                found += _words(node.value)
            else:
                found += _assigned(node.target, node.value)
        elif isinstance(node, ast.AugAssign):
            found += _assigned(node.target, node.value)
        elif isinstance(node, ast.Dict):
            found += [
                word
                for key, value in zip(node.keys, node.values, strict=True)
                if key is not None and _key(key) in CONTEXT_KEYS
                for word in _words(value)
            ]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = node.args
            positional = [*args.posonlyargs, *args.args]
            pairs = list(zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True))
            pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None]
            for arg, default in pairs:
                if _is_context_name(arg.arg) or _annotates_enum(arg.annotation):
                    found += _words(default)
            if not isinstance(node, ast.Lambda) and _annotates_enum(node.returns):
                found += [
                    word
                    for inner in ast.walk(node)
                    if isinstance(inner, ast.Return)
                    for word in _words(inner.value)
                ]
        elif isinstance(node, ast.Call) and _named(node.func) in positions:
            typed = positions[_named(node.func)]
            found += [word for i, arg in enumerate(node.args) if i in typed for word in _words(arg)]
    unique = {(word.lineno, word.col_offset): word for word in found}
    return [f"{word.lineno}: {word.value!r}" for _, word in sorted(unique.items())]


def _grader_modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p.name not in DEFINITIONS)


@functools.cache  # read once: every parametrized test below uses it, none changes it
def _grader_positions() -> dict[str, set[int]]:
    """The Enum-typed fields of every dataclass of the grader, record.py and events.py included."""
    positions: dict[str, set[int]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        positions.update(_typed_positions(ast.parse(path.read_text(encoding="utf-8"))))
    return positions


def test_the_vocabulary_is_read_from_both_definitions():
    assert {"Status", "CaseStatus", "EventKind", "StepKind", "RunEnd", "CaseKind"} <= set(ENUMS)
    assert {"graded", "passed", "hello", "cell", "step-timeout", "not-attempted"} <= VOCABULARY
    # RunOutcome.end, Step.kind, Event.kind, CaseEvent.kind, record.Case.status, Record.status
    positions = _grader_positions()
    assert positions["RunOutcome"] == {0} and positions["CaseEvent"] == {0}
    assert positions["Case"] == {1}


@pytest.mark.parametrize("path", _grader_modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_status_or_kind_is_spelled_outside_its_definition(path):
    found = literal_statuses(path.read_text(encoding="utf-8"), _grader_positions())
    assert not found, (
        f"{path.relative_to(ROOT)} spells statuses or kinds as strings (use the members of "
        f"coursetools.grade.records.record / coursetools.grade.records.events): {found}"
    )


# each source spells exactly one status or kind; the checker must find it on line 1
SPELLED = [
    'if record["status"] == "graded": pass',
    'if "unreadable" != record.get("status"): pass',
    'ok = outcome.end in ("step-timeout", Status.TIMEOUT)',
    'ok = event.kind is not "hello"',
    'ok = str(record.status) == "needs-review"',
    'ok = record.status.value == "kernel-died"',
    'ok = case_status == "passed"',
    'record["status"] = "interrupted"',
    'record.status = "grader-error" if failed else Status.GRADED',
    'kind, answer = "error", {}',
    'skipped: CaseKind = "died-skipped"',
    'channel.send(t="fatal", message="stopped")',
    'answer.update(kind="value", value=1)',
    'message = {"t": EventKind.CASE, "kind": "not-attempted"}',
    'def judge(status="no-verdict"): pass',
    'def end(done: bool) -> RunEnd: return RunEnd.DONE if done else "died"',
    'outcome = RunOutcome("deadline", step)',
    'match event.kind:\n    case "cell-done": pass',
    'state = "missing" if func is None else LookupState.OK',
]

CLEAN = """
from coursetools.grade.records.events import CaseKind, EventKind, RunEnd
from coursetools.grade.records.record import Status

def outcome(record: dict, answer: dict, data: dict, kind: str, step=None) -> RunOutcome:
    answer["error"] = {"etype": "TypeError", "text": "not callable"}  # "error" as a key
    value = answer.get("value")  # "value" as a key
    tagged = ("value", value)  # a tag, not a kind
    message = "the run is done"
    if data.get("etype") == "error":  # not a status-like key
        pass
    if record["status"] == Status.GRADED and kind in (CaseKind.VALUE, CaseKind.ERROR):
        pass
    fields = {k: data.get(k) for k in ("cell", "etype", "text", "line")}
    print(f"{message}: done", tagged, fields, value)
    return RunOutcome(RunEnd.DONE, step, "done")
"""


@pytest.mark.parametrize("source", SPELLED)
def test_the_checker_finds_a_spelled_status(source):
    found = literal_statuses(source, _grader_positions())
    assert len(found) == 1 and found[0].startswith(("1: ", "2: ")), found


def test_the_checker_leaves_members_and_ordinary_strings_alone():
    assert literal_statuses(CLEAN, _grader_positions()) == []


# -- one protocol module for both ends: what the harness builds, the grader reads back


def _wire(message: dict, token: str) -> dict:
    """``message`` as it crosses the channel (the harness's _Channel puts the secret first)."""
    return json.loads(json.dumps({"k": token, **message}))


def test_the_harness_messages_keep_their_wire_words_and_read_back_as_members():
    token = "0" * 32
    plan = events.RunPlan(
        cells=[[3, "x = 1"]], evaluate_after={"3": ["ex-1"]}, evaluate_at_end=[], exercises=["ex-1"]
    )
    messages = [
        events.hello({"mode": "none"}, 1),
        events.cell_step(3),
        events.cell_error(3, "ValueError", "bad" * 200, 2),
        events.cell_done(3, 0.1),
        events.case_step("ex-1", "small"),
        events.case_outcome(
            "ex-1", "small", events.Phase.CELL, events.CaseKind.VALUE, 0.1, value=[1], defined=["<cell 3>", 1]
        ),
        events.done(0),
    ]
    wire = [_wire(m, token) for m in messages]
    assert [w["t"] for w in wire] == ["hello", "step", "cell-error", "cell-done", "step", "case", "done"]
    assert wire[1] == {"k": token, "t": "step", "kind": "cell", "cell": 3}
    assert wire[5]["kind"] == "value" and wire[5]["phase"] == "cell" and "etype" not in wire[5]
    assert len(wire[2]["text"]) == events.TEXT_CHARS
    parsed = [events.Event.parse(w, token) for w in wire]
    assert [p.kind for p in parsed] == [
        events.EventKind.HELLO,
        events.EventKind.STEP,
        events.EventKind.CELL_ERROR,
        events.EventKind.CELL_DONE,
        events.EventKind.STEP,
        events.EventKind.CASE,
        events.EventKind.DONE,
    ]
    assert all(type(p.kind) is events.EventKind for p in parsed)
    assert events.Step.from_event(parsed[1].data) == events.Step(events.StepKind.CELL, cell=3)
    assert events.CaseEvent.from_event(parsed[5].data) == events.CaseEvent(events.CaseKind.VALUE, [1])
    transcript = events.Transcript(plan)
    assert [transcript.accept(p) for p in parsed] == [True] * len(parsed)


def test_a_case_message_carries_an_error_and_never_a_kind_only_the_grader_records():
    missing = events.case_outcome(
        "ex-1", "small", "end", "missing", 0.0, value=[1], etype="NameError", text="no function"
    )
    assert missing["kind"] is events.CaseKind.MISSING and missing["phase"] is events.Phase.END
    assert (missing["etype"], missing["text"]) == ("NameError", "no function") and "value" not in missing
    for kind in events.CaseKind:
        if kind.by_grader:
            with pytest.raises(ValueError, match="kind"):
                events.case_outcome("ex-1", "small", events.Phase.CELL, kind, 0.0)


@pytest.mark.parametrize("reply", [None, 3, ["value"], {"kind": "value"}, "Value", "timeout "])
def test_a_reply_that_is_not_a_wire_word_reads_as_none(reply):
    assert events.CaseKind.read(reply) is None
    assert events.LookupState.read(reply) is None


def test_a_wire_word_reads_as_its_member():
    assert events.CaseKind.read("not-attempted") is events.CaseKind.NOT_ATTEMPTED
    assert events.LookupState.read("not-callable") is events.LookupState.NOT_CALLABLE
    assert events.Request.read("flush") is events.Request.FLUSH
