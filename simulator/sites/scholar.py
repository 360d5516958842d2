"""``scholar``: a preprint archive with arxiv.org's information architecture, served on loopback.

Routes (all server-rendered HTML unless noted):

- ``/`` archives and categories; ``/list/<archive|category>`` redirects to ``.../recent``;
  ``/list/<x>/new|recent|pastweek`` listings with ``skip``/``show`` paging
- ``/abs/<id>`` (latest) and ``/abs/<id>v<n>`` abstract pages with versions and metadata
- ``/html/<id>`` redirects to the latest version; ``/html/<id>v<n>`` full text with numbered
  sections, figures (PNG with ``srcset``), a table and references
- ``/search`` simple search (``query``, ``searchtype`` all|title|author|abstract, ``order``,
  ``size``, ``start``); ``/search/advanced`` field terms joined by AND/OR/NOT, category filter,
  date ranges, paging and sorting
- ``/about``, ``/help``, ``/help/license``, ``/help/submit``, ``/about/editorial-committee``
- ``/prefs`` (POST form; sets a cookie, 303 back), ``/api/stats`` (JSON XHR with a timestamp)
"""

from __future__ import annotations

import re
from datetime import date, timedelta
from urllib.parse import urlencode

from werkzeug.exceptions import NotFound
from werkzeug.routing import Rule
from werkzeug.utils import redirect
from werkzeug.wrappers import Request, Response

from .common import SimulatedSite, esc, json_response, png, respond, route_map
from .scholar_data import ARCHIVES, SNAPSHOT, Paper, announce_date, build_corpus

SITE = "Scholar Preprints"
COLOR = (179, 27, 27)
ID_RE = r"\d{4}\.\d{5}"

NAV = """<nav><a href="/">Home</a> <a href="/search/advanced">Advanced search</a> <a href="/help">Help</a>
<a href="/about">About</a>
<form class="search" action="/search" method="get" role="search">
<input type="text" name="query" aria-label="Search term or terms" placeholder="Search...">
<select name="searchtype" aria-label="Field to search"><option value="all">All fields</option>
<option value="title">Title</option><option value="author">Author</option><option value="abstract">Abstract</option>
</select><button type="submit">Search</button></form></nav>"""

STATIC_PAGES = {
    "about": ("About Scholar Preprints", [
        "Scholar Preprints is a free distribution service and an open-access archive for scholarly articles in "
        "physics, mathematics, computer science, quantitative biology, quantitative finance, statistics, electrical "
        "engineering and systems science, and economics.",
        "Materials on this site are not peer-reviewed by Scholar Preprints. The service is run by a small team and "
        "supported by member institutions."]),
    "help": ("Help contents", [
        "Find help on searching, submitting and the policies that govern this archive.",
        '<ul><li><a href="/help/submit">Submission policy</a></li><li><a href="/help/license">Licenses</a></li>'
        '<li><a href="/about/editorial-committee">Editorial committee</a></li>'
        '<li><a href="/search/advanced">Advanced search</a></li></ul>']),
    "help/license": ("License and copyright", [
        "Authors grant Scholar Preprints a perpetual, non-exclusive license to distribute their article.",
        "Authors may additionally choose CC BY 4.0, CC BY-SA 4.0, CC BY-NC-SA 4.0, CC BY-NC-ND 4.0 or CC0 1.0.",
        "The license chosen at submission applies to every later version of the article."]),
    "help/submit": ("Submission policy", [
        "Submissions must be scholarly articles of interest to the research community. Registered authors may "
        "submit; a first-time submitter needs an endorsement from an established author in the category.",
        "Submissions received before 14:00 US Eastern time on a weekday are announced at 20:00 the same day.",
        "A replacement creates a new version (v2, v3, ...); earlier versions remain available.",
        "Articles may be withdrawn but not removed; a withdrawal notice becomes the latest version."]),
    "about/editorial-committee": ("Editorial committee", [
        "Each archive is overseen by an editorial committee of volunteer scientists who advise on moderation "
        "policy and category definitions.",
        "<ul>" + "".join(f"<li>{esc(name)}: chair for {esc(ARCHIVES[a][0])}</li>" for name, a in zip(
            ["Ada Fischer", "Ravi Tanaka", "Mei Okafor", "Jonas Silva", "Nadia Weber", "Omar Lopez",
             "Grace Kim", "Lucas Haddad", "Sofia Park", "Tariq Novak"], ARCHIVES)) + "</ul>"]),
}


