"""`tasks add --replace` keeps what the author did not give, and says what changed.

A new-user walkthrough replaced a task (`--replace` with a new reference and answer) and found its
category turned from `info` into `general` and its answer check rebuilt as `exact`, neither
printed, and the old instruction not kept ("needs an instruction"). Every option not given now
keeps the replaced task's value, one given replaces it, and the printed changes name every field
that changed; a new task still gets the documented defaults. No browser: the sessions are written
by hand, in `record session`'s format.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from webfreeze.eval.authoring import add_task
from webfreeze.eval.errors import TaskError


def session(path: Path, answer: str, *, archive_session: str, start: str = "http://docs.test/",
            link: str = "Version", instruction: str | None = None, t0: float = 1_700_000_000.0) -> Path:
    """A recorded session: the start page, a click on ``link``, the answer."""
    steps = [
        {"step": 0, "action": "navigate", "url": start, "cause": "goto", "time": t0},
        {"step": 1, "action": "click", "target": {"role": "link", "name": link, "css": "a", "tag": "a",
                                                  "text": link}, "value": None, "url": start, "time": t0 + 1},
        {"step": 2, "action": "answer", "value": {"text": answer}, "url": start + "v", "time": t0 + 2},
    ]
    traj = {"kind": "reference_trajectory", "start_url": start, "archive_session": archive_session, "steps": steps}
    if instruction is not None:
        traj["instruction"] = instruction
    path.write_text(json.dumps(traj))
    return path


def lines(suite: Path) -> list[dict]:
    return [json.loads(x) for x in (suite / "tasks.jsonl").read_text().splitlines()]


@pytest.fixture
def psuite(tmp_path):
    """A suite with two tasks; ``idna-version`` is in category info, checked normalised."""
    suite = tmp_path / "psuite"
    add_task(suite, session(tmp_path / "other.json", "yes", archive_session="s0"), "yes",
             instruction="Is it there?", task_id="other", category="info")
    add_task(suite, session(tmp_path / "old.json", "3.7", archive_session="s1"), "3.7", task_id="idna-version",
             category="info", match="normalised", instruction="Which idna version is the latest?")
    return suite


def test_replace_keeps_category_match_and_instruction_not_given(psuite, tmp_path, cli_here):
    """The walkthrough's command, without --instruction: nothing the author did not give changes."""
    before = lines(psuite)[1]
    new = session(tmp_path / "new.json", "3.10", archive_session="s2", t0=1_800_000_000.0)
    r = cli_here("tasks", "add", psuite, "--reference", new, "--id", "idna-version", "--answer", "3.10", "--replace")
    assert r.returncode == 0, r.stderr
    after = lines(psuite)
    assert [t["id"] for t in after] == ["other", "idna-version"]
    t = after[1]
    assert t["category"] == "info" and t["instruction"] == before["instruction"]
    assert t["ground_truth"]["answer"] == {"normalised": "3.10"}
    out = r.stdout.splitlines()
    assert out[0] == "idna-version: archive session s1 -> s2"
    assert "idna-version: answer '3.7' -> '3.10'" in out  # the session's recorded answer
    assert "idna-version: answer check normalised '3.7' -> normalised '3.10'" in out
    assert any(x.startswith("idna-version: snapshot_time '") for x in out), out
    assert not any("category" in x or "instruction" in x for x in out), out
    assert "replaced task idna-version (info)" in r.stderr


def test_replace_with_the_walkthroughs_options_lists_nothing_it_did_not_change(psuite, tmp_path, cli_here):
    new = session(tmp_path / "new.json", "3.7", archive_session="s1")  # the same session again
    r = cli_here("tasks", "add", psuite, "--reference", new, "--id", "idna-version", "--answer", "3.7", "--replace",
                 "--instruction", "Which idna version is the latest?")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["idna-version: the same 1 steps"]
    assert lines(psuite)[1]["ground_truth"]["answer"] == {"normalised": "3.7"}


def test_given_match_category_and_instruction_replace_and_are_listed(psuite, tmp_path, cli_here):
    new = session(tmp_path / "new.json", "3.10", archive_session="s2", link="Release history",
                  start="http://docs.test/pkg/")
    r = cli_here("tasks", "add", psuite, "--reference", new, "--id", "idna-version", "--answer", "3.10", "--replace",
                 "--match", "exact", "--category", "versions", "--instruction", "What is idna's newest version?")
    assert r.returncode == 0, r.stderr
    t = lines(psuite)[1]
    assert t["category"] == "versions" and t["instruction"] == "What is idna's newest version?"
    assert t["ground_truth"]["answer"] == {"exact": "3.10"} and t["start_url"] == "http://docs.test/pkg/"
    out = r.stdout.splitlines()
    assert "idna-version: category 'info' -> 'versions'" in out
    assert ("idna-version: instruction 'Which idna version is the latest?' -> "
            "\"What is idna's newest version?\"") in out
    assert "idna-version: answer check normalised '3.7' -> exact '3.10'" in out
    assert "idna-version: start_url 'http://docs.test/' -> 'http://docs.test/pkg/'" in out
    assert any(x.startswith("idna-version: steps part at step 1") for x in out), out


