"""Issue 38: the sandbox in one module per process, its report and the run's plan as types,
a job slot as one object.

* ``coursetools.grade.sandbox.api`` stays the grader's face over the four modules: every name the
  grader and its tests use there is the moved object itself, so a test that replaces one on
  ``sandbox`` replaces what the grader calls (the import rule between the modules is
  ``tests/test_layering.py``'s);
* :class:`IsolationReport` crosses as the JSON object the sandbox always sent (the same keys,
  in the same order, so ``record.json`` is unchanged), and reads back to itself;
* :class:`RunPlan` reads back from what :meth:`RunPlan.to_wire` wrote, beside the keys the
  run adds (``fd``, ``token``, ``env``, ``sandbox``);
* :class:`JobSlot`: a session hands each slot its own reader, memory cgroup and zygote.
"""

from __future__ import annotations

import json
import os

import pytest
from fixtures import _session

from coursetools.grade.grading import process
from coursetools.grade.grading.process import JobSlot, Run
from coursetools.grade.records.events import RunPlan
from coursetools.grade.sandbox import api as sandbox
from coursetools.grade.sandbox import child as sandbox_child
from coursetools.grade.sandbox import host as sandbox_host
from coursetools.grade.sandbox import parent as sandbox_parent
from coursetools.grade.sandbox import shared as sandbox_shared
from coursetools.grade.sandbox.shared import IsolationReport, SandboxConfig

pytestmark = pytest.mark.grader

# the isolation report's keys, in the order the sandbox has always sent them (before issue 38 a dict)
WIRE_KEYS = ["mode", "network", "readonly", "root", "hidden", "opened", "uid", "limits", "seccomp", "errors"]


@pytest.mark.parametrize(
    ("name", "module"),
    [
        ("probe", sandbox_host),
        ("command", sandbox_host),
        ("describe", sandbox_host),
        ("allocate_uids", sandbox_host),
        ("release_uids", sandbox_host),
        ("sweep_memory_groups", sandbox_host),
        ("kill_uid", sandbox_host),
        ("_uid_processes", sandbox_host),
        ("MemoryGroup", sandbox_host),
        ("RunGroup", sandbox_host),
        ("SANDBOX_UID_BASE", sandbox_host),
        ("enter", sandbox_parent),
        ("build_root", sandbox_parent),
        ("set_dumpable", sandbox_parent),
        ("confine", sandbox_child),
        ("seccomp_program", sandbox_child),
        ("install_seccomp", sandbox_child),
        ("SandboxConfig", sandbox_shared),
        ("IsolationReport", sandbox_shared),
        ("HOME", sandbox_shared),
        ("set_pdeathsig", sandbox_shared),
    ],
)
def test_the_facade_hands_out_the_moved_objects(name, module):
    assert getattr(sandbox, name) is getattr(module, name)


def test_a_test_that_replaces_a_host_function_on_the_facade_reaches_the_grader(tmp_path, log, monkeypatch):  # noqa: F811
    """batch calls the host's functions through ``sandbox``: replaced there, they are what it calls."""
    calls = []
    monkeypatch.setattr(sandbox, "sweep_memory_groups", lambda: calls.append("swept"))
    monkeypatch.setattr(sandbox, "allocate_uids", lambda jobs: calls.append(f"uids {jobs}") or 70000)
    monkeypatch.setattr(sandbox, "release_uids", lambda base: calls.append(f"released {base}"))
    monkeypatch.setattr(os, "geteuid", lambda: 0)  # the uids are claimed by a root grader only
    with _session(tmp_path, busy=1) as session:
        assert session.settings.uid_base == 70000
    assert calls == ["uids 2", "swept", "released 70000"]


def test_the_isolation_report_crosses_as_the_dict_the_sandbox_always_sent():
    report = IsolationReport("namespaces", uid=62001)
    report.network = report.readonly = report.seccomp = True
    report.root += ["/usr", "/lib"]
    report.limits.append("RLIMIT_AS")
    report.errors.append("RLIMIT_NPROC: not allowed")
    wire = report.to_wire()
    assert list(wire) == WIRE_KEYS
    assert wire == {
        "mode": "namespaces",
        "network": True,
        "readonly": True,
        "root": ["/usr", "/lib"],
        "hidden": [],
        "opened": [],
        "uid": 62001,
        "limits": ["RLIMIT_AS"],
        "seccomp": True,
        "errors": ["RLIMIT_NPROC: not allowed"],
    }
    text = json.dumps({"ready": wire})
    back = IsolationReport.from_wire(json.loads(text)["ready"])
    assert back == report and json.dumps({"ready": back.to_wire()}) == text
    assert wire["root"] is not report.root  # the wire form is a copy: the report goes on growing
    with pytest.raises(KeyError):
        IsolationReport.from_wire({"uid": 0})


