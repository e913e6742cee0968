"""`make book`: the executed lessons as a static HTML site (Sphinx, myst-nb, sphinx-book-theme).

    python book/build.py --notebooks build/notebooks --profile lab --out build/book

Reads each lesson's executed copy and results file (<notebooks>/<NN_name>.ipynb and .json), and
each paper's reproduction where it was run (<notebooks>/<paper>.ipynb and .json, `make reproduce`), and
refuses (exit 1, naming each one and why) a run that failed or did not finish, a run made at
another profile, a results file written outside the run that executed the notebook, and, unless
--allow-stale, a run of another version of the notebook than notebooks/ holds. Then it writes the
book's sources to <out>/src (the front page from the README's course map, one page per lesson with
a note on the run it shows, one page per paper with its claims as its reproduction decided them, one
page per reproduction run, the reproduction records) and builds <out>/html
with Sphinx. Nothing is executed (myst-nb's execution is off) and nothing is fetched: the theme
and MathJax come from installed packages. `--missing` only prints the lessons that have no
executed copy (the Makefile runs those first).
"""
from __future__ import annotations

import argparse
import copy
import html
import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONF_DIR = Path(__file__).resolve().parent
LESSON_DIR = "lessons"
PAPER_DIR = "papers"
REPRO_DIR = "reproductions"


@dataclass(frozen=True)
class Paper:
    slug: str
    short: str
    title: str
    authors: str
    venue: str
    taken: str                 # what the course takes from it
    patterns: tuple            # lower-case phrases that name it in a lesson's "Follows" or a claim's cites
    repro: str = ""            # its reproduction notebook's stem (notebooks/reproductions/<repro>.ipynb)


PAPERS = (
    Paper("seed", "the seed paper", "Diverse Machine Translation with a Single Multinomial Latent Variable",
          "Anonymous authors", "ICLR 2019 submission (an early version of Shen et al. 2019)",
          "Hard-MoE: a discrete latent variable whose embedding replaces the decoder's first input, trained by "
          "hard EM (Algorithm 1); average oracle BLEU, reference coverage and pairwise BLEU; its failure modes "
          "(Table 2), the dropout flip rate (Fig. 3) and each latent's word preferences (Table 4).",
          ("seed paper", "seed 000", "single multinomial latent variable", "diverse mt with a single"), "seed_paper"),
    Paper("shen2019", "Shen et al. 2019", "Mixture Models for Diverse Machine Translation: Tricks of the Trade",
          "Tianxiao Shen, Myle Ott, Michael Auli, Marc'Aurelio Ranzato", "ICML 2019",
          "the 16 mixture variants (soft or hard EM, learned or uniform prior, shared or independent "
          "decoders, online or offline), dropout in the E-step against the M-step (Table 1), the two "
          "degeneracies D1 and D2, per-latent BLEU (Table 7), leave-one-out multi-reference BLEU and the "
          "baselines (beam, sampling, top-k sampling, diverse beam search, variational NMT).",
          ("shen",), "shen"),
    Paper("zoph2016", "Zoph & Knight 2016", "Multi-Source Neural Translation", "Barret Zoph, Kevin Knight",
          "NAACL 2016",
          "P(e | f, g) with two encoders, the Basic and Child-Sum combiners, multi-source (local-p) attention, "
          "the French+French control and the attention plots (Fig. 5).",
          ("zoph",), "zoph_knight"),
    Paper("stahlberg2022", "Stahlberg & Kumar 2022",
          "Jam or Cream First? Modeling Ambiguity in Neural Machine Translation with SCONES",
          "Felix Stahlberg, Shankar Kumar", "NAACL 2022",
          "the sigmoid output layer and the SCONES loss, the beam search curse (BLEU and length against beam "
          "size), exact search, search errors, the empty translation's score, and synthetic language pairs "
          "sampled from IBM Model 3 with a temperature (appendix B).",
          ("stahlberg", "jam or cream"), "scones"),
    Paper("lachaux2020", "Lachaux et al. 2020", "Target Conditioning for One-to-Many Generation",
          "Marie-Anne Lachaux, Armand Joulin, Guillaume Lample", "Findings of EMNLP 2020",
          "a target encoder that picks one of K domains, the domain embedding as the decoder's first input, "
          "the temperature annealed from 1 to 0, the batch-entropy regulariser, and a training cost that does "
          "not grow with K (Fig. 3).",
          ("lachaux",), "lachaux"),
)


