"""attnlib.chapters.second_process: a call in a second interpreter gives the numbers it gives here."""

import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from attnlib.chapters import second_process, tiny_lm

ATTNLIB_ROOT = str(Path(second_process.__file__).resolve().parents[2])


@pytest.fixture
def spare_core(monkeypatch):
    """A second process starts whatever the machine's load (the tests compare both places)."""
    monkeypatch.setattr(second_process, "spare_core_with_reason", lambda: (True, "a test asks for one"))
    monkeypatch.delenv(second_process.SWITCH, raising=False)


@pytest.fixture
def machine(monkeypatch, tmp_path):
    """A made-up machine: ``machine(cpus, load)`` sets the affinity mask and the 1-minute load
    (``load=None``: no load average, as on Windows); no cgroup files unless a test writes them
    under ``machine.cgroup``. Nothing is read from the real machine."""
    cgroup = tmp_path / "cgroup"
    cgroup.mkdir()
    monkeypatch.setattr(second_process, "CGROUP_ROOT", cgroup)
    monkeypatch.delenv(second_process.SWITCH, raising=False)

    def set_machine(cpus, load):
        monkeypatch.setattr(
            second_process.os, "sched_getaffinity", lambda pid: set(range(cpus)), raising=False
        )
        if load is None:
            monkeypatch.delattr(second_process.os, "getloadavg", raising=False)
        else:
            monkeypatch.setattr(second_process.os, "getloadavg", lambda: (load, 0.0, 0.0))

    set_machine.cgroup = cgroup
    return set_machine


