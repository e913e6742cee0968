"""Notebook conventions, and every notebook executed by papermill at PROFILE="ci"."""
import ast
import json
import time
from pathlib import Path

import nbformat
import pytest

from nbsupport.paths import results_dir
from nbsupport.run_notebooks import execute, notebook_paths

NOTEBOOKS = notebook_paths()
IDS = [p.stem for p in NOTEBOOKS]


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found in notebooks/"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_conventions(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# "), "first cell: a title"
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code), \
        "outputs committed: run `make strip`"
    params = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1 and params[0] is code[0], "the first code cell is the tagged parameters cell"
    names = {t.id for node in ast.parse(params[0].source).body for t in getattr(node, "targets", [])}
    assert {"PROFILE", "SEED", "INTERACTIVE"} <= names
    assert 'PROFILE = "lab"' in params[0].source
    imports = [n for c in code for n in ast.walk(ast.parse(c.source))
               if isinstance(n, (ast.Import, ast.ImportFrom))]
    top = [n for n in imports if isinstance(n, ast.Import) and n.names[0].name == "nbsupport"]
    assert len(top) == 1 and top[0].names[0].asname == "nbs", "one line: import nbsupport as nbs"


# What each notebook's ci run must write, with ranges that a broken pipeline would miss.
EXPECTED = {
    "00_data_and_metrics": lambda r: [
        r["profile"] == "ci",
        r["fig1"]["D"]["avg_oracle_bleu"] > 99.9,
        r["fig1"]["D"]["ref_coverage"] == 4.0,
        abs(r["fig1"]["D"]["pairwise_bleu"] - r["bible"]["human"]["pairwise_bleu"]) < 1e-6,
        r["fig1"]["B"]["ref_coverage"] < 1.2 < r["fig1"]["C"]["ref_coverage"],
        r["fig1"]["A"]["avg_oracle_bleu"] < r["fig1"]["C"]["avg_oracle_bleu"] < r["fig1"]["B"]["avg_oracle_bleu"],
        r["fig1"]["A"]["pairwise_bleu"] < r["fig1"]["C"]["pairwise_bleu"] < r["fig1"]["B"]["pairwise_bleu"],
        15 < r["bible"]["human"]["pairwise_bleu"] < 60,
        20 < r["toy"]["strong"]["none"]["pairwise_bleu"] < 45,
        r["toy"]["subtle"]["none"]["pairwise_bleu"] > 45,
        r["toy"]["strong"]["high"]["entropy_nats"] >= 10,
        r["spm"]["en"]["unk rate %"] < 1,
    ],
    "02_hard_moe": lambda r: [
        r["profile"] == "ci",
        *(0 <= r["toy"][s][m] <= 100 + 1e-6 for s in SYSTEMS for m in ("pairwise_bleu", "avg_oracle_bleu", "multi_ref_bleu")),
        *(1 <= r["toy"][s]["coverage"] <= 4 for s in SYSTEMS),
        0.25 <= r["toy"]["hard_moe"]["purity"] <= 1,
        sum(map(sum, r["toy"]["hard_moe"]["confusion"])) == 4 * 50,      # K hypotheses x ci test sources
        r["train_seconds"]["baseline"] > 0 and r["train_seconds"]["hard_moe"] > 0,
        # the human point: the test references against each other
        r["toy"]["human"]["coverage"] == 4 and 20 < r["toy"]["human"]["pairwise_bleu"] < 45,
        set(r["claims"]) and "bible" not in r,
    ],
    "06_scones_beam_curse": lambda r: [
        r["profile"] == "ci",
        *(set(r[level]) == set(SCONES_MODELS) for level in ("toy_low", "toy_high")),
        *(set(r[level][m]["bleu_by_beam"]) == {"1", "2", "4", "8"}
          for level in ("toy_low", "toy_high") for m in SCONES_MODELS),
        *(0 <= v <= 100 + 1e-6 for level in ("toy_low", "toy_high") for m in SCONES_MODELS
          for v in r[level][m]["bleu_by_beam"].values()),
        *(0 <= v <= 1 for level in ("toy_low", "toy_high") for m in SCONES_MODELS
          for v in list(r[level][m]["empty_rate_by_beam"].values()) + list(r[level][m]["search_errors_by_beam"].values())),
        *(0 <= r[level][m]["exact"]["proven_fraction"] <= 1 and r[level][m]["empty_logprob_mean"] < 0
          for level in ("toy_low", "toy_high") for m in SCONES_MODELS),
        # exact search is lower-bounded by beam 4: its mean best score cannot be -inf or positive
        *(-1e4 < r[level][m]["exact_logprob_mean"] <= 0 for level in ("toy_low", "toy_high") for m in SCONES_MODELS),
        r["speed"]["scones_greedy_sent_s"] > 0 and r["speed"]["softmax_beam4_sent_s"] > 0,
    ],
    "05_target_conditioning": lambda r: [
        r["profile"] == "ci",
        *(0 <= r["toy"][s][m] <= 100 + 1e-6 for s in ("beam", "sampling", "hard_moe", "target_encoder")
          for m in ("mbleu", "pairwise_bleu", "avg_oracle_bleu")),
        0.25 <= r["toy"]["target_encoder"]["purity"] <= 1,
        set(r["speed"]["target_encoder"]) == set(r["speed"]["hard_moe"]) == {"3", "5", "10"},
        all(v > 0 for d in r["speed"].values() for v in d.values()),
        # Hard-MoE decodes the batch K times in its E-step: K=10 cannot be faster than K=3
        r["speed"]["hard_moe"]["10"] < r["speed"]["hard_moe"]["3"],
        1 <= r["ablation"]["lambda0"]["domains_used"] <= 4,
        0 <= r["ablation"]["source_input"]["pairwise_bleu"] <= 100 + 1e-6,
        set(r["claims"]),
    ],
    "01_multi_source": lambda r: [
        r["profile"] == "ci",
        set(r["toy"]) == set(MULTI_SOURCE_SYSTEMS) and "bible" not in r,
        *(r["toy"][s]["ppl"] >= 1 and 0 <= r["toy"][s]["bleu"] <= 100 + 1e-6 for s in MULTI_SOURCE_SYSTEMS),
        # two encoders (and a combiner) have more parameters than one
        r["toy"]["fr+de.basic"]["parameters"] > r["toy"]["fr"]["parameters"],
        *(0 <= v <= 1 for s in MULTI_SOURCE_SYSTEMS for v in r["toy"][s]["noun_accuracy"].values()),
        set(r["claims"]),
    ],
    "07_ibm3_synthetic_ambiguity": lambda r: [
        r["profile"] == "ci",
        r["gammas"] == [0.1, 1.0],
        # the likelihood of Model 1 never falls; entropy grows with the temperature
        all(b >= a - 1e-6 for a, b in zip(r["ibm"]["log_likelihood"]["model1"], r["ibm"]["log_likelihood"]["model1"][1:])),
        r["entropy"]["0.05"]["t"] < r["entropy"]["1.0"]["t"] and r["entropy"]["0.05"]["d"] < r["entropy"]["1.0"]["d"],
        *(key in r[g] for g in ("0.1", "1.0") for key in ("softmax.beam4_bleu", "softmax.exact_rel", "scones_0.2.exact_rel",
                                                          "scones_1.0.exact_rel", "hard_moe.pairwise_bleu")),
        *(0 <= r[g][f"{m}.proven_fraction"] <= 1 for g in ("0.1", "1.0") for m in ("softmax", "scones_0.2", "scones_1.0")),
        set(r["claims"]),
    ],
    "03_dropout_in_the_e_step": lambda r: [
        r["profile"] == "ci",
        # no dropout never flips the E-step; the package and the inline computation agree on the keys
        r["flip_rate"]["init"]["p0.0"] == 0.0 and 0 <= r["flip_rate"]["init"]["p0.1"] <= 1,
        r["hMup.dropout"] == 0.3,
        *(0 <= r[k] <= 100 + 1e-6 for k in ("hMup.EM.pairwise_bleu", "hMup.M.pairwise_bleu")),
        set(r["grid"]) == {"strong.p0.3.EM", "strong.p0.3.M"},
        *(e["label"] in ("ok", "D1", "D2") and 1 <= e["coverage"] <= 3 for e in r["grid"].values()),
        set(r["table1"]) == {"hMup"} and set(r["table1"]["hMup"]) == {"no", "E&M", "M"} and set(r["claims"]),
    ],
    "04_expert_collapse": lambda r: [
        r["profile"] == "ci",
        *(name in r for name in MIXTURE_NAMES),
        *(r[n]["label"] in ("ok", "D1", "D2") and len(r[n]["per_latent_bleu"]) == 3 for n in MIXTURE_NAMES),
        *(0 <= r[n]["pairwise_bleu"] <= 100 + 1e-6 and 0 <= r[n]["multi_ref_bleu"] <= 100 + 1e-6 for n in MIXTURE_NAMES),
        r["vnmt"]["label"] in ("ok", "D1", "D2") and len(r["vnmt"]["per_latent_bleu"]) == 3,
        set(r["claims"]),
    ],
}
MIXTURE_NAMES = [f"{s}.{p}.{l}" for s in ("online", "offline") for p in ("shared", "independent")
                 for l in ("sMlp", "sMup", "hMlp", "hMup")]
