"""`make test-book`: every page of the built book read as a reader would, in headless Chromium.

The site is $NBS_BOOK_SITE (the Makefile builds it from ci runs of every lesson). Each page is
opened from disk (file://, as the README tells a reader to open it): it loads with no console
error and requests nothing from the network, every image loads (naturalWidth > 0), MathJax has
typeset every formula (no raw $...$ left in the text, no MathJax error); every link, stylesheet,
script and image of every page resolves to a file of the site (and an anchor to an id of its
page); each lesson's first figure is visible, and its page says which run it shows and that the
live widgets need JupyterLab. Screenshots in build/screenshots/book/: the top of each page and
each lesson's first figure.
"""
from __future__ import annotations

import os
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

pytestmark = pytest.mark.browser

SITE = Path(os.environ.get("NBS_BOOK_SITE", "build/book/html")).resolve()
ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "build" / "screenshots" / "book"
PAGES = sorted(p.relative_to(SITE).as_posix() for p in SITE.rglob("*.html")
               if not p.relative_to(SITE).as_posix().startswith(("_static/", "_sources/", "_images/")))
LESSONS = sorted(p for p in PAGES if p.startswith("lessons/"))
NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
STEMS = [Path(p).stem for p in LESSONS]
PROFILE = os.environ.get("NBS_BOOK_PROFILE", "ci")      # the profile of the runs the site was built from
RAW_MATH = re.compile(r"\$[^\s$][^$\n]{0,200}?\$|\\\(|\\\[")


class Refs(HTMLParser):
    """Every URL a page refers to (tag, attribute, url) and every id it defines."""

    def __init__(self):
        super().__init__()
        self.refs, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        for name in ("href", "src"):
            if a.get(name) and not (tag == "a" and name == "src"):
                self.refs.append((tag, name, a[name]))


_parsed: dict[Path, Refs] = {}


def parsed(path: Path) -> Refs:
    if path not in _parsed:
        p = Refs()
        p.feed(path.read_text(encoding="utf-8"))
        _parsed[path] = p
    return _parsed[path]


def test_the_site_has_every_page():
    assert "index.html" in PAGES and "records.html" in PAGES
    assert LESSONS == [f"lessons/{s}.html" for s in NOTEBOOKS]
    assert len([p for p in PAGES if p.startswith("papers/")]) == 5


@pytest.mark.parametrize("page", PAGES)
def test_every_link_resolves_and_nothing_is_loaded_from_the_web(page):
    path = SITE / page
    bad = []
    for tag, attr, url in parsed(path).refs:
        parts = urlsplit(url)
        if parts.scheme in ("http", "https") or url.startswith("//"):
            if tag != "a":                 # a stylesheet, script or image from the web
                bad.append(f"<{tag} {attr}={url}> loads from the web")
            continue
        if parts.scheme in ("mailto", "data", "javascript"):
            continue
        target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
        if target.is_dir():
            target = target / "index.html"
        if not target.exists():
            bad.append(f"<{tag} {attr}={url}>: no {target.relative_to(SITE) if SITE in target.parents else target}")
        elif parts.fragment and target.suffix == ".html" and unquote(parts.fragment) not in parsed(target).ids:
            bad.append(f"<{tag} {attr}={url}>: no id {parts.fragment!r} in {target.relative_to(SITE)}")
    # no other web address either (a CDN named in an inline script or style), only XML namespaces
    links = {url for tag, _, url in parsed(path).refs if tag == "a"}
    for url in re.findall(r"https?://[^\s\"'<>)]+", path.read_text(encoding="utf-8")):
        if url not in links and not url.startswith("http://www.w3.org/"):
            bad.append(f"a web address in the page: {url}")
    assert not bad, "\n".join(bad)


@pytest.fixture(scope="module")
def browser():
    binary = os.environ.get("NBS_CHROMIUM") or (
        "/usr/lib/chromium/chromium" if os.access("/usr/lib/chromium/chromium", os.X_OK)
        else shutil.which("chromium") or shutil.which("google-chrome"))
    if not binary:
        pytest.fail("no Chromium found: apt-get install chromium (or set NBS_CHROMIUM=/path/to/chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is not installed: pip install -e '.[browser]' (make test-book does it)")
    shutil.rmtree(SHOTS, ignore_errors=True)       # only this site's screenshots
    SHOTS.mkdir(parents=True)
    with sync_playwright() as pw:
        chrome = pw.chromium.launch(executable_path=binary, args=["--no-sandbox"])
        yield chrome
        chrome.close()


