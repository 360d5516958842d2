"""Guards that hold across commands: a group named alone shows its help, a bad value on any command line
is a usage error pointing at that command's help, and no output names what the command reads. Each
stage's own guards are beside its tests (tests/archives/test_archive_guards.py, tests/replayer/
test_replay_guards.py, tests/recorder/test_record_guards.py, tests/runs/test_bench_guards.py)."""

from __future__ import annotations

import hashlib

from cli_runner import assert_one_line_error


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_show_and_session_outputs_never_overwrite_the_archive(archive, tmp_path, cli_here):
    before = digest(archive)
    assert_one_line_error(cli_here("archive", "show", archive, "--id", "1", "-o", archive),
                          contains="which this command reads")
    assert_one_line_error(cli_here("archive", "show", archive, "--id", "1", "-o", tmp_path / "no" / "body"),
                          contains="no such directory")
    script = tmp_path / "noop.py"
    script.write_text("def run(page):\n    pass\n")
    assert_one_line_error(cli_here("record", "session", "http://127.0.0.1:9/", "--archive", archive,
                                   "--trajectory", archive, "--script", script), contains="which this command reads")
    assert digest(archive) == before
    # an ordinary output file is (re)written whole
    out = tmp_path / "body.html"
    out.write_text("old")
    r = cli_here("archive", "show", archive, "--id", "1", "-o", out)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() != b"old" and out.stat().st_size > 0
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_a_command_group_named_alone_shows_its_help(cli):
    for args in ((), ("replay",), ("archive",)):
        proc = cli(*args)
        assert proc.returncode == 2 and proc.stderr.startswith("Usage: webfreeze") and "Commands:" in proc.stderr


def test_bad_option_values_are_usage_errors(archive, tmp_path, cli_here):
    """Mistakes on the command line exit with status 2 and point at --help (some exited 1)."""
    url = "http://127.0.0.1:9/"
    cases = [
        (("archive", "ls", archive, "--since", "garbage"), "bad timestamp 'garbage'"),
        (("archive", "ls", archive, "--until", "2014-13"), "bad timestamp '2014-13'"),
        (("archive", "ls", archive, "--until", "2014-02-30"), "bad timestamp '2014-02-30'"),
        (("archive", "ls", archive, "--until", "9999-12-31T23:30-01:00"), "outside the years 1 to 9999"),
        (("archive", "ls", archive, "--since", "\uff12\uff10\uff11\uff14-02"), "bad timestamp"),
        (("archive", "show", archive, "http://www.iana.org/", "--at", "yesterday"), "bad timestamp"),
        (("replay", "serve", archive, "--at", "garbage"), "bad timestamp 'garbage'"),
        (("record", "crawl", url, "--archive", tmp_path / "c.wfz", "--scope", "(["), "invalid --scope"),
        (("record", "crawl", url, "--archive", tmp_path / "c.wfz", "--resolve", "bad"), "expected HOST=ADDRESS:PORT"),
        (("record", "session", url, "--archive", tmp_path / "s.wfz", "--trajectory", tmp_path / "t.json"),
         "needs --headed"),
    ]
    for args, message in cases:
        line = assert_one_line_error(cli_here(*args), code=2, contains=message)
        assert "--help" in line, line
    assert not [p.name for p in tmp_path.iterdir() if not p.name.startswith("a.wfz")]  # nothing made


def test_usage_errors_found_by_a_command_point_to_its_help_as_clicks_do(archive, cli_here):
    line = assert_one_line_error(cli_here("archive", "meta", archive, "--set", "bogus=1"), code=2,
                                 contains="--set expects")
    assert line.endswith("(see 'webfreeze archive meta --help')")
    line = assert_one_line_error(cli_here("archive", "ls", archive, "--bogus"), code=2)
    assert line.endswith("(see 'webfreeze archive ls --help')") and line.count("--help") == 1
