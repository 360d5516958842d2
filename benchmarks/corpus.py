"""A deterministic stand-in for five weekly crawls of a scholarly preprint site, as WARC.gz files.

The site has the shape of arxiv.org: ~300 server-rendered HTML pages (abstract pages of 20-40 kB,
category listings, help and about pages) sharing a header, navigation, a large "bibliographic
tools" block and a footer, plus shared CSS, JavaScript and a few PNG images. Visible text is built
from a seeded, Zipf-distributed vocabulary (real words plus pronounceable made-up ones) so it
compresses like prose, not like a repeated string; images are random bytes, so they do not
compress at all, as real PNGs barely do.

Between consecutive crawls about 10% of the pages change (a new version line and comment on an
abstract page, a new entry on a listing, an edited paragraph on a help page) and every response
carries a new Date (and CDN timing headers). Each crawl is written by warcio's WARCWriter with
per-record gzip, a response and a request record per URL (as browser-based crawlers do); bodies
are served without content coding (``identity``), so payload bytes are what the browser sees.

Everything, WARC-Record-IDs included, derives from the seed: the files are identical on every run.
"""

from __future__ import annotations

import hashlib
import io
import random
import re
import uuid
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from itertools import accumulate
from pathlib import Path

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

CORPUS_VERSION = "1"
SEED = 20240304
HOST = "preprints.example.org"
BASE = f"https://{HOST}"
CRAWLS = 5
CHANGE_FRACTION = 0.10
N_ABS = 250
CATEGORIES = ["cs.AI", "cs.CL", "cs.CV", "cs.LG", "cs.IR", "cs.DB", "cs.DC", "cs.DS", "cs.HC", "cs.NE",
              "cs.RO", "cs.SE", "stat.ML", "math.OC", "math.PR", "physics.comp-ph", "q-bio.NC",
              "eess.SP", "econ.EM", "astro-ph.IM"]
HELP_TOPICS = ["submit", "license", "moderation", "endorsement", "versions", "withdraw", "find", "view",
               "faq", "api", "bulk_data", "oa", "accessibility", "privacy_policy", "policies/code_of_conduct",
               "policies/submission_guidelines", "stats", "mailing", "rss", "contact"]
ABOUT_PAGES = ["", "people", "ourmembers", "donate", "governance", "reports", "funding"]
CHROME_UA = ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
             "Chrome/122.0.6261.94 Safari/537.36")
FIRST_CRAWL = datetime(2024, 3, 4, 9, 0, 0, tzinfo=timezone.utc)

_WORDS = """
the of and to in a is that for it as was with be by on not he this are or his from at which but have an
they you were her she there been one all we their has would when if so no will more can what about up
out them some could into than then only other its time these two may first new also after any most over
such very where through our between those used under each well state both because same while during
without however against within large number several important different following possible general
model models method methods approach results result data learning network networks neural training
performance problem problems task tasks propose proposed show demonstrate paper work framework based
using use analysis algorithm algorithms function functions distribution system systems approach existing
efficient effective improve improves improved state-of-the-art benchmark benchmarks experiments
experimental evaluation evaluate accuracy dataset datasets representation representations feature
features structure structures information language languages inference estimation estimator bound
bounds theorem theory theoretical empirical empirically optimal optimization convex stochastic gradient
descent linear nonlinear matrix matrices vector vectors space spaces dimension dimensional high low
sample samples sampling complexity computational cost costs scalable scale scaling large-scale graph
graphs node nodes edge edges label labels supervised unsupervised self-supervised reinforcement policy
agent agents reward environment environments robust robustness adversarial attack attacks defense
privacy fairness bias generalization transfer domain adaptation prior posterior bayesian probabilistic
variational latent generative diffusion transformer transformers attention sequence sequences token
tokens embedding embeddings retrieval search query queries document documents web pages page text
image images video visual vision object detection segmentation recognition classification regression
clustering kernel kernels sparse dense signal signals noise noisy measurement measurements physical
quantum energy field fields dynamics dynamical equation equations solution solutions numerical
simulation simulations experiment observe observed observation observations significantly respectively
novel simple natural standard various specific previous recent recently current further thus therefore
moreover finally particular particularly provide provides present presents introduce introduces study
studies investigate investigates consider considers achieve achieves obtain obtains establish
establishes extend extends develop develops compare compared comparison baseline baselines strong
weak substantial substantially consistent consistently across multiple single real-world synthetic
open source code available publicly release released human humans user users interaction interactive
memory long short context contexts reasoning knowledge planning trajectory trajectories action actions
""".split()
_SYLLABLES = ["ka", "lo", "mi", "ne", "ra", "to", "shi", "vel", "dor", "an", "ex", "tri", "qua", "syn", "pol",
              "ber", "cal", "dis", "fen", "gor", "hel", "ist", "jun", "kor", "lum", "mor", "nov", "ost", "pra",
              "ric", "sal", "tem", "ul", "ver", "wen", "zel", "ion", "ary", "ic", "al", "ous", "ent", "ism"]
