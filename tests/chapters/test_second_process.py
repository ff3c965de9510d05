"""attnlib.chapters.second_process: a call in a second interpreter gives the numbers it gives here."""

import pytest
import torch

from attnlib.chapters import second_process, tiny_lm


@pytest.fixture
def spare_core(monkeypatch):
    """A second process starts whatever the machine's load (the tests compare both places)."""
    monkeypatch.setattr(second_process, "spare_core", lambda: True)


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
    with pytest.raises(RuntimeError, match=r"test_set failed in the second process \(exit 1\)"):
        job.result()


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
    monkeypatch.setattr(second_process, "spare_core", lambda: False)
    torch.set_num_threads(1)
    model = tiny_lm.build_model(3, d_model=16, num_heads=2, d_ff=32, num_layers=1)
    again = tiny_lm.build_model(3, d_model=16, num_heads=2, d_ff=32, num_layers=1)
    job = second_process.start(tiny_lm.train, model, steps=3, seed=5)
    assert job.where == "this process" and job.seconds is None
    assert torch.equal(model.head.weight, again.head.weight)  # nothing ran yet
    assert job.result() == tiny_lm.train(again, steps=3, seed=5)
    assert job.args[0] is model and torch.equal(model.head.weight, again.head.weight)
    assert job.seconds >= 0 and job.result() is job.result()  # once


def test_spare_core_reads_the_load_average(monkeypatch):
    monkeypatch.setattr(second_process.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(second_process.os, "getloadavg", lambda: (1.2, 0.0, 0.0))
    assert second_process.spare_core()
    monkeypatch.setattr(second_process.os, "getloadavg", lambda: (1.6, 0.0, 0.0))
    assert not second_process.spare_core()
    monkeypatch.setattr(second_process.os, "cpu_count", lambda: 1)
    monkeypatch.setattr(second_process.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert not second_process.spare_core()
