"""Direct mode's rewriting (replayer/rewrite.py) on its own and through the server: every URL a
page names points into the archive's URL space, every other byte is as archived, ``id_`` keeps
the archived bytes, and every direct-mode answer carries the seal's headers."""

from __future__ import annotations

import gzip
import urllib.error
import urllib.request

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.replayer.rewrite import SEAL_CSP, UrlRewriter, rewrite_css, rewrite_html
from webfreeze.replayer.server import ReplayServer

TS = "20240301120000"
T0 = "2024-03-01T12:00:00Z"
PAGE = "https://site.test/dir/page.html"


def test_url_values_move_into_the_archive():
    rw = UrlRewriter(TS, PAGE)
    assert rw("http://cdn.test/a.png") == f"/{TS}/http://cdn.test/a.png"
    assert rw("  https://cdn.test/a.png") == f"  /{TS}/https://cdn.test/a.png"
    assert rw("//cdn.test/x.js") == f"/{TS}/https://cdn.test/x.js"
    assert rw("/root/x.css") == f"/{TS}/https://site.test/root/x.css"
    assert rw("ws://127.0.0.1:9/s") == f"/{TS}/ws://127.0.0.1:9/s"
    for same in ("img/a.png", "../b", "?q=1", "#top", "data:image/png;base64,AA", "javascript:void(0)",
                 "mailto:a@b.test", f"/{TS}/http://already.test/", ""):
        assert rw(same) is None, same


def test_urls_a_browser_reads_as_another_host_are_rewritten():
    """What a browser's URL parser takes for another host (it drops tabs and newlines, trims C0
    controls, reads a backslash as a slash, lets ``scheme:`` stand without slashes) moves into the
    archive too; nothing is left that would resolve outside it."""
    rw = UrlRewriter(TS, PAGE)
    for written, host in (("\\\\evil.test/x", "https://evil.test/x"), ("/\\evil.test/x", "https://evil.test/x"),
                          ("\\/evil.test/x", "https://evil.test/x"), ("/\t/evil.test/x", "https://evil.test/x"),
                          ("ht\ttps://evil.test/x", "https://evil.test/x"), ("\x01//evil.test/x", "https://evil.test/x"),
                          ("http:evil.test/x", "http://evil.test/x"), ("http:/evil.test/x", "http://evil.test/x"),
                          ("https:\\\\evil.test/x", "https://evil.test/x"), ("https:/\\evil.test/x", "https://evil.test/x"),
                          ("wss:evil.test/s", "wss://evil.test/s")):
        assert rw(written) == f"/{TS}/{host}", written
    # the page's own scheme without slashes is a path on the page's host, as on the live site
    assert rw("https:other.html") == f"/{TS}/https://site.test/dir/other.html"
    assert rw("https:/root.html") == f"/{TS}/https://site.test/root.html"
    assert rw("\\root.html") == f"/{TS}/https://site.test/root.html"


def test_html_is_rewritten_in_place_and_nothing_else_changes():
    html = (
        '<!doctype html><html><head><base href="/base/">'
        '<meta http-equiv="refresh" content="5; url=http://127.0.0.1:9/refresh">'
        '<meta http-equiv="Content-Security-Policy" content="default-src https://site.test">'
        '<link rel=stylesheet href=//cdn.test/s.css integrity="sha384-x">'
        '<link rel="preconnect" href="http://[::1]:9">'
        '<style>@import "http://localhost:9/i.css"; /* url(http://kept.test/c) */ '
        "body{background:url( '/bg.png' )} .x{content:'url(http://kept.test/s)'}</style>"
        "</head><body style=\"background-image:url(http://cdn.test/b.png)\">"
        '<p>caf\xc3\xa9 &amp; text http://not-a-link.test/</p>'
        '<img src="http://cdn.test/a.png" srcset="http://cdn.test/a1.png 1x, /a2.png 2x,rel.png 3x">'
        "<a href='/next?x=1&amp;y=2' ping=\"http://127.0.0.1:9/ping /p2\">next</a>"
        '<form action="https://site.test/search"><input name=q></form>'
        '<iframe src="http://localhost:9/frame"></iframe><img src="rel/a.png">'
        "<script>var u = 'http://in-script.test/';</script></body></html>"
    ).encode("latin-1")
    out = rewrite_html(html, TS, PAGE).decode("latin-1")
    base = "https://site.test"
    for expected in (
        f'<base href="/{TS}/{base}/base/">',
        f'content="5; url=/{TS}/http://127.0.0.1:9/refresh"',
        'http-equiv="x-archived-Content-Security-Policy"',
        f'href="/{TS}/https://cdn.test/s.css" data-archived-integrity="sha384-x"',
        f'href="/{TS}/http://[::1]:9"',
        f'@import "/{TS}/http://localhost:9/i.css";',
        "/* url(http://kept.test/c) */",  # comments and strings are not URLs
        f"background:url( '/{TS}/{base}/bg.png' )",  # (the <base> came before: its origin is the same)
        "content:'url(http://kept.test/s)'",
        f'style="background-image:url(/{TS}/http://cdn.test/b.png)"',
        "<p>caf\xc3\xa9 &amp; text http://not-a-link.test/</p>",
        f'srcset="/{TS}/http://cdn.test/a1.png 1x, /{TS}/{base}/a2.png 2x,rel.png 3x"',
        f"href='/{TS}/{base}/next?x=1&amp;y=2'",
        f'ping="/{TS}/http://127.0.0.1:9/ping /{TS}/{base}/p2"',
        f'action="/{TS}/{base}/search"',
        f'src="/{TS}/http://localhost:9/frame"',
        '<img src="rel/a.png">',
        "var u = 'http://in-script.test/';",  # scripts are the shim's
    ):
        assert expected in out, expected
    # every byte outside the rewritten values is as archived
    assert out.count("<") == html.decode("latin-1").count("<")


