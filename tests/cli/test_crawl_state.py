"""How ``record crawl`` says it ended (its summary's parentheses). A crawl cut by ``--max-pages``
whose pages were also incomplete said only "incomplete": the URLs left in its queue went unsaid,
and a user took the crawl for whole but for its misses (found on Wagtail's admin: 53 pages, 9 URLs
still queued)."""

from __future__ import annotations

from types import SimpleNamespace

from webfreeze.cli.record import _crawl_state


def _result(incomplete=(), failed=(), queued=0):
    return SimpleNamespace(incomplete=list(incomplete), failed=list(failed), queued=queued)


def test_a_crawl_cut_by_max_pages_says_so_beside_its_misses():
    cut = "stopped at --max-pages with 9 URLs queued; run again with a higher --max-pages to go on"
    missing = [("http://a.test/x", ["GET http://a.test/y"])]
    assert _crawl_state(_result(missing, queued=9), True) == f"incomplete: 1 page misses requests; {cut}"
    assert _crawl_state(_result(missing), True) == "incomplete: 1 page misses requests"
    assert _crawl_state(_result(queued=9), True) == cut
    assert _crawl_state(_result(), True) == "complete"
    assert _crawl_state(_result(), False) == "complete, unchecked"
    unloaded = _crawl_state(_result(failed=[("http://a.test/z", "did not load: timeout")], queued=2), True)
    assert unloaded.startswith("incomplete: 1 page did not load") and unloaded.endswith("with 2 URLs queued; run again "
                                                                                       "with a higher --max-pages to go on")
