"""Widgets, each on a pure render function.

``explore(render, interactive, **controls)`` first calls ``render`` once with the default
value of every control and shows the result, so a papermill run (which saves no widget
output) still shows it; then, when ``interactive`` and ipywidgets is present, it adds the
controls, and every change calls ``render`` again: the render functions of the lessons call
the model (:mod:`nbsupport.views.live`), so what a student changes, the model answers.
``render`` returns text, HTML (``IPython.display.HTML``) or a matplotlib figure and has no
side effects. An exception in ``render`` (bad input) is shown in the view as one line, never
as a traceback, and the controls keep working.

Every view drawn in the kernel is kept in :data:`VIEWS` with the text of its last rendering,
so that a test can set a control's value through ipywidgets and read what the view answered
(:func:`exercise`).
"""
from __future__ import annotations

import contextlib
import html as _html
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence


def _default(control):
    """The default value of a control spec: list -> first item, (lo, hi[, step]) -> lo, else itself."""
    if hasattr(control, "value"):          # an ipywidgets control
        return control.value
    if isinstance(control, (list, tuple)):
        return control[0]
    return control


def as_text(result) -> str:
    """What a view shows, as text: a string itself, HTML's markup, a figure's title, axis labels
    and caption (for tests and for the record of a view)."""
    if result is None:
        return ""
    if isinstance(result, str):
        return result
    data = getattr(result, "data", None)
    if isinstance(data, str):                       # IPython.display.HTML / Markdown
        return data
    if hasattr(result, "axes") and hasattr(result, "texts"):   # a matplotlib figure
        parts = [t.get_text() for t in result.texts]
        for ax in result.axes:
            parts += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
            parts += [t.get_text() for t in ax.get_xticklabels() + ax.get_yticklabels()]
        sup = getattr(result, "_suptitle", None)
        return "\n".join(([sup.get_text()] if sup else []) + [p for p in parts if p])
    return str(result)


def _show(result) -> None:
    if result is None:
        return
    if isinstance(result, str):
        print(result)
        return
    from IPython.display import display
    display(result)
    _close(result)


def error_view(err: Exception) -> str:
    """One line for an exception raised by a render function: its message, no traceback."""
    return f"⚠ {err}" if isinstance(err, (ValueError, TypeError, KeyError)) else f"⚠ {type(err).__name__}: {err}"


@contextlib.contextmanager
def interaction_threads(n: int = 1):
    """Run a widget's re-render on ``n`` CPU threads (then restore the count). A view decodes one
    sentence or a handful: too little work to split across threads, which only adds their
    synchronisation (benchmarks/README.md has the measurement)."""
    import torch
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@dataclass
class View:
    """One explored render function: its controls (ipywidgets, when interactive), the values of
    its last rendering, what it showed, and how long each rendering took."""
    name: str
    render: Callable
    defaults: dict
    controls: dict = field(default_factory=dict)
    values: dict = field(default_factory=dict)
    last: str = ""
    seconds: list = field(default_factory=list)

    def update(self, **values):
        """Render with ``values`` (the rest as last time), on one CPU thread; returns what to show."""
        self.values = {**self.defaults, **self.values, **values}
        t0 = time.perf_counter()
        try:
            with interaction_threads():
                result = self.render(**self.values)
        except Exception as err:  # bad input: said in the view, never a traceback
            result = error_view(err)
        self.seconds.append(time.perf_counter() - t0)
        self.last = as_text(result)
        return result


VIEWS: list[View] = []


def _displayable(result):
    """``result`` as an object ``display`` can show and later replace in place: text as plain text."""
    if isinstance(result, str):
        from IPython.display import Pretty
        return Pretty(result)
    return result


def _close(result) -> None:
    if hasattr(result, "savefig"):      # a figure: closed once shown, so the inline backend does not draw it again
        import matplotlib.pyplot as plt
        plt.close(result)


