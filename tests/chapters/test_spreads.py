"""The recorded spreads of the chapters' experiments (attnlib/chapters/spread.py)."""

import json
import sys
import textwrap

import pytest

from attnlib.chapters import spread

FILES = sorted(spread.SPREAD_DIR.glob("*.json"))


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_spread_is_current(path):
    """A spread was recorded from the code as it is: rerun the sweep after changing the experiment."""
    record = json.loads(path.read_text(encoding="utf-8"))
    assert record["source_hash"] == spread.source_hash(record["experiment"]), (
        f"{path.name} was recorded from other code than {record['experiment']}'s module has now; "
        f"rerun: python -m attnlib.chapters.spread {record['name']} {record['experiment']} "
        f"--seeds {' '.join(map(str, record['seeds']))}"
    )
    runs = record["runs"]
    assert len(record["seeds"]) >= 3, f"{path.name}: expected at least 3 seeds, got {record['seeds']}"
    caps = {r["capability"] for r in runs}
    assert len(caps) >= 2, f"{path.name}: expected runs on at least 2 float paths, got {sorted(caps)}"
    assert {r["threads"] for r in runs} >= {1, 2}, f"{path.name}: expected 1 and 2 threads"


def test_sweep_load_and_check(tmp_path, monkeypatch):
    module = tmp_path / "toy_experiment.py"
    module.write_text(
        textwrap.dedent(
            """
            import torch

            def experiment(seed):
                g = torch.Generator().manual_seed(seed)
                x = torch.randn(64, 64, generator=g, dtype=torch.float64)
                return {"norm": float(x.norm()), "cols": [float(v) for v in x[:3].sum(1)]}
            """
        )
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.syspath_prepend(str(tmp_path))
    out = spread.sweep(
        "toy",
        "toy_experiment:experiment",
        seeds=[0, 1],
        paths=["native", "default"],
        threads=[1],
        out_dir=tmp_path,
    )
    s = spread.load("toy", tmp_path)
    assert len(s.runs) == 4 and s.seeds == [0, 1] and s.thread_counts == [1]
    assert s.low("norm") <= s.high("norm")
    assert len(s.low("cols")) == 3
    assert s.describe("norm", 64.0, ".1f").startswith("64.0 here; ")
    s.check(lambda m: m["norm"] > 0, "a positive norm")
    with pytest.raises(
        AssertionError, match=r"expected a huge norm in every recorded run of toy; it fails in 4 of 4"
    ):
        s.check(lambda m: m["norm"] > 1e9, "a huge norm")
    with pytest.raises(KeyError, match="no metric 'nope'"):
        s.values("nope")
    assert json.loads(out.read_text())["source_hash"] == spread.source_hash("toy_experiment:experiment")
    with pytest.raises(ValueError, match="path must be one of"):
        spread.run_one("toy_experiment:experiment", 0, "avx9", 1)
    del sys.modules["toy_experiment"]


def test_the_hash_follows_the_code_not_the_prose():
    base = 'def f(seed):\n    """One run."""\n    return {"x": seed * 2}  # doubled\n'
    reworded = 'def f(seed):\n    """One run of the experiment, reworded."""\n    return {"x": seed * 2}\n'
    changed = 'def f(seed):\n    """One run."""\n    return {"x": seed * 3}\n'
    assert spread._code_only(base) == spread._code_only(reworded)
    assert spread._code_only(base) != spread._code_only(changed)