@pytest.mark.slow
def test_a_training_run_in_the_second_process_equals_the_same_run_here(spare_core):
    torch.set_num_threads(1)
    here = tiny_lm.build_model(3, d_model=16, num_heads=2, d_ff=32, num_layers=1)
    there = tiny_lm.build_model(3, d_model=16, num_heads=2, d_ff=32, num_layers=1)
    job = second_process.start(tiny_lm.train, there, steps=4, seed=5)
    assert job.where == "a second process"
    losses = tiny_lm.train(here, steps=4, seed=5)
    assert job.result() == losses
    trained = job.args[0]
    assert trained is not there and isinstance(trained, tiny_lm.TinyDecoderLM)
    assert job.seconds is not None and job.seconds >= 0
    for (name, a), b in zip(here.state_dict().items(), trained.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    assert not torch.equal(there.head.weight, trained.head.weight)  # the caller's copy is untouched


@pytest.mark.slow
def test_a_failure_in_the_second_process_is_raised_with_its_message(spare_core):
    job = second_process.start(tiny_lm.test_set, size="many")
    folder = Path(job._folder)
    with pytest.raises(RuntimeError, match=r"test_set failed in the second process \(exit 1\)") as first:
        job.result()
    assert not folder.exists()
    with pytest.raises(RuntimeError) as again:  # the same message, not a missing file
        job.result()
    assert str(again.value) == str(first.value)


@pytest.mark.slow
def test_a_result_that_cannot_be_read_back_is_raised_once_and_for_all(spare_core, monkeypatch):
    job = second_process.start(math.sqrt, 4.0)
    folder = Path(job._folder)

    def unreadable(*args, **kwargs):
        raise ModuleNotFoundError("No module named 'only_there'")

    monkeypatch.setattr(second_process.torch, "load", unreadable)
    with pytest.raises(RuntimeError, match=r"result of sqrt could not be read back .*only_there") as first:
        job.result()
    assert not folder.exists()
    with pytest.raises(RuntimeError) as again:
        job.result()
    assert str(again.value) == str(first.value)


def test_a_function_that_cannot_be_imported_is_refused():
    def local(x):
        return x

    local.__module__ = "__main__"
    with pytest.raises(TypeError, match="must be an importable function"):
        second_process.start(local, 1)


@pytest.mark.slow
def test_the_chapters_runs_that_go_to_the_second_process_are_the_same_there(spare_core):
    """Chapter 11's CNN and chapter 12's dropout run (dropout draws from torch's RNG) both ways."""
    from attnlib.chapters import char_lm, vit

    torch.set_num_threads(1)
    x, y = vit.digits()["train"]
    data = char_lm.corpus()
    calls = [(vit.trained, ("cnn", 0, x, y)), (char_lm.practice_run, (0, "dropout 0.1", data))]
    jobs = [second_process.start(second_process.call_each, fn, [args]) for fn, args in calls]
    for (fn, args), job in zip(calls, jobs, strict=True):
        here = fn(*args)
        (there,) = job.result()
        if isinstance(here, dict):  # practice_run: {"model", "log"}
            assert here["log"] == there["log"]
            here, there = here["model"], there["model"]
        for (name, a), b in zip(here.state_dict().items(), there.state_dict().values(), strict=True):
            assert torch.equal(a, b), f"{fn.__name__}: {name}"


@pytest.mark.slow
def test_without_a_spare_core_the_call_runs_here_when_asked(monkeypatch):
    monkeypatch.setattr(second_process, "spare_core_with_reason", lambda: (False, "a test says no"))
    torch.set_num_threads(1)
    model = tiny_lm.build_model(3, d_model=16, num_heads=2, d_ff=32, num_layers=1)
    again = tiny_lm.build_model(3, d_model=16, num_heads=2, d_ff=32, num_layers=1)
    job = second_process.start(tiny_lm.train, model, steps=3, seed=5)
    assert job.where == "this process" and job.seconds is None
    assert torch.equal(model.head.weight, again.head.weight)  # nothing ran yet
    assert job.result() == tiny_lm.train(again, steps=3, seed=5)
    assert job.args[0] is model and torch.equal(model.head.weight, again.head.weight)
    assert job.seconds >= 0 and job.result() is job.result()  # once


def test_spare_core_reads_the_load_average(machine):
    machine(2, 1.2)
    assert second_process.spare_core()
    assert second_process.spare_core_with_reason() == (True, "a core was spare (load 1.20 of 2 usable CPUs)")
    machine(2, 1.6)
    assert not second_process.spare_core()
    assert second_process.spare_core_with_reason() == (
        False,
        "no core was spare (load 1.60 of 2 usable CPUs)",
    )
    machine(4, 3.4)  # below 4 - 0.5
    assert second_process.spare_core_with_reason() == (True, "a core was spare (load 3.40 of 4 usable CPUs)")
    machine(1, 0.0)
    assert second_process.spare_core_with_reason() == (False, "only 1 usable CPU")
    assert not second_process.spare_core()


def test_without_a_load_average_two_usable_cpus_say_yes_and_the_reason_says_the_load_is_unknown(machine):
    machine(1, None)  # Windows: no os.getloadavg
    assert second_process.spare_core_with_reason() == (False, "only 1 usable CPU")
    machine(2, None)
    spare, reason = second_process.spare_core_with_reason()
    assert spare and second_process.spare_core()
    assert reason.startswith("2 usable CPUs") and "load cannot be read" in reason


def test_without_an_affinity_mask_the_cpu_count_is_used(machine, monkeypatch):
    machine(8, 0.0)
    monkeypatch.delattr(second_process.os, "sched_getaffinity", raising=False)  # Windows, macOS
    monkeypatch.setattr(second_process.os, "cpu_count", lambda: 3)
    assert second_process.usable_cpus() == 3
    monkeypatch.setattr(second_process.os, "cpu_count", lambda: None)
    assert second_process.usable_cpus() == 1


def test_the_affinity_mask_counts_not_the_hosts_cpus(machine, monkeypatch):
    monkeypatch.setattr(second_process.os, "cpu_count", lambda: 64)  # the host's
    machine(1, 0.0)
    assert second_process.usable_cpus() == 1
    assert second_process.spare_core_with_reason() == (False, "only 1 usable CPU")
    machine(2, 0.3)
    assert second_process.usable_cpus() == 2


@pytest.mark.parametrize(
    ("cpu_max", "limit", "usable"),
    [
        ("max 100000\n", None, 8),
        ("200000 100000\n", 2.0, 2),
        ("150000 100000\n", 1.5, 1),  # floored
        ("50000 100000\n", 0.5, 1),  # at least one
        ("1600000 100000\n", 16.0, 8),  # the affinity mask is smaller
        ("garbage\n", None, 8),
    ],
)
def test_cgroup_v2_quota_limits_the_usable_cpus(machine, cpu_max, limit, usable):
    machine(8, 0.0)
    (machine.cgroup / "cpu.max").write_text(cpu_max)
    assert second_process.cgroup_cpu_limit() == limit
    assert second_process.cgroup_cpu_limit(machine.cgroup) == limit
    assert second_process.usable_cpus() == usable


@pytest.mark.parametrize("folder", ["cpu", "cpu,cpuacct"])
@pytest.mark.parametrize(
    ("quota", "period", "limit", "usable"),
    [
        ("-1", "100000", None, 8),
        ("300000", "100000", 3.0, 3),
        ("150000", "100000", 1.5, 1),
        ("1", "0", None, 8),
    ],
)
def test_cgroup_v1_quota_limits_the_usable_cpus(machine, folder, quota, period, limit, usable):
    machine(8, 0.0)
    (machine.cgroup / folder).mkdir()
    (machine.cgroup / folder / "cpu.cfs_quota_us").write_text(quota + "\n")
    (machine.cgroup / folder / "cpu.cfs_period_us").write_text(period + "\n")
    assert second_process.cgroup_cpu_limit() == limit
    assert second_process.usable_cpus() == usable


def test_cgroup_v2_is_read_before_v1_and_no_files_mean_no_quota(machine):
    machine(4, 0.0)
    assert second_process.cgroup_cpu_limit() is None and second_process.usable_cpus() == 4
    (machine.cgroup / "cpu").mkdir()
    (machine.cgroup / "cpu" / "cpu.cfs_quota_us").write_text("100000\n")
    (machine.cgroup / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert second_process.usable_cpus() == 1
    (machine.cgroup / "cpu.max").write_text("300000 100000\n")
    assert second_process.cgroup_cpu_limit() == 3.0 and second_process.usable_cpus() == 3


def test_a_container_quota_of_one_cpu_keeps_the_call_here_and_says_why(machine):
    machine(2, 0.1)
    (machine.cgroup / "cpu.max").write_text("100000 100000\n")
    job = second_process.start(os.getenv, "HOME")
    assert job.where == "this process" and job.reason == "only 1 usable CPU"
    assert job.result() == os.getenv("HOME")


def test_a_busy_machine_keeps_the_call_here_and_says_why(machine, monkeypatch):
    machine(2, 1.7)
    monkeypatch.setattr(second_process.subprocess, "Popen", _no_process)
    job = second_process.start(math.sqrt, 16.0)
    assert job.where == "this process"
    assert job.reason == "no core was spare (load 1.70 of 2 usable CPUs)"
    assert job.result() == 4.0 and job.seconds >= 0


def _no_process(*args, **kwargs):
    raise AssertionError("a second process started")


@pytest.mark.parametrize("value", ["0", "false", "FALSE", "No", "off", " Off "])
def test_the_switch_keeps_every_call_in_this_process(spare_core, monkeypatch, value):
    monkeypatch.setenv(second_process.SWITCH, value)
    monkeypatch.setattr(second_process.subprocess, "Popen", _no_process)
    job = second_process.start(math.sqrt, 9.0)
    assert job.where == "this process"
    assert job.reason == f"ATTNLIB_SECOND_PROCESS={value.strip()} switches the second process off"
    assert job.result() == 3.0


@pytest.mark.parametrize("value", ["1", "", "yes", "true", "on"])
def test_other_values_of_the_switch_leave_the_decision_to_the_machine(machine, monkeypatch, value):
    machine(2, 1.9)
    monkeypatch.setenv(second_process.SWITCH, value)
    job = second_process.start(math.sqrt, 9.0)
    assert job.reason == "no core was spare (load 1.90 of 2 usable CPUs)"


def test_the_decision_and_its_reason_come_from_spare_core_with_reason(monkeypatch):
    monkeypatch.delenv(second_process.SWITCH, raising=False)
    monkeypatch.setattr(second_process, "spare_core_with_reason", lambda: (False, "a test says no"))
    job = second_process.start(math.sqrt, 4.0)
    assert job.where == "this process" and job.reason == "a test says no"


def test_a_call_that_fails_here_is_raised_and_not_run_again(machine):
    machine(1, 0.0)
    job = second_process.start(math.sqrt, -1.0)
    with pytest.raises(ValueError, match="math domain error"):
        job.result()
    with pytest.raises(RuntimeError, match=r"sqrt stopped in this process \(ValueError\).*start it again"):
        job.result()


def test_cancel_before_a_call_runs_here_means_it_never_runs(machine):
    machine(1, 0.0)
    job = second_process.start(math.sqrt, 4.0)
    job.cancel()
    with pytest.raises(RuntimeError, match="sqrt was cancelled: start it again"):
        job.result()
    done = second_process.start(math.sqrt, 4.0)
    assert done.result() == 2.0
    done.cancel()  # nothing left to end: the value stays
    assert done.result() == 2.0


def test_the_child_pythonpath_is_attnlibs_folder_and_the_given_pythonpath(monkeypatch, tmp_path):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["/given/one", "", "/given/two"]))
    assert second_process._child_pythonpath(tiny_lm.train) == os.pathsep.join(
        [ATTNLIB_ROOT, "/given/one", "/given/two"]
    )
    monkeypatch.delenv("PYTHONPATH")
    for fn in (tiny_lm.train, os.getenv, time.sleep, torch.zeros):  # attnlib, stdlib, built-in, site-packages
        assert second_process._child_pythonpath(fn) == ATTNLIB_ROOT, fn
    module = _module_in(tmp_path, monkeypatch)  # a folder this process added to sys.path
    assert second_process._child_pythonpath(module.child_pythonpath) == os.pathsep.join(
        [ATTNLIB_ROOT, str(tmp_path.resolve())]
    )


