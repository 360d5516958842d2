"""Text a web component draws in its own (open) shadow root is text the page shows. The crawl's DOM
snapshot and ``replay check``'s were Playwright's ``page.content()``, which leaves shadow roots
out, so the check compared two texts blind to it: a replay whose component showed something else
than the capture (or nothing) passed at similarity 1.0. Both now take the page's HTML with its open
shadow roots as declarative ones (``<template shadowrootmode="open">``), nested ones too, and the
check's visible text counts them (and no longer counts an inert ``<template>``'s elements)."""

from __future__ import annotations

import json
import os

import pytest
from cli_runner import run_cli
from static_site import static_site

from webfreeze.archives import Archive, Exchange, new_archive_atomically
from webfreeze.checks.replay_check import visible_text
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

# A price tag whose shadow root shows the price it fetched, and inside it a note with a shadow root
# of its own; an inert template beside them (never shown).
PAGE = b"""<!doctype html><html lang="en"><head><title>Shop</title></head><body><h1>Teapot</h1>
<price-tag></price-tag><template id="unused"><p>never shown</p></template><script>
customElements.define('price-note', class extends HTMLElement {
  connectedCallback() { this.attachShadow({mode: 'open'}).innerHTML = '<small>incl. VAT</small>'; }
});
customElements.define('price-tag', class extends HTMLElement {
  connectedCallback() {
    const root = this.attachShadow({mode: 'open'});
    root.innerHTML = '<style>b { color: green }</style><b>loading</b>';
    fetch('/price.json').then((r) => r.json()).then((p) => {
      root.innerHTML = '<b>price ' + p.amount + ' EUR</b> <price-note></price-note>';
    });
  }
});
</script></body></html>"""
PRICE = b'{"amount": 42}'


@pytest.fixture
def shop():
    with static_site({"/": PAGE, "/price.json": (PRICE, "application/json")}) as port:
        yield port


def test_the_crawl_keeps_shadow_roots_and_the_check_compares_their_text(tmp_path, shop, cli):
    env = dict(os.environ, WEBFREEZE_HOME=str(tmp_path / "home"))
    archive = tmp_path / "shop.wfz"
    r = cli("record", "crawl", "http://shop.test/", "--resolve", f"shop.test=127.0.0.1:{shop}",
            "--archive", archive, "--depth", "0", "--screenshots", "none", timeout=300, env=env)
    assert r.returncode == 0 and "(complete)" in r.stdout, r.stdout + r.stderr
    with Archive.open(archive) as arc:
        (page,) = arc.pages()
        dom = page.dom().decode("utf-8")
    assert dom.count('<template shadowrootmode="open">') == 2, dom  # the tag's root and, inside it, the note's
    assert page.extra["shadow_roots"] is True
    assert visible_text(dom).endswith("Teapot price 42 EUR incl. VAT"), visible_text(dom)
    r = run_cli("replay", "check", archive, "--report", tmp_path / "report",
                env=env, timeout=300)
    (checked,) = json.loads((tmp_path / "report" / "report.json").read_text())["pages"]
    assert checked["text_similarity"] == 1.0 and checked["misses"] == [], checked
    assert r.returncode == 0, r.stdout + r.stderr


# the capture's shadow roots as the crawl's snapshot holds them: the tag showed 42 EUR
CAPTURED = PAGE.decode().replace(
    "<price-tag></price-tag>", '<price-tag><template shadowrootmode="open"><b>price 42 EUR</b> <price-note>'
    '<template shadowrootmode="open"><small>incl. VAT</small></template></price-note></template></price-tag>')


