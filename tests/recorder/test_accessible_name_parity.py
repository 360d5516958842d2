"""Accessible-name parity: the role and name the recorder logs for a target (``recorder/accname.py``,
run in Chromium) against the observation tree's (``simulator/axtree.py``, the definition), for every
element the tree shows, on the demo archive's HTML pages served by the replay (every kind of page:
up to three of each URL shape, PAGES_PER_SHAPE) and on hand-made edge cases. The reference agent
finds recorded targets by that role and name, so the two must agree exactly."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest

import webfreeze.demo
from webfreeze.archives import Archive
from webfreeze.recorder.accname import ROLE_NAME_JS
from webfreeze.recorder.session import LISTENER_JS
from webfreeze.simulator import axtree
from webfreeze.simulator.axtree import MARK_JS, build_tree, marked
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

DEMO = Path(webfreeze.demo.__file__).resolve().parent / "data" / "demo.wfz"

# One call per page: the observation script, then the recorder's role and name of every element it
# stamped, in the same task (no page script can change the DOM between the two).
OBSERVE_AND_NAME = (
    "() => { const marked = (" + MARK_JS + ")(); const rn = (" + ROLE_NAME_JS + ")(); const names = {};"
    " for (const el of document.querySelectorAll('[data-wf-bid]'))"
    "   names[el.getAttribute('data-wf-bid')] = [rn.role(el), rn.name(el)];"
    " return [marked, names]; }"
)


def compare(observed, url: str, where: str, mismatches: list) -> tuple[int, object]:
    """Check every element of the tree of one page (``observed``: what OBSERVE_AND_NAME returned
    there) against the recorder's names; returns (elements, tree)."""
    result, names = observed
    m = marked(result)
    tree = build_tree(m["html"], url, m["geometry"])
    count = 0
    for element in tree.summaries():
        count += 1
        want = [element["role"], element["name"]]
        got = names.get(element["bid"])
        if got != want:
            mismatches.append(f"{where} [{element['bid']}] <{element['tag']}>: tree {tuple(want)!r}, "
                              f"recorder {tuple(got) if got else None!r}")
    return count, tree


def report(mismatches: list) -> str:
    return f"{len(mismatches)} mismatches, the first: " + "; ".join(mismatches[:8])


# The demo's 1,579 HTML pages come from 126 URL shapes (host, path with digits as N, query keys): a
# site's template filled with other data. Three of each shape (the first, middle and last) cover every
# template and a spread of its data in a fifth of the time of all of them (about 330 pages).
PAGES_PER_SHAPE = 3


def url_shape(url: str) -> tuple:
    parts = urlsplit(url)
    return parts.netloc, re.sub(r"\d+", "N", parts.path), tuple(sorted(k for k, _ in parse_qsl(parts.query)))


def sample_by_shape(urls: list[str], per_shape: int = PAGES_PER_SHAPE) -> list[str]:
    """Up to ``per_shape`` URLs of each shape, evenly spread over the sorted URLs of that shape."""
    shapes: dict[tuple, list[str]] = {}
    for url in sorted(urls):
        shapes.setdefault(url_shape(url), []).append(url)
    picked = []
    for group in shapes.values():
        step = max(1, (len(group) - 1) / max(1, per_shape - 1))
        picked += sorted({group[min(len(group) - 1, round(i * step))] for i in range(min(per_shape, len(group)))})
    return sorted(picked)


def test_demo_archive_pages(tmp_path):
    """Pages of every URL shape the demo archive holds (PAGES_PER_SHAPE of each), through the replay."""
    from webfreeze.replayer.server import ReplayServer

    with Archive.open(DEMO) as arc:
        every = sorted({e.url for e in arc.exchanges(method="GET", status=200, mime="text/html")})
        pages = {p.url for p in arc.pages()}
    assert len(every) >= len(pages) >= 1000 and pages <= set(every)
    urls = sample_by_shape(every)
    assert {url_shape(u) for u in urls} == {url_shape(u) for u in every} and len(urls) < len(every) / 3
    mismatches: list = []
    with ReplayServer(DEMO, mode="proxy", confdir=tmp_path / "home", miss_report=tmp_path / "misses.jsonl") as srv:
        elements = asyncio.run(check_pages(srv.url, urls, mismatches))
    print(f"\naccessible-name parity: {len(urls)} demo pages, {elements} elements, {len(mismatches)} mismatches")
    assert elements > 10_000
    assert not mismatches, report(mismatches)


