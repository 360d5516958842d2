"""`tasks add`'s note on the requests a session sent leaves CORS preflights out.

A walkthrough (Swagger UI calling a json-server API on another name) recorded a POST and a DELETE;
`tasks add` said "its session sent DELETE ... (and 3 before it)", counting the browser's two
`OPTIONS` preflights as actions of the page. No archive is opened: a stand-in gives the exchanges.
"""

from __future__ import annotations

from types import SimpleNamespace

import webfreeze.archives
from webfreeze.cli import tasks


class _Req:
    def __init__(self, headers):
        self.headers = headers

    def header(self, name):
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)


class _Arc:
    def __init__(self, rows):
        self.rows = rows

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def exchanges(self, session=None, order=None):
        return iter(self.rows)


def ex(method, url, *headers):
    return SimpleNamespace(method=method, url=url, request=_Req(list(headers)))


def test_preflights_are_not_counted_as_sent(monkeypatch):
    api = "http://api.test/books"
    rows = [ex("GET", api), ex("OPTIONS", api, ("Access-Control-Request-Method", "POST")), ex("POST", api),
            ex("OPTIONS", api + "/2", ("Access-Control-Request-Method", "DELETE")), ex("DELETE", api + "/2"),
            ex("OPTIONS", api)]  # (an OPTIONS the page itself sent stays)
    monkeypatch.setattr(webfreeze.archives.Archive, "open", staticmethod(lambda path: _Arc(rows)))
    assert tasks._session_sent("a.wfz", "s") == [f"POST {api}", f"DELETE {api}/2", f"OPTIONS {api}"]