def _module_in(folder, monkeypatch):
    """A module ``sp_helper_module`` in ``folder``, imported from there (``folder`` on sys.path)."""
    (folder / "sp_helper_module.py").write_text(
        textwrap.dedent(
            """
            import os
            import time
            from pathlib import Path


            def child_pythonpath():
                return os.environ["PYTHONPATH"]


            def touch_and_sleep(path, seconds):
                Path(path).touch()  # the call has begun
                time.sleep(seconds)
            """
        )
    )
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, "sp_helper_module", raising=False)
    import sp_helper_module

    return sp_helper_module


@pytest.mark.slow
def test_the_second_process_gets_only_attnlibs_folder_and_the_given_pythonpath(
    machine, monkeypatch, tmp_path
):
    machine(2, 0.4)
    monkeypatch.setenv("PYTHONPATH", "/given/extra")
    module = _module_in(tmp_path, monkeypatch)
    given = second_process.start(os.getenv, "PYTHONPATH")
    assert given.where == "a second process"
    assert given.reason == "a core was spare (load 0.40 of 2 usable CPUs)"
    helper = second_process.start(module.child_pythonpath)  # its module imports there too
    monkeypatch.delenv("PYTHONPATH")
    alone = second_process.start(os.getenv, "PYTHONPATH")
    assert given.result() == os.pathsep.join([ATTNLIB_ROOT, "/given/extra"])
    assert helper.result() == os.pathsep.join([ATTNLIB_ROOT, str(tmp_path.resolve()), "/given/extra"])
    assert alone.result() == ATTNLIB_ROOT


