"""`make test-browser`: every notebook in JupyterLab, in headless Chromium, as a student sees it.

For each notebook: a copy with ``PROFILE = "ci"`` (``INTERACTIVE = True``) in a temporary folder
that a `jupyter lab` of the venv serves (the venv's own kernel); Chromium (the system's, driven
by playwright from PyPI: no browser download) opens it and runs all cells; then every ipywidgets
control on the page is used as a person would: a toggle button other than the selected one is
clicked, a dropdown's selection changed, a slider's handle moved with the arrow keys, a text box
typed into (the text + " zzzq", then the text again) and Enter pressed. After each action the
widget's output (the Output of the box that holds the control) must change and show no
traceback; a control's own values must not give an error view ("⚠ ..."), a typed unknown word
must be named. Screenshots: build/screenshots/<notebook>-<step>.png, and what each step did in
build/screenshots/<notebook>.json.

Not part of `make test` (pytest's default `-m "not browser"`). Needs `pip install -e '.[browser]'`
and Chromium (`apt-get install chromium`; another binary: NBS_CHROMIUM=/path). NBS_BROWSER_TIMEOUT
sets the seconds allowed for one notebook's Run All (default 900).
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from nbsupport.paths import build_dir, repo_root
from nbsupport.harness.run_notebooks import notebook_paths

pytestmark = pytest.mark.browser

ROOT = repo_root()
VENV = ROOT / ".venv"
NOTEBOOKS = notebook_paths()
SCREENSHOTS = build_dir() / "screenshots"
RUN_ALL_TIMEOUT_S = float(os.environ.get("NBS_BROWSER_TIMEOUT", 900))
CHANGE_TIMEOUT_S = 120          # one interaction (an exact search may take its budget; the CPU is shared)
UNKNOWN = "zzzq"                # typed after a text box's text: a word no toy vocabulary has

# the controls, by the DOM classes of ipywidgets 8 in JupyterLab 4
CONTROLS = {
    "toggles": ".widget-toggle-buttons",
    "dropdown": ".widget-dropdown select",
    "slider": ".widget-slider",
    "combobox": ".widget-text input[list], .widget-combobox input",   # ipywidgets 8: a text box with a datalist
    "text": ".widget-text input, .widget-textarea textarea",
    "checkbox": ".widget-checkbox input",
}
OUTPUTS = ".widget-output, .jupyter-widgets-output-area"

# Tags every control with data-nbs-control=<j> and the output it drives with data-nbs-view=<i>
# (the Output inside the innermost widget box holding both, else the cell's output area), in
# page order; returns [{control, kind, label, view}].
TAG_CONTROLS = r"""([controls, outputs]) => {
  const found = [], views = new Map();
  const all = document.querySelectorAll(Object.values(controls).join(', '));
  for (const el of all) {
    const kind = Object.keys(controls).find(k => el.matches(controls[k]));
    let box = el.closest('.widget-box'), out = null;
    while (box && !out) {
      out = box.querySelector(outputs);
      box = box.parentElement ? box.parentElement.closest('.widget-box') : null;
    }
    out = out || el.closest('.jp-Cell-outputArea, .jp-OutputArea');
    if (!views.has(out)) { views.set(out, views.size); out.setAttribute('data-nbs-view', views.get(out)); }
    const own = el.closest('.widget-inline-hbox, .widget-inline-vbox, .widget-checkbox, .widget-toggle-buttons') || el;
    const label = Array.from(own.querySelectorAll('.widget-label, .widget-label-basic'))
      .filter(l => !l.closest('button')).map(l => l.textContent).join(' ').replace(/[\u200b\s]+/g, ' ').trim();
    el.setAttribute('data-nbs-control', found.length);
    found.push({control: found.length, kind, view: views.get(out), label});
  }
  return found;
}"""
KERNEL_IDLE = """() => { const w = window.jupyterapp && jupyterapp.shell.currentWidget;
  const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  return !!k && k.status === 'idle'; }"""
# what a view shows: its text and its images (a figure is a PNG); the HTML itself changes on every render
# (a cell's output area holds the controls' box too: its outputs that contain controls are left out, so
# that a slider's own readout never counts as the view changing)
SHOWN = """e => { const outs = Array.from(e.querySelectorAll('.jp-OutputArea-output')).filter(o =>
    !o.querySelector('.widget-box, .widget-inline-hbox, .widget-toggle-buttons, .widget-checkbox'));
  const parts = outs.length ? outs : [e];
  return parts.map(o => o.innerText + Array.from(o.querySelectorAll('img'), i => i.src).join('|')).join('\\n'); }"""
RUN_ALL = """() => { window.__nbsRunAll = null;
  jupyterapp.commands.execute('notebook:run-all-cells').then(ok => { window.__nbsRunAll = ok ? 'ok' : 'failed'; },
                                                             err => { window.__nbsRunAll = 'error: ' + err; }); }"""


def chromium_path() -> str | None:
    """$NBS_CHROMIUM, else Debian's chromium binary (/usr/bin/chromium is a shell wrapper around
    it), else a chromium or chrome on PATH."""
    if os.environ.get("NBS_CHROMIUM"):
        return os.environ["NBS_CHROMIUM"]
    if os.access("/usr/lib/chromium/chromium", os.X_OK):
        return "/usr/lib/chromium/chromium"
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def ci_copy(path: Path, folder: Path) -> Path:
    """``path`` with its parameters cell set to PROFILE = "ci", INTERACTIVE = True, in ``folder``."""
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    source, n = re.subn(r'^PROFILE\s*=\s*"\w+"', 'PROFILE = "ci"', cell.source, flags=re.M)
    source, m = re.subn(r"^INTERACTIVE\s*=\s*\w+", "INTERACTIVE = True", source, flags=re.M)
    assert n == 1 and m == 1, f"{path.name}: the parameters cell must assign PROFILE and INTERACTIVE once"
    cell.source = source
    out = folder / path.name
    nbformat.write(nb, out)
    return out


BROKEN = Path("zz_broken_widgets.ipynb")


def broken_widgets(path: Path) -> None:
    """A notebook whose widgets are broken in four ways (for test_a_broken_widget_fails)."""
    cells = ['PROFILE = "ci"\nSEED = 0\nINTERACTIVE = True',
             "import nbsupport as nbs",
             "nbs.widgets.explore(lambda x: 'always the same', INTERACTIVE, x=['a', 'b'])",
             "def bad(x):\n    if x != 'a':\n        raise ValueError(f'bad {x}')\n    return x\n"
             "nbs.widgets.explore(bad, INTERACTIVE, x=['a', 'b'])",
             "import ipywidgets as w\nd, out = w.Dropdown(options=['a', 'b']), w.Output()\n"
             "def f(change):\n    with out:\n        raise RuntimeError('boom')\n"
             "d.observe(f, names='value')\nw.VBox([d, out])",
             "nbs.widgets.explore(lambda s: f'{len(s)} characters', INTERACTIVE, s='hello')"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture          # one JupyterLab per notebook: widgets of an earlier notebook's kernel never leak in
def lab(tmp_path_factory):
    """A `jupyter lab` of the venv serving ci copies of the notebooks; yields its base URL and token.
    Its results go to a temporary build folder (the real build/notebooks/*.json stay as they are)
    that shares build/models and build/cache, so trained models are reused."""
    base = tmp_path_factory.mktemp("lab")
    root, build, settings = base / "notebooks", base / "build", base / "settings"
    root.mkdir()
    for path in NOTEBOOKS:
        ci_copy(path, root)
    broken_widgets(root / BROKEN.name)
    build.mkdir()
    for shared in ("models", "cache"):
        (build_dir() / shared).mkdir(parents=True, exist_ok=True)
        (build / shared).symlink_to(build_dir() / shared)
    # every cell in the DOM (no virtual scrolling), no news pop-up over the widgets
    for plugin, values in {"notebook-extension/tracker": {"windowingMode": "none"},
                           "apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False}}.items():
        file = settings / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(json.dumps(values))
    port, token = free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTER_PATH": str(VENV / "share" / "jupyter"), "JUPYTERLAB_SETTINGS_DIR": str(settings),
           "JUPYTERLAB_WORKSPACES_DIR": str(base / "workspaces"), "NBS_BUILD": str(build),
           "MPLBACKEND": "module://matplotlib_inline.backend_inline"}
    cmd = [str(VENV / "bin" / "jupyter"), "lab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
           "--LabApp.expose_app_in_browser=True"] + (["--allow-root"] if os.geteuid() == 0 else [])
    log = open(base / "jupyter.log", "w")
    server = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        t0 = time.time()
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=5)
                break
            except OSError:
                if server.poll() is not None or time.time() - t0 > 180:
                    pytest.fail(f"jupyter lab did not start: {(base / 'jupyter.log').read_text()[-3000:]}")
                time.sleep(0.5)
        yield url, token
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


@pytest.fixture(scope="module")
def browser():
    binary = chromium_path()
    if binary is None:
        pytest.fail("no Chromium found: apt-get install chromium (or set NBS_CHROMIUM=/path/to/chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is not installed: pip install -e '.[browser]' (make test-browser does it)")
    with sync_playwright() as pw:
        chrome = pw.chromium.launch(executable_path=binary, args=["--no-sandbox"])
        yield chrome
        chrome.close()


def wait_for_change(page, output, before: str) -> float | None:
    """Wait until what ``output`` shows differs from ``before``, the kernel is idle and it has
    stopped changing (0.3 s); returns the seconds until it first changed, or None after CHANGE_TIMEOUT_S."""
    t0, last, stable, first = time.time(), before, 0, None
    while time.time() - t0 < CHANGE_TIMEOUT_S:
        page.wait_for_timeout(100)
        shown = output.evaluate(SHOWN)
        if shown != before and first is None:
            first = time.time() - t0
        stable = stable + 1 if shown == last and shown != before else 0
        last = shown
        if stable >= 3 and page.evaluate(KERNEL_IDLE):
            return first
    return None


def output_problems(text: str, expect_error: bool) -> list[str]:
    problems = []
    if "Traceback" in text:
        problems.append("a traceback in the output: " + text[text.index("Traceback"):][:600])
    errors = [line for line in text.splitlines() if line.lstrip().startswith("⚠")]
    if errors and not expect_error:
        problems.append(f"an error view for one of the control's own values: {errors[0][:300]}")
    return problems


def actions(page, control: dict):
    """What to do with a control, as a person would: yields (step name, do it, expect an error view,
    a text the output must then contain)."""
    el = page.locator(f'[data-nbs-control="{control["control"]}"]')
    kind = control["kind"]
    if kind == "toggles":
        others = el.locator("button:not(.mod-active)")
        if others.count():
            name = others.first.inner_text().strip() or "other"
            yield f"click-{name}", others.first.click, False, None
    elif kind == "dropdown":
        n, current = el.evaluate("s => [s.options.length, s.selectedIndex]")
        if n > 1:
            index = (current + 1) % n
            yield f"select-{index}", lambda: el.select_option(index=index), False, None
    elif kind == "slider":
        handle = el.locator(".noUi-handle").first

        def move():
            # the formatted value: noUiSlider writes aria-valuenow with one decimal (0.1 + 0.05 still reads 0.1)
            start = handle.get_attribute("aria-valuetext")
            handle.focus()
            page.keyboard.press("ArrowRight")
            page.wait_for_timeout(200)
            if handle.get_attribute("aria-valuetext") == start:     # at its maximum
                page.keyboard.press("ArrowLeft")
        yield "arrow-key", move, False, None
    elif kind in ("text", "combobox"):
        if el.get_attribute("type") == "number":
            def step():
                el.focus()
                page.keyboard.press("ArrowUp")
                page.keyboard.press("Enter")
            yield "arrow-up-enter", step, False, None
        else:
            original = el.input_value()

            def typed(text):
                def do():
                    el.fill(text)
                    el.press("Enter")
                return do
            suggestions = el.evaluate("e => e.list ? Array.from(e.list.options, o => o.value) : []")
            other = next((s for s in suggestions if s != original), None)
            if other is not None:           # a combobox: pick another of its suggestions
                yield "pick-suggestion", typed(other), False, None
            yield "type-unknown-word", typed(f"{original} {UNKNOWN}"), True, UNKNOWN
            yield "type-back", typed(original), False, None
    elif kind == "checkbox":
        yield "click", el.click, False, None


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:40] or "x"


def run_all(page, name: str) -> float:
    """Run All in JupyterLab; waits for the last cell and an idle kernel; returns the seconds taken.
    Fails on a cell's error, a traceback in any output, or widgets shown as text."""
    page.wait_for_function(KERNEL_IDLE, timeout=180_000, polling=500)
    page.evaluate("() => jupyterapp.shell.collapseLeft()")
    t0 = time.time()
    page.evaluate(RUN_ALL)
    page.wait_for_function("() => window.__nbsRunAll !== null", timeout=RUN_ALL_TIMEOUT_S * 1000, polling=1000)
    page.wait_for_function(KERNEL_IDLE, timeout=60_000, polling=500)
    seconds = time.time() - t0
    status = page.evaluate("() => window.__nbsRunAll")
    texts = page.locator(".jp-Notebook .jp-OutputArea-output").all_inner_texts()
    broken = [t for t in texts if "Traceback" in t or "Error displaying widget" in t]
    assert status == "ok" and not broken, f"{name}: Run All {status}; {broken[0][:2000] if broken else 'no output says why'}"
    reprs = [t for t in texts if re.match(r"\s*(VBox|HBox|interactive)\(children=", t)]
    assert not reprs, f"{name}: widgets shown as text ({reprs[0][:100]}...): is jupyterlab_widgets installed?"
    return seconds


def use_control(page, control: dict, output, shot) -> list[dict]:
    """Every action on one control (:func:`actions`), each checked on the view's output and
    photographed; returns one record per action."""
    steps = []
    for k, (step, do, expect_error, must_show) in enumerate(actions(page, control), 1):
        before = output.evaluate(SHOWN)
        do()
        seconds = wait_for_change(page, output, before)    # what the student waits, polled every 0.1 s
        text = output.inner_text()
        problems = ([f"the output did not change within {CHANGE_TIMEOUT_S} s"] if seconds is None else []) \
            + output_problems(text, expect_error)
        if must_show and must_show not in text:
            problems.append(f"the typed word {must_show!r} is not named in the output: {text[:300]!r}")
        file = shot(f"w{control['view'] + 1:02d}-{control['control'] + 1:02d}{chr(96 + k)}-{control['kind']}-"
                    f"{slug(control['label'])}-{slug(step)}")
        steps.append({"view": control["view"] + 1, "kind": control["kind"], "label": control["label"], "step": step,
                      "seconds": None if seconds is None else round(seconds, 2), "problems": problems,
                      "screenshot": file, "text": text[:500]})
    return steps


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_in_browser(path, lab, browser):
    check_in_browser(path.name, lab, browser, SCREENSHOTS)


def test_a_broken_widget_fails(lab, browser, tmp_path, monkeypatch):
    """The checks above can fail: a view that does not change, one that shows an error for its own
    value, a traceback in an Output, a typed word the view does not name are all reported."""
    monkeypatch.setitem(globals(), "CHANGE_TIMEOUT_S", 15)
    with pytest.raises(AssertionError) as failed:
        check_in_browser(BROKEN.name, lab, browser, tmp_path)
    message = str(failed.value)
    assert "4 widget step(s) failed" in message, message
    for problem in ("view 1, dropdown 'x', select-1: the output did not change",
                    "view 2, dropdown 'x', select-1: an error view for one of the control's own values: ⚠ bad b",
                    "view 3, dropdown '', select-1: a traceback in the output",
                    f"view 4, text 's', type-unknown-word: the typed word '{UNKNOWN}' is not named"):
        assert problem in message, message


def check_in_browser(file_name: str, lab, browser, screenshots: Path) -> None:
    """Open ``file_name`` (in the lab's folder), Run All, use every control; fails listing every
    failed step; screenshots and the record (<notebook>.json) go to ``screenshots``."""
    url, token = lab
    name = Path(file_name).stem
    screenshots.mkdir(parents=True, exist_ok=True)
    for old in screenshots.glob(f"{name}-*.png"):
        old.unlink()
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(60_000)
    record = {"notebook": name, "steps": [], "screenshots": []}

    def shot(step: str, element=None) -> str:
        file = screenshots / f"{name}-{step}.png"
        (element or page).screenshot(path=str(file))
        record["screenshots"].append(file.name)
        return file.name

    try:
        page.goto(f"{url}/lab/tree/{file_name}?token={token}")
        record["run_all_s"] = round(run_all(page, name), 1)
        controls = page.evaluate(TAG_CONTROLS, [CONTROLS, OUTPUTS])
        assert controls, f"{name}: no ipywidgets control on the page after Run All (INTERACTIVE = True)"
        page.locator('[data-nbs-view="0"]').scroll_into_view_if_needed()
        shot("00-run-all")
        for view in sorted({c["view"] for c in controls}):
            output = page.locator(f'[data-nbs-view="{view}"]')
            box = output.locator("xpath=ancestor::*[contains(@class,'widget-box')][last()]")   # controls + output
            target = box if box.count() else output
            shot(f"w{view + 1:02d}-00-default", target)
            for control in (c for c in controls if c["view"] == view):
                record["steps"] += use_control(page, control, output, lambda step: shot(step, target))
        failures = [f"view {s['view']}, {s['kind']} {s['label']!r}, {s['step']}: {p}"
                    for s in record["steps"] for p in s["problems"]]
        assert not failures, f"{name}: {len(failures)} widget step(s) failed:\n" + "\n".join(failures)
    except Exception as err:
        record["error"] = str(err)[:3000]
        try:
            shot("zz-failure")
        except Exception:
            pass
        raise
    finally:
        (screenshots / f"{name}.json").write_text(json.dumps(record, indent=2, ensure_ascii=False))
        try:
            page.evaluate("() => jupyterapp.shell.currentWidget.sessionContext.shutdown()")
        except Exception:
            pass
        page.close()
