"""A small static site drawn by Bokeh (run with the test bed's Python: ``bokeh_site.py OUT``): Bokeh 3
draws its widgets, tables and tabs as web components, in open shadow roots, from BokehJS inlined in
each page (nothing is fetched from a CDN). Pages: ``index.html`` (links), ``stock.html`` (a title, a
region select, a button and a data table of stock) and ``tabs.html`` (two tabs)."""

from __future__ import annotations

import sys
from pathlib import Path

from bokeh.io import save
from bokeh.layouts import column
from bokeh.models import Button, ColumnDataSource, DataTable, Div, Select, TableColumn, TabPanel, Tabs
from bokeh.resources import INLINE

INDEX = """<!doctype html><html><head><meta charset="utf-8"><title>Depot</title></head><body>
<h1>Depot</h1><ul><li><a href="stock.html">Stock</a></li><li><a href="tabs.html">Routes</a></li></ul>
</body></html>
"""


def build(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    stock = ColumnDataSource({"item": ["Anvil", "Bracket", "Cobalt kettle", "Dynamo"],
                              "colour": ["red", "green", "blue", "amber"], "count": [3, 14, 15, 92]})
    table = DataTable(source=stock, width=420, height=160,
                      columns=[TableColumn(field="item", title="Item"), TableColumn(field="colour", title="Colour"),
                               TableColumn(field="count", title="Count")])
    page = column(Div(text="<b>Depot stock</b>, counted on Mondays."),
                  Select(title="Region:", value="North", options=["North", "South", "East"]),
                  Button(label="Recount"), table)
    save(page, filename=str(out / "stock.html"), resources=INLINE, title="Stock")
    tabs = Tabs(tabs=[TabPanel(child=Div(text="Harbour route: Zanzibar on Fridays"), title="Harbour"),
                      TabPanel(child=Div(text="Caravan route: Timbuktu on Tuesdays"), title="Caravans")])
    save(tabs, filename=str(out / "tabs.html"), resources=INLINE, title="Routes")
    (out / "index.html").write_text(INDEX)


if __name__ == "__main__":
    build(Path(sys.argv[1]))
