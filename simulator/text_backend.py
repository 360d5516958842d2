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
from .axtree import FRAME_ATTR, AXTreeError, Tree, build_tree, frame_path, frame_sources
from .forms import DOM_SNAPSHOTS, form_submission, is_submitter, label_control
from .provenance import OPEN_STREAM_WHY, answer_record

if TYPE_CHECKING:
    from .env import WebEnv

MAX_REDIRECTS = 10
SCRIPT = re.compile(rb"<script[\s>]", re.IGNORECASE)
# A page whose scripts fill its templates: AngularJS's and Vue's directives in its HTML ...
TEMPLATED = re.compile(rb"\s(?:data-)?(?:ng-(?:app|controller|if|repeat|show|bind)|v-(?:if|for|cloak|bind|model)|x-data)[\s=>]",
                       re.IGNORECASE)
# ... and what the text backend then shows: their expressions, unfilled (Syncthing's {{thisDeviceName()}})
UNFILLED = re.compile(r"\{\{[^{}\n]{1,80}\}\}")
FRAME = re.compile(rb"<i?frame[\s>/]", re.IGNORECASE)
MAX_FRAME_DEPTH = 8
# What a frame shows when its document is not one the text backend can show.
SCRIPTED_FRAME = "frame not shown: its document is written by the page's scripts, which the text backend does not run"


def _data_document(url: str) -> bytes | None:
    """The HTML document a ``data:`` URL holds (RFC 2397: percent-encoded or base64), None when it
    holds another type or cannot be read."""
    import base64
    from urllib.parse import unquote_to_bytes

    head, sep, data = url[5:].partition(",")
    if not sep:
        return None
    params = [p.strip().lower() for p in head.split(";")]
    if params[0] not in ("text/html", "application/xhtml+xml"):
        return None
    raw = unquote_to_bytes(data.partition("#")[0])
    if "base64" in params[1:]:
        try:
            return base64.b64decode(raw, validate=False)
        except ValueError:
            return None
    return raw


def _shows_something(node) -> bool:
    """Whether an observation's node holds anything to read or use: text, a name, an element
    other than a bare container."""
    return any(child.strip() if isinstance(child, str) else
               child.name or child.role not in ("generic", "none") or _shows_something(child)
               for child in node.children)


# What Chromium percent-encodes (in UTF-8) when it serialises an http(s) URL, besides non-ASCII
# characters, C0 controls, space and DEL, in each part (measured on Chromium 156 with
# ``new URL(href, base).href``; what was already percent-encoded is kept as it was).
_ESCAPED_IN = {"path": frozenset('"<>`{}|^'), "query": frozenset('"<>\''), "fragment": frozenset('"<>`')}


def _escape(part: str, escaped: frozenset) -> str:
    out = []
    for ch in part:
        if ch in "\t\n\r":  # (removed from a URL wherever they are)
            continue
        if " " < ch < "\x7f" and ch not in escaped:
            out.append(ch)
        else:
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
    return "".join(out)


def _location_ascii(location: str) -> str:
    """A ``Location`` header as a browser reads it: the bytes the server sent (the recorder keeps a
    header's bytes as latin-1 code points) taken as UTF-8, the non-ASCII ones percent-encoded as
    they are (``/Ã\x8ele``, the raw bytes of ``/Île``, is ``/%C3%8Ele``)."""
    try:
        raw = location.encode("latin-1")
    except UnicodeEncodeError:  # (a header stored as text beyond latin-1: its UTF-8)
        raw = location.encode("utf-8", "surrogatepass")
    return "".join(chr(b) if b < 0x80 else f"%{b:02X}" for b in raw)


