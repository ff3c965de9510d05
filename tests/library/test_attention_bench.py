"""Smoke test of benchmarks/attention_bench.py: tiny sizes, nothing timed or asserted on speed."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_benchmark_smoke(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "attention_bench.py"), "--smoke", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "MPLBACKEND": "Agg"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((tmp_path / "smoke.json").read_text())
    assert {"meta", "matmul", "results", "skipped", "fits", "head_to_head", "plots"} <= set(data)
    assert data["matmul"]["torch_gflops"] > 0
    impls = {r["impl"] for r in data["results"]}
    assert {
        "numpy_naive",
        "torch_naive",
        "tiled",
        "tiled_causal",
        "sdpa",
        "sdpa_causal",
        "mha",
        "torch_naive_fb",
        "tiled_fb",
        "sdpa_fb",
    } <= impls
    for row in data["results"]:
        assert {"impl", "n", "time_ms", "extra_mb", "flops", "gflops", "fraction_of_matmul", "load"} <= set(
            row
        )
        assert row["time_ms"] > 0 and row["extra_mb"] >= 0
    assert {"time_exponent", "memory_exponent"} <= set(data["fits"]["tiled"])
    h2h = data["head_to_head"][0]
    for ours, theirs in (("tiled", "sdpa"), ("tiled_causal", "sdpa_causal"), ("tiled_fb", "sdpa_fb")):
        assert h2h[f"ratio_{ours}_to_{theirs}"] > 0 and h2h[f"min_ratio_{ours}_to_{theirs}"] > 0
    # forward + backward counts 3.5 x the forward's FLOPs
    rows = {(r["impl"], r["n"]): r for r in data["results"]}
    assert rows["tiled_fb", 64]["flops"] == 3.5 * rows["tiled", 64]["flops"]
    assert "uptime" in data["meta"] and "targets" in data
    for name in data["plots"]:
        assert (tmp_path / name).stat().st_size > 1000
    assert {p.name for p in tmp_path.glob("*.png")} == {
        "smoke_time.png",
        "smoke_memory.png",
        "smoke_flops.png",
    }