_FIRST = """Alice Bo Carlos Daniela Emre Fatima Grace Hiro Ines Jakob Kavya Lars Mei Nikolai Olga Pablo Qing
Ravi Sara Tomasz Uma Viktor Wen Xavier Yara Zhen Amir Beatriz Chen Dmitri Elena Farid Giulia Hannah Ivan
Jun Kenji Lucia Mateo Nadia Omar Priya Rafael Sofia Theo Ugo Valentina William Xin Yusuf Zoe Arjun Bianca
Cheng Diego Eva Felix Gabriel Helena Isaac Julia Karim Lena Marco Nina Oscar Paula Quentin Rosa Stefan
Tara Ulrich Vera Walter Ximena Yuki""".split()
_LAST = """Smith Wang Garcia Kumar Chen Mueller Rossi Novak Tanaka Silva Ivanova Kim Nguyen Johansson Dubois
Kowalski Haddad Okafor Fernandez Li Zhang Liu Yang Huang Zhao Wu Zhou Xu Sun Ma Zhu Hu Guo He Lin Luo Gao
Patel Shah Singh Sharma Gupta Rao Iyer Nair Das Bose Sato Suzuki Takahashi Watanabe Ito Yamamoto Nakamura
Kobayashi Schmidt Schneider Fischer Weber Meyer Wagner Becker Schulz Hoffmann Martin Bernard Thomas
Petit Robert Richard Durand Leroy Moreau Simon Laurent Lefebvre Michel Romano Colombo Ricci Marino Greco
Bruno Gallo Conti Costa Santos Pereira Oliveira Alves Rodrigues Lopez Martinez Sanchez Perez Gomez Diaz
Andersson Nilsson Larsson Olsen Hansen Jensen Nielsen Virtanen Korhonen Horvath Nagy Popescu Petrov
Volkov Sokolov Lebedev Kozlov Morozov Novikov Cohen Levi Friedman Katz Shapiro Adeyemi Mensah Banda""".split()
_MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