def browser_url(url: str) -> str:
    """An http(s) URL as a browser serialises it before asking for it: its path, query and fragment
    with non-ASCII characters, spaces and the characters Chromium escapes there percent-encoded in
    UTF-8 (MoinMoin links its items as ``href="/Île Vierge"``: Chromium asks for
    ``/%C3%8Ele%20Vierge``, which is what a recording holds). Other URLs are returned as given."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("http", "https") or url.isascii() and " " not in url and not any(
            c in url for c in '"<>`{}|^\'\t\n\r'):
        return url
    slash = rest.find("/")
    ends = [i for i in (slash, rest.find("?"), rest.find("#")) if i >= 0]
    cut = min(ends) if ends else len(rest)
    netloc, rest = rest[:cut], rest[cut:]
    rest, hashed, fragment = rest.partition("#")
    path, asked, query = rest.partition("?")
    return (f"{scheme}://{netloc}{_escape(path, _ESCAPED_IN['path'])}{asked}{_escape(query, _ESCAPED_IN['query'])}"
            f"{hashed}{_escape(fragment, _ESCAPED_IN['fragment'])}")


class TextBackend:
    """Pages straight from the archive, no browser."""

    def __init__(self, env: WebEnv):
        self.env = env
        self.replay = env.server.replay.open()  # the replay's answers, asked in-process (no server)
        self.replay.answers = []  # how each was matched: the steps' provenance
        self.url = ""
        self.html = b""
        # (url, html, what was entered there when the agent left it): as a browser's history entry
        self.history: list[tuple[str, bytes, dict]] = []
        self.forward: list[tuple[str, bytes, dict]] = []
        self.state: dict = {}
        self.cookies: dict[str, dict[str, str]] = {}
        self._doms: dict | None = None  # the sessions' DOM snapshots by URL (_session_doms)
        self._tree: tuple | None = None  # (url, html, tree) built by a load, for the observation after it
        # The line a load that succeeded returned about a page drawn by its scripts (not a replay failure)
        self.unshown: str | None = None
        self.frames: dict = {}  # frame bid -> {html, url} or {note}: the documents shown in the page's frames
        self.frame_names: dict = {}  # a frame element's name -> its bid (the first of the name), for targets
        self.frame_nav: dict = {}  # frame bid -> (method, url, body, ctype): where a frame was navigated
        self._frame_answers: list = []  # the replay's answers for frames' documents (not main loads)

    def take_dialogs(self) -> list[dict]:
        """None ever: a dialog is a script's, and this backend runs none."""
        return []

    def take_answers(self) -> list[dict]:
        """The answers since the last call, as provenance records: every request of the text
        backend is a hop of a main-document load."""
        got, self.replay.answers = self.replay.answers, []
        framed, self._frame_answers = self._frame_answers, []
        return [answer_record("document", a.method, a.url, a.level, a.status, main=main, score=a.score,
                              capture_url=a.capture_url, mime=a.mime, size=a.size,
                              why=OPEN_STREAM_WHY if a.open_stream else a.why, capture=a.capture)
                for main, answers in ((True, got), (False, framed)) for a in answers]

    def reset(self, url: str) -> str | None:
        self.history, self.forward, self.cookies = [], [], {}
        self.url, self.html, self.state = "", b"", {}
        return self._load("GET", url)

    def _request(self, method: str, url: str, body: bytes = b"", ctype: str | None = None):
        try:
            return self._requested(method, browser_url(url), body, ctype)
        except ValueError:  # a URL no parser reads (http://[x): loaded by nothing, as in a browser
            return 0, url, b""

    def _requested(self, method: str, url: str, body: bytes, ctype: str | None):
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

                url = browser_url(urljoin(url, _location_ascii(location)))
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
        url = browser_url(url)  # (``/Île Vierge`` is asked for as ``/%C3%8Ele%20Vierge``, as Chromium asks)
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
            self.history.append((self.url, self.html, dict(self.state)))
            self.forward = []
        self.url, self.html, self.state = final, data, {}
        self.frame_nav = {}
        self._load_frames()
        if miss is not None:
            return f"not captured: the archive has no {miss.method} {miss.url} (a replay miss)"
        if status >= 400:
            return f"HTTP {status} for {final}"
        self.unshown = self._drawn_by_scripts()
        return self.unshown

    def _load_frames(self, keep: dict | None = None) -> None:
        """The documents of the page's frames (and theirs) from the replay: a ``srcdoc``, or the
        ``src`` (or where the agent navigated the frame); a frame whose document is not there says
        why. Frames a sandbox keeps from running scripts are left out, as the browser backend
        leaves them; a frame with no document to load (none, ``about:blank``) is left empty,
        unless the page has scripts: then they are what fills it, and the frame says so. A frame
        of its own page or of an enclosing frame's document is left empty too (Chromium loads
        none). ``keep``:
        frames already loaded that stay as they are (those outside a frame the agent navigated),
        not asked of the replay again."""
        before = len(self.replay.answers)
        self.frames, self.frame_names = {}, {}
        page = (self.url or "about:blank").partition("#")[0]
        self._frames_of(self.html, self.url or "about:blank", "", 0, (page,), keep or {})
        self._frame_answers.extend(self.replay.answers[before:])
        del self.replay.answers[before:]

    def _frames_of(self, html: bytes, url: str, prefix: str, depth: int, ancestors: tuple, keep: dict) -> None:
        if not FRAME.search(html):
            return
        scripted = bool(SCRIPT.search(html))
        for f in frame_sources(html, url, prefix):
            bid = f["bid"]
            if f["sandboxed"] or depth >= MAX_FRAME_DEPTH:
                continue
            if f["name"]:
                self.frame_names.setdefault(f["name"], bid)
            nav = self.frame_nav.get(bid)
            if bid in keep:
                self.frames[bid] = kept = keep[bid]
                if kept.get("html") is not None:
                    inner = kept["url"] if not kept["url"].startswith("about:") else url
                    self._frames_of(kept["html"], inner, bid, depth + 1, (*ancestors, kept["url"].partition("#")[0]),
                                    keep)
                continue
            if nav is None and f["srcdoc"] is not None:
                doc, where = f["srcdoc"].encode("utf-8", "surrogatepass"), "about:srcdoc"
            elif nav is None and f["src"] and f["src"].partition("#")[0] in ancestors:
                continue  # a frame of its own page or of an enclosing frame's: Chromium leaves it empty
            elif nav is None and f["src"] and f["src"][:5].lower() == "data:":
                doc, where = _data_document(f["src"]), f["src"]  # (in the page itself: no request)
                if doc is None:
                    self.frames[bid] = {"note": "frame not shown: a data: URL that is not an HTML document"}
                    continue
            elif nav is not None or (f["src"] and f["src"].startswith(("http:", "https:"))):
                method, asked, body, ctype = nav or ("GET", f["src"], b"", None)
                before = len(self.replay.answers)
                status, where, doc = self._request(method, asked.partition("#")[0], body, ctype)
                miss = next((a for a in self.replay.answers[before:] if a.level == "miss"), None)
                if miss is not None or status == 0:
                    why = f"the archive has no {method} {asked}" if miss is not None else f"could not load {asked}"
                    self.frames[bid] = {"note": f"frame not shown: {why}"}
                    continue
                if status >= 400:
                    self.frames[bid] = {"note": f"frame not shown: HTTP {status} for {where}"}
                    continue
            else:
                if scripted:
                    self.frames[bid] = {"note": SCRIPTED_FRAME}
                continue
            self.frames[bid] = {"html": doc, "url": where}
            # (a srcdoc document's links and frames resolve against its parent's URL)
            inner = where if not where.startswith("about:") else url
            self._frames_of(doc, inner, bid, depth + 1, (*ancestors, where.partition("#")[0]), keep)

    def _navigate_frame(self, frame: str, method: str, url: str, body: bytes = b"", ctype: str | None = None):
        """A link followed or a form submitted in the frame ``frame``: its document (and its own
        frames) replaced, the page kept (no history entry: the text backend keeps the top page's)."""
        self.frame_nav = {k: v for k, v in self.frame_nav.items() if frame not in frame_path(k)}
        self.frame_nav[frame] = (method, url, body, ctype)
        # what was entered in the frame's old document is gone with it (its bids are the new one's)
        self.state = {k: v for k, v in self.state.items() if frame not in frame_path(str(k))}
        # the other frames stay as they are: loaded again, a frame would post its form again
        self._load_frames(keep={k: v for k, v in self.frames.items() if frame not in frame_path(k)})
        note = (self.frames.get(frame) or {}).get("note")
        return note

    def _drawn_by_scripts(self) -> str | None:
        """Why the page just loaded cannot be shown, when it shows nothing without its scripts (a
        single-page application's shell: Docsify's empty ``<div id="app">``, drawn in the browser)
        or shows the templates they fill, unfilled (AngularJS's ``{{thisDeviceName()}}``:
        Syncthing's): the text backend runs none, and that is not what the site showed."""
        if not SCRIPT.search(self.html):
            return None
        tree = self.observe()[0]
        self._tree = (self.url, self.html, tree)  # (observed next, unchanged: built once)
        if not _shows_something(tree.root):
            return (f"{self.url} shows nothing without its scripts, and the text backend runs none: "
                    "the browser backend shows this page")
        unfilled = UNFILLED.findall(tree.axtree_text) if TEMPLATED.search(self.html) else []
        if len(set(unfilled)) >= 2:  # (one could be a page's text about templates)
            return (f"{self.url} shows its scripts' templates unfilled ({unfilled[0]}), and the text backend runs "
                    "no scripts: the browser backend shows this page")
        return None

    def _restored(self, entered: dict) -> dict:
        """What was entered in a page's fields when the agent left it, as Chromium gives it back to
        a page it goes back (or forward) to: a field's text, a box's tick, a choice; not a password
        field's, nor a field's whose ``autocomplete`` (or its form's) is ``off`` (measured on
        Chromium 156 in the browser backend). Fields of frames are not given back."""
        if not entered:
            return {}
        builder = build_tree(self.html, self.url or "about:blank", frames=self.frames).builder
        element = {bid: el for el, bid in builder.bid_of.items()}
        kept = {}
        for bid, value in entered.items():
            el = element.get(str(bid))
            if el is None or not isinstance(el.tag, str) or (el.get("type") or "").strip().lower() == "password":
                continue
            form = builder.form_owner(el)
            said = el.get("autocomplete") or (form.get("autocomplete") if form is not None else None) or ""
            if said.strip().lower() != "off":
                kept[bid] = value
        return kept

    def observe(self):
        cached, self._tree = self._tree, None
        if cached is not None and cached[0] == self.url and cached[1] is self.html and not self.state:
            return cached[2], None
        return build_tree(self.html, self.url or "about:blank", state=self.state, frames=self.frames), None

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
                    frame = self._target_frame(tree, a.bid, "a")
                    if frame:
                        return self._navigate_frame(frame, "GET", link)
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
                self.forward.append((self.url, self.html, dict(self.state)))
                self.url, self.html, entered = self.history.pop()
                self.state, self.frame_nav = {}, {}
                self._load_frames()
                self.state = self._restored(entered)
                return self._drawn_by_scripts()
            if a.kind == "go_forward":
                if not self.forward:
                    return "no next page"
                self.history.append((self.url, self.html, dict(self.state)))
                self.url, self.html, entered = self.forward.pop()
                self.state, self.frame_nav = {}, {}
                self._load_frames()
                self.state = self._restored(entered)
                return self._drawn_by_scripts()
            return None  # scroll, hover, focus, noop, a key on no element: nothing changes without a viewport
        except AXTreeError as exc:
            return str(exc)

    def _submit(self, tree: Tree, bid: str) -> str | None:
        method, url, body, ctype = form_submission(tree, bid, self.state, loaded_html=self._loaded_dom())
        frame = self._target_frame(tree, bid, "form")
        if frame:
            return self._navigate_frame(frame, method.upper(), url, body, ctype)
        return self._load(method.upper(), url, body, ctype)

    def _target_frame(self, tree: Tree, bid: str, kind: str) -> str | None:
        """The frame a link (``kind`` "a") or a form ("form") navigates, None for the page itself:
        its own frame's (the page for the page's own), unless a target says otherwise (the link's
        or form's ``target``, a submit button's ``formtarget``, else its document's ``<base
        target>``): ``_top`` and ``_blank`` the page (the text backend has one), ``_parent`` the
        enclosing frame's, a frame's name that frame (the first of the name in document order),
        an unknown name a new window: the page here."""
        path = frame_path(bid)
        el = tree.builder.by_bid.get(str(bid))
        chain = [el, *el.iterancestors()] if el is not None else []
        holder = next((x for x in chain if x.tag in (("a", "area") if kind == "a" else ("form",))), None)
        target = el.get("formtarget") if kind == "form" and el is not None else None
        if target is None and holder is not None:
            target = holder.get("target")
        if target is None:
            root = next((x for x in chain if x.get(FRAME_ATTR) is not None), tree.builder.doc)
            base = root.find(".//head/base[@target]")
            target = base.get("target") if base is not None else None
        target = (target or "").strip()
        if target.lower() in ("", "_self"):
            return path[-1] if path else None
        if target.lower() in ("_top", "_blank"):
            return None
        if target.lower() == "_parent":
            return path[-2] if len(path) > 1 else None
        return self.frame_names.get(target)

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
