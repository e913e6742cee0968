"""The papers' reproduction notebooks (notebooks/reproductions/): their conventions, and each one
executed by papermill at PROFILE="ci" with 2 model seeds, its results checked against its paper's
claim table (nbsupport.claims)."""
import ast
import importlib
import json

import nbformat
import pytest

from nbsupport import claims
from nbsupport.harness.run_notebooks import execute, reproduction_paths
from nbsupport.stats import VERDICTS

PATHS = reproduction_paths()
IDS = [p.stem for p in PATHS]


def test_there_is_one_reproduction_per_paper():
    assert sorted(IDS) == sorted(claims.PAPERS)


@pytest.mark.parametrize("path", PATHS, ids=IDS)
def test_conventions(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# "), "first cell: a title"
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code), "outputs committed: make strip"
    params = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1 and params[0] is code[0], "the first code cell is the tagged parameters cell"
    names = {t.id for node in ast.parse(params[0].source).body for t in getattr(node, "targets", [])}
    assert {"PROFILE", "SEED", "INTERACTIVE", "N_SEEDS"} <= names and 'PROFILE = "lab"' in params[0].source
    text = "\n".join(c.source for c in code)
    assert f'nbs.claims.reproduction("{path.stem}"' in text, "the notebook tests its own paper's table"
    assert "run.claim(" not in text, "claims come from the table (nbs.claims), not written in the notebook"


@pytest.mark.notebook
@pytest.mark.parametrize("path", PATHS, ids=IDS)
def test_reproduction_runs_at_ci_with_two_seeds(path, tmp_path, monkeypatch):
    monkeypatch.setenv("NBS_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("NBS_CHECK_DEVICES", "1")
    execute(path, "ci", seed=0, out_dir=tmp_path / "out", timeout_s=900, parameters={"N_SEEDS": 2})
    r = json.loads((tmp_path / "results" / f"{path.stem}.json").read_text())
    table = importlib.import_module(f"nbsupport.claims.{path.stem}")
    assert r["profile"] == "ci" and r["seeds"] == [0, 1]
    assert list(r["claims"]) == [c.key for c in table.CLAIMS], "every claim of the table decided, in its order"
    for key, c in r["claims"].items():
        assert {"verdict", "estimate", "ci_low", "ci_high", "seeds", "preconditions"} <= set(c), key
        assert c["verdict"] in VERDICTS and c["ci_low"] <= c["estimate"] + 1e-9 <= c["ci_high"] + 2e-9, key
        assert set(c["seeds"]) == {"0", "1"} and all(s["verdict"] in VERDICTS for s in c["seeds"].values()), key
        assert sum(c["counts"].values()) == 2, key
        assert all(set(p["per_seed"]) == {"0", "1"} for p in c["preconditions"]), key
        # a failed precondition leaves the pooled verdict undecided
        assert c["verdict"] == "not decided" or all(p["ok"] for p in c["preconditions"]), key
    assert set(r["sanity"]) == {s.key for s in getattr(table, "SANITY", ())}
    assert all(s["ok"] for s in r["sanity"].values()), r["sanity"]
    assert sum(r["counts"]["pooled"].values()) == len(table.CLAIMS)