class Prose:
    """Seeded pseudo-English: Zipf-distributed words, sentences, paragraphs, titles, names."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        made_up = set()
        while len(made_up) < 4000:
            made_up.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))))
        vocab = list(dict.fromkeys(_WORDS)) + sorted(made_up)
        # Real function words first so they get the most weight, made-up words form the long tail.
        self.vocab = vocab
        self.cum = list(accumulate(1.0 / (rank + 2.7) ** 1.07 for rank in range(len(vocab))))

    def words(self, n: int) -> list[str]:
        return self.rng.choices(self.vocab, cum_weights=self.cum, k=n)

    def sentence(self, lo: int = 8, hi: int = 28) -> str:
        w = self.words(self.rng.randint(lo, hi))
        for i in range(3, len(w) - 2, 7):
            if self.rng.random() < 0.35:
                w[i] += ","
        if self.rng.random() < 0.15:
            w.insert(self.rng.randrange(len(w)), f"{self.rng.uniform(0.5, 99.9):.1f}%")
        w[0] = w[0].capitalize()
        return " ".join(w) + "."

    def paragraph(self, lo: int = 3, hi: int = 8) -> str:
        return " ".join(self.sentence() for _ in range(self.rng.randint(lo, hi)))

    def title(self) -> str:
        w = self.words(self.rng.randint(5, 13))
        if self.rng.random() < 0.4:
            w.insert(self.rng.randint(1, 3), ":")
        return " ".join(x if len(x) < 4 else x.capitalize() for x in w).replace(" :", ":")

    def name(self) -> str:
        return f"{self.rng.choice(_FIRST)} {self.rng.choice(_LAST)}"

    def authors(self) -> list[str]:
        return [self.name() for _ in range(max(1, int(self.rng.expovariate(1 / 4))))]


# --------------------------------------------------------------------------- static assets
def _css(rng: random.Random, n_rules: int) -> bytes:
    props = ["margin", "padding", "color", "background-color", "font-size", "line-height", "border",
             "display", "width", "max-width", "font-weight", "text-align", "border-radius", "position"]
    vals = ["0", "0 auto", "1em", "0.5rem 1rem", "#b31b1b", "#fff", "#333", "1.4", "block", "flex",
            "none", "100%", "60em", "bold", "left", "center", "4px", "relative", "1px solid #ccc", "inherit"]
    words = ["header", "nav", "abs", "list", "meta", "search", "btn", "title", "authors", "dateline", "extra",
             "services", "bib", "toggle", "label", "footer", "column", "item", "link", "icon", "primary"]
    out = []
    for _ in range(n_rules):
        sel = ", ".join("." + "-".join(rng.sample(words, rng.randint(1, 3))) for _ in range(rng.randint(1, 3)))
        body = "".join(f"  {rng.choice(props)}: {rng.choice(vals)};\n" for _ in range(rng.randint(2, 7)))
        out.append(f"{sel} {{\n{body}}}\n")
        if rng.random() < 0.05:
            out.append(f"@media screen and (max-width: {rng.choice([480, 768, 1024])}px) {{ {sel} {{ display: none; }} }}\n")
    return "".join(out).encode()


def _js(rng: random.Random, prose: Prose, n_funcs: int) -> bytes:
    idents = [w for w in prose.vocab[150:800] if w.isalpha()]
    out = ['"use strict";\n']
    for _ in range(n_funcs):
        name = rng.choice(idents) + rng.choice(idents).capitalize()
        args = ", ".join(rng.sample(idents, rng.randint(0, 3)))
        lines = []
        for _ in range(rng.randint(3, 14)):
            a, b = rng.choice(idents), rng.choice(idents)
            lines.append(rng.choice([
                f"  const {a} = document.querySelector('.{b}');",
                f"  if (!{a}) {{ return null; }}",
                f"  {a}.addEventListener('click', function (ev) {{ ev.preventDefault(); toggle('{b}'); }});",
                f"  for (let i = 0; i < {a}.length; i++) {{ {b}.push({a}[i]); }}",
                f"  window.{a} = window.{a} || {{}};",
                f"  fetch('/api/{b}?q=' + encodeURIComponent({a})).then(r => r.json());",
                f"  // {prose.sentence(4, 12)}",
            ]))
        out.append(f"function {name}({args}) {{\n" + "\n".join(lines) + "\n}\n")
    return "".join(out).encode()


def _png(rng: random.Random, size: int) -> bytes:
    return b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + rng.randbytes(size - 16)


# --------------------------------------------------------------------------- HTML pages
def _boilerplate(prose: Prose) -> tuple[str, str, str]:
    """(head links, header+nav, bibliographic tools + footer) shared by every page."""
    head = ('<meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">'
            '<link rel="stylesheet" media="screen" type="text/css" href="/static/css/site.css">'
            '<link rel="stylesheet" media="screen" type="text/css" href="/static/css/abs.css">'
            '<link rel="icon" type="image/png" href="/static/images/favicon.png">'
            '<script src="/static/js/mathjax-config.js"></script><script defer src="/static/js/site.js"></script>\n')
    options = "".join(f'<option value="{f}">{f.replace("_", " ").title()}</option>'
                      for f in ["all", "title", "author", "abstract", "comments", "journal_ref", "acm_class",
                                "msc_class", "report_num", "paper_id", "doi", "orcid", "license", "author_id",
                                "help", "full_text"])
    cats = "".join(f'<li><a href="/list/{c}/recent">{c}</a></li>' for c in CATEGORIES)
    header = (
        '<a class="skip" href="#content">Skip to main content</a>\n'
        '<div class="attribution"><img src="/static/images/member-logo.png" alt="member institution" width="140">'
        f'<p>We gratefully acknowledge support from the Simons Foundation, member institutions, and all contributors. '
        f'<a href="/about/donate">Donate</a></p></div>\n'
        '<header class="site-header"><a href="/"><img src="/static/images/logo.png" alt="preprints logo" '
        'width="85"></a><form class="search" action="/search/" method="GET"><input type="text" name="query" '
        f'placeholder="Search..." aria-label="Search term or terms"><select name="searchtype">{options}</select>'
        '<button class="btn">Search</button><a href="/search/advanced">Advanced Search</a></form></header>\n'
        f'<nav class="main-nav"><ul>{cats}</ul><ul><li><a href="/login">Login</a></li>'
        '<li><a href="/help">Help Pages</a></li><li><a href="/about">About</a></li></ul></nav>\n'
    )
    tools = []
    for label in ["Bibliographic Explorer", "Connected Papers", "Litmaps", "scite.ai Smart Citations",
                  "alphaXiv", "CatalyzeX Code Finder", "DagsHub", "GotitPub", "Hugging Face", "Papers with Code",
                  "ScienceCast", "Replicate", "Spaces", "TXYZ.AI", "Influence Flower", "CORE Recommender",
                  "IArxiv Recommender", "Links to Code", "Demos", "Related Papers", "About arXivLabs"]:
        slug = re.sub(r"\W+", "-", label.lower()).strip("-")
        tools.append(
            f'<div class="toggle"><input id="{slug}-toggle" type="checkbox" class="lab-toggle" '
            f'data-script-url="/static/js/{slug}.js"><label for="{slug}-toggle">{label} Toggle</label>'
            f'<span class="tool-label">{label}</span> <em>(<a href="/labs/{slug}">What is {label}?</a>)</em></div>\n')
    bib = ('<div class="bib-tools"><h2>Bibliographic and Citation Tools</h2>' + "".join(tools)
           + f'<p class="labs-about">{prose.paragraph(3, 3)}</p></div>\n')
    footer = ('<footer><div class="columns"><ul><li><a href="/about">About</a></li><li><a href="/help">Help</a></li>'
              '<li><a href="/help/contact">Contact</a></li><li><a href="/help/subscribe">Subscribe</a></li></ul>'
              '<ul><li><a href="/help/license">Copyright</a></li><li><a href="/help/policies/privacy_policy">Privacy '
              'Policy</a></li><li><a href="/help/web_accessibility">Web Accessibility Assistance</a></li>'
              '<li><a href="https://status.example.org">Operational Status</a></li></ul></div>'
              f'<p class="small">{prose.sentence(12, 20)}</p></footer>\n')
    return head, header, bib + footer


def _date_text(dt: datetime) -> str:
    return dt.strftime("%a, %-d %b %Y %H:%M:%S UTC")


class Site:
    """The pages and assets of the site; ``mutate`` applies one crawl interval's changes."""

    def __init__(self, seed: int = SEED):
        rng = self.rng = random.Random(seed)
        self.prose = prose = Prose(rng)
        self.head, self.header, self.footer = _boilerplate(prose)
        self.ids = [f"2403.{rng.randint(1, 19999):05d}" for _ in range(N_ABS)]
        self.ids = list(dict.fromkeys(self.ids))
        self.papers = {pid: (prose.title(), prose.authors(), rng.choice(CATEGORIES)) for pid in self.ids}
        self.pages: dict[str, str] = {}  # path -> HTML
        self.assets: dict[str, tuple[str, bytes]] = {  # path -> (content type, body)
            "/static/css/site.css": ("text/css", _css(rng, 700)),
            "/static/css/abs.css": ("text/css", _css(rng, 120)),
            "/static/js/site.js": ("application/javascript", _js(rng, prose, 260)),
            "/static/js/mathjax-config.js": ("application/javascript", _js(rng, prose, 8)),
            "/static/images/logo.png": ("image/png", _png(rng, 7_400)),
            "/static/images/member-logo.png": ("image/png", _png(rng, 12_800)),
            "/static/images/favicon.png": ("image/png", _png(rng, 1_900)),
            "/static/images/icon-search.png": ("image/png", _png(rng, 900)),
            "/static/images/banner.png": ("image/png", _png(rng, 61_000)),
        }
        self.pages["/"] = self._home()
        for cat in CATEGORIES:
            self.pages[f"/list/{cat}/recent"] = self._listing(cat)
        for pid in self.ids:
            self.pages[f"/abs/{pid}"] = self._abs(pid)
        for topic in HELP_TOPICS:
            self.pages[f"/help/{topic}"] = self._prose_page(f"Help: {topic.split('/')[-1].replace('_', ' ').title()}")
        for name in ABOUT_PAGES:
            self.pages[f"/about/{name}".rstrip("/")] = self._prose_page(f"About {name or 'us'}".strip())

    # -- rendering
    def _doc(self, title: str, body: str, meta: str = "") -> str:
        return (f'<!DOCTYPE html>\n<html lang="en">\n<head><title>{title}</title>\n{self.head}{meta}</head>\n'
                f'<body class="with-cu-identity">\n{self.header}<main id="content">\n{body}\n</main>\n'
                f'{self.footer}</body>\n</html>\n')

    def _entry(self, pid: str) -> str:
        title, authors, cat = self.papers[pid]
        alinks = ", ".join(f'<a href="/a/{a.split()[-1].lower()}_{a[0].lower()}_1">{a}</a>' for a in authors)
        return (f'<dt><a name="item{pid}"></a><a href="/abs/{pid}" title="Abstract">arXiv:{pid}</a> '
                f'[<a href="/pdf/{pid}" title="Download PDF">pdf</a>, <a href="/html/{pid}v1">html</a>, '
                f'<a href="/format/{pid}">other</a>]</dt>\n<dd><div class="meta"><div class="list-title">'
                f'<span class="descriptor">Title:</span> {title}</div><div class="list-authors">{alinks}</div>'
                f'<div class="list-subjects"><span class="descriptor">Subjects:</span> <span class="primary-subject">'
                f'{cat}</span></div></div></dd>\n')

    def _home(self) -> str:
        body = "".join(f'<h2>{c}</h2><p>{self.prose.sentence(10, 20)} <a href="/list/{c}/recent">recent</a></p>\n'
                       for c in CATEGORIES)
        return self._doc("preprints e-print archive", f'<div class="intro"><p>{self.prose.paragraph()}</p></div>\n{body}')

    def _listing(self, cat: str) -> str:
        pids = self.rng.sample(self.ids, 40)
        entries = "".join(self._entry(p) for p in pids)
        return self._doc(f"{cat} recent submissions",
                         f'<h1>{cat}</h1><h3>Recent submissions</h3><dl id="articles"><!--entries-->\n{entries}</dl>')

    def _abs(self, pid: str) -> str:
        rng, prose = self.rng, self.prose
        title, authors, cat = self.papers[pid]
        abstract = " ".join(prose.paragraph(4, 9) for _ in range(rng.randint(1, 2)))
        submitted = FIRST_CRAWL - timedelta(days=rng.randint(1, 60), seconds=rng.randint(0, 86_400))
        meta = (f'<meta name="citation_title" content="{title}">'
                + "".join(f'<meta name="citation_author" content="{a.split()[-1]}, {a.split()[0]}">' for a in authors)
                + f'<meta name="citation_date" content="{submitted:%Y/%m/%d}">'
                f'<meta name="citation_pdf_url" content="{BASE}/pdf/{pid}"><meta name="citation_arxiv_id" content="{pid}">'
                f'<meta name="citation_abstract" content="{abstract}">'
                f'<meta property="og:type" content="website"><meta property="og:title" content="{title}">'
                f'<meta property="og:url" content="{BASE}/abs/{pid}v1"><meta property="og:description" '
                f'content="{abstract[:300]}">\n')
        alinks = ", ".join(f'<a href="/search/?searchtype=author&amp;query={a.split()[-1]},+{a[0]}">{a}</a>'
                           for a in authors)
        pages, figs = rng.randint(6, 60), rng.randint(1, 20)
        head = (
            f'<div class="breadcrumbs"><a href="/list/{cat}/recent">{cat}</a> &gt; arXiv:{pid}</div>\n'
            f'<div class="dateline">[Submitted on {submitted:%-d %b %Y}]</div>\n'
            f'<h1 class="title mathjax"><span class="descriptor">Title:</span>{title}</h1>\n'
            f'<div class="authors"><span class="descriptor">Authors:</span>{alinks}</div>\n'
            f'<blockquote class="abstract mathjax"><span class="descriptor">Abstract:</span>{abstract}</blockquote>\n'
            f'<div class="metatable"><table><tr><td class="tablecell label">Comments:</td>'
            f'<td class="comments">{pages} pages, {figs} figures. {prose.sentence(5, 14)}</td></tr>'
            f'<tr><td class="tablecell label">Subjects:</td><td class="subjects"><span class="primary-subject">'
            f'{cat}</span>; {", ".join(rng.sample(CATEGORIES, 2))}</td></tr><tr><td class="label">Cite as:</td>'
            f'<td><span class="arxivid"><a href="/abs/{pid}">arXiv:{pid}</a> [{cat}]</span></td></tr></table></div>\n'
            f'<div class="submission-history"><h2>Submission history</h2> From: {authors[0]} '
            f'[<a href="/show-email/{rng.getrandbits(32):08x}/{pid}">view email</a>]<br>\n'
            f'<strong>[v1]</strong> {_date_text(submitted)} ({rng.randint(80, 9000):,} KB)<br>\n<!--/history--></div>\n'
            f'<div class="extra-services"><h2>Access Paper:</h2><ul><li><a href="/pdf/{pid}">View PDF</a></li>'
            f'<li><a href="/html/{pid}v1">HTML (experimental)</a></li><li><a href="/src/{pid}">TeX Source</a></li>'
            f'<li><a href="/format/{pid}">Other Formats</a></li></ul><div class="license">'
            f'<a href="http://creativecommons.org/licenses/by/4.0/">view license</a></div></div>\n'
        )
        target = rng.randint(20_000, 40_000)
        size = len(self._doc(title, head, meta))
        refs = ['<div class="references"><h2>References &amp; Citations</h2><ol>\n']
        size += 200
        while size < target:
            rt, ra = prose.title(), ", ".join(prose.name() for _ in range(rng.randint(1, 5)))
            rid = rng.choice(self.ids)
            item = (f'<li><span class="ref-authors">{ra}</span>. <a href="/abs/{rid}">{rt}</a>. '
                    f'<em>{prose.title()[:40]}</em>, {rng.randint(1990, 2024)}. {prose.sentence(6, 20)}</li>\n')
            refs.append(item)
            size += len(item)
        refs.append("</ol></div>\n")
        return self._doc(f"[{pid}] {title}", head + "".join(refs), meta)

    def _prose_page(self, title: str) -> str:
        paras = "".join(f"<h2>{self.prose.title()}</h2>\n<p>{self.prose.paragraph(4, 10)}</p>\n"
                        for _ in range(self.rng.randint(4, 12)))
        return self._doc(title, f'<h1>{title}</h1>\n<p class="updated">Last updated {FIRST_CRAWL:%Y-%m-%d}</p>\n{paras}')

    # -- changes between crawls
    def mutate(self, crawl: int, when: datetime) -> list[str]:
        """Change ~CHANGE_FRACTION of the pages as a week of site activity would; returns their paths."""
        rng, prose = self.rng, self.prose
        changed = rng.sample(sorted(self.pages), max(1, round(CHANGE_FRACTION * len(self.pages))))
        for path in changed:
            html = self.pages[path]
            if path.startswith("/abs/"):
                size = f"({rng.randint(80, 9000):,} KB)"
                html = html.replace("<!--/history-->",
                                    f"<strong>[v{crawl + 1}]</strong> {_date_text(when - timedelta(days=2))} {size}<br>\n"
                                    "<!--/history-->", 1)
                html = re.sub(r'<td class="comments">[^<]*</td>',
                              f'<td class="comments">{rng.randint(6, 60)} pages. v{crawl + 1}: {prose.sentence(5, 14)}</td>',
                              html, count=1)
            elif path.startswith("/list/"):
                new = "".join(self._entry(p) for p in rng.sample(self.ids, 3))
                html = html.replace("<!--entries-->\n", "<!--entries-->\n" + new, 1)
            else:
                html = re.sub(r'<p class="updated">[^<]*</p>', f'<p class="updated">Last updated {when:%Y-%m-%d}</p>'
                              f"\n<p>{prose.paragraph(2, 5)}</p>", html, count=1)
            self.pages[path] = html
        return changed

    def urls(self) -> list[tuple[str, str, bytes, str]]:
        """(path, content type, body, referer path) in crawl order: each page, then what it loads."""
        out = []
        first_assets = True
        for path in sorted(self.pages, key=lambda p: (p != "/", not p.startswith("/list/"), p)):
            out.append((path, "text/html; charset=utf-8", self.pages[path].encode("utf-8"), "/"))
            if first_assets:  # a browser crawl fetches the shared assets once, from the first page
                out.extend((a, ctype, body, path) for a, (ctype, body) in self.assets.items())
                first_assets = False
        return out


