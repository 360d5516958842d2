"""`replay check --mode direct` on the shipped demo archive: every page with a capture renders from
the archive at its direct URL with no miss and the text of its capture. The words the demo's page
script writes from the clock and Math.random (the crawl ran on the real ones, the replay on the
seeded runtime) are found by a probe load and set aside; anything else still counts, and a page
whose capture holds no text is reported as such, not as "similarity 0"."""

from __future__ import annotations

import json
import shutil

import pytest
from cli_runner import run_cli

from webfreeze.archives import Archive
from webfreeze.checks import replay_check
from webfreeze.checks.replay_check import stable_similarity, text_similarity, visible_text
from webfreeze.demo import ARCHIVE as DEMO
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))


def _demo_pages():
    """(ids of the demo's page records with capture text, how many records to check to cover them
    and a few without)."""
    with Archive.open(DEMO) as arc:
        rows = list(arc.pages())
        with_text = [p.id for p in rows if visible_text(p.payload() or b"")]
    order = [p.id for p in rows]
    return with_text, max(order.index(i) for i in with_text) + 4


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory):
    with_text, limit = _demo_pages()
    out = tmp_path_factory.mktemp("direct-check") / "report"
    r = run_cli("replay", "check", DEMO, "--mode", "direct", "--limit", str(limit), "--report", out, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr[-2000:]
    report = json.loads((out / "report.json").read_text())
    report["report_dir"] = out
    return with_text, report


@pytest.mark.slow
def test_every_demo_page_replays_in_direct_mode_exactly(demo_report):
    with_text, report = demo_report
    assert report["mode"] == "direct"
    pages = {p["id"]: p for p in report["pages"]}
    assert set(with_text) <= set(pages) and len(with_text) >= 10
    for p in pages.values():
        assert p["error"] is None and p["misses"] == [], p
    for i in with_text:
        # the capture's clock and random values stand where the replay has its own: set aside, and only those
        assert pages[i]["text_similarity"] == 1.0, pages[i]
        assert pages[i]["text_similarity_raw"] < 1.0 and 1 <= pages[i]["volatile_words"] <= 3, pages[i]
    no_text = [p for i, p in pages.items() if i not in with_text]
    assert no_text and all(p["text_similarity"] is None and p["volatile_words"] == 0 for p in no_text)
    s = report["summary"]
    assert s["missed_requests"] == 0 and s["pages_with_errors"] == 0 and s["min_text_similarity"] == 1.0
    assert s["pages_without_capture_text"] == len(no_text) and s["pages"] == len(pages)
    assert "no capture text" in replay_check.render_html(report)


@pytest.mark.slow
def test_a_real_difference_still_counts_in_direct_mode(tmp_path):
    """The same check with one page's capture changed (a word added to its text, besides its clock
    and token): the probe does not set that word aside."""
    with_text, _ = _demo_pages()
    target = with_text[1]
    with Archive.open(DEMO) as arc:
        rec = next(p for p in arc.pages() if p.id == target)
        page = {"id": rec.id, "url": rec.url, "title": rec.title, "captured_at": rec.captured_at,
                "extra": rec.extra, "screenshot": None, "loaded_at": replay_check._loaded_at(arc, rec)}
        dom = rec.payload()
    assert b"</main>" in dom
    tampered = dom.replace(b"</main>", b"<p>Tampered</p></main>", 1)  # one word more in the capture
    out, partial = tmp_path / "out", tmp_path / "partial"
    (partial / "pages").mkdir(parents=True)
    report = replay_check._check(DEMO, [page], {target: (tampered, None)}, out, partial, 0, None, None,
                                 mode="direct")
    got = report["pages"][0]
    assert got["volatile_words"] >= 1 and got["misses"] == [] and got["error"] is None, got
    assert 0.9 < got["text_similarity"] < 1.0, got  # the added word, and only it
    shutil.rmtree(out)


def test_stable_similarity_sets_aside_only_what_the_probe_changes():
    captured = "Rendered at 1000 token abc ; served 5 ; Hello world"
    replayed = "Rendered at 2000 token xyz ; served 5 ; Hello world"
    probe = "Rendered at 9000 token qqq ; served 5 ; Hello world"
    assert text_similarity(captured, replayed) < 1.0
    assert stable_similarity(captured, replayed, probe) == (1.0, 2)
    # a word the probe reproduces is no clock value: a difference there counts
    assert stable_similarity(captured.replace("served 5", "served 6"), replayed, probe)[0] < 1.0
    assert stable_similarity(captured.replace("world", "there"), replayed, probe)[0] < 1.0
    # a missing word next to a clock value is not absorbed by it
    sim, n = stable_similarity("Rendered at 1000 token abc extra ; served 5 ; Hello world", replayed, probe)
    assert sim < 1.0
    # a probe identical to the replay sets nothing aside
    assert stable_similarity(captured, replayed, replayed) == (text_similarity(captured, replayed), 0)


@pytest.mark.slow
def test_two_direct_checks_write_the_same_bytes(demo_report, tmp_path):
    """The probe (another seed, a shifted clock) leaves the check a pure function of the archive and
    the seed: a second check of the first pages writes the same report and snapshots."""
    _, first = demo_report
    n = 3
    out = tmp_path / "again"
    r = run_cli("replay", "check", DEMO, "--mode", "direct", "--limit", str(n), "--report", out, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr[-2000:]
    again = json.loads((out / "report.json").read_text())
    assert again["pages"] == first["pages"][:n]
    assert first["report_dir"] and all(
        (first["report_dir"] / p["dom"]).read_bytes() == (out / p["dom"]).read_bytes() for p in again["pages"])


STATE_PAGE = b"""<!doctype html><html><head><title>state</title></head><body><p>stateful</p><script>
const seen = [localStorage.getItem('seen') && 'storage', sessionStorage.getItem('seen') && 'session',
              document.cookie.includes('seen=1') && 'cookie'].filter(Boolean).join('-') || 'fresh';
localStorage.setItem('seen', '1'); sessionStorage.setItem('seen', '1');
document.cookie = 'seen=1; max-age=3600; path=/';
fetch('/state/' + seen).then((r) => r.text()).then((t) => { document.body.dataset.state = t; });
</script></body></html>"""


def test_pages_without_capture_text_share_a_tab_that_starts_each_page_afresh(tmp_path):
    """Direct mode loads the pages whose capture holds no text in one reused tab: each starts with
    no cookie and no storage of the page before (a page that finds either asks for a URL the archive
    lacks: a miss), and a page's misses are its own (the page after a missing one has none)."""
    from webfreeze.archives import Exchange, new_archive_atomically

    t0 = "2024-03-01T12:00:00Z"
    archive = tmp_path / "state.wfz"
    html = [("Content-Type", "text/html; charset=utf-8")]
    with new_archive_atomically(archive) as arc:
        sid = arc.new_session("test", source="test_direct_check")
        for url, body, headers in (("http://site.test/a", STATE_PAGE, html), ("http://site.test/b", STATE_PAGE, html),
                                   ("http://site.test/state/fresh", b"fresh", [("Content-Type", "text/plain")])):
            arc.add_exchange(Exchange(url=url, captured_at=t0, status=200, payload=body, resp_headers=headers,
                                      session_id=sid))
    urls = ["http://site.test/a", "http://site.test/b", "http://site.test/gone", "http://site.test/a"]
    pages = [{"id": i, "url": url, "title": "", "captured_at": t0, "extra": {"screenshot": "none"}, "screenshot": None,
              "loaded_at": t0} for i, url in enumerate(urls, 1)]
    out, partial = tmp_path / "out", tmp_path / "partial"
    (partial / "pages").mkdir(parents=True)
    report = replay_check._check(archive, pages, {p["id"]: (None, None) for p in pages}, out, partial, 0, None, None,
                                 mode="direct")
    got = [(p["url"], p["misses"], p["error"], p["text_similarity"]) for p in report["pages"]]
    assert [g[1] for g in got] == [[], [], [got[2][1][0]], []] and got[2][1][0].endswith("/http://site.test/gone"), got
    assert all(g[2] is None and g[3] is None for g in got), got
    # each page did load and ask for its state: the archive's answer is in its DOM
    doms = [(out / p["dom"]).read_text() for p in report["pages"]]
    assert [('data-state="fresh"' in d) for d in doms] == [True, True, False, True], doms


ORIGIN_PAGE = b"""<!doctype html><title>where</title><p id=o>?</p>
<script>document.getElementById('o').textContent = 'served from ' + location.origin + '/alice/';</script>"""


def test_a_page_that_prints_its_address_checks_the_same_twice(tmp_path):
    """In direct mode a page's address is the replay's (Radicale builds its collection URLs from
    ``location``): two checks on the same ``--port`` write the same bytes, the address included."""
    from pywb_tools import free_port

    from webfreeze.archives import Exchange

    archive = tmp_path / "where.wfz"
    with Archive.create(archive) as arc:
        sid = arc.new_session("crawl")
        arc.add_exchange(Exchange(url="http://cal.test/", captured_at="2024-05-01T10:00:00Z", status=200,
                                  resp_headers=[("Content-Type", "text/html; charset=utf-8")], payload=ORIGIN_PAGE,
                                  session_id=sid))
        arc.add_page(session_id=sid, url="http://cal.test/", captured_at="2024-05-01T10:00:01Z", title="where",
                     dom=ORIGIN_PAGE, extra={"screenshot": "none"})
    port = free_port()
    written = []
    for n in (1, 2):
        out = tmp_path / f"check-{n}"
        r = run_cli("replay", "check", archive, "--mode", "direct", "--port", str(port), "--report", out, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        (snapshot,) = (out / "pages").glob("*.replay.html")
        written.append((snapshot.read_bytes(), json.loads((out / "report.json").read_text())["pages"]))
    assert f"served from http://127.0.0.1:{port}/alice/".encode() in written[0][0]
    assert written[0] == written[1]


ROUTER_PAGE = b"""<!doctype html><html><head><title>Packages</title></head><body><main id="app"></main>
<script>
document.getElementById('app').textContent = location.pathname === '/'
  ? 'Packages: left-pad, tiny-router, color-names, and three more published this week'
  : "Sorry, we couldn't find it";
</script></body></html>"""
ROUTER_CAPTURE = ROUTER_PAGE.replace(b'<main id="app"></main>', b'<main id="app">Packages: left-pad, tiny-router, '
                                     b'color-names, and three more published this week</main>')


def test_a_page_that_routes_on_its_address_is_said_to_differ_in_direct_mode(tmp_path):
    """A client-side router (Verdaccio's) reads ``location.pathname``: at its direct URL it shows its
    not-found view, with no miss. The check says so in a warning line naming the page and proxy
    mode; in proxy mode the page is itself and nothing is said. The exit status counts misses."""
    from webfreeze.archives import Exchange

    archive = tmp_path / "spa.wfz"
    with Archive.create(archive) as arc:
        sid = arc.new_session("crawl")
        arc.add_exchange(Exchange(url="http://spa.test/", captured_at="2024-05-01T10:00:00Z", status=200,
                                  resp_headers=[("Content-Type", "text/html; charset=utf-8")], payload=ROUTER_PAGE,
                                  session_id=sid))
        arc.add_page(session_id=sid, url="http://spa.test/", captured_at="2024-05-01T10:00:01Z", title="Packages",
                     dom=ROUTER_CAPTURE, extra={"screenshot": "none"})
    for mode in ("direct", "proxy"):
        out = tmp_path / f"check-{mode}"
        r = run_cli("replay", "check", archive, "--mode", mode, "--report", out, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        (page,) = json.loads((out / "report.json").read_text())["pages"]
        warnings = [line for line in r.stderr.splitlines() if line.startswith("warning:")]
        if mode == "direct":
            assert page["misses"] == [] and page["text_similarity"] < 0.5, page
            assert len(warnings) == 1 and "1 page replays with other text than the capture" in warnings[0]
            assert "http://spa.test/" in warnings[0] and "check it in proxy mode" in warnings[0], warnings
        else:
            assert page["text_similarity"] == 1.0 and warnings == [], (page, r.stderr)


VITEPRESS_LIKE = ROUTER_PAGE.replace(b': "Sorry, we couldn\'t find it";',
                                     b': "Sorry, we couldn\'t find it";\nif (location.pathname !== \'/\') fetch(\'/hashmap.json\');')


def test_a_router_whose_not_found_view_misses_a_request_is_said_to_differ_too(tmp_path):
    """VitePress: at its direct URL the router shows its not-found view, which fetches
    ``/hashmap.json`` (never asked for live, so not captured). The page has a miss (exit status 1)
    and other text: the warning names it and proxy mode all the same (it was left out of the
    warning, and a check of 8 pages said only "8 with misses" and a low mean similarity)."""
    from webfreeze.archives import Exchange

    assert b"hashmap.json" in VITEPRESS_LIKE
    archive = tmp_path / "vp.wfz"
    with Archive.create(archive) as arc:
        sid = arc.new_session("crawl")
        arc.add_exchange(Exchange(url="http://vp.test/", captured_at="2024-05-01T10:00:00Z", status=200,
                                  resp_headers=[("Content-Type", "text/html; charset=utf-8")], payload=VITEPRESS_LIKE,
                                  session_id=sid))
        arc.add_page(session_id=sid, url="http://vp.test/", captured_at="2024-05-01T10:00:01Z", title="Packages",
                     dom=ROUTER_CAPTURE, extra={"screenshot": "none"})
    out = tmp_path / "check"
    r = run_cli("replay", "check", archive, "--mode", "direct", "--report", out, timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    (page,) = json.loads((out / "report.json").read_text())["pages"]
    assert [m.rsplit("/", 1)[1] for m in page["misses"]] == ["hashmap.json"] and page["text_similarity"] < 0.5, page
    warnings = [line for line in r.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "1 page replays with other text than the capture" in warnings[0], r.stderr
    assert "http://vp.test/" in warnings[0] and "check it in proxy mode" in warnings[0], warnings


def test_a_direct_check_takes_the_first_free_port_of_its_range(tmp_path, monkeypatch):
    """Without --port: the first port of DIRECT_PORTS that is free (one held here is passed over)."""
    import socket

    from pywb_tools import free_port

    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen(1)
    taken, free = held.getsockname()[1], free_port()
    monkeypatch.setattr(replay_check, "DIRECT_PORTS", [taken, free])
    try:
        server = replay_check._start_server(DEMO, "direct", 0, seed=0, miss_report=None, confdir=tmp_path)
    finally:
        held.close()
    try:
        assert server.port == free
    finally:
        server.stop()
