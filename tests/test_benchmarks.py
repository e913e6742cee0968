"""The benchmark script runs end to end at a tiny size and writes every ratio."""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_bench_runs_at_tiny_size(tmp_path):
    # with the device checker: a tensor built on the host and handed to a model fails here as on a GPU
    env = {**os.environ, "NBS_CHECK_DEVICES": "1"}
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench.py"), "--size", "tiny", "--out", str(tmp_path)],
                   check=True, capture_output=True, timeout=600, env=env)
    r = json.loads((tmp_path / "results.json").read_text())
    for key in ("hard_moe_k10_step_over_baseline", "batched_estep_speedup_over_loop",
                "target_encoder_k50_step_over_k3", "scones_greedy_over_softmax_beam4_b4", "device"):
        assert key in r, key
    assert all(v > 0 for k, v in r.items() if isinstance(v, float))
    # the fused loss keeps one gradient tensor; the plain composition keeps several
    assert r["fused_loss_peak_mem_over_plain_1k"] < 1
    assert (tmp_path / "results.md").read_text().startswith("Measured on")
