"""What an audit of the replay commands' error paths found: ``replay check`` never wipes a folder that is
not its report, a miss report is never the rules file, bad rules and busy ports are one line, and
what a damaged or odd archive holds still replays or fails in one logged line."""

from __future__ import annotations

import json
import socket

import pytest
from cli_runner import assert_one_line_error
from guards import archive_with_a_corrupt_blob, digest


def test_replay_check_never_replaces_a_folder_that_is_not_a_report(archive, tmp_path, cli):
    before = digest(archive)
    # the folder holding the archive (it used to be wiped, archive included)
    assert_one_line_error(cli("replay", "check", archive, "--report", tmp_path),
                          contains="holds no replay check report")
    other = tmp_path / "notes"
    other.mkdir()
    (other / "precious.txt").write_text("keep me")
    assert_one_line_error(cli("replay", "check", archive, "--report", other), contains="not empty")
    assert (other / "precious.txt").read_text() == "keep me"
    assert_one_line_error(cli("replay", "check", archive, "--report", "/dev/null"), contains="not a directory")
    assert_one_line_error(cli("replay", "check", archive, "--report", ".", cwd=tmp_path), contains="not empty")
    assert digest(archive) == before
    # an empty folder is fine: the check goes on (and stops here on the archive, which has no pages)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_one_line_error(cli("replay", "check", archive, "--report", empty), contains="no page records")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_replay_serve_refuses_a_bad_miss_report_before_serving(archive, tmp_path, cli):
    before = digest(archive)
    assert_one_line_error(cli("replay", "serve", archive, "--port", "0", "--miss-report", archive, timeout=60),
                          contains="which this command reads")
    assert_one_line_error(cli("replay", "serve", archive, "--port", "0", "--miss-report", tmp_path / "no" / "m.jsonl",
                              timeout=60), contains="no such directory")
    assert digest(archive) == before


@pytest.mark.parametrize("rules, message", [
    ({"bogus": 1}, "unknown replay rule"),
    ({"drop_prefixes": [1, 2]}, "list of strings"),
    ({"fuzzy_threshold": "abc"}, "number from 0 to 1"),
    ({"fuzzy": "yes"}, "true or false"),
])
def test_bad_replay_rules_are_refused_when_set_and_when_served(archive, tmp_path, cli, rules, message):
    rules_file = tmp_path / "rules.json"
    rules_file.write_text(json.dumps(rules))
    assert_one_line_error(cli("replay", "serve", archive, "--port", "0", "--rules", rules_file, timeout=60),
                          contains=message)
    assert_one_line_error(cli("archive", "meta", archive, "--set", f"replay_rules={json.dumps(rules)}"), code=2,
                          contains=message)
    shown = json.loads(cli("archive", "meta", archive).stdout)
    assert shown["replay_rules"] == {}


def test_port_in_use_is_one_line(archive, cli):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert_one_line_error(cli("replay", "serve", archive, "--port", str(port), timeout=60), contains=str(port))


def test_replay_of_a_corrupt_blob_is_a_one_line_log_and_a_500(tmp_path, caplog):
    import logging
    import urllib.error
    import urllib.request

    from webfreeze.replayer.server import ReplayServer

    target = archive_with_a_corrupt_blob(tmp_path / "c.wfz")
    with caplog.at_level(logging.ERROR), ReplayServer(target, mode="direct", port=0) as srv:
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"{srv.url}/2024id_/http://example.com/", timeout=30)
        assert err.value.code == 500 and b"corrupt" in err.value.read()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info is None and "corrupt" in errors[0].getMessage()


def test_an_archive_holding_a_malformed_url_still_replays(tmp_path, cli):
    import urllib.request

    from webfreeze.archives import Archive
    from webfreeze.archives.store import Exchange
    from webfreeze.replayer.server import ReplayServer

    target = tmp_path / "u.wfz"
    with Archive.create(target) as arc:
        sid = arc.new_session("crawl")
        for url in ("http://[::1", "http://ok.example/"):
            arc.add_exchange(Exchange(url=url, captured_at="2024-01-01T00:00:00Z", status=200,
                                      resp_headers=[("Content-Type", "text/plain")], payload=url.encode(),
                                      session_id=sid))
    with ReplayServer(target, mode="direct", port=0) as srv:
        with urllib.request.urlopen(f"{srv.url}/2024id_/http://ok.example/", timeout=30) as resp:
            assert resp.read() == b"http://ok.example/"


def test_replay_check_may_replace_an_earlier_report(archive, tmp_path, cli):
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / "report.json").write_text(json.dumps({"format": "webfreeze-replay-check"}))
    # accepted as a report folder: the check goes on (and stops on the archive, which has no pages)
    assert_one_line_error(cli("replay", "check", archive, "--report", earlier), contains="no page records")
    assert (earlier / "report.json").exists()


def test_rules_accept_what_they_always_meant_and_overrides_mend_stored_ones(archive, tmp_path, cli):
    from webfreeze.archives import Archive
    from webfreeze.replayer.server import ReplayError, ReplayServer

    good = {"fuzzy_threshold": 1, "fuzzy": 0, "underscore_weight": 2, "drop_params": ["sid"]}
    assert cli("archive", "meta", archive, "--set", f"replay_rules={json.dumps(good)}").returncode == 0
    with ReplayServer(archive, mode="direct", port=0) as srv:
        assert srv.rules.fuzzy is False and srv.rules.underscore_weight == 2.0 and srv.rules.drop_params == ("sid",)
    with Archive.open(archive, write=True) as arc:  # stored by an older version, before the checks
        arc.set_meta("replay_rules", {"fuzzy_threshold": "high"})
    with pytest.raises(ReplayError, match="the archive's replay_rules"):
        ReplayServer(archive, mode="direct", port=0).start()
    with ReplayServer(archive, mode="direct", port=0, rules={"fuzzy_threshold": 0.7}) as srv:
        assert srv.rules.fuzzy_threshold == 0.7


def test_miss_report_is_never_the_rules_file(archive, tmp_path, cli):
    rules = tmp_path / "rules.json"
    rules.write_text("{}")
    assert_one_line_error(cli("replay", "serve", archive, "--port", "0", "--rules", rules, "--miss-report", rules,
                              timeout=60), contains="which this command reads")
    assert rules.read_text() == "{}"
