"""The presentation layer: ``plots`` (matplotlib figures), ``tables`` (text tables),
``widgets`` (ipywidgets views on pure render functions) and ``live`` (render functions that
decode with a trained model on what the student chose). Nothing here trains."""
