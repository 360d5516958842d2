"""The test bed's Plotly Dash application (run by the test bed venv's Python, not imported by the
tests): a dropdown of cities, a graph of the chosen city's monthly rainfall and a text output,
both updated by a callback over XHR. ``python dash_app.py PORT``."""

import sys

from dash import Dash, Input, Output, dcc, html

RAIN = {
    "Lisbon": [99, 81, 56, 62, 44, 15, 4, 6, 27, 88, 113, 128],
    "Oslo": [49, 36, 47, 41, 53, 65, 81, 89, 90, 84, 73, 55],
    "Cairo": [5, 4, 4, 1, 0, 0, 0, 0, 0, 1, 3, 6],
}
MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

app = Dash(__name__, title="Rainfall")
app.layout = html.Div([
    html.H1("Monthly rainfall"),
    html.Label("City", htmlFor="city"),
    dcc.Dropdown(id="city", options=sorted(RAIN), value="Lisbon", clearable=False),
    dcc.Graph(id="graph", config={"displayModeBar": False}),
    html.P(id="summary"),
])


@app.callback(Output("graph", "figure"), Output("summary", "children"), Input("city", "value"))
def show(city):
    values = RAIN[city]
    figure = {"data": [{"type": "bar", "x": MONTHS, "y": values, "name": city}],
              "layout": {"title": {"text": f"Rainfall in {city} (mm)"}, "height": 360}}
    return figure, f"{city}: {sum(values)} mm a year, wettest month {MONTHS[values.index(max(values))]}."


if __name__ == "__main__":
    app.run(host="127.0.0.1", port=int(sys.argv[1]), debug=False)
