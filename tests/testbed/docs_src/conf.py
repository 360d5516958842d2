# Sphinx configuration of the test bed's documentation site (our own text about a made-up tool).
project = "Tidepool"
author = "webfreeze test bed"
copyright = "2026, webfreeze test bed"
release = "1.4"
extensions = []
# The classic theme under its old name "default", entered through its legacy default.css:
# default.css @imports classic.css, which @imports basic.css, a chain a capture must follow.
html_theme = "default"
html_style = "default.css"
# fixed build: no "last updated" stamp, no source links that change between builds
html_last_updated_fmt = None
html_show_sourcelink = False
html_copy_source = False