class Refused(Exception):
    """A run the book must not show."""


@dataclass
class Lesson:
    stem: str
    executed: Path
    results: Path
    notebook: dict
    record: dict
    title: str
    follows: str
    papers: list = field(default_factory=list)
    run: dict = field(default_factory=dict)
    stale: bool = False


def source_text(cell: dict) -> str:
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else s


def first_markdown(nb: dict) -> str:
    """The lesson's opening: its markdown cells before the first code cell (title, question, what
    it follows), one cell or several."""
    opening = []
    for c in nb["cells"]:
        if c["cell_type"] == "code":
            break
        if c["cell_type"] == "markdown":
            opening.append(source_text(c))
    return "\n\n".join(opening)


def follows_text(first_cell: str) -> str:
    """The lesson's "**Follows**: ..." paragraph (the papers and sections it follows), else the whole cell."""
    m = re.search(r"\*\*Follows\*\*:?(.*?)(?:\n\s*\n|\Z)", first_cell, re.S)
    return " ".join((m.group(1) if m else first_cell).split()).lstrip(": ")


def papers_named(text: str) -> list[Paper]:
    low = text.lower()
    return [p for p in PAPERS if any(pat in low for pat in p.patterns)]


def title_of(first_cell: str, stem: str) -> str:
    m = re.search(r"^#\s+(.+)$", first_cell, re.M)
    return m.group(1).strip() if m else stem


def parse_utc(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)


def produced_utc(produced: dict) -> datetime | None:
    """`_produced.time` ("%Y-%m-%d %H:%M:%S %Z") as UTC when its zone is UTC/GMT, else None."""
    m = re.fullmatch(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (UTC|GMT)", str(produced.get("time", "")).strip())
    return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc) if m else None


def cells_as_written(nb: dict) -> list[tuple[str, str]]:
    """The cells as written (papermill's injected parameters cell left out), to compare versions."""
    return [(c["cell_type"], source_text(c).strip()) for c in nb["cells"]
            if "injected-parameters" not in c.get("metadata", {}).get("tags", [])]


