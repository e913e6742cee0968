# Sphinx configuration of the course book (`make book`; book/build.py writes the sources it reads).
# Everything the pages load comes from installed packages: the theme's assets from
# sphinx-book-theme, MathJax 3 from sphinx-mathjax-offline (copied to _static/mathjax).
project = "Ambiguity and diversity in neural machine translation"
author = "the course authors"
html_title = "Ambiguity and diversity in NMT"

extensions = ["myst_nb", "sphinx.ext.mathjax", "sphinx-mathjax-offline"]

# the notebooks are shown as executed (papermill's run), never run again here
nb_execution_mode = "off"
# the widgets' default views are in the outputs as HTML; the widget manager (loaded from a CDN) is not wanted
nb_ipywidgets_js = {}
nb_output_stderr = "show"
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3

html_theme = "sphinx_book_theme"
html_theme_options = {
    "home_page_in_toc": True,
    "use_download_button": True,   # the executed .ipynb, from this site
    "show_toc_level": 2,
    "navigation_with_keys": False,
}
html_static_path = ["static"]
html_css_files = ["book.css"]
html_show_sourcelink = False
html_last_updated_fmt = None
html_permalinks_icon = "#"
exclude_patterns = ["**.ipynb_checkpoints"]
# myst-nb renders images from notebook outputs itself; a lesson's headings start at "#"
suppress_warnings = ["myst.header", "mystnb.unknown_mime_type"]
# the theme's light mode unless the reader chose another (matplotlib's figures are drawn on white)
html_context = {"default_mode": "light"}
