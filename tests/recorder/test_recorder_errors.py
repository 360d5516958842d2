"""The recorder's errors (recorder/errors.py): a crawl whose start page fails raises ``SeedFailed``, and
every recorder error that reaches the CLI is one line with a non-zero exit."""

from __future__ import annotations

import socket

import pytest
from cli_runner import assert_one_line_error

from webfreeze.archives import ArchiveError


# ------------------------------------------------------------------------------ at the CLI
@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def dead_port() -> int:
    """A loopback port nothing listens on once the socket is closed."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_crawl_whose_start_page_fails_raises_seed_failed(tmp_path, home):
    """The seed is probed through the proxy before any browser starts: no Chromium needed."""
    pytest.importorskip("mitmproxy")
    pytest.importorskip("playwright")
    from webfreeze.recorder.crawl import crawl
    from webfreeze.recorder.errors import CrawlError, RecordError, SeedFailed

    with pytest.raises(SeedFailed, match="unreachable") as caught:
        crawl(tmp_path / "a.wfz", f"http://127.0.0.1:{dead_port()}/")
    assert isinstance(caught.value, CrawlError) and isinstance(caught.value, RecordError)
    assert not isinstance(caught.value, ArchiveError)
    assert not (tmp_path / "a.wfz").exists()  # the archive it made is removed again


def test_recorder_errors_at_the_cli_are_one_line(tmp_path, home, cli, monkeypatch):
    pytest.importorskip("mitmproxy")
    pytest.importorskip("playwright")
    # SeedFailed: a start page that does not answer
    assert_one_line_error(cli("record", "crawl", f"http://127.0.0.1:{dead_port()}/", "--archive", tmp_path / "a.wfz"),
                          contains="unreachable")
    # ... and a --resolve that names another host than the start URL's says so
    assert_one_line_error(cli("record", "crawl", "http://typo.test/", "--resolve", f"other.test=127.0.0.1:{dead_port()}",
                              "--archive", tmp_path / "r.wfz"),
                          contains="; --resolve names other.test, not typo.test")
    # ProxyError: a port another socket holds
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        assert_one_line_error(cli("record", "proxy", "--archive", tmp_path / "p.wfz", "--port", port),
                              contains="port already in use")
    # SessionScriptError: a script that is not there
    assert_one_line_error(cli("record", "session", "http://127.0.0.1:9/", "--archive", tmp_path / "s.wfz",
                              "--trajectory", tmp_path / "t.json", "--script", tmp_path / "gone.py"),
                          contains="no such script")
    # a bad --resolve entry is still a usage error
    assert_one_line_error(cli("record", "crawl", "http://scholar.test/", "--archive", tmp_path / "c.wfz",
                              "--resolve", "scholar.test"), code=2, contains="expected HOST=ADDRESS:PORT")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]  # no archive, no trajectory left behind