MULTI_SOURCE_SYSTEMS = ("fr", "de", "fr+de.basic", "fr+de.childsum", "fr+fr.same", "fr.attn", "fr+de.attn_basic",
                        "fr+de.attn_childsum")
SYSTEMS = ("beam", "sampling", "topk", "diverse_beam", "hard_moe")
SCONES_MODELS = ("softmax", "scones_0.2", "scones_0.5", "scones_1.0")


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_runs_at_ci_profile(path, tmp_path):
    t0 = time.time()
    execute(path, "ci", seed=0, out_dir=tmp_path, timeout_s=600)
    elapsed = time.time() - t0
    results = json.loads((results_dir() / f"{path.stem}.json").read_text())
    assert results["_produced"]["time"], "results written"
    assert path.stem in EXPECTED, f"add the expected ci results of {path.stem} to EXPECTED"
    checks = EXPECTED[path.stem](results)
    failed = [i for i, ok in enumerate(checks) if not ok]
    assert not failed, f"checks {failed} failed on {json.dumps(results)[:2000]}"
    # the ci budget is 90 s of notebook work; allow for the kernel's start on a busy machine
    assert elapsed < 150, f"{path.name} took {elapsed:.0f} s at ci (budget 90 s)"


def test_unknown_profile_fails_before_starting_a_kernel(tmp_path):
    with pytest.raises(ValueError, match="ci, lab, full"):
        execute(NOTEBOOKS[0], "turbo", out_dir=tmp_path)