async def check_pages(proxy: str, urls: list, mismatches: list, tabs: int = 2) -> int:
    """Load ``urls`` in Chromium through ``proxy`` and compare each; returns the elements compared.
    Two tabs take turns: one page loads while the other's tree is built (a third gains nothing on
    two cores)."""
    from playwright.async_api import async_playwright

    from webfreeze.simulator.browser import launch_chromium, new_context

    todo = iter(urls)
    counts = []

    async def tab(context) -> None:
        page = await context.new_page()
        for url in todo:
            await page.goto(url, wait_until="load")
            counts.append(compare(await page.evaluate(OBSERVE_AND_NAME), page.url, url, mismatches)[0])

    async with async_playwright() as pw:
        browser = await launch_chromium(pw, proxy=proxy, shell=True)
        try:
            context = await new_context(browser)
            await asyncio.gather(*(tab(context) for _ in range(tabs)))
        finally:
            await browser.close()
    mismatches.sort()  # (the tabs finish pages in no fixed order)
    return sum(counts)


# Hand-made edge cases: (HTML body, the tree's (role, name) of the element with id "t"). The
# expected pair pins the definition down; every other element of each page is compared too.
EDGE_CASES = [
    # aria-labelledby: several ids in the order given, missing ids skipped, hidden targets read,
    # a target's aria-label not used, the element itself as a target
    ('<span id="b">Beta</span><span id="a">Alpha</span><button id="t" aria-labelledby="a b">x</button>',
     ("button", "Alpha Beta")),
    ('<span id="h" hidden>Secret <i style="display:none">deep</i></span><input id="t" aria-labelledby="nope h">',
     ("textbox", "Secret deep")),
    # (a labelledby target's aria-label counts, its own too when the element lists itself: Chromium's names)
    ('<a id="t" href="#" aria-labelledby="t more" aria-label="Own">Link text</a><span id="more">More</span>',
     ("link", "Own More")),
    ('<span id="l" aria-label="Taken">Read</span><a id="t" href="#" aria-labelledby="l">x</a>', ("link", "Taken")),
    ('<div id="lb"><img src="l.png" alt="Logo"> Corp</div><a id="t" href="#" aria-labelledby="lb">x</a>',
     ("link", "Logo Corp")),
    ('<span id="e"> </span><button id="t" aria-labelledby="e" aria-label="Fallback">x</button>',
     ("button", "Fallback")),
    # aria-label against content
    ('<button id="t" aria-label="Close dialog">X</button>', ("button", "Close dialog")),
    ('<a id="t" href="#" aria-label="   ">Home</a>', ("link", "Home")),
    ('<a id="t" href="#"><span aria-label="Rated 4 of 5">****</span> reviews</a>', ("link", "Rated 4 of 5 reviews")),
    # images in links
    ('<a id="t" href="/"><img src="logo.png" alt="ACME logo"> Shop</a>', ("link", "ACME logo Shop")),
    ('<a id="t" href="/" title="Go home"><img src="x.png" alt=""></a>', ("link", "Go home")),
    ('<img id="t" src="x.png" alt="" title="Tip">', ("image", "Tip")),
    ('<p><img id="t" src="x.png" alt=""></p>', ("image", "")),  # (BrowserGym's marks: never none)
    ('<button id="t" type="button"><img src="x.png" alt="">Delete</button>', ("button", "Delete")),
    # hidden text: the hidden attribute, inline and stylesheet display:none, aria-hidden,
    # visibility:hidden over a visible child, scripts and styles
    ('<a id="t" href="#">Visible <span hidden>secret</span>text</a>', ("link", "Visible text")),
    ('<button id="t">Save<span style="DISPLAY : none">draft</span></button>', ("button", "Save")),
    ('<a id="t" href="#"><span aria-hidden="true">*</span>Favourites</a>', ("link", "Favourites")),
    ('<style>.gone{display:none}</style><a id="t" href="#">Cart <span class="gone">(3 items)</span></a>',
     ("link", "Cart")),
    ('<style>.v{visibility:hidden}.w{visibility:visible}</style>'
     '<button id="t">Go<span class="v"> away <b class="w">now</b></span></button>', ("button", "Go")),
    ('<a id="t" href="#">Text<script>var x = 1;</script><style>.a{}</style></a>', ("link", "Text")),
    ('<details><summary id="t">More <span>info</span></summary><p>Body</p></details>',
     ("DisclosureTriangle", "More info")),
    ('<dialog open><button id="t">OK</button></dialog><dialog><button>Never</button></dialog>', ("button", "OK")),
    # select options, a select's selected text inside a name, listboxes
    ('<select id="s"><option>One</option><option id="t" selected>Two</option></select>', ("option", "Two")),
    ('<label for="t">Country</label><select id="t"><option>France</option></select>', ("combobox", "Country")),
    ('<label>Sort by <select id="t"><option>Price</option><option selected>Rating</option></select></label>',
     ("combobox", "Sort by")),
    ('<label for="t">Amount <select><option>USD</option><option selected>EUR</option></select></label>'
     '<input id="t" type="number">', ("spinbutton", "Amount EUR")),
    ('<select id="t" multiple aria-label="Sizes"><option selected>S</option><option selected>M</option></select>',
     ("listbox", "Sizes")),
    ('<div id="t" role="button">Pick <select id="s"><option>a</option><option>b</option></select></div>'
     '<script>document.getElementById("s").value = "b";</script>', ("button", "Pick b")),
    # input types
    ('<form><input id="t" type="submit"></form>', ("button", "Submit")),
    ('<input id="t" type="submit" value="  Search   now ">', ("button", "Search now")),
    ('<input id="t" type="reset">', ("button", "Reset")),
    ('<input id="t" type="button" title="More">', ("button", "More")),
    ('<input id="t" type="image" src="go.png" alt="Go">', ("button", "Go")),
    ('<input id="t" type="image" src="go.png">', ("button", "Submit")),
    ('<a id="t" href="#">Send <input type="submit" value="now"> <input type="reset"></a>', ("link", "Send now Reset")),
    ('<input id="t" type="search" list="d"><datalist id="d"><option>x</option></datalist>', ("combobox", "")),
    # label[for] and wrapping labels, placeholder and title fallbacks
    ('<label for="t">First</label><label>Second <input id="t"></label>', ("textbox", "First Second")),
    ('<label for="t" hidden>Ghost</label><input id="t" placeholder="  Your   email ">', ("textbox", "Your email")),
    ('<label><input id="t" type="checkbox"> Remember me</label>', ("checkbox", "Remember me")),
    ('<label for="t" aria-label="Given name">Name</label><input id="t">', ("textbox", "Given name")),
    ('<textarea id="t" title="Comments"></textarea>', ("textbox", "Comments")),
    ('<input id="t" aria-placeholder="Type here">', ("textbox", "Type here")),
    ('<label for="t">Qty <input id="q" value="1"></label><input id="t">'
     '<script>document.getElementById("q").value = "5";</script>', ("textbox", "Qty 5")),
    ('<textarea id="n">default</textarea><button id="t" aria-labelledby="n">x</button>'
     '<script>document.getElementById("n").value = "typed text";</script>', ("button", "typed text")),
    # whitespace: HTML whitespace collapsed, Python's str.strip() at the ends (not U+FEFF)
    ('<a id="t" href="#">\n  Many\t\tspaces\n\n here&nbsp;</a>', ("link", "Many spaces here")),
    ('<a id="t" href="#">a&nbsp; b</a>', ("link", "a\xa0 b")),
    ('<a id="t" href="#">\u2003Wide\u2003</a><a href="#">\ufeffBOM</a>', ("link", "Wide")),
    # nested inline and block elements
    ('<a id="t" href="#"><strong>Bold</strong><em>Em</em> and <span>span</span></a>', ("link", "BoldEm and span")),
    ('<a id="t" href="#"><div>One</div><div>Two</div></a>', ("link", "One Two")),
    ('<button id="t">Line<br>Two</button>', ("button", "Line Two")),
    # an icon button: no text inside, named by its title as Chromium names it (TensorBoard's reload)
    ('<button id="t" title="Reload"><span></span><i aria-hidden="true"><svg><path d="M0 0"/></svg></i></button>',
     ("button", "Reload")),
    ('<button id="t" title="Tip">Text</button>', ("button", "Text")),
    ('<h2 id="t">Results <a href="#">(edit)</a></h2>', ("heading", "Results (edit)")),
    # an icon link: named by its SVG's title, as Chromium names it (tests/simulator/test_axtree.py)
    ('<a id="t" href="#"><svg><title>Home icon</title></svg></a>', ("link", "Home icon")),
    ('<a id="t" href="#"><svg><desc>Words</desc><text>Next</text></svg></a>', ("link", "Next")),
    # an SVG's own content: what it draws is in the tree (an SvgRoot), else it is an image
    ('<svg id="t" aria-label="Chart"><g><text>Jan</text><text>Feb</text></g></svg>', ("SvgRoot", "Chart")),
    ('<svg id="t"><title>Logo</title><g><path d="M0 0"/></g></svg>', ("image", "Logo")),
    ('<svg><g id="t"><title>Series A</title><rect width="5" height="5"/></g></svg>', ("group", "Series A")),
    ('<svg><a id="t" xlink:href="/n"><desc>d</desc><text>Next <tspan>page</tspan></text></a></svg>',
     ("link", "Next page")),
    ('<svg><text>Go <a id="t" href="/g">there</a></text></svg>', ("link", "there")),
    ('<svg><circle id="t" r="4" tabindex="0"><title>Point 3</title></circle></svg>', ("graphics-symbol", "Point 3")),
    ('<svg><foreignObject width="50" height="20"><button id="t">In HTML</button></foreignObject></svg>',
     ("button", "In HTML")),
    # roles and names from parts: legend, caption, figcaption, regions, landmarks, explicit roles
    ('<fieldset id="t"><legend>Shipping <b>address</b></legend><input></fieldset>', ("group", "Shipping address")),
    ('<table id="t"><caption>Prices</caption><tr><td>A</td><td>1</td></tr></table>', ("table", "Prices")),
    ('<table><tr id="t"><th>Item</th><td>1 <b>kg</b></td></tr></table>', ("row", "")),  # (a table's rows: no name)
    ('<div role="grid"><div id="t" role="row"><div role="gridcell">1 <b>kg</b></div></div></div>', ("row", "1 kg")),
    # (Chromium's tree, read with BrowserGym's marks, names a figure by aria-label or title alone; its
    # figcaption is a node of its own, Figcaption)
    ('<figure id="t"><img src="f.png" alt="Chart"><figcaption>Figure 1</figcaption></figure>', ("figure", "")),
    ('<figure><figcaption id="t" title="c">Figure 2</figcaption></figure>', ("Figcaption", "c")),
    ('<p><dfn id="t" title="x">tide</dfn> pools</p>', ("term", "tide")),
    ('<section id="t" title="Tides"><p>x</p></section>', ("region", "Tides")),
    ('<p id="t" title="Note">body</p>', ("paragraph", "")),
    ('<p id="t" title="Note" tabindex="0">body</p>', ("paragraph", "Note")),
    ('<section id="t" aria-label="News"><p>x</p></section>', ("region", "News")),
    ('<article><header id="t">Top</header></article><header>Banner</header>', ("generic", "")),
    ('<div id="t" role="tab button" title="Tip">Tab one</div>', ("tab", "Tab one")),
    ('<table role="presentation"><tr><td id="t">cell</td></tr></table>', ("cell", "cell")),
    ('<ul role="none"><li id="t" role="menuitem"><a href="#">Open</a></li></ul>', ("menuitem", "Open")),
    # a canvas's fallback content (glide-data-grid's cells: Streamlit's st.dataframe) is shown, with
    # its name, though it has no box; a row named by its cells, one display:none cell left out
    ('<canvas width="200" height="50"><table role="grid"><tr id="t" role="row"><td role="gridcell">Jupiter</td>'
     '<td role="gridcell">95</td><td style="display:none">x</td></tr></table></canvas>', ("row", "Jupiter 95")),
    ('<div id="t" role="button"><canvas width="20" height="20"><span>Cell</span></canvas> Open</div>',
     ("button", "Cell Open")),
]