# The routes, built once for every instance (common.route_map).
_url_map = route_map(lambda: [
    Rule("/", endpoint="home"),
    Rule("/list/<name>", endpoint="list_redirect"),
    Rule("/list/<name>/<kind>", endpoint="listing"),
    Rule("/abs/<path:ident>", endpoint="abstract"),
    Rule("/html/<path:ident>", endpoint="fulltext"),
    Rule("/search", endpoint="search"),
    Rule("/search/advanced", endpoint="advanced"),
    Rule("/prefs", endpoint="prefs", methods=["POST"]),
    Rule("/api/stats", endpoint="stats"),
    Rule("/static/<name>", endpoint="static"),
    Rule("/about", endpoint="static_page", defaults={"page": "about"}),
    Rule("/about/editorial-committee", endpoint="static_page",
         defaults={"page": "about/editorial-committee"}),
    Rule("/help", endpoint="static_page", defaults={"page": "help"}),
    Rule("/help/license", endpoint="static_page", defaults={"page": "help/license"}),
    Rule("/help/submit", endpoint="static_page", defaults={"page": "help/submit"}),
])


class ScholarSite(SimulatedSite):
    """The WSGI application; deterministic for a seed (dynamic bits are the page's own scripts)."""

    title, color, nav = SITE, COLOR, NAV
    session_cookie, session_prefix = "scholar_session", "s"

    def __init__(self, seed: int = 0):
        super().__init__()
        self.corpus = build_corpus(seed)
        self.by_id = self.corpus.by_id
        self.url_map = _url_map()

    # ------------------------------------------------------------------ plumbing
    def html(self, request: Request, title: str, body: str, *, status: int = 200) -> Response:
        theme = request.cookies.get("theme", "light")
        return super().html(request, title, f'<div class="theme-{esc(theme)}">{body}</div>', status=status)

    def paper(self, ident: str) -> tuple[Paper, int | None]:
        m = re.fullmatch(rf"({ID_RE})(?:v(\d+))?", ident)
        if not m or m.group(1) not in self.by_id:
            raise NotFound(f"Article identifier '{ident}' not recognized.")
        p = self.by_id[m.group(1)]
        version = int(m.group(2)) if m.group(2) else None
        if version is not None and not 1 <= version <= len(p.versions):
            raise NotFound(f"Version {version} of {p.id} does not exist.")
        return p, version

    # ------------------------------------------------------------------ pages
    def on_home(self, request: Request) -> Response:
        parts = ["<h1>Scholar Preprints</h1>",
                 f"<p>{len(self.corpus.papers)} e-prints in {len(ARCHIVES)} archives.</p>"]
        for archive, (name, cats) in ARCHIVES.items():
            links = ", ".join(f'<a href="/list/{c}/recent">{esc(cn)}</a>' for c, cn in cats.items())
            parts.append(f'<h2 id="{archive}">{esc(name)}</h2><ul><li><a href="/list/{archive}/new">new</a>, '
                         f'<a href="/list/{archive}/recent">recent</a>, <a href="/list/{archive}/pastweek">'
                         f'past week</a></li><li>Categories: {links}</li></ul>')
        return self.html(request, "Scholar Preprints", "\n".join(parts))

    def on_list_redirect(self, request: Request, name: str) -> Response:
        self._listing_name(name)
        return redirect(f"/list/{name}/recent", code=301)

    def _listing_name(self, name: str) -> str:
        if name in ARCHIVES:
            return ARCHIVES[name][0]
        for _, (_, cats) in ARCHIVES.items():
            if name in cats:
                return cats[name]
        raise NotFound(f"No archive or category named '{name}'.")

    def on_listing(self, request: Request, name: str, kind: str) -> Response:
        label = self._listing_name(name)
        papers = self.corpus.in_archive(name)
        today = SNAPSHOT.date()
        if kind == "new":
            last = max((announce_date(p) for p in papers), default=today)
            papers = [p for p in papers if announce_date(p) == last]
            heading = f"New submissions for {last:%a, %d %b %Y}"
        elif kind == "pastweek":
            papers = [p for p in papers if announce_date(p) >= today - timedelta(days=7)]
            heading = "Submissions from the past week"
        elif kind == "recent":
            papers = [p for p in papers if announce_date(p) >= today - timedelta(days=30)]
            heading = "Recent submissions (last 30 days)"
        else:
            raise NotFound(f"Unknown listing '{kind}'; use new, recent or pastweek.")
        skip, show = _int_arg(request, "skip", 0), _int_arg(request, "show", 25, allowed=(25, 50, 100))
        total = len(papers)
        body = [f"<h1>{esc(label)}</h1><h2>{heading}</h2>", f"<p>Total of {total} entries; showing "
                f"{min(skip + 1, total)}-{min(skip + show, total)}</p>", self._listing(papers[skip:skip + show])]
        body.append(_pager(f"/list/{name}/{kind}", {"show": show}, "skip", skip, show, total))
        return self.html(request, f"{label} {kind}", "\n".join(body))

    def _listing(self, papers: list[Paper], abstracts: bool = False) -> str:
        rows = []
        for p in papers:
            authors = ", ".join(f'<a href="/search?{urlencode({"query": a, "searchtype": "author"})}">{esc(a)}</a>'
                                for a in p.authors)
            rows.append(
                f'<dt><a href="/abs/{p.id}" title="Abstract" id="{p.id}">{p.id}</a> '
                f'[<a href="/html/{p.id}" title="HTML full text">html</a>]</dt>'
                f'<dd><div class="list-title">{esc(p.title)}</div><div class="authors">Authors: {authors}</div>'
                f'<div class="list-comments">Comments: {esc(p.comments)}</div>'
                f'<div class="list-subjects">Subjects: {esc(", ".join(p.categories))}</div>'
                f'<div class="list-date">Submitted {p.first_submitted:%d %B, %Y}</div>'
                + (f'<p class="abstract">{esc(p.abstract)}</p>' if abstracts else "") + "</dd>")
        return '<dl class="listing">' + "".join(rows) + "</dl>"

    def on_abstract(self, request: Request, ident: str) -> Response:
        p, version = self.paper(ident)
        shown = p.versions[(version or len(p.versions)) - 1]
        authors = ", ".join(f'<a href="/search?{urlencode({"query": a, "searchtype": "author"})}">{esc(a)}</a>'
                            for a in p.authors)
        history = "".join(
            f'<li><a href="/abs/{p.id}v{v.number}">[v{v.number}]</a> {v.submitted:%a, %d %b %Y %H:%M:%S} UTC '
            f'({v.size_kb} KB)</li>' for v in p.versions)
        meta = [("Comments", esc(p.comments)),
                ("Subjects", esc("; ".join(f"{_cat_name(c)} ({c})" for c in p.categories)))]
        if p.journal_ref:
            meta.append(("Journal reference", esc(p.journal_ref)))
        if p.doi:
            meta.append(("DOI", f'<a href="https://doi.org/{esc(p.doi)}">{esc(p.doi)}</a>'))
        meta.append(("Cite as", f"{p.id} [{p.primary}] (v{shown.number})"))
        table = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in meta)
        body = (f'<div class="breadcrumbs"><a href="/list/{p.archive}/recent">{esc(ARCHIVES[p.archive][0])}</a> &gt; '
                f'{p.id}v{shown.number}</div>'
                f'<h1 class="title">{esc(p.title)}</h1><div class="authors">{authors}</div>'
                f'<div class="affiliations">{esc("; ".join(p.affiliations))}</div>'
                f'<blockquote class="abstract"><span class="descriptor">Abstract:</span> {esc(p.abstract)}</blockquote>'
                f'<table class="metatable">{table}</table>'
                f'<div class="submission-history"><h2>Submission history</h2><ul>{history}</ul></div>'
                f'<div class="full-text"><a href="/html/{p.id}v{shown.number}">HTML (experimental)</a></div>')
        return self.html(request, f"[{p.id}] {p.title}", body)

    def on_fulltext(self, request: Request, ident: str) -> Response:
        m = re.fullmatch(rf"({ID_RE}(?:v\d+)?)/(x\d+)\.png", ident)
        if m:
            p, _ = self.paper(m.group(1))
            k = int(m.group(2)[1:])
            if k > len(p.figures):
                raise NotFound("No such figure.")
            scale = 2 if request.args.get("scale") == "2" else 1
            shade = (40 * k) % 200
            return respond(request, png(160 * scale, 100 * scale, (shade, 90, 200 - shade)), "image/png",
                           cache="public, max-age=86400")
        p, version = self.paper(ident)
        if version is None:
            return redirect(f"/html/{p.id}v{len(p.versions)}", code=302)
        base = f"/html/{p.id}v{version}"
        parts = [f'<article class="ltx_document"><h1 class="ltx_title">{esc(p.title)}</h1>',
                 f'<div class="ltx_authors">{esc(", ".join(p.authors))}</div>',
                 f'<div class="ltx_abstract"><h6>Abstract</h6><p>{esc(p.abstract)}</p></div>',
                 '<nav class="ltx_toc"><ol>' + "".join(
                     f'<li><a href="#S{s.number}">{s.number} {esc(s.title)}</a></li>' for s in p.sections) + "</ol></nav>"]
        figures = list(enumerate(p.figures, start=1))
        for s in p.sections:
            parts.append(f'<section id="S{s.number}" class="ltx_section"><h2>{s.number} {esc(s.title)}</h2>')
            parts += [f'<p class="ltx_p">{esc(par)}</p>' for par in s.paragraphs]
            for sub in s.subsections:
                parts.append(f'<section id="S{sub.number.replace(".", "-")}" class="ltx_subsection">'
                             f'<h3>{sub.number} {esc(sub.title)}</h3>')
                parts += [f'<p class="ltx_p">{esc(par)}</p>' for par in sub.paragraphs]
                parts.append("</section>")
            if s.title == "Experiments":
                for k, (fid, caption) in figures:
                    parts.append(f'<figure id="F{k}" class="ltx_figure"><img src="{base}/{fid}.png" '
                                 f'srcset="{base}/{fid}.png 1x, {base}/{fid}.png?scale=2 2x" alt="Figure {k}" '
                                 f'width="160" height="100"><figcaption>Figure {k}: {esc(caption)}</figcaption></figure>')
                head, *rows = p.table
                parts.append('<figure id="T1" class="ltx_table"><figcaption>Table 1: Main results.</figcaption>'
                             '<table><thead><tr>' + "".join(f"<th>{esc(h)}</th>" for h in head) + "</tr></thead><tbody>"
                             + "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows)
                             + "</tbody></table></figure>")
            parts.append("</section>")
        parts.append('<section id="bib" class="ltx_bibliography"><h2>References</h2><ol>'
                     + "".join(f'<li id="bib.bib{i}">{esc(r)}</li>' for i, r in enumerate(p.references, 1))
                     + "</ol></section></article>")
        return self.html(request, f"{p.title} (v{version})", "\n".join(parts))

    # ------------------------------------------------------------------ search
    def on_search(self, request: Request) -> Response:
        query = request.args.get("query", "").strip()
        field = request.args.get("searchtype", "all")
        if field not in ("all", "title", "author", "abstract"):
            field = "all"
        if not query:
            return self.html(request, "Search", "<h1>Search</h1><p>Enter a search term in the box above.</p>")
        words = query.lower().split()
        hits = [p for p in self.corpus.papers if all(w in field_text(p, field) for w in words)]
        return self._results(request, f"Showing results for {field}: {query}", hits, "/search",
                             {"query": query, "searchtype": field})

    def on_advanced(self, request: Request) -> Response:
        terms = []
        for i in range(10):
            term = request.args.get(f"terms-{i}-term", "").strip()
            if term:
                terms.append((request.args.get(f"terms-{i}-operator", "AND").upper(),
                              request.args.get(f"terms-{i}-field", "all"), term.lower()))
        if not terms:
            return self.html(request, "Advanced search", ADVANCED_FORM)
        cats = [a for a in ARCHIVES if request.args.get(f"classification-{a}") == "y"]
        hits = []
        for p in self.corpus.papers:
            ok = None
            for op, field, term in terms:
                match = all(w in field_text(p, field) for w in term.split())
                if ok is None:
                    ok = match if op != "NOT" else not match
                elif op == "OR":
                    ok = ok or match
                elif op == "NOT":
                    ok = ok and not match
                else:
                    ok = ok and match
            if ok and (not cats or any(c.split(".")[0] in cats for c in p.categories)) and _in_dates(request, p):
                hits.append(p)
        params = {k: v for k, v in request.args.items(multi=True) if k not in ("start",)}
        summary = " ".join(f"{op} {field}={term}" for op, field, term in terms)
        return self._results(request, f"Advanced search: {summary}", hits, "/search/advanced", params)

    def _results(self, request: Request, heading: str, hits: list[Paper], path: str, params: dict) -> Response:
        order = request.args.get("order", "-announced_date_first")
        if order == "announced_date_first":
            hits = sorted(hits, key=lambda p: (p.first_submitted, p.id))
        elif order == "title":
            hits = sorted(hits, key=lambda p: p.title)
        size = _int_arg(request, "size", 25, allowed=(25, 50, 100, 200))
        start = _int_arg(request, "start", 0)
        total = len(hits)
        sorts = " | ".join(f'<a href="{path}?{urlencode({**params, "order": o, "size": size})}">{label}</a>'
                           for o, label in (("-announced_date_first", "newest first"),
                                            ("announced_date_first", "oldest first"), ("title", "title")))
        body = [f"<h1>{esc(heading)}</h1>",
                f'<p class="result-count">Showing {min(start + 1, total)}&ndash;{min(start + size, total)} of '
                f'{total} results</p><p>Sort: {sorts}</p>' if total else '<p class="result-count">Sorry, your query '
                'returned no results.</p>',
                self._listing(hits[start:start + size], abstracts=True),
                _pager(path, {**params, "order": order, "size": size}, "start", start, size, total)]
        return self.html(request, "Search results", "\n".join(body))

    # ------------------------------------------------------------------ the rest
    def on_static_page(self, request: Request, page: str) -> Response:
        title, paragraphs = STATIC_PAGES[page]
        body = f"<h1>{esc(title)}</h1>" + "".join(
            par if par.startswith("<") else f"<p>{esc(par)}</p>" for par in paragraphs)
        return self.html(request, title, body)

    def on_prefs(self, request: Request) -> Response:
        theme = request.form.get("theme", "light")
        back = request.form.get("next", "/")
        response = redirect(back if back.startswith("/") else "/", code=303)
        response.set_cookie("theme", "dark" if theme == "dark" else "light", path="/", samesite="Lax")
        return response

    def on_stats(self, request: Request) -> Response:
        counts = {a: len(self.corpus.in_archive(a)) for a in ARCHIVES}
        return json_response(request, {"summary": f"{len(self.corpus.papers)} e-prints", "per_archive": counts,
                                       "served_at": int(self.clock() * 1000), "echo": request.args.get("_", "")})