def test_the_text_of_a_textarea_or_title_is_left_as_written():
    """What looks like a tag inside <textarea>, <title>, <xmp> or an <iframe>'s fallback is text to a
    browser (shown as written): not rewritten; the elements' own attributes are."""
    html = ('<html><head><title>see <a href="http://x.test/t"></title></head><body>'
            '<textarea name=t><img src="http://cdn.test/a.png"></textarea>'
            '<iframe src="http://x.test/f">fallback <a href="http://y.test/"></iframe>'
            '<xmp><a href="/kept"></xmp><a href="/after">after</a></body></html>').encode()
    out = rewrite_html(html, TS, PAGE).decode()
    for kept in ('<title>see <a href="http://x.test/t"></title>', '<img src="http://cdn.test/a.png"></textarea>',
                 'fallback <a href="http://y.test/"></iframe>', '<xmp><a href="/kept"></xmp>'):
        assert kept in out, kept
    assert f'<iframe src="/{TS}/http://x.test/f">' in out
    assert f'<a href="/{TS}/https://site.test/after">' in out


def test_css_scanner_reads_tokens_not_text():
    css = ("@import url(/a.css) screen; @IMPORT 'http://x.test/b.css';\n"
           "a{b:URL(\"//c.test/c.png\")} d{e:my-url(/kept)} /* @import '/kept' */ f{g:'/kept'}")
    out = rewrite_css(css, UrlRewriter(TS, "http://s.test/css/main.css"))
    assert out == (f"@import url(/{TS}/http://s.test/a.css) screen; @IMPORT '/{TS}/http://x.test/b.css';\n"
                   f"a{{b:URL(\"/{TS}/http://c.test/c.png\")}} d{{e:my-url(/kept)}} /* @import '/kept' */ f{{g:'/kept'}}")


def _archive(path):
    page = (b"<html><head><title>t</title><link rel=stylesheet href=/s.css></head><body>"
            b"<a href=http://other.test/x>x</a><img src=/i.png></body></html>")
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_seal_rewrite")
        for url, ctype, body, extra in (
            ("http://site.test/", "text/html", gzip.compress(page), [("Content-Encoding", "gzip")]),
            ("http://site.test/s.css", "text/css", b"body{background:url(/bg.png)}", []),
            ("http://site.test/old", "text/html", b"moved", [("Location", "http://site.test/")]),
            ("http://site.test/refresh", "text/plain", b"r", [("Refresh", "0; http://other.test/away")]),
        ):
            arc.add_exchange(Exchange(url=url, captured_at=T0, status=302 if url.endswith("old") else 200, session_id=sid,
                                      payload=body, resp_headers=[("Content-Type", ctype), *extra,
                                                                  ("Link", "<http://cdn.test/>; rel=preconnect")]))
    return path


def _get(url, headers=None):
    req = urllib.request.Request(url, headers=headers or {})
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(req, timeout=10) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *a, **kw):
        return None


