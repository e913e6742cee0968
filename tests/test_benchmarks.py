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
                "target_encoder_k50_step_over_k3", "scones_greedy_over_softmax_beam4_b4", "device",
                "three_seeds_k1_together_speedup_over_one_by_one", "three_seeds_k4_together_speedup_over_one_by_one"):
        assert key in r, key
    assert all(v > 0 for k, v in r.items() if isinstance(v, float))
    # the fused loss keeps one gradient tensor; the plain composition keeps several
    assert r["fused_loss_peak_mem_over_plain_1k"] < 1
    assert (tmp_path / "results.md").read_text().startswith("Measured on")
    # the seeds trained together end where they end trained one by one (dropout 0, the same batches)
    assert r["raw"]["three_seeds_k1_max_valid_rel_diff"] < 1e-3 and r["raw"]["three_seeds_k4_max_valid_rel_diff"] < 1e-3


def test_gpu_check_writes_its_folder_and_says_what_the_budget_left_out(tmp_path):
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--budget-s", "0", "--out", str(tmp_path)],
                   check=True, capture_output=True, timeout=120)
    (folder,) = tmp_path.glob("gpu-*")
    info = json.loads((folder / "info.json").read_text())
    assert {"device", "torch", "cuda", "bf16_native", "profile"} <= set(info)
    steps = json.loads((folder / "steps.json").read_text())
    assert set(steps) == {"bench", "kernels", "lessons", "seed_paper"} and all("skipped" in s for s in steps.values())
    assert (folder / "summary.md").read_text().startswith("# GPU check:")