def explore(render: Callable, interactive: bool = True, **controls):
    """Call ``render(**defaults)`` once and show it; then, if ``interactive``, attach widgets
    whose every change renders again and replaces that view in place (one view, always the
    controls' current answer; a papermill run keeps the default view).

    Controls follow ipywidgets.interact's abbreviations: a list gives a dropdown, a
    ``(min, max)`` or ``(min, max, step)`` tuple gives a slider (starting at ``min``, the value
    the default view shows), a bool a checkbox, a string a text box (updated on Enter), and
    any ipywidgets control is used as it is.
    Returns nothing (so that Jupyter does not echo the default view a second time).
    """
    view = View(getattr(render, "__name__", "view"), render, {n: _default(c) for n, c in controls.items()})
    VIEWS.append(view)
    result = view.update()
    widgets = None
    if interactive:
        try:
            import ipywidgets as widgets
        except ImportError:  # the course still works without widgets
            print("(ipywidgets is not installed: showing the default view only)")
    if widgets is None:
        _show(result)
        return None
    from IPython.display import DisplayHandle, display
    for name, c in controls.items():
        if isinstance(c, widgets.Widget):
            view.controls[name] = c
        elif isinstance(c, str):
            view.controls[name] = widgets.Text(value=c, description=name, continuous_update=False,
                                               layout=widgets.Layout(width="90%"))
        else:
            control = widgets.interactive.widget_from_abbrev(c)
            control.description = name
            control.value = view.defaults[name]          # a slider starts where the default view is
            view.controls[name] = control
    display(widgets.VBox(list(view.controls.values())))
    handle = DisplayHandle()               # the view, replaced in place by every change
    handle.display(_displayable(result))
    _close(result)

    def refresh(change=None):
        # said at once (a display update reaches the browser while the kernel still works): an
        # exact search may take its budget's time
        handle.update(_displayable("⏳ the model is decoding ..."))
        shown = view.update(**{n: c.value for n, c in view.controls.items()})
        handle.update(_displayable(shown))
        _close(shown)

    for c in view.controls.values():
        c.observe(refresh, names="value")
    return None


def toggles(options, description: str = "", value=None):
    """Toggle buttons (one per option), pressed at ``value`` (default: the first option; give the
    render function's default so that the buttons show the default view's value); a plain list
    when ipywidgets is missing."""
    options = list(options)
    if value is not None and value not in options:
        raise ValueError(f"the toggles' value {value!r} is not one of their options {options}")
    try:
        import ipywidgets as w
    except ImportError:                    # the default view's value first, as explore's lists
        return options if value is None else [value, *(o for o in options if o != value)]
    return w.ToggleButtons(options=options, description=description, value=options[0] if value is None else value)


def source_box(sentences: Sequence[str], description: str = "source"):
    """One control for the source of a live view: a text box that suggests ``sentences`` (the
    test sources; ipywidgets' Combobox): pick one, or write a sentence and press Enter. Starts
    at the first sentence; without ipywidgets, that sentence (the default view)."""
    if not sentences:
        raise ValueError("source_box needs at least one sentence to start from")
    try:
        import ipywidgets as w
    except ImportError:
        return sentences[0]
    return w.Combobox(value=sentences[0], options=list(dict.fromkeys(sentences)), ensure_option=False,
                      continuous_update=False, description=description,
                      placeholder="pick a test sentence, or write one and press Enter", layout=w.Layout(width="90%"))


def slider(lo, hi, value, step=1, description: str = ""):
    """A slider from ``lo`` to ``hi`` that starts at ``value`` (an int slider when all are
    ints, else a float one); without ipywidgets, ``value`` (the default view)."""
    if not lo <= value <= hi:
        raise ValueError(f"the slider's value {value!r} is outside {lo}..{hi}")
    try:
        import ipywidgets as w
    except ImportError:
        return value
    ints = all(isinstance(v, int) for v in (lo, hi, value, step))
    return (w.IntSlider if ints else w.FloatSlider)(value=value, min=lo, max=hi, step=step, description=description,
                                                    continuous_update=False)


# --------------------------------------------------------------------------- driving views (tests)
def _other_values(control) -> list:
    """Values to set a control to, other than its current one: up to 3 other options of a
    dropdown or toggle, a slider's ends, a checkbox's other state; for a text box (or a
    combobox, after one of its suggestions) bad input the view must name: the text with an
    unknown word, then only spaces."""
    value = control.value
    bad_text = [f"{value} zzzq", "   "]
    options = getattr(control, "options", None)
    if type(control).__name__ == "Combobox":
        return [o for o in options if o != value][:1] + bad_text
    if options is not None:
        labels = [o[1] if isinstance(o, tuple) else o for o in options]
        return [o for o in labels if o != value][:3]
    if hasattr(control, "max") and hasattr(control, "min"):
        return [v for v in (control.max, control.min) if v != value]
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, str):
        return bad_text
    return []


def exercise(views: list[View] | None = None) -> list[dict]:
    """Set every control of every view through ipywidgets to other values in turn and record
    what the view showed: ``[{view, control, value, changed, error, text, seconds}]``."""
    report = []
    for view in VIEWS if views is None else views:
        for name, control in view.controls.items():
            start = control.value
            for value in _other_values(control):
                before = view.last
                control.value = value             # the observer renders, as a click or Enter would
                report.append({"view": view.name, "control": name, "value": value, "changed": view.last != before,
                               "error": view.last.startswith("⚠"), "text": view.last,
                               "seconds": view.seconds[-1]})
            control.value = start
    return report


def escape(text: str) -> str:
    return _html.escape(str(text))