def test_server_rewrites_seals_and_keeps_identity(tmp_path):
    archive = _archive(tmp_path / "a.wfz")
    with ReplayServer(archive, mode="direct", miss_report=None) as srv:
        status, headers, body = _get(f"{srv.url}/{TS}/http://site.test/")
        assert status == 200 and "content-encoding" not in headers
        assert headers["Content-Security-Policy"] == SEAL_CSP and headers["X-DNS-Prefetch-Control"] == "off"
        assert "Link" not in headers
        assert b'data-webfreeze="seal"' in body  # the shim
        # (an unquoted value that is rewritten comes back quoted)
        assert f'href="/{TS}/http://site.test/s.css"'.encode() in body
        assert f'href="/{TS}/http://other.test/x"'.encode() in body
        assert f'src="/{TS}/http://site.test/i.png"'.encode() in body
        assert int(headers["Content-Length"]) == len(body)
        again = _get(f"{srv.url}/{TS}/http://site.test/")[2]
        assert again == body  # (from the rewrite cache: the same bytes)
        status, headers, css = _get(f"{srv.url}/{TS}/http://site.test/s.css")
        assert css == f"body{{background:url(/{TS}/http://site.test/bg.png)}}".encode()
        # identity: the archived bytes (still gzip-coded), sealed all the same
        status, headers, raw = _get(f"{srv.url}/{TS}id_/http://site.test/")
        assert gzip.decompress(raw).startswith(b"<html><head><title>t</title><link rel=stylesheet href=/s.css>")
        assert headers["Content-Security-Policy"] == SEAL_CSP
        # a redirect stays inside the archive, in the form it was asked in
        status, headers, _ = _get(f"{srv.url}/{TS}id_/http://site.test/old")
        assert status == 302 and headers["Location"] == f"/{TS}id_/http://site.test/"
        status, headers, _ = _get(f"{srv.url}/{TS}/http://site.test/old")
        assert status == 302 and headers["Location"] == f"/{TS}/http://site.test/"
        # so does a Refresh header, with its "url=" or without it (browsers read both)
        status, headers, _ = _get(f"{srv.url}/{TS}/http://site.test/refresh")
        assert status == 200 and headers["Refresh"] == f"0; /{TS}/http://other.test/away"
        # a root-relative request that escaped the rewriting follows its page's Referer
        status, headers, _ = _get(f"{srv.url}/api/x?y=1", {"Referer": f"{srv.url}/{TS}/http://site.test/"})
        assert status == 307 and headers["Location"] == f"/{TS}/http://site.test/api/x?y=1"
        status, headers, _ = _get(f"{srv.url}/api/x")
        assert status == 404 and headers["X-Webfreeze-Miss"] == "1" and headers["Content-Security-Policy"]
        # service workers are refused
        status, headers, _ = _get(f"{srv.url}/{TS}/http://site.test/s.css", {"Service-Worker": "script"})
        assert status == 403


def test_a_page_fetched_first_by_a_script_still_gets_the_runtime_as_a_document(tmp_path):
    """Direct mode keeps each page's rewritten answer; the key left out whether it got the
    determinism runtime (a document's answer does, a fetch's of the same URL does not). A `curl`
    first (`Accept: */*`: no runtime) left a browser's later visit without it (Solara then drew
    another kernel id on each load), and the other way round a fetch got a document's runtime."""
    import http.client

    path = tmp_path / "d.wfz"
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_seal_rewrite")
        arc.add_exchange(Exchange(url="http://order.test/", captured_at="2026-01-01T00:00:00Z", status=200,
                                  reason="OK", resp_headers=[("Content-Type", "text/html")], session_id=sid,
                                  payload=b"<html><body><p>page</p></body></html>"))

    def has_runtime(port: int, ts: str, headers: dict) -> bool:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", f"/{ts}/http://order.test/", headers=headers)
        body = conn.getresponse().read()
        conn.close()
        return b"__wfRuntime" in body

    fetch, document = {"Accept": "*/*"}, {"Accept": "text/html", "Sec-Fetch-Dest": "document"}
    with ReplayServer(path, mode="direct", port=0, miss_report=None, confdir=tmp_path / "ca") as srv:
        assert [has_runtime(srv.port, "2031", h) for h in (fetch, document, fetch)] == [False, True, False]
        assert [has_runtime(srv.port, "2032", h) for h in (document, fetch, document)] == [True, False, True]
