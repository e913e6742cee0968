"""book/build.py's checks of the runs it shows and the pages it derives (part of `make test-book`)."""
from __future__ import annotations

import copy
import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("book_build", ROOT / "book" / "build.py")
book = importlib.util.module_from_spec(_spec)
sys.modules["book_build"] = book          # dataclasses look their module up there
_spec.loader.exec_module(book)

SOURCE = json.loads((ROOT / "notebooks" / "00_data_and_metrics.ipynb").read_text(encoding="utf-8"))


def executed(source=SOURCE, profile="ci", start="2026-01-02T10:00:00.5+00:00", end="2026-01-02T10:01:30+00:00"):
    """``source`` as papermill leaves a finished run: its metadata, an injected parameters cell."""
    nb = copy.deepcopy(source)
    params = {"PROFILE": profile, "SEED": 0, "INTERACTIVE": False}
    nb["metadata"]["papermill"] = {"exception": None, "start_time": start, "end_time": end, "duration": 89.5,
                                   "parameters": params}
    at = next(i for i, c in enumerate(nb["cells"]) if "parameters" in c["metadata"].get("tags", [])) + 1
    nb["cells"].insert(at, {"cell_type": "code", "id": "injected", "execution_count": 1, "outputs": [],
                            "metadata": {"tags": ["injected-parameters"]}, "source": f'PROFILE = "{profile}"\n'})
    for c in nb["cells"]:
        c["metadata"]["papermill"] = {"status": "completed"}
    return nb


def record(profile="ci", time="2026-01-02 10:01:29 UTC"):
    return {"profile": profile, "claims": {}, "_produced": {"time": time, "machine": "m", "torch": "t"}}


def test_a_finished_run_of_the_same_notebook_is_shown():
    run, stale = book.check_run(executed(), record(), "ci", SOURCE)
    assert not stale                      # papermill's injected cell is not a change of the notebook
    assert run["profile"] == "ci" and run["duration_s"] == 89.5 and run["machine"] == "m"
    assert book.when(run) == "2026-01-02 10:00-10:01 UTC, 90 s"


def test_a_run_of_another_version_is_stale():
    changed = copy.deepcopy(SOURCE)
    code = next(c for c in changed["cells"] if c["cell_type"] == "code" and book.source_text(c).strip())
    code["source"] = book.source_text(code) + "\nx = 1"
    assert book.check_run(executed(), record(), "ci", changed)[1] is True


@pytest.mark.parametrize("breakage, reason", [
    (lambda nb, rec: nb["metadata"]["papermill"].update(exception=True), "run failed"),
    (lambda nb, rec: nb["cells"][-1].setdefault("outputs", []).append(
        {"output_type": "error", "ename": "ValueError", "evalue": "boom", "traceback": []}), "ValueError: boom"),
    (lambda nb, rec: nb["metadata"]["papermill"].update(end_time=None), "did not finish"),
    (lambda nb, rec: nb["cells"][-1]["metadata"]["papermill"].update(status="pending"), "did not finish"),
    (lambda nb, rec: nb["metadata"]["papermill"]["parameters"].update(PROFILE="lab"), "profile 'lab'"),
    (lambda nb, rec: rec.update(profile="lab"), "results file is from a 'lab' run"),
    (lambda nb, rec: rec["_produced"].update(time="2026-01-02 09:59:00 UTC"), "another run's results"),
    (lambda nb, rec: rec["_produced"].update(time="2026-01-02 10:01:31 UTC"), "another run's results"),
    (lambda nb, rec: nb["metadata"].pop("papermill"), "not executed by papermill"),
])
def test_a_run_that_must_not_be_shown_is_refused(breakage, reason):
    nb, rec = executed(), record()
    breakage(nb, rec)
    with pytest.raises(book.Refused, match=reason):
        book.check_run(nb, rec, "ci", SOURCE)


def test_no_results_file_is_refused():
    with pytest.raises(book.Refused, match="no results file"):
        book.check_run(executed(), None, "ci", SOURCE)