def check_run(nb: dict, record: dict | None, profile: str, source: dict | None) -> tuple[dict, bool]:
    """Raises Refused if the executed notebook ``nb`` with results ``record`` must not be shown;
    returns (the run's provenance, whether it ran another version of the notebook than ``source``)."""
    pm = nb.get("metadata", {}).get("papermill")
    if not pm:
        raise Refused("not executed by papermill (no papermill metadata)")
    errors = [o for c in nb["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
    if pm.get("exception") or errors:
        where = f": {errors[0].get('ename')}: {errors[0].get('evalue', '')[:200]}" if errors else ""
        raise Refused(f"its run failed{where}")
    unfinished = [c for c in nb["cells"] if c.get("metadata", {}).get("papermill", {}).get("status")
                  not in (None, "completed")]
    if pm.get("end_time") is None or unfinished:
        raise Refused(f"its run did not finish ({len(unfinished)} cells not completed; killed or still running)")
    ran_at = pm.get("parameters", {}).get("PROFILE")
    if ran_at != profile:
        raise Refused(f"it ran at profile {ran_at!r}, the book is built from {profile!r} runs")
    if record is None:
        raise Refused("no results file (the notebook did not reach run.save)")
    if record.get("profile") != profile:
        raise Refused(f"its results file is from a {record.get('profile')!r} run, not {profile!r}")
    start, end = parse_utc(pm.get("start_time")), parse_utc(pm.get("end_time"))
    written = produced_utc(record.get("_produced", {}))
    if written is not None and start and end and not (start.replace(microsecond=0) <= written <= end):
        raise Refused(f"its results file was written at {written:%Y-%m-%d %H:%M:%S} UTC, outside the run that "
                      f"executed the notebook ({start:%H:%M:%S}-{end:%H:%M:%S} UTC): another run's results")
    run = {"profile": ran_at, "seed": pm.get("parameters", {}).get("SEED"), "start": start, "end": end,
           "duration_s": pm.get("duration"), "machine": record.get("_produced", {}).get("machine", "?"),
           "torch": record.get("_produced", {}).get("torch", "?")}
    stale = source is not None and cells_as_written(source) != cells_as_written(nb)
    return run, stale


def lesson_sources() -> list[Path]:
    return sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def read_run(src: Path, folder: Path, profile: str, allow_stale: bool) -> tuple[dict, dict, dict, bool]:
    """The executed copy of ``src`` in ``folder``, its results and the run's provenance (and whether it
    ran another version of ``src``); raises Refused when the book must not show it."""
    executed, results = folder / src.name, folder / f"{src.stem}.json"
    if not executed.exists():
        raise Refused(f"no executed copy in {folder} (run: make notebooks)")
    nb = json.loads(executed.read_text(encoding="utf-8"))
    record = json.loads(results.read_text(encoding="utf-8")) if results.exists() else None
    run, stale = check_run(nb, record, profile, json.loads(src.read_text(encoding="utf-8")))
    if stale and not allow_stale:
        raise Refused(f"it ran another version of the notebook than {src.parent.relative_to(ROOT)}/ holds "
                      "(run it again, or build with --allow-stale / BOOK_ALLOW_STALE=1)")
    return nb, record, run, stale


def load_runs(sources: list[Path], folder: Path, profile: str, allow_stale: bool, what: str,
              papers_of, optional: bool = False) -> list[Lesson]:
    """A :class:`Lesson` for every source's run in ``folder`` (``papers_of(src, opening)``: the papers
    it follows); every refused run named in one error. ``optional``: a source with no run is skipped."""
    runs, refused = [], []
    for src in sources:
        if optional and not (folder / src.name).exists():
            continue
        try:
            nb, record, run, stale = read_run(src, folder, profile, allow_stale)
        except Refused as why:
            refused.append(f"{src.stem}: {why}")
            continue
        first = first_markdown(nb)
        follows, papers = papers_of(src, first)
        runs.append(Lesson(src.stem, folder / src.name, folder / f"{src.stem}.json", nb, record,
                           title_of(first, src.stem), follows, papers, run, stale))
    if refused:
        raise Refused(f"the book refuses these {what}:\n  " + "\n  ".join(refused))
    return runs


def _lesson_papers(src: Path, opening: str) -> tuple[str, list]:
    follows = follows_text(opening)
    return follows, papers_named(follows)


def load_lessons(folder: Path, profile: str, allow_stale: bool, only: list[str] | None = None) -> list[Lesson]:
    sources = [s for s in lesson_sources() if not only or any(s.stem.startswith(o) for o in only)]
    return load_runs(sources, folder, profile, allow_stale, "runs", _lesson_papers)


def reproduction_sources() -> list[Path]:
    return sorted((ROOT / "notebooks" / REPRO_DIR).glob("[a-z]*.ipynb"))


def load_reproductions(folder: Path, profile: str, allow_stale: bool) -> list[Lesson]:
    """The reproductions run in ``folder`` (a paper whose reproduction was not run has none: its page
    says how to run it); a run that is there is checked as a lesson's is, and refused the same way."""
    return load_runs(reproduction_sources(), folder, profile, allow_stale, "reproduction runs",
                     lambda src, opening: ("", [p for p in PAPERS if p.repro == src.stem]), optional=True)


def missing(folder: Path) -> list[Path]:
    return [p for p in lesson_sources() if not (folder / p.name).exists()]


# ---------------------------------------------------------------- the pages


def anchor(lesson: Lesson) -> str:
    """The records page's label of a lesson's section."""
    return "records-" + lesson.stem.replace("_", "-")


def when(run: dict) -> str:
    start, end = run["start"], run["end"]
    span = "?" if not (start and end) else (f"{start:%Y-%m-%d %H:%M}" + ("" if f"{start:%H:%M}" == f"{end:%H:%M}"
                                                                      else f"-{end:%H:%M}") + " UTC")
    dur = f", {run['duration_s']:.0f} s" if run.get("duration_s") else ""
    return f"{span}{dur}"


def run_line(lesson: Lesson) -> str:
    r = lesson.run
    return (f"profile `{r['profile']}`, seed {r['seed']}, executed {when(r)} on {r['machine']} "
            f"(torch {r['torch']})")


def md_cell(text: str, cell_id: str) -> dict:
    return {"cell_type": "markdown", "id": cell_id, "metadata": {}, "source": text}


def lesson_page(lesson: Lesson) -> dict:
    nb = copy.deepcopy(lesson.notebook)
    # the widget state is only for a live kernel; without it no widget manager script is wanted
    nb["metadata"].pop("widgets", None)
    repro = bool(lesson.papers) and lesson.papers[0].repro == lesson.stem
    where = f"{REPRO_DIR}/{lesson.stem}" if repro else lesson.stem
    note = (f":::{{note}}\nThis page shows the run at {run_line(lesson)}; its numbers are in "
            f"`{lesson.results.name}`" + (f" ({{ref}}`reproduction records <{anchor(lesson)}>`)" if repro else "") + ".\n\n"
            "The widgets' default views appear as static output. The live widgets decode with the model "
            "on every change and need JupyterLab: `make lab`, then open "
            f"`notebooks/{where}.ipynb`.\n:::\n")
    if lesson.stale:
        note += ("\n:::{warning}\nThis run executed an earlier version of the lesson than `notebooks/` "
                 "holds now: run the notebook again to see the current one.\n:::\n")
    at = next((i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "markdown"), -1) + 1
    nb["cells"].insert(at, md_cell(note, "book-run-note"))
    if not repro:          # a lesson's link to a reproduction: beside the lessons in notebooks/, a folder over in the book
        for c in nb["cells"]:
            if c["cell_type"] == "markdown":
                text = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
                c["source"] = text.replace(f"]({REPRO_DIR}/", f"](../{REPRO_DIR}/")
    return nb


def readme_front(lessons: list[Lesson]) -> str:
    """The README from its title through the course map (up to the next second-level heading),
    each lesson's name linked to its page."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("## The course map")
    nxt = re.search(r"^## ", text[start + 3:], re.M)
    front = text[: start + 3 + nxt.start()] if nxt else text
    for lesson in lessons:
        front = front.replace(f"| `{lesson.stem}` |", f"| [`{lesson.stem}`]({LESSON_DIR}/{lesson.stem}.ipynb) |")
    return front.rstrip() + "\n"


def index_page(lessons: list[Lesson], profile: str, reproductions: list[Lesson] = ()) -> str:
    runs = "\n".join(f"| [`{l.stem}`]({REPRO_DIR if l in reproductions else LESSON_DIR}/{l.stem}.ipynb) | {when(l.run)}"
                     + ("; of an earlier version of the notebook" if l.stale else "") + f" | {l.run['machine']} |"
                     for l in list(lessons) + list(reproductions))
    return (readme_front(lessons) + "\n## This book\n\n"
            f"Each lesson's page shows the outputs of its run at the `{profile}` profile, executed as "
            "they are (no cell was run again to build the book); the widgets' default views are static "
            "here and live in JupyterLab (`make lab`). A page per paper lists the lessons that follow "
            "it and its claims as its reproduction decided them over several model seeds; the "
            "[reproduction records](records.md) list every claim, per seed and pooled.\n\n"
            "| notebook | run | machine |\n| --- | --- | --- |\n" + runs + "\n\n"
            "```{toctree}\n:caption: Lessons\n:maxdepth: 1\n:hidden:\n\n"
            + "\n".join(f"{LESSON_DIR}/{l.stem}" for l in lessons) + f"\n{LESSON_DIR}/glossary\n```\n\n"
            "```{toctree}\n:caption: Papers\n:maxdepth: 1\n:hidden:\n\n"
            + "\n".join(f"{PAPER_DIR}/{p.slug}" for p in PAPERS) + "\n```\n\n"
            + ("```{toctree}\n:caption: Reproductions\n:maxdepth: 1\n:hidden:\n\n"
               + "\n".join(f"{REPRO_DIR}/{r.stem}" for r in reproductions) + "\n```\n\n" if reproductions else "")
            + "```{toctree}\n:caption: Results\n:maxdepth: 1\n:hidden:\n\nrecords\n```\n")


def cell(text) -> str:
    """A value as a markdown table cell."""
    return html.escape(str(text), quote=False).replace("|", "\\|").replace("\n", " ")


def claims_of(record: dict) -> list[tuple[str, object]]:
    return list((record.get("claims") or {}).items())


def verdict_of(value) -> str:
    if isinstance(value, dict):
        return value.get("verdict", "?")
    return "reproduced" if value is True else "not reproduced" if value is False else str(value)


def interval_of(value) -> str:
    if isinstance(value, dict) and "estimate" in value:
        lo, hi = value.get("ci_low"), value.get("ci_high")
        fmt = lambda v: "?" if v is None else f"{v:.3g}"
        return f"{fmt(value['estimate'])} [{fmt(lo)}, {fmt(hi)}]"
    return ""


def expects_of(value) -> str:
    if isinstance(value, dict) and "direction" in value:
        return f"{value['direction']} {value.get('threshold')}"
    return ""


def seed_counts(v: dict) -> str:
    """A reproduction claim's verdicts over the seeds: "3 holds" or "2 holds, 1 not decided"."""
    counts = v.get("counts") or {}
    return ", ".join(f"{n} {k}" for k, n in counts.items() if n) or "?"


def reproduction_of(paper: Paper, reproductions: list[Lesson]) -> Lesson | None:
    return next((r for r in reproductions if r.stem == paper.repro), None)


def paper_page(paper: Paper, lessons: list[Lesson], reproductions: list[Lesson] = ()) -> str:
    following = [l for l in lessons if paper in l.papers]
    out = [f"# {paper.short[0].upper() + paper.short[1:]}: *{paper.title}*", "",
           f"{paper.authors}, {paper.venue}.", "", f"**What the course takes from it**: {paper.taken}", "",
           "## The lessons that follow it", ""]
    for l in following:
        out += [f"- [{l.title}](../{LESSON_DIR}/{l.stem}.ipynb). It follows: {l.follows}"]
    if not following:
        out += ["No lesson of this book names it."]
    repro = reproduction_of(paper, reproductions)
    out += ["", "## Its claims, as the reproduction tests them", ""]
    if repro is None:
        out.append(f"Its reproduction (`notebooks/{REPRO_DIR}/{paper.repro}.ipynb`) has no run in this book: "
                   "`make reproduce` runs it, then `make book`.")
    else:
        claims = claims_of(repro.record)
        out += [f"[The reproduction](../{REPRO_DIR}/{repro.stem}.ipynb), {len(repro.record.get('seeds', []))} model seeds, "
                f"run at {run_line(repro)}. Pooled: the seeds' mean with its 95% interval (t over the seeds and "
                "the bootstrap over the test sentences); per seed: each seed's own verdict.", "",
                "| claim | the paper says | section | pooled verdict | mean [95% interval] | the paper expects | per seed |",
                "| --- | --- | --- | --- | --- | --- | --- |"]
        out += [f"| {cell(k)} | {cell(v.get('quote', ''))} | {cell(v.get('section', ''))} | {cell(verdict_of(v))} | "
                f"{cell(interval_of(v))} | {cell(expects_of(v))} | {cell(seed_counts(v))} |" for k, v in claims]
    return "\n".join(out) + "\n"


def records_page(reproductions: list[Lesson]) -> str:
    out = ["# Reproduction records", "",
           "Every claim each paper's reproduction tests, as its run recorded it (its results file). A claim is a "
           "paper's statement in the paper's direction, against a threshold the paper fixes, decided on every "
           "model seed (that seed's 95% bootstrap interval over the test sentences) and pooled (the seeds' mean "
           "with the t interval over seeds and the bootstrap, in quadrature): it *holds* (the interval lies on the "
           "paper's side), is *not decided* (the interval reaches the other side, or a precondition of the "
           "paper's statement failed) or is *contradicted* (the interval lies on the other side).", ""]
    if not reproductions:
        return "\n".join(out + ["No reproduction has a run in this book: `make reproduce`, then `make book`."]) + "\n"
    out += ["| reproduction | claims | pooled verdicts | verdicts over all seeds |", "| --- | --- | --- | --- |"]
    for r in reproductions:
        counts = r.record.get("counts", {})
        fmt = lambda c: ", ".join(f"{n} {k}" for k, n in (c or {}).items())
        out.append(f"| {{ref}}`{r.stem} <{anchor(r)}>` | {len(claims_of(r.record))} | {cell(fmt(counts.get('pooled')))} | "
                   f"{cell(fmt(counts.get('per_seed')))} |")
    for r in reproductions:
        out += ["", f"({anchor(r)})=", f"## {r.title}", "",
                f"[The reproduction]({REPRO_DIR}/{r.stem}.ipynb); run at {run_line(r)}; results file `{r.results.name}`."
                + (" This run executed an earlier version of the notebook." if r.stale else ""), "",
                "| claim | pooled verdict | mean [95% interval] | the paper expects | per seed | preconditions |",
                "| --- | --- | --- | --- | --- | --- |"]
        for k, v in claims_of(r.record):
            pre = "; ".join(f"{p['name']}: {'ok' if p['ok'] else 'FAILED'}" for p in v.get("preconditions", [])) or "none"
            per = "; ".join(f"{s} {x['verdict']}" for s, x in (v.get("seeds") or {}).items())
            out.append(f"| {cell(k)} | {cell(verdict_of(v))} | {cell(interval_of(v))} | {cell(expects_of(v))} | "
                       f"{cell(per)} | {cell(pre)} |")
        sanity = r.record.get("sanity") or {}
        if sanity:
            failed = [k for k, v in sanity.items() if not (v is True or (isinstance(v, dict) and v.get("ok")))]
            out += ["", f"Construction checks (not claims): {len(sanity)}, " +
                    ("all passed." if not failed else "failed: " + cell("; ".join(failed)) + ".")]
    return "\n".join(out) + "\n"


def write_sources(lessons: list[Lesson], src: Path, profile: str, reproductions: list[Lesson] = ()) -> None:
    if src.exists():
        shutil.rmtree(src)
    (src / LESSON_DIR).mkdir(parents=True)
    (src / PAPER_DIR).mkdir()
    (src / REPRO_DIR).mkdir()
    for page in list(lessons) + list(reproductions):
        folder = REPRO_DIR if page in reproductions else LESSON_DIR
        (src / folder / page.executed.name).write_text(
            json.dumps(lesson_page(page), indent=1, ensure_ascii=False), encoding="utf-8")
    (src / "index.md").write_text(index_page(lessons, profile, reproductions), encoding="utf-8")
    # the lessons link to it as glossary.md, beside them both in notebooks/ and in the book
    shutil.copyfile(ROOT / "notebooks" / "glossary.md", src / LESSON_DIR / "glossary.md")
    for paper in PAPERS:
        (src / PAPER_DIR / f"{paper.slug}.md").write_text(paper_page(paper, lessons, reproductions), encoding="utf-8")
    (src / "records.md").write_text(records_page(list(reproductions)), encoding="utf-8")


def sphinx(src: Path, html_dir: Path) -> None:
    doctrees = html_dir.parent / "doctrees"
    for d in (html_dir, doctrees):       # a page is never left over from an earlier build
        if d.exists():
            shutil.rmtree(d)
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", "--keep-going", "-c", str(CONF_DIR),
           "-d", str(doctrees), str(src), str(html_dir)]
    subprocess.run(cmd, check=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--notebooks", type=Path, default=ROOT / "build" / "notebooks",
                    help="the executed notebooks and their results files (default: build/notebooks)")
    ap.add_argument("--profile", default="lab", help="the profile every run must have (default: lab)")
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "book", help="sources in OUT/src, the site in OUT/html")
    ap.add_argument("--allow-stale", action="store_true",
                    help="show runs of an earlier version of a notebook (each page says so)")
    ap.add_argument("--missing", action="store_true", help="only print the lessons with no executed copy")
    ap.add_argument("--only", nargs="+", metavar="NN", help="only these lessons (a partial book, for a quick look)")
    args = ap.parse_args(argv)
    if args.missing:
        print(" ".join(str(p.relative_to(ROOT)) for p in missing(args.notebooks)))
        return 0
    t0 = time.time()
    try:
        lessons = load_lessons(args.notebooks, args.profile, args.allow_stale, args.only)
    except Refused as why:
        print(f"book: {why}", file=sys.stderr)
        return 1
    try:
        reproductions = load_reproductions(args.notebooks, args.profile, args.allow_stale)
    except Refused as why:
        print(f"book: {why}", file=sys.stderr)
        return 1
    print(f"book: the runs it shows (from {args.notebooks}):")
    for l in lessons + reproductions:
        print(f"  {l.stem:30s} {when(l.run):36s} {l.run['machine']}, torch {l.run['torch']}"
              + ("  [an earlier version of the lesson]" if l.stale else ""))
    not_run = [p.repro for p in PAPERS if reproduction_of(p, reproductions) is None]
    if not_run:
        print(f"book: no reproduction run of {', '.join(not_run)} (make reproduce): their paper pages say so")
    write_sources(lessons, args.out / "src", args.profile, reproductions)
    sphinx(args.out / "src", args.out / "html")
    print(f"book: built {args.out / 'html' / 'index.html'} in {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