# --------------------------------------------------------------------------- WARC writing
def _resp_headers(rng: random.Random, path: str, ctype: str, body: bytes, when: datetime) -> list[tuple[str, str]]:
    etag = '"' + hashlib.sha1(body).hexdigest()[:20] + '"'
    static = path.startswith("/static/")
    headers = [
        ("Date", format_datetime(when, usegmt=True)),
        ("Server", "Apache"),
        ("Content-Type", ctype),
        ("Content-Length", str(len(body))),
        ("Cache-Control", "public, max-age=31536000, immutable" if static else
         ("max-age=0, no-cache" if path.startswith("/list/") else "public, max-age=3600")),
        ("ETag", etag),
    ]
    if static:
        headers += [("Last-Modified", "Tue, 13 Feb 2024 16:21:07 GMT"), ("Accept-Ranges", "bytes")]
    else:
        headers += [("Vary", "Accept-Encoding"), ("X-Frame-Options", "SAMEORIGIN"),
                    ("Strict-Transport-Security", "max-age=31536000")]
    hit = rng.random() < 0.6
    headers += [
        ("Via", "1.1 varnish"),
        ("Age", str(rng.randint(1, 3000)) if hit else "0"),
        ("X-Served-By", f"cache-iad-kiad7000{rng.randint(20, 180)}-IAD"),
        ("X-Cache", "HIT" if hit else "MISS"),
        ("X-Timer", f"S{when.timestamp():.6f},VS0,VE{rng.randint(0, 90)}"),
    ]
    return headers