def test_the_build_names_each_refused_notebook_and_stops(tmp_path, capsys):
    nb = executed()
    nb["cells"][-1].setdefault("outputs", []).append({"output_type": "error", "ename": "KeyError", "evalue": "'x'"})
    (tmp_path / "00_data_and_metrics.ipynb").write_text(json.dumps(nb))
    (tmp_path / "00_data_and_metrics.json").write_text(json.dumps(record()))
    out = tmp_path / "book"
    assert book.main(["--notebooks", str(tmp_path), "--profile", "ci", "--out", str(out), "--only", "00", "01"]) == 1
    err = capsys.readouterr().err
    assert "00_data_and_metrics: its run failed: KeyError" in err
    assert "01_multi_source: no executed copy" in err
    assert not out.exists()               # nothing is built from a refused set of runs


def test_missing_lists_the_lessons_without_an_executed_copy(tmp_path):
    (tmp_path / "02_hard_moe.ipynb").write_text("{}")
    names = [p.name for p in book.missing(tmp_path)]
    assert "02_hard_moe.ipynb" not in names and "00_data_and_metrics.ipynb" in names
    assert len(names) == len(book.lesson_sources()) - 1


# which papers each lesson's "Follows" paragraph names, read off the notebooks by hand
FOLLOWS = {"00": {"seed", "shen2019"}, "01": {"zoph2016"}, "02": {"seed"}, "03": {"seed", "shen2019"},
           "04": {"shen2019"}, "05": {"lachaux2020", "seed"}, "06": {"stahlberg2022"},
           "07": {"stahlberg2022"}, "08": {"stahlberg2022"}, "09": {"stahlberg2022"},
           "10": {"seed", "shen2019", "lachaux2020"}}


def test_each_lesson_is_mapped_to_the_papers_its_first_cell_names():
    found = {}
    for path in book.lesson_sources():
        nb = json.loads(path.read_text(encoding="utf-8"))
        found[path.stem[:2]] = {p.slug for p in book.papers_named(book.follows_text(book.first_markdown(nb)))}
    assert found == FOLLOWS


def test_follows_is_the_follows_paragraph():
    cell = "# 99 · T\n\nintro on Zoph\n\n**Follows**: Lachaux et al. 2020,\nsection 3.\n\nMore on Stahlberg."
    assert book.follows_text(cell) == "Lachaux et al. 2020, section 3."
    assert [p.slug for p in book.papers_named(book.follows_text(cell))] == ["lachaux2020"]
    assert book.title_of(cell, "x") == "99 · T"


def test_the_front_page_is_the_readme_course_map_with_each_lesson_linked():
    stems = [p.stem for p in book.lesson_sources()]
    lessons = [book.Lesson(s, Path(s), Path(s), {}, {}, s, "") for s in stems]
    front = book.readme_front(lessons)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert front.startswith(readme.splitlines()[0]) and "## The course map" in front
    assert "## Two commands" not in front
    for s in stems:
        assert f"[`{s}`](lessons/{s}.ipynb)" in front


def test_a_claim_is_shown_with_its_verdict_and_interval():
    v = {"verdict": "not decided", "estimate": 3.6949, "ci_low": 2.888, "ci_high": 4.5019, "direction": ">",
         "threshold": 3.5, "cites": "seed 000 §4"}
    assert book.verdict_of(v) == "not decided"
    assert book.interval_of(v) == "3.69 [2.89, 4.5]"
    assert book.expects_of(v) == "> 3.5"
    assert book.verdict_of(True) == "reproduced" and book.verdict_of(False) == "not reproduced"
    assert book.cell("a | b <c>") == "a \\| b &lt;c&gt;"


