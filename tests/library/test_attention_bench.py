"""Smoke test of benchmarks/attention_bench.py: tiny sizes, nothing timed or asserted on speed."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_benchmark_smoke(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "attention_bench.py"), "--smoke",
         "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={**os.environ, "MPLBACKEND": "Agg"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((tmp_path / "smoke.json").read_text())
    assert {"meta", "matmul", "results", "skipped", "fits", "head_to_head", "plots"} <= set(data)
    assert data["matmul"]["torch_gflops"] > 0
    impls = {r["impl"] for r in data["results"]}
    assert {"numpy_naive", "torch_naive", "tiled", "tiled_causal", "sdpa", "sdpa_causal",
            "mha"} <= impls
    for row in data["results"]:
        assert {"impl", "n", "time_ms", "extra_mb", "flops", "gflops", "fraction_of_matmul",
                "load"} <= set(row)
        assert row["time_ms"] > 0 and row["extra_mb"] >= 0
    assert {"time_exponent", "memory_exponent"} <= set(data["fits"]["tiled"])
    assert "ratio_tiled_to_sdpa" in data["head_to_head"][0]
    for name in data["plots"]:
        assert (tmp_path / name).stat().st_size > 1000
    assert {p.name for p in tmp_path.glob("*.png")} == {
        "smoke_time.png", "smoke_memory.png", "smoke_flops.png"}