def _req_headers(path: str, ctype: str, referer: str) -> list[tuple[str, str]]:
    if ctype.startswith("text/html"):
        accept = ("text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,"
                  "application/signed-exchange;v=b3;q=0.7")
        dest, mode, site = "document", "navigate", "same-origin"
    elif ctype == "text/css":
        accept, dest, mode, site = "text/css,*/*;q=0.1", "style", "no-cors", "same-origin"
    elif ctype.startswith("image/"):
        accept, dest, mode, site = "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8", "image", "no-cors", "same-origin"
    else:
        accept, dest, mode, site = "*/*", "script", "no-cors", "same-origin"
    headers = [
        ("Host", HOST),
        ("Connection", "keep-alive"),
        ("sec-ch-ua", '"Chromium";v="122", "Not(A:Brand";v="24", "Google Chrome";v="122"'),
        ("sec-ch-ua-mobile", "?0"),
        ("sec-ch-ua-platform", '"Linux"'),
    ]
    if dest == "document":
        headers.append(("Upgrade-Insecure-Requests", "1"))
    headers += [
        ("User-Agent", CHROME_UA),
        ("Accept", accept),
        ("Sec-Fetch-Site", site),
        ("Sec-Fetch-Mode", mode),
    ]
    if dest == "document":
        headers.append(("Sec-Fetch-User", "?1"))
    headers += [
        ("Sec-Fetch-Dest", dest),
        ("Referer", BASE + referer),
        ("Accept-Encoding", "gzip, deflate, br, zstd"),
        ("Accept-Language", "en-US,en;q=0.9"),
    ]
    return headers


