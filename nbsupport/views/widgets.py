"""Widgets, each on a pure render function.

``explore(render, interactive, **controls)`` first calls ``render`` once with the default
value of every control and prints the result, so a papermill run (which saves no widget
output) still shows it; then, when ``interactive`` and ipywidgets is present, it adds the
controls. ``render`` returns text (or a matplotlib figure) and has no side effects.
"""
from __future__ import annotations

from typing import Callable


def _default(control):
    """The default value of a control spec: list -> first item, (lo, hi[, step]) -> lo, else itself."""
    if hasattr(control, "value"):          # an ipywidgets control
        return control.value
    if isinstance(control, list):
        return control[0]
    if isinstance(control, tuple):
        return control[0]
    return control


def _show(result) -> None:
    if result is None:
        return
    if isinstance(result, str):
        print(result)
    else:
        from IPython.display import display
        display(result)


def explore(render: Callable, interactive: bool = True, **controls):
    """Call ``render(**defaults)`` once and show it; then, if ``interactive``, attach widgets.

    Controls follow ipywidgets.interact's abbreviations: a list gives a dropdown, a
    ``(min, max)`` or ``(min, max, step)`` tuple of ints gives a slider, a bool a checkbox.
    Returns nothing (so that Jupyter does not echo the default view a second time).
    """
    defaults = {name: _default(c) for name, c in controls.items()}
    result = render(**defaults)
    _show(result)
    if interactive:
        try:
            import ipywidgets as w
        except ImportError:  # the course still works without widgets
            print("(ipywidgets is not installed: showing the default view only)")
            return None

        def view(**kwargs):
            _show(render(**kwargs))

        w.interact(view, **{k: (w.fixed(v) if not isinstance(v, (list, tuple, bool, w.Widget)) else v)
                            for k, v in controls.items()})
    return None


def toggles(options, description: str = ""):
    """Toggle buttons (one per option); a plain list when ipywidgets is missing."""
    try:
        import ipywidgets as w
    except ImportError:
        return list(options)
    return w.ToggleButtons(options=list(options), description=description)
