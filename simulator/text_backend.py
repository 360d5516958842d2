"""The ``text`` backend of :class:`~webfreeze.simulator.env.WebEnv`: no browser. HTML comes from the
archive through the replay's matching (and site models), in-process; it is parsed with lxml and its
scripts are ignored; links are followed and forms submitted (GET and POST) by building the request
a browser would send (:mod:`webfreeze.simulator.forms`). Cookies are kept per host.

It meets :class:`webfreeze.simulator.backends.Backend`.
"""

from __future__ import annotations

import re
from dataclasses import replace
from http.cookies import SimpleCookie
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from webfreeze.archives.content import DecodeError, content_encoding, decode_content
from webfreeze.archives.timeutil import parse_time
from webfreeze.common.http import header_value
from webfreeze.replayer.hooks import host_key

from .actions import Action
from .axtree import AXTreeError, Tree, build_tree
from .forms import DOM_SNAPSHOTS, form_submission, is_submitter, label_control
from .provenance import answer_record

if TYPE_CHECKING:
    from .env import WebEnv

MAX_REDIRECTS = 10
SCRIPT = re.compile(rb"<script[\s>]", re.IGNORECASE)


def _shows_something(node) -> bool:
    """Whether an observation's node holds anything to read or use: text, a name, an element
    other than a bare container."""
    return any(child.strip() if isinstance(child, str) else
               child.name or child.role not in ("generic", "none") or _shows_something(child)
               for child in node.children)