def test_enter_without_namespaces_starts_the_report_in_the_scratch_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scratch = tmp_path / "scratch"
    report = sandbox_parent.enter(SandboxConfig(str(scratch), mode="none"))
    assert isinstance(report, IsolationReport) and list(report.to_wire()) == WIRE_KEYS
    assert (report.mode, report.network, report.readonly, report.root) == ("none", False, False, [])
    assert report.uid == os.getuid() and os.getcwd() == str(scratch)


def test_the_plan_reads_back_from_its_wire_form_beside_the_runs_keys():
    plan = RunPlan(
        cells=[[0, "import numpy as np"], [3, "def f(x):\n    return x\n"]],
        evaluate_after={"3": ["ex-1"]},
        evaluate_at_end=["ex-2"],
        exercises=["ex-1", "ex-2"],
        skip_cells=[5],
        skip_cases=[("ex-1", "small")],
        inputs="c2hpcHBlZA==",
    )
    wire = json.loads(json.dumps(plan.to_wire()))
    wire.update(fd=7, token="0" * 32, env={"HOME": "/home/student"}, sandbox={"scratch": "/tmp/x"})
    assert RunPlan.from_wire(wire) == plan
    bare = RunPlan.from_wire({"cells": [["2", "x = 1"]]})
    assert bare == RunPlan([[2, "x = 1"]], {}, [], [])
    with pytest.raises(KeyError):
        RunPlan.from_wire({"evaluate_at_end": []})


def test_a_run_takes_its_job_slot_or_a_bare_index(tmp_path):
    plan = RunPlan([[0, "x = 1"]], {}, [], [])
    slot = JobSlot(1, zygote=None, memory_group=None, reader=None)
    assert Run(plan, None, tmp_path, slot, 0.0, None).slot is slot
    assert Run(plan, None, tmp_path, 3, 0.0, None).slot == JobSlot(3)
    with pytest.raises(AttributeError):
        slot.index = 2  # frozen: a slot is what the session made


def test_the_session_gives_each_job_slot_its_own_reader_group_and_zygote(tmp_path, log):  # noqa: F811
    with _session(tmp_path, busy=1) as session:
        slots = session.slots
        assert [s.index for s in slots] == [0, 1]
        assert [s.reader for s in slots] == session.readers
        assert [s.memory_group for s in slots] == session.groups
        # busy=1: one zygote, shared by both slots in turn
        assert len(session.zygotes) == 1 and all(s.zygote is session.zygotes[0] for s in slots)
        assert all(isinstance(s, process.JobSlot) for s in slots)


def test_the_cgroup_readers_share_one_filter_of_the_mount_table(monkeypatch, tmp_path):
    """``_cgroup_mounts`` (where a run's group may live) and ``_cgroup_roots`` (where the memory
    controller is) read one list of writable cgroup mounts: a read-only or non-cgroup mount is in
    neither, v2 roots come first, and an unreadable mount table gives none."""
    v2, freezer, memory, locked = (tmp_path / name for name in ("v2", "freezer", "memory", "locked"))
    for folder in (v2, freezer, memory, locked):
        folder.mkdir()
    (v2 / "cgroup.controllers").write_text("cpu memory pids\n")
    entry = sandbox_shared.MountEntry
    table = [
        entry(str(memory), "cgroup", ["rw"], ["rw", "memory"]),
        entry(str(freezer), "cgroup", ["rw"], ["rw", "freezer"]),
        entry(str(tmp_path), "tmpfs", ["rw"], []),
        entry(str(locked), "cgroup", ["ro"], ["rw", "memory"]),
        entry(str(v2), "cgroup2", ["rw"], []),
    ]
    monkeypatch.setattr(sandbox_host, "mountinfo_entries", lambda: table)
    real_access = os.access
    writable = lambda p, mode: str(p) != str(locked) and real_access(p, mode)  # noqa: E731
    monkeypatch.setattr(sandbox_host.os, "access", writable)
    expected = [("memory", str(memory)), ("freezer", str(freezer)), ("v2", str(v2))]
    assert sandbox_host._cgroup_mounts() == expected
    assert sandbox_host._cgroup_roots() == [("cgroup v2", str(v2)), ("cgroup v1", str(memory))]

    def unreadable():
        raise OSError("no /proc")

    monkeypatch.setattr(sandbox_host, "mountinfo_entries", unreadable)
    assert sandbox_host._cgroup_mounts() == [] and sandbox_host._cgroup_roots() == []
