"""What an audit of the recording commands' error paths found: invalid URLs, session scripts that fail,
outputs that name an input, a damaged CA and a start URL that does not speak HTTP are one-line
errors that record nothing."""

from __future__ import annotations

import socket

import pytest
from cli_runner import assert_one_line_error


def test_session_script_errors_are_one_line(archive, tmp_path, cli):
    broken = tmp_path / "broken.py"
    broken.write_text("def run(page:\n")
    assert_one_line_error(cli("record", "session", "http://127.0.0.1:9/", "--archive", tmp_path / "s.wfz",
                              "--trajectory", tmp_path / "t.json", "--script", broken), contains="SyntaxError")
    assert not (tmp_path / "s.wfz").exists() and not (tmp_path / "t.json").exists()


@pytest.mark.parametrize("url, message", [("http://[::1", "not a valid URL"), ("http://a b/", "not a valid URL"),
                                          ("http://x:99999/", "not a valid URL"), ("ftp://x/", "not an http(s) URL")])
def test_recording_commands_refuse_invalid_urls(tmp_path, cli, url, message):
    """A bad start URL is a usage error (exit 2), before anything is made."""
    crawl = cli("record", "crawl", url, "--archive", tmp_path / "c.wfz")
    assert_one_line_error(crawl, code=2, contains=message)
    session = cli("record", "session", url, "--archive", tmp_path / "c.wfz", "--trajectory", tmp_path / "t.json",
                  "--headed")
    assert_one_line_error(session, code=2, contains=message)
    assert list(tmp_path.iterdir()) == []


def test_a_damaged_ca_is_one_line_and_records_nothing(archive, tmp_path, cli, monkeypatch):
    home = tmp_path / "home"
    (home / "mitmproxy").mkdir(parents=True)
    (home / "mitmproxy" / "mitmproxy-ca.pem").write_text("not a key\n")
    monkeypatch.setenv("WEBFREEZE_HOME", str(home))
    assert_one_line_error(cli("record", "ca"), contains="CA there cannot be read")
    assert_one_line_error(cli("replay", "serve", archive, "--port", "0", timeout=60),
                          contains="CA there cannot be read")
    with socket.socket() as s:  # a free port for the proxy that must not start
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert_one_line_error(cli("record", "proxy", "--archive", tmp_path / "p.wfz", "--port", str(port), timeout=60),
                          contains="CA there cannot be read")
    assert not (tmp_path / "p.wfz").exists()


def test_outputs_that_name_an_input_not_yet_there_or_a_script_are_refused(tmp_path, cli):
    script = tmp_path / "noop.py"
    script.write_text("def run(page):\n    pass\n")
    new = tmp_path / "new.wfz"  # the archive this session would create
    assert_one_line_error(cli("record", "session", "http://127.0.0.1:9/", "--archive", new, "--trajectory", new,
                              "--script", script), contains="which this command reads")
    assert_one_line_error(cli("record", "session", "http://127.0.0.1:9/", "--archive", new, "--trajectory", script,
                              "--script", script), contains="which this command reads")
    assert not new.exists() and script.read_text().startswith("def run")


def test_a_start_url_whose_server_does_not_speak_http_is_unreachable(tmp_path, cli):
    import threading

    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        srv.settimeout(300)  # (the crawl's probe comes once its proxy has started: slow on a loaded machine)

        def answer():  # one connection: a banner that is not HTTP
            conn, _ = srv.accept()
            with conn:
                conn.recv(1024)
                conn.sendall(b"SSH-2.0-OpenSSH_9.0\r\n")

        t = threading.Thread(target=answer, daemon=True)
        t.start()
        url = f"http://127.0.0.1:{srv.getsockname()[1]}/"
        assert_one_line_error(cli("record", "crawl", url, "--archive", tmp_path / "c.wfz"),
                              contains="does not speak HTTP")
        t.join(timeout=30)
    assert not (tmp_path / "c.wfz").exists()