def test_a_given_match_alone_changes_only_the_check(psuite, tmp_path):
    new = session(tmp_path / "new.json", "3.7", archive_session="s1")
    obj = add_task(psuite, new, "3.7", task_id="idna-version", match="must_include", replace=True)
    assert obj["category"] == "info" and obj["ground_truth"]["answer"] == {"must_include": ["3.7"]}
    assert obj["changes"] == ["the same 1 steps", "answer check normalised '3.7' -> must_include ['3.7']"]


def test_the_sessions_own_instruction_replaces_the_old_one_and_is_listed(psuite, tmp_path):
    new = session(tmp_path / "new.json", "3.7", archive_session="s1", instruction="Find idna's latest version.")
    obj = add_task(psuite, new, "3.7", task_id="idna-version", replace=True)
    assert obj["instruction"] == "Find idna's latest version."
    assert "instruction 'Which idna version is the latest?' -> \"Find idna's latest version.\"" in obj["changes"]


def test_fields_tasks_add_does_not_write_are_kept(psuite, tmp_path):
    """A hand-added field of the old line (here depends_on) stays: replacing is no place to lose it."""
    rows = lines(psuite)
    rows[1]["depends_on"] = "other"
    (psuite / "tasks.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows))
    obj = add_task(psuite, session(tmp_path / "new.json", "3.7", archive_session="s1"), "3.7",
                   task_id="idna-version", replace=True)
    assert lines(psuite)[1]["depends_on"] == "other" and not any("depends_on" in c for c in obj["changes"])


def test_an_old_check_tasks_add_cannot_write_needs_a_match(psuite, tmp_path):
    """The old line's check is a list (written by hand): without --match, nothing is guessed."""
    rows = lines(psuite)
    rows[1]["ground_truth"]["answer"] = [{"normalised": "3.7"}, {"must_include": ["3"]}]
    (psuite / "tasks.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows))
    before = (psuite / "tasks.jsonl").read_bytes()
    new = session(tmp_path / "new.json", "3.7", archive_session="s2")
    with pytest.raises(TaskError, match="give --match"):
        add_task(psuite, new, "3.7", task_id="idna-version", replace=True)
    assert (psuite / "tasks.jsonl").read_bytes() == before
    obj = add_task(psuite, new, "3.7", task_id="idna-version", replace=True, match="exact")
    assert obj["ground_truth"]["answer"] == {"exact": "3.7"}
    assert any(c.startswith("answer check [{'normalised': '3.7'}") and c.endswith("-> exact '3.7'")
               for c in obj["changes"]), obj["changes"]


def test_a_new_task_gets_the_documented_defaults(tmp_path, cli_here):
    suite = tmp_path / "fresh"
    ref = session(tmp_path / "t1.json", "3.7", archive_session="s1", instruction="Which idna version?")
    r = cli_here("tasks", "add", suite, "--reference", ref, "--answer", "3.7")
    assert r.returncode == 0 and r.stdout == "", r.stdout + r.stderr
    t = lines(suite)[0]
    assert (t["id"], t["category"], t["instruction"]) == ("t1", "general", "Which idna version?")
    assert t["ground_truth"]["answer"] == {"exact": "3.7"}
    # --replace of an id the suite does not have adds it, with the same defaults
    r = cli_here("tasks", "add", suite, "--reference", ref, "--id", "t2", "--answer", "3.7", "--replace")
    assert r.returncode == 0 and r.stdout == "", r.stdout + r.stderr
    assert lines(suite)[1]["category"] == "general" and lines(suite)[1]["ground_truth"]["answer"] == {"exact": "3.7"}
    # a new task without any instruction is refused
    r = cli_here("tasks", "add", suite, "--reference", session(tmp_path / "t3.json", "x", archive_session="s3"),
                 "--answer", "x")
    assert r.returncode == 1 and "give --instruction" in r.stderr
    # a manifest with one category gives it to a new task; a replaced task keeps its own
    one = tmp_path / "one-category"
    add_task(one, ref, "3.7", category="info")
    manifest = json.loads((one / "manifest.json").read_text())
    (one / "manifest.json").write_text(json.dumps({**manifest, "categories": ["info"]}))
    assert add_task(one, ref, "3.7", task_id="t4")["category"] == "info"
    with pytest.raises(TaskError, match="category 'general' is not among"):
        add_task(one, ref, "3.7", task_id="t4", category="general", replace=True)


def test_help_names_the_defaults(cli_here):
    r = cli_here("tasks", "add", "--help")
    text = " ".join(r.stdout.split())
    assert "[default: exact; with --replace, the replaced task's]" in text
    assert "the manifest's only category, else 'general'; with --replace, the replaced task's" in text