# waits for MathJax (if the page loads it) to finish typesetting; then what the page shows
READ_PAGE = """async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  const imgs = Array.from(document.querySelectorAll('img'));
  await Promise.all(imgs.map(i => { i.loading = 'eager'; return i.decode().catch(() => null); }));
  const article = document.querySelector('article') || document.body;
  const text = article.cloneNode(true);
  text.querySelectorAll('pre, code, script, style, .highlight, mjx-container').forEach(e => e.remove());
  return {
    mathjax: !!window.MathJax,
    images: imgs.map(i => ({src: i.getAttribute('src'), width: i.naturalWidth})),
    math: document.querySelectorAll('.math').length,
    typeset: document.querySelectorAll('mjx-container').length,
    untypeset: Array.from(document.querySelectorAll('.math')).filter(e => !e.querySelector('mjx-container'))
                    .map(e => e.textContent.slice(0, 80)),
    errors: Array.from(document.querySelectorAll('mjx-merror, [data-mjx-error]')).map(e => e.textContent.slice(0, 80)),
    text: text.textContent,
    notes: Array.from(document.querySelectorAll('.admonition.note')).map(e => e.textContent),
  };
}"""


def open_page(browser, page_name: str):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems = []
    page.on("console", lambda m: m.type == "error" and problems.append(f"console: {m.text}"))
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url} ({r.failure})"))
    page.on("request", lambda r: r.url.split(":", 1)[0] not in ("file", "data", "blob", "about")
            and problems.append(f"request to the network: {r.url}"))
    page.goto((SITE / page_name).as_uri(), wait_until="load")
    shown = page.evaluate(READ_PAGE)
    page.wait_for_timeout(200)            # late console messages
    return page, shown, problems


@pytest.mark.parametrize("page_name", PAGES)
def test_every_page_loads_with_its_images_and_math(browser, page_name):
    page, shown, problems = open_page(browser, page_name)
    try:
        page.screenshot(path=str(SHOTS / (page_name.replace("/", "-").removesuffix(".html") + ".png")))
    finally:
        page.close()
    assert not problems, "\n".join(problems)
    assert shown["mathjax"] or not shown["math"], "MathJax is not loaded"
    broken = [i["src"] for i in shown["images"] if not i["width"]]
    assert not broken, f"images that did not load: {broken}"
    assert not shown["untypeset"], f"formulas MathJax did not typeset: {shown['untypeset']}"
    assert not shown["errors"], f"MathJax errors: {shown['errors']}"
    raw = RAW_MATH.findall(shown["text"])
    assert not raw, f"raw TeX left in the text: {raw[:5]}"
    assert shown["typeset"] >= shown["math"]


@pytest.mark.parametrize("lesson", LESSONS)
def test_each_lesson_shows_its_run_its_math_and_its_first_figure(browser, lesson):
    page, shown, problems = open_page(browser, lesson)
    try:
        assert not problems, "\n".join(problems)
        note = " ".join(" ".join(n.split()) for n in shown["notes"])
        assert f"This page shows the run at profile {PROFILE}," in note, note
        assert "need JupyterLab" in note and "make lab" in note
        page.locator("article .admonition.note").first.screenshot(path=str(SHOTS / (Path(lesson).stem + "-note.png")))
        assert shown["math"] > 0 and shown["typeset"] >= shown["math"], "a lesson's equations are typeset"
        figure = page.locator("article .cell_output img").first
        figure.scroll_into_view_if_needed()
        assert figure.is_visible()
        box = figure.bounding_box()
        assert box and box["width"] > 100 and box["height"] > 100, box
        assert figure.evaluate("i => i.naturalWidth") > 0
        figure.screenshot(path=str(SHOTS / (Path(lesson).stem + "-first-figure.png")))
    finally:
        page.close()


def test_the_front_page_is_the_course_map_linking_every_lesson(browser):
    page, shown, problems = open_page(browser, "index.html")
    try:
        assert "The course map" in shown["text"]
        linked = set(page.eval_on_selector_all(
            "article table a", "as => as.map(a => a.getAttribute('href'))"))
        assert {f"lessons/{s}.html" for s in STEMS} <= linked
        nav = page.eval_on_selector_all("nav a", "as => as.map(a => a.getAttribute('href'))")
        assert any("records.html" in h for h in nav) and sum("papers/" in h for h in nav) == 5
    finally:
        page.close()


def test_each_paper_page_links_the_lessons_that_follow_it():
    for page in (p for p in PAGES if p.startswith("papers/")):
        links = {url for tag, _, url in parsed(SITE / page).refs if tag == "a" and "lessons/" in url}
        assert links, f"{page} links no lesson"


def test_the_records_page_has_every_lessons_claims_and_verdicts():
    text = (SITE / "records.html").read_text(encoding="utf-8")
    ids = parsed(SITE / "records.html").ids
    for stem in STEMS:
        assert "records-" + stem.replace("_", "-") in ids, stem
    verdicts = re.findall(r"<td><p>(holds|not decided|contradicted|reproduced|not reproduced)</p></td>", text)
    assert verdicts, "no claim verdict on the records page"


def test_the_search_works_offline(browser):
    page = browser.new_page()
    try:
        page.goto((SITE / "search.html").as_uri() + "?q=BLEU", wait_until="load")
        page.wait_for_selector("#search-results ul li", timeout=30_000)
        hits = page.eval_on_selector_all("#search-results ul li a", "as => as.map(a => a.getAttribute('href'))")
        assert any("lessons/" in h for h in hits), hits
    finally:
        page.close()