ADVANCED_FORM = """<h1>Advanced search</h1>
<form method="get" action="/search/advanced" class="advanced">
""" + "".join(f"""<fieldset><legend>Term {i + 1}</legend>
<select name="terms-{i}-operator" aria-label="Boolean operator"><option>AND</option><option>OR</option><option>NOT</option></select>
<input type="text" name="terms-{i}-term" aria-label="Search term">
<select name="terms-{i}-field" aria-label="Field"><option value="title">Title</option><option value="author">Author(s)</option>
<option value="abstract">Abstract</option><option value="all">All fields</option></select></fieldset>
""" for i in range(3)) + "<fieldset><legend>Subject</legend>" + "".join(
    f'<label><input type="checkbox" name="classification-{a}" value="y"> {esc(n)}</label>'
    for a, (n, _) in ARCHIVES.items()) + """</fieldset>
<fieldset><legend>Date</legend>
<label><input type="radio" name="date-filter_by" value="all_dates" checked> All dates</label>
<label><input type="radio" name="date-filter_by" value="past_12"> Past 12 months</label>
<label><input type="radio" name="date-filter_by" value="date_range"> Date range</label>
<input type="date" name="date-from_date" aria-label="From"> <input type="date" name="date-to_date" aria-label="To">
</fieldset>
<label>Results per page <select name="size"><option>25</option><option>50</option><option>100</option></select></label>
<label>Sort <select name="order"><option value="-announced_date_first">Newest first</option>
<option value="announced_date_first">Oldest first</option><option value="title">Title</option></select></label>
<button type="submit">Search</button>
</form>"""