@pytest.mark.parametrize("record", ["with-shadow-roots", "older-record"])
def test_a_replay_whose_component_shows_something_else_is_not_a_perfect_match(tmp_path, record):
    """The archive's price answers 40, so the replayed tag shows 40 EUR. Blind to shadow roots, the
    check found the two pages' texts identical. A page record from before snapshots held shadow
    roots (no ``shadow_roots`` in its ``extra``) is compared as it was taken: without them."""
    site = "http://shop.test"
    archive = tmp_path / "shop.wfz"
    new = record == "with-shadow-roots"
    with new_archive_atomically(archive) as arc:
        sid = arc.new_session("test", source="test_check_shadow_dom")
        for rel, ctype, body in (("/", "text/html; charset=utf-8", PAGE), ("/price.json", "application/json",
                                                                          b'{"amount": 40}')):
            arc.add_exchange(Exchange(url=site + rel, captured_at="2026-01-01T00:00:00Z", status=200, reason="OK",
                                      resp_headers=[("Content-Type", ctype)], payload=body, session_id=sid))
        arc.add_page(session_id=sid, url=site + "/", captured_at="2026-01-01T00:00:01Z", title="Shop",
                     dom=(CAPTURED if new else PAGE.decode()).encode(),
                     extra={"complete": True, **({"shadow_roots": True} if new else {})})
    run_cli("replay", "check", archive, "--report", tmp_path / "report",
            env=dict(os.environ, WEBFREEZE_HOME=str(tmp_path / "home")), timeout=300)
    (checked,) = json.loads((tmp_path / "report" / "report.json").read_text())["pages"]
    assert checked["misses"] == [], checked  # answered, from the archive
    if new:
        assert 0.5 < checked["text_similarity"] < 1.0, checked  # but not what the capture showed
        assert "price 40 EUR" in (tmp_path / "report" / checked["dom"]).read_text()
    else:
        assert checked["text_similarity"] == 1.0, checked
        assert "shadowrootmode" not in (tmp_path / "report" / checked["dom"]).read_text()


def test_drift_compares_an_older_snapshot_without_the_newer_one_s_shadow_roots():
    from webfreeze.checks.drift import compare_pages

    plain = {"dom": PAGE, "shot": None, "title": "Shop", "shadow": False}
    shadowed = {"dom": CAPTURED.encode(), "shot": None, "title": "Shop", "shadow": True}
    (row,) = compare_pages({"u": plain}, {"u": shadowed})
    assert (row["status"], row["text_similarity"]) == ("same", 1.0), row
    (row,) = compare_pages({"u": {**plain, "dom": CAPTURED.replace("42", "40").encode(), "shadow": True}},
                           {"u": shadowed})
    assert row["status"] == "changed" and row["text_similarity"] < 1.0, row


def test_an_inert_template_is_not_text_and_a_shadow_root_is():
    html = ('<html><body><p>one</p> <x-a><template shadowrootmode="open"><style>p{}</style><b>two</b></template>'
            '</x-a> <template><i>never</i> shown</template> three</body></html>')
    assert visible_text(html) == "one two three"


def test_visible_text_sets_blocks_apart_so_one_changed_cell_is_one_changed_word():
    """A table a script builds without whitespace between its cells (Bokeh's DataTable, in a shadow
    root) read as one long word: one changed cell and twelve changed cells gave the same similarity.
    Block elements (and ``br``) are set apart, as in the observation's text; inline ones join."""
    from webfreeze.checks.replay_check import text_similarity

    def grid(cells):
        rows = "".join("<div class=row>" + "".join(f"<div>{c}</div>" for c in row) + "</div>" for row in cells)
        return f"<html><body><p>Stock</p><template shadowrootmode=open>{rows}</template></body></html>"

    cells = [["Anvil", "red", "3"], ["Bracket", "green", "14"], ["Cobalt", "blue", "15"], ["Dynamo", "amber", "9"]]
    assert visible_text(grid(cells)) == "Stock Anvil red 3 Bracket green 14 Cobalt blue 15 Dynamo amber 9"
    one = [row[:] for row in cells]
    one[2][0] = "Cerulean"
    every = [[c + "x" for c in row] for row in cells]
    assert text_similarity(visible_text(grid(cells)), visible_text(grid(one))) > \
        text_similarity(visible_text(grid(cells)), visible_text(grid(every)))
    # inline elements join their neighbours; comments are no text and cut no word; a cell is a block
    assert visible_text("<p>a<b>Bo</b>ld<!-- note -->er</p><table><tr><td>1</td><td>2</td></tr></table>x<br>y") == \
        "aBolder 1 2 x y"