class TextBackend:
    """Pages straight from the archive, no browser."""

    def __init__(self, env: WebEnv):
        self.env = env
        self.replay = env.server.replay.open()  # the replay's answers, asked in-process (no server)
        self.replay.answers = []  # how each was matched: the steps' provenance
        self.url = ""
        self.html = b""
        self.history: list[tuple[str, bytes]] = []
        self.forward: list[tuple[str, bytes]] = []
        self.state: dict = {}
        self.cookies: dict[str, dict[str, str]] = {}
        self._doms: dict | None = None  # the sessions' DOM snapshots by URL (_session_doms)
        self._tree: tuple | None = None  # (url, html, tree) built by a load, for the observation after it
        # The line a load that succeeded returned about a page drawn by its scripts (not a replay failure)
        self.unshown: str | None = None

    def take_answers(self) -> list[dict]:
        """The answers since the last call, as provenance records: every request of the text
        backend is a hop of a main-document load."""
        got, self.replay.answers = self.replay.answers, []
        return [answer_record("document", a.method, a.url, a.level, a.status, main=True, score=a.score,
                              capture_url=a.capture_url, mime=a.mime, size=a.size) for a in got]

    def reset(self, url: str) -> str | None:
        self.history, self.forward, self.cookies = [], [], {}
        self.url, self.html, self.state = "", b"", {}
        return self._load("GET", url)

    def _request(self, method: str, url: str, body: bytes = b"", ctype: str | None = None):
        for _ in range(MAX_REDIRECTS):
            headers = [("Host", urlsplit(url).netloc), ("Accept", "text/html,*/*"), ("Accept-Encoding", "gzip, br")]
            jar = self.cookies.get(host_key(url))
            if jar:
                headers.append(("Cookie", "; ".join(f"{k}={v}" for k, v in sorted(jar.items()))))
            if ctype:
                headers.append(("Content-Type", ctype))
            status, resp_headers, data = self.replay.fetch(method, url, headers, body)
            for k, v in resp_headers:
                if k.lower() == "set-cookie":
                    c = SimpleCookie()
                    try:
                        c.load(v)
                    except Exception:
                        continue
                    self.cookies.setdefault(host_key(url), {}).update({m.key: m.value for m in c.values()})
            location = header_value(resp_headers, "location")
            if status in (301, 302, 303, 307, 308) and location:
                from urllib.parse import urljoin

                url = urljoin(url, location)
                if status in (301, 302, 303):
                    method, body, ctype = "GET", b"", None
                continue
            try:
                data = decode_content(data, content_encoding(resp_headers))
            except DecodeError:
                pass
            return status, url, data
        return 0, url, b""

    def _load(self, method: str, url: str, body: bytes = b"", ctype: str | None = None) -> str | None:
        # A URL's #fragment is never sent (the request, its provenance, `replay coverage`); the page
        # keeps it, and keeps it across a redirect whose Location has none, as a browser does.
        asked, _, fragment = url.partition("#")
        self.unshown = None
        before = len(self.replay.answers)
        status, final, data = self._request(method, asked, body, ctype)
        if status == 0:
            return f"could not load {asked}"
        miss = next((a for a in self.replay.answers[before:] if a.level == "miss"), None)
        if fragment and "#" not in final:
            final = f"{final}#{fragment}"
        # A GET of the page's own URL replaces its history entry, as a browser does (HTML's
        # navigate: same URL -> "replace"); any other load is a new entry.
        if self.url and not (method == "GET" and url == self.url):
            self.history.append((self.url, self.html))
            self.forward = []
        self.url, self.html, self.state = final, data, {}
        if miss is not None:
            return f"not captured: the archive has no {miss.method} {miss.url} (a replay miss)"
        if status >= 400:
            return f"HTTP {status} for {final}"
        self.unshown = self._drawn_by_scripts()
        return self.unshown

    def _drawn_by_scripts(self) -> str | None:
        """Why the page just loaded cannot be shown, when it shows nothing without its scripts (a
        single-page application's shell: Docsify's empty ``<div id="app">``, drawn in the browser):
        the text backend runs none, and an empty page is not what the site showed."""
        if not SCRIPT.search(self.html):
            return None
        tree = self.observe()[0]
        self._tree = (self.url, self.html, tree)  # (observed next, unchanged: built once)
        if _shows_something(tree.root):
            return None
        return (f"{self.url} shows nothing without its scripts, and the text backend runs none: "
                "the browser backend shows this page")

    def observe(self):
        cached, self._tree = self._tree, None
        if cached is not None and cached[0] == self.url and cached[1] is self.html and not self.state:
            return cached[2], None
        return build_tree(self.html, self.url or "about:blank", state=self.state), None

    def act(self, a: Action, target: dict | None) -> str | None:
        tree = self.env.tree
        try:
            if a.kind == "click":
                if target.get("tag") == "label":  # a click on a label is a click on its control
                    control = label_control(tree, a.bid)
                    described = tree.get(control) if control is not None else None
                    if described is not None and described.get("tag") == "input" and "checked" in described:
                        a, target = replace(a, bid=control), described
                if target.get("tag") == "input" and "checked" in target:
                    self.state[a.bid] = not target["checked"] if target.get("role") == "checkbox" else True
                    return None
                link = tree.link_target(a.bid)
                if link:
                    return self._load("GET", link)
                if is_submitter(tree, a.bid):
                    return self._submit(tree, a.bid)
                return None  # nothing a page without scripts would do
            if a.kind == "fill":
                self.state[a.bid] = a.text or ""
                if a.key == "Enter":
                    return self._submit(tree, a.bid)
                return None
            if a.kind == "select":
                many = (a.args or {}).get("options")
                self.state[a.bid] = list(many) if many else a.value
                return None
            if a.kind == "clear":
                self.state[a.bid] = ""
                return None
            if a.kind == "press":
                if (a.key or "").lower() == "enter" and a.bid:
                    return self._submit(tree, a.bid)
                return None
            if a.kind == "goto":
                return self._load("GET", a.url)
            if a.kind == "go_back":
                if not self.history:
                    return "no previous page"
                self.forward.append((self.url, self.html))
                self.url, self.html = self.history.pop()
                self.state = {}
                return self._drawn_by_scripts()
            if a.kind == "go_forward":
                if not self.forward:
                    return "no next page"
                self.history.append((self.url, self.html))
                self.url, self.html = self.forward.pop()
                self.state = {}
                return self._drawn_by_scripts()
            return None  # scroll, hover, focus, noop, a key on no element: nothing changes without a viewport
        except AXTreeError as exc:
            return str(exc)

    def _submit(self, tree: Tree, bid: str) -> str | None:
        method, url, body, ctype = form_submission(tree, bid, self.state, loaded_html=self._loaded_dom())
        return self._load(method.upper(), url, body, ctype)

    def _loaded_dom(self) -> bytes | str | None:
        """The page's DOM once its scripts had run, when the archive has one for this URL (a
        crawl's page record, a session's ``dom-snapshots/`` document), the one captured nearest the
        replay's time: which fields a script disabled at load, so that a form is submitted as a
        browser submits it."""
        arc = self.replay.archive
        if arc is None or not self.url:
            return None
        urls = tuple(dict.fromkeys((self.url, self.url.partition("#")[0])))
        found: list[tuple] = [(p.captured_at, p.id, p.dom) for u in urls for p in arc.pages(url=u) if p.dom_digest]
        found += [(at, n, lambda html=html: html) for n, (at, html) in enumerate(
            x for u in urls for x in self._session_doms().get(u, []))]
        if not found:
            return None
        when = self.replay.when
        if when is not None:
            best = min(found, key=lambda f: (abs(parse_time(f[0]).timestamp() - when), f[0], f[1]))
        else:
            best = max(found, key=lambda f: (f[0], f[1]))
        return best[2]()

    def _session_doms(self) -> dict:
        """URL -> [(captured_at, html)] of the sessions' DOM snapshots, read once per episode's backend."""
        if self._doms is None:
            self._doms = {}
            arc = self.replay.archive
            for doc in arc.documents(prefix=DOM_SNAPSHOTS):
                value = arc.get_document(doc.name)
                for snap in (value.get("snapshots") if isinstance(value, dict) else None) or []:
                    if isinstance(snap, dict) and isinstance(snap.get("html"), str) and snap.get("captured_at"):
                        self._doms.setdefault(str(snap.get("url")), []).append((snap["captured_at"], snap["html"]))
        return self._doms

    def open_pages(self) -> list[str]:
        return [self.url]

    def screenshot(self) -> None:
        return None  # no viewport to take a picture of

    def close(self) -> None:
        self.replay.close()


    bgym_raw: dict | None = None  # (BrowserGym's snapshots: the browser's own only)
