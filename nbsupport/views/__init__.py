"""The presentation layer: ``plots`` (matplotlib figures), ``tables`` (text tables) and
``widgets`` (ipywidgets views). Nothing here trains or decodes."""