def _cat_name(cat: str) -> str:
    return ARCHIVES[cat.split(".")[0]][1].get(cat, cat)


def field_text(p: Paper, field: str) -> str:
    """The lower-cased text of paper ``p`` that a search in ``field`` (title, author, abstract, all) looks in."""
    if field == "title":
        return p.title.lower()
    if field == "author":
        return " ".join(p.authors).lower()
    if field == "abstract":
        return p.abstract.lower()
    return " ".join([p.title, " ".join(p.authors), p.abstract, p.comments, p.id, " ".join(p.categories)]).lower()


def _in_dates(request: Request, p: Paper) -> bool:
    mode = request.args.get("date-filter_by", "all_dates")
    submitted = p.first_submitted.date()
    if mode == "past_12":
        return submitted >= SNAPSHOT.date() - timedelta(days=365)
    if mode == "date_range":
        lo, hi = _date_arg(request, "date-from_date"), _date_arg(request, "date-to_date")
        return (lo is None or submitted >= lo) and (hi is None or submitted <= hi)
    return True


def _date_arg(request: Request, name: str) -> date | None:
    try:
        return date.fromisoformat(request.args.get(name, ""))
    except ValueError:
        return None


def _int_arg(request: Request, name: str, default: int, allowed: tuple[int, ...] | None = None) -> int:
    try:
        value = int(request.args.get(name, default))
    except ValueError:
        return default
    if value < 0 or (allowed and value not in allowed):
        return default
    return value


def _pager(path: str, params: dict, key: str, start: int, size: int, total: int) -> str:
    links = []
    for offset in range(0, total, size):
        label = f"{offset + 1}-{min(offset + size, total)}"
        if offset == start:
            links.append(f"<span>{label}</span>")
        else:
            links.append(f'<a href="{path}?{urlencode({**params, key: offset})}">{label}</a>')
    return '<div class="pagination">' + " ".join(links) + "</div>" if len(links) > 1 else ""