@pytest.fixture
def start_sleeping(spare_core, monkeypatch, tmp_path):
    """``start_sleeping()``: a second process inside a call that would sleep 60 s, as
    ``(job, its Popen, its folder)``; the fixture keeps no reference to the job."""
    module = _module_in(tmp_path, monkeypatch)
    begun = tmp_path / "begun"

    def start():
        job = second_process.start(module.touch_and_sleep, str(begun), 60)
        assert job.where == "a second process" and Path(job._folder).is_dir()
        deadline = time.monotonic() + 60
        while not begun.exists():  # the interpreter starts, imports torch, begins the call
            assert job._proc.poll() is None, Path(job._folder, "stderr.txt").read_text()
            assert time.monotonic() < deadline, "the second process did not begin its call in 60 s"
            time.sleep(0.05)
        return job, job._proc, Path(job._folder)

    return start


@pytest.mark.slow
def test_cancel_ends_the_second_process_and_removes_its_folder(start_sleeping):
    job, proc, folder = start_sleeping()
    if sys.platform != "win32":  # a kernel interrupt of another cell reaches the process group
        os.kill(proc.pid, signal.SIGINT)
        with pytest.raises(subprocess.TimeoutExpired):  # the second process ignores it
            proc.wait(timeout=1)
    start = time.perf_counter()
    job.cancel()
    assert proc.returncode is not None and not folder.exists()
    assert time.perf_counter() - start < 10  # terminated, not the 60 s of the call
    with pytest.raises(RuntimeError, match="sleep was cancelled: start it again with second_process.start"):
        job.result()
    job.cancel()  # twice: nothing more to do


@pytest.mark.slow
def test_a_dropped_job_ends_its_second_process_and_removes_its_folder(start_sleeping):
    job, proc, folder = start_sleeping()
    del job  # the cell that made it runs again
    assert proc.returncode is not None and not folder.exists()


@pytest.mark.slow
def test_an_interrupt_while_result_waits_ends_the_second_process(start_sleeping, monkeypatch):
    job, proc, folder = start_sleeping()
    real_wait, interrupts = proc.wait, []

    def interrupted_once(timeout=None):
        if not interrupts:
            interrupts.append(timeout)
            raise KeyboardInterrupt  # the kernel's interrupt
        return real_wait(timeout)

    monkeypatch.setattr(proc, "wait", interrupted_once)
    with pytest.raises(KeyboardInterrupt):
        job.result()
    assert interrupts == [None]
    assert proc.returncode is not None and not folder.exists()
    with pytest.raises(RuntimeError, match="sleep was interrupted while result\\(\\) waited.*start it again"):
        job.result()


@pytest.mark.slow
def test_the_second_process_ends_when_this_interpreter_exits(tmp_path):
    script = textwrap.dedent(
        """
        import time
        from attnlib.chapters import second_process
        second_process.spare_core_with_reason = lambda: (True, "a test asks for one")
        job = second_process.start(time.sleep, 60)
        print(job._proc.pid, job._folder, flush=True)
        """
    )
    env = {k: v for k, v in os.environ.items() if k != second_process.SWITCH}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ATTNLIB_ROOT, env=env, capture_output=True, text=True, timeout=50
    )
    assert done.returncode == 0, done.stderr
    pid, folder = done.stdout.split()
    assert not Path(folder).exists()
    with pytest.raises(ProcessLookupError):  # ended and reaped before the interpreter exited
        os.kill(int(pid), 0)