def test_a_lesson_page_says_which_run_it_shows_and_drops_the_widget_state():
    nb = executed()
    nb["metadata"]["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    run, _ = book.check_run(nb, record(), "ci", SOURCE)
    lesson = book.Lesson("00_data_and_metrics", Path("00_data_and_metrics.ipynb"), Path("00_data_and_metrics.json"),
                         nb, record(), "00", "", [], run, stale=False)
    page = book.lesson_page(lesson)
    assert "widgets" not in page["metadata"] and "widgets" in nb["metadata"]     # the run's copy is untouched
    first = next(i for i, c in enumerate(page["cells"]) if c["cell_type"] == "markdown")
    note = page["cells"][first + 1]["source"]
    assert page["cells"][first + 1]["id"] == "book-run-note" and len(page["cells"]) == len(nb["cells"]) + 1
    assert "the run at profile `ci`, seed 0, executed 2026-01-02 10:00-10:01 UTC, 90 s on m (torch t)" in note
    assert "need JupyterLab" in note and "{warning}" not in note
    lesson.stale = True
    assert "an earlier version of the lesson" in book.lesson_page(lesson)["cells"][first + 1]["source"]


def test_a_run_within_one_minute_is_shown_at_that_minute():
    run, _ = book.check_run(executed(start="2026-01-02T10:00:01+00:00", end="2026-01-02T10:00:40+00:00"),
                            record(time="2026-01-02 10:00:39 UTC"), "ci", SOURCE)
    assert book.when(run) == "2026-01-02 10:00 UTC, 90 s"    # the duration is papermill's (89.5 s here)


def reproduction_record(profile="ci", time="2026-01-02 10:01:29 UTC"):
    claim = {"verdict": "not decided", "estimate": 2.0, "ci_low": -0.5, "ci_high": 4.5, "direction": ">", "threshold": 0.0,
             "quote": "Hard-MoE is more diverse", "section": "§5, Table 1", "counts": {"holds": 2, "not decided": 1,
                                                                                        "contradicted": 0},
             "seeds": {"0": {"verdict": "holds"}, "1": {"verdict": "holds"}, "2": {"verdict": "not decided"}},
             "preconditions": [{"name": "converged", "ok": False}]}
    return {"profile": profile, "seeds": [0, 1, 2], "claims": {"moe_diverse": claim}, "sanity": {"x": {"ok": True}},
            "counts": {"pooled": {"holds": 0, "not decided": 1, "contradicted": 0},
                       "per_seed": {"holds": 2, "not decided": 1, "contradicted": 0}},
            "_produced": {"time": time, "machine": "m", "torch": "t"}}


def test_a_paper_page_shows_its_reproduction_s_claims_per_seed_and_pooled(tmp_path):
    source = json.loads((book.reproduction_sources()[0]).read_text(encoding="utf-8"))
    stem = book.reproduction_sources()[0].stem
    paper = next(p for p in book.PAPERS if p.repro == stem)
    (tmp_path / f"{stem}.ipynb").write_text(json.dumps(executed(source)))
    (tmp_path / f"{stem}.json").write_text(json.dumps(reproduction_record()))
    runs = book.load_reproductions(tmp_path, "ci", allow_stale=False)
    assert [r.stem for r in runs] == [stem] and runs[0].papers == [paper]
    page = book.paper_page(paper, [], runs)
    assert "| moe_diverse | Hard-MoE is more diverse | §5, Table 1 | not decided | 2 [-0.5, 4.5] | &gt; 0.0 | 2 holds, 1 not decided |" in page
    records = book.records_page(runs)
    assert "0 holds, 1 not decided, 0 contradicted" in records and "converged: FAILED" in records
    assert "0 holds; 1 holds; 2 not decided" in records and "Construction checks (not claims): 1, all passed." in records
    other = next(p for p in book.PAPERS if p.repro != stem)
    assert "`make reproduce` runs it" in book.paper_page(other, [], runs)


def test_a_broken_reproduction_run_is_refused(tmp_path):
    path = book.reproduction_sources()[0]
    nb = executed(json.loads(path.read_text(encoding="utf-8")))
    nb["metadata"]["papermill"]["exception"] = True
    (tmp_path / path.name).write_text(json.dumps(nb))
    (tmp_path / f"{path.stem}.json").write_text(json.dumps(reproduction_record()))
    with pytest.raises(book.Refused, match=f"{path.stem}: its run failed"):
        book.load_reproductions(tmp_path, "ci", allow_stale=False)
    assert book.load_reproductions(tmp_path / "empty", "ci", allow_stale=False) == []
