"""Smoke test of benchmarks/variants_bench.py: tiny sizes, nothing timed or asserted on speed."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_variants_benchmark_smoke(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "variants_bench.py"), "--smoke", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "MPLBACKEND": "Agg"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((tmp_path / "variants_smoke.json").read_text())
    points = data["window"]["head_to_head"]
    assert [p["n"] for p in points] == [256, 512]
    assert all(p["median_s"]["sliding"] > 0 and p["median_s"]["sdpa_causal"] > 0 for p in points)
    assert {(m["impl"], m["n"]) for m in data["window"]["memory"]} == {
        (impl, n) for impl in ("sliding", "sdpa_causal") for n in (256, 512)
    }
    assert set(data["decoding"]["relative_slope"]) == {"linear_state", "kv_cache"}
    assert (tmp_path / "variants_smoke.png").stat().st_size > 0
