"""A recording that went wrong can be dropped: ``archive sessions`` lists the capture sessions, and
``archive merge --skip-session ID`` writes a copy without one, its exchanges, pages and the
documents named after it (WebSocket conversations, the session's trajectory and DOM snapshots),
then removes the blobs nothing refers to. A crawl's session takes its archive's crawl resume
states with it; a live run's episode cannot be left out; an unknown id is a one-line error."""

from __future__ import annotations

import json

from cli_runner import assert_one_line_error

from webfreeze.archives import Archive, Exchange, new_archive_atomically


def _archive(path):
    """A crawl session (one page, a resume state) and two recorded sessions, the second of which
    went wrong (its own page, a payload nothing else has, a socket, a trajectory), and a live one."""
    ids = {}
    with new_archive_atomically(path) as arc:
        for name, kind in (("crawl", "crawl"), ("good", "session"), ("bad", "session"), ("live", "live")):
            sid = ids[name] = arc.new_session(kind, source=f"the {name} one")
            arc.add_exchange(Exchange(url=f"http://site.test/{name}", captured_at="2026-01-01T00:00:00Z", status=200,
                                      reason="OK", resp_headers=[("Content-Type", "text/html")],
                                      payload=f"<p>only the {name} page</p>".encode(), session_id=sid))
            arc.add_page(session_id=sid, url=f"http://site.test/{name}", captured_at="2026-01-01T00:00:01Z", title=name)
            if kind == "session":
                arc.put_document(f"websocket/{sid}/1.json", {"version": 1, "url": f"ws://site.test/{name}", "messages": []})
                arc.put_document(f"trajectories/{sid}.json", {"task": name})
                arc.put_document(f"dom-snapshots/{sid}.json", {"steps": [name]})
        arc.put_document("crawls/0123456789abcdef.json", {"start": "http://site.test/crawl", "done": 1})
    return ids


def _contents(path):
    with Archive.open(path) as arc:
        q = arc.conn.execute
        return ({r[0] for r in q("SELECT id FROM sessions")}, sorted(r[0] for r in q("SELECT url FROM exchanges")),
                sorted(r[0] for r in q("SELECT url FROM pages")), sorted(r[0] for r in q("SELECT name FROM documents")),
                {r[0] for r in q("SELECT digest FROM blobs")})


def test_a_session_that_went_wrong_is_left_out_of_a_copy(cli_here, tmp_path):
    source = tmp_path / "site.wfz"
    ids = _archive(source)
    listed = cli_here("archive", "sessions", source, "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {r["id"]: r for r in json.loads(listed.stdout)}
    assert {sid: (rows[sid]["kind"], rows[sid]["exchanges"], rows[sid]["pages"]) for sid in ids.values()} == {
        ids["crawl"]: ("crawl", 1, 1), ids["good"]: ("session", 1, 1), ids["bad"]: ("session", 1, 1),
        ids["live"]: ("live", 1, 1)}
    text = cli_here("archive", "sessions", source).stdout
    assert f"{ids['bad']}  session" in text and "the bad one" in text

    fixed = tmp_path / "fixed.wfz"
    r = cli_here("archive", "merge", source, "--into", fixed, "--skip-session", ids["bad"])
    assert r.returncode == 0, r.stderr
    assert "1 session left out" in r.stdout and "3 documents left out" in r.stdout, r.stdout
    sessions, urls, pages, docs, digests = _contents(fixed)
    assert sessions == {ids["crawl"], ids["good"], ids["live"]}
    assert urls == pages == ["http://site.test/crawl", "http://site.test/good", "http://site.test/live"]
    good = ids["good"]
    assert docs == sorted(["crawls/0123456789abcdef.json", f"dom-snapshots/{good}.json", f"trajectories/{good}.json",
                           f"websocket/{good}/1.json"])
    with Archive.open(source) as arc:
        (bad_payload,) = arc.conn.execute("SELECT payload FROM exchanges WHERE url='http://site.test/bad'").fetchone()
    assert bad_payload in _contents(source)[4] and bad_payload not in digests  # (its blob went with it)
    assert cli_here("archive", "verify", fixed).returncode == 0

    # a crawl's session takes the crawl's resume state with it
    no_crawl = tmp_path / "no-crawl.wfz"
    assert cli_here("archive", "merge", source, "--into", no_crawl, "--skip-session", ids["crawl"]).returncode == 0
    assert not [d for d in _contents(no_crawl)[3] if d.startswith("crawls/")]


def test_an_unknown_or_live_session_is_refused_and_nothing_is_written(cli_here, tmp_path):
    source = tmp_path / "site.wfz"
    ids = _archive(source)
    out = tmp_path / "out.wfz"
    assert_one_line_error(cli_here("archive", "merge", source, "--into", out, "--skip-session", "0000ffff0000ffff"),
                          contains="no session 0000ffff0000ffff")
    assert_one_line_error(cli_here("archive", "merge", source, "--into", out, "--skip-session", ids["live"]),
                          contains="live run's episode")
    assert not out.exists()
    # a session the destination already holds cannot be taken out by merging into it
    assert cli_here("archive", "merge", source, "--into", out).returncode == 0
    before = out.read_bytes()
    assert_one_line_error(cli_here("archive", "merge", source, "--into", out, "--skip-session", ids["bad"]),
                          contains=f"already holds session {ids['bad']}")
    assert out.read_bytes() == before
