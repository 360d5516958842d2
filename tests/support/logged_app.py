"""A WSGI app wrapped to note every path it serves: a served site's access log, the leak canary."""

from __future__ import annotations


class Logged:
    """A WSGI app that notes every path it serves (the site's access log)."""

    def __init__(self, app):
        self.app = app
        self.log: list[str] = []

    def __call__(self, environ, start_response):
        self.log.append(environ.get("PATH_INFO", ""))
        return self.app(environ, start_response)