@pytest.fixture
def pw():
    """Playwright's sync API, per test (the demo pages' test runs the async one)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        yield p


def test_edge_cases(pw):
    from webfreeze.simulator.browser import launch_chromium, new_context

    mismatches: list = []
    wrong: list = []
    elements = 0
    browser = launch_chromium(pw, shell=True)
    try:
        page = new_context(browser).new_page()
        for i, (body, expected) in enumerate(EDGE_CASES):
            page.set_content(f"<!DOCTYPE html><html><head><title>case {i}</title></head><body>{body}</body></html>")
            count, tree = compare(page.evaluate(OBSERVE_AND_NAME), page.url, f"case {i}", mismatches)
            elements += count
            target = next((e for e in tree.summaries() if e["css"] == "#t"), None)
            got = (target["role"], target["name"]) if target else None
            if got != expected:
                wrong.append(f"case {i} {body[:60]!r}: the tree says {got!r}, expected {expected!r}")
    finally:
        browser.close()
    print(f"\naccessible-name parity: {len(EDGE_CASES)} edge cases, {elements} elements, {len(mismatches)} mismatches")
    assert not mismatches, report(mismatches)
    assert not wrong, "; ".join(wrong)


def test_the_recorder_logs_this_role_and_name(pw):
    """The listener the recorder injects names targets with this code, and its tables are the tree's."""
    from webfreeze.simulator.browser import launch_chromium, new_context

    assert ROLE_NAME_JS.strip() in LISTENER_JS
    browser = launch_chromium(pw, shell=True)
    try:
        page = new_context(browser).new_page()
        tables = page.evaluate("() => (" + ROLE_NAME_JS + ")().tables")
    finally:
        browser.close()
    assert tables["INPUT_ROLES"] == axtree.INPUT_ROLES
    assert tables["TAG_ROLES"] == axtree.TAG_ROLES
    for name in ("NAME_FROM_CONTENT", "BLOCK_TAGS", "SKIPPED_TAGS", "LANDMARK_SCOPES"):
        assert set(tables[name]) == set(getattr(axtree, name)), name
    assert set(tables["HIDDEN_TAGS"]) == set(axtree._HIDDEN_TAGS)
