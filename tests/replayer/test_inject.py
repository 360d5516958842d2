"""Where the determinism runtime (and direct mode's shim) goes into a page: before anything of the
page can run, found by walking the document's start as a parser meets it. A ``<head>`` or
``<html>`` written inside a comment or a script's string is not the document's own: the runtime
put there broke the page's script (a string cut in two) or never ran (inside a comment)."""

from __future__ import annotations

import pytest

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.replayer.determinism import inject
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.env import EnvConfig, WebEnv

S = b"<script>RUNTIME</script>"


@pytest.mark.parametrize(("page", "expected"), [
    (b"<!doctype html><html><head><title>t</title>", b"<!doctype html><html><head>" + S + b"<title>t</title>"),
    (b"<!DOCTYPE html>\n<html lang='en'>\n  <head data-x=\"a>b\">\n<meta charset=utf-8>",
     b"<!DOCTYPE html>\n<html lang='en'>\n  <head data-x=\"a>b\">" + S + b"\n<meta charset=utf-8>"),
    # no <head> tag: the runtime goes where the content begins, not into the script's string
    (b"<!doctype html><html><body><script>var s = '<head>' + '<html>';</script>",
     b"<!doctype html><html>" + S + b"<body><script>var s = '<head>' + '<html>';</script>"),
    # a commented-out head is not the head
    (b"<!doctype html><!-- <head> old --><html><title>t</title><head></head>",
     b"<!doctype html><!-- <head> old --><html>" + S + b"<title>t</title><head></head>"),
    # a page script before <html>: the runtime still comes first
    (b"<script>window.a = Math.random();</script><html><head></head>",
     S + b"<script>window.a = Math.random();</script><html><head></head>"),
    (b"\xef\xbb\xbf<!doctype html><p>text <head> here", b"\xef\xbb\xbf<!doctype html>" + S + b"<p>text <head> here"),
    (b"<header>nav</header>", S + b"<header>nav</header>"),
    (b"<?xml version='1.0'?>\n<html xmlns='http://www.w3.org/1999/xhtml'><head/>",
     b"<?xml version='1.0'?>\n<html xmlns='http://www.w3.org/1999/xhtml'><head/>" + S),
    (b"<!-- never closed <head>", S + b"<!-- never closed <head>"),
    # the parser's short comments end at once: the runtime still goes before the page's script
    (b"<!--><html><head><script>a()</script><!-- x -->", b"<!--><html><head>" + S + b"<script>a()</script><!-- x -->"),
    (b"<!---><html><head>", b"<!---><html><head>" + S),
    (b"<!-- a --!><head>", b"<!-- a --!><head>" + S),
    (b"", S),
])
def test_the_runtime_goes_before_the_pages_first_content(page, expected):
    assert inject(page, S) == expected


SITE = "http://inject.test"
# No <head> tag (HTML allows leaving it out), and a script whose strings hold the tag names.
PAGE = b"""<!doctype html><html><title>Tags</title><body><p id="out">script did not run</p><script>
const tags = ['<head>', '<html lang="x">'];
document.getElementById('out').textContent = 'tags ' + tags.length + ' random ' + Math.random();
</script></body></html>"""


def _replayed_twice(tmp_path, path: str, ctype: str, payload: bytes) -> list[str]:
    """The environment's first observation (``axtree_text``) of ``SITE + path``, answered with
    ``payload`` typed ``ctype``, in two episodes."""
    try:
        chromium_path()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))
    archive = tmp_path / "inject.wfz"
    with new_archive_atomically(archive) as arc:
        sid = arc.new_session("test", source="test_inject")
        arc.add_exchange(Exchange(url=SITE + path, captured_at="2026-01-01T00:00:00Z", status=200, reason="OK",
                                  resp_headers=[("Content-Type", ctype)], payload=payload, session_id=sid))
    seen = []
    for _ in range(2):
        with WebEnv(EnvConfig(archive, backend="browser")) as env:
            obs, _ = env.reset(options={"task": {"id": "t", "start_url": SITE + path, "instruction": "read"}})
        seen.append(obs["axtree_text"])
    return seen


def test_a_page_writing_tag_names_in_a_script_replays_with_its_script_and_seeded(tmp_path):
    seen = [next(x for x in text.splitlines() if "tags 2 random" in x or "did not run" in x)
            for text in _replayed_twice(tmp_path, "/", "text/html; charset=utf-8", PAGE)]
    assert "tags 2 random 0." in seen[0], seen  # the script ran whole
    assert seen[0] == seen[1]  # and Math.random came from the seeded runtime

# XHTML served as XML: a parse error ends the page at the first '&&' or '<' of a script written bare
XHTML = b"""<?xml version="1.0" encoding="UTF-8"?>
<html xmlns="http://www.w3.org/1999/xhtml"><head><title>Strict</title></head><body><p id="out">script did not run</p>
<script>//<![CDATA[
document.getElementById('out').textContent = 'xml ok ' + (1 < 2 && 'random ' + Math.random());
//]]></script></body></html>"""


def test_an_xhtml_page_gets_the_runtime_in_a_cdata_section_and_still_parses(tmp_path):
    """The runtime's code holds ``&&`` and ``<``: written bare into a page the browser parses as XML
    (``application/xhtml+xml``), the page ended in "This page contains the following errors"; the
    replay put it there, and so would the recording browser's generator (recorder/addon.py)."""
    from lxml import etree

    from webfreeze.replayer.determinism import random_script

    for script in (random_script(7), b"<script>if (a && b < c) {}</script>"):
        doc = etree.fromstring(inject(XHTML, script, xml=True))
        first = doc.find("{http://www.w3.org/1999/xhtml}head/{http://www.w3.org/1999/xhtml}script")
        assert first.text.startswith("//") and script[8:-9].decode() in first.text
    with pytest.raises(etree.XMLSyntaxError):  # (what the page was given before)
        etree.fromstring(inject(XHTML, random_script(7)))
    seen = _replayed_twice(tmp_path, "/strict", "application/xhtml+xml", XHTML)
    assert "xml ok random 0." in seen[0] and "errors" not in seen[0], seen[0]
    assert seen[0] == seen[1]  # seeded