def _warc_date(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def write_crawl(site: Site, crawl: int, path: Path, rng: random.Random) -> None:
    """Write one crawl of ``site`` as a per-record-gzip WARC at ``path``."""
    started = FIRST_CRAWL + timedelta(days=7 * crawl)
    with open(path, "wb") as fh:
        writer = WARCWriter(fh, gzip=True)
        rid = lambda: f"<urn:uuid:{uuid.UUID(int=rng.getrandbits(128), version=4)}>"  # noqa: E731
        info = (f"software: webfreeze-benchmarks corpus {CORPUS_VERSION}\r\nformat: WARC File Format 1.0\r\n"
                f"isPartOf: preprints-weekly\r\ndescription: crawl {crawl + 1} of {CRAWLS}\r\n"
                f"http-header-user-agent: {CHROME_UA}\r\n").encode()
        writer.write_record(writer.create_warc_record(
            path.name, "warcinfo", payload=io.BytesIO(info), length=len(info),
            warc_content_type="application/warc-fields",
            warc_headers_dict={"WARC-Record-ID": rid(), "WARC-Date": _warc_date(started), "WARC-Filename": path.name}))
        when = started
        for url_path, ctype, body, referer in site.urls():
            when += timedelta(milliseconds=rng.randint(40, 1500))
            uri = BASE + url_path
            resp_id = rid()
            resp = writer.create_warc_record(
                uri, "response", payload=io.BytesIO(body), length=len(body),
                http_headers=StatusAndHeaders("200 OK", _resp_headers(rng, url_path, ctype, body, when),
                                              protocol="HTTP/1.1"),
                warc_headers_dict={"WARC-Record-ID": resp_id, "WARC-Date": _warc_date(when),
                                   "WARC-IP-Address": "151.101.3.42"})
            writer.write_record(resp)
            req = writer.create_warc_record(
                uri, "request", payload=io.BytesIO(b""), length=0,
                http_headers=StatusAndHeaders(f"GET {url_path} HTTP/1.1", _req_headers(url_path, ctype, referer),
                                              is_http_request=True),
                warc_headers_dict={"WARC-Record-ID": rid(), "WARC-Date": _warc_date(when),
                                   "WARC-Concurrent-To": resp_id})
            writer.write_record(req)


def five_crawls(out: Path) -> list[Path]:
    """The five crawl files, generated on first use and cached under ``out`` (they never change)."""
    folder = out / f"corpus-v{CORPUS_VERSION}-s{SEED}"
    files = [folder / f"preprints-crawl-{k + 1}.warc.gz" for k in range(CRAWLS)]
    if (folder / ".complete").exists() and all(f.exists() for f in files):
        return files
    from . import console, progress

    folder.mkdir(parents=True, exist_ok=True)
    console.print("  generating the five-crawl corpus (cached for later runs) ...")
    with progress() as prog:
        task = prog.add_task("writing crawls", total=CRAWLS)
        site = Site(SEED)
        wrng = random.Random(SEED + 1)
        for k, f in enumerate(files):
            if k:
                site.mutate(k, FIRST_CRAWL + timedelta(days=7 * k))
            tmp = f.with_suffix(".partial")
            write_crawl(site, k, tmp, wrng)
            tmp.replace(f)
            prog.advance(task)
    (folder / ".complete").touch()
    return files
