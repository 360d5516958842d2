"""`record session` logs the JavaScript dialogs a page opened and how they were answered (by the
person, or by a script's dialog handler) on the step that opened them (``dialogs``). The agent
environment accepts every ``confirm`` and answers a ``prompt`` with the text it offers: a session
answered the same way becomes a task that validates in the browser backend; one that cancelled
a ``confirm`` or typed its own prompt text is named by `tasks add`, since its task is not replayed
as it was done. Before, no dialog was logged, and the replay cancelled every ``confirm``."""

from __future__ import annotations

import pytest
from session_task import record_session, validate_as_task

from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

PAGE = """<!doctype html><html><head><title>Lamps</title></head><body><h1>Lamps</h1>
<button onclick="document.getElementById('out').textContent = confirm('Order 3 lamps?') ? 'Ordered 3 lamps.' : 'No order.'">
Order</button>
<button onclick="document.getElementById('note').textContent = 'Note: ' + prompt('Note for the courier?', 'Leave at the door')">
Add a note</button>
<p id="out">Nothing ordered.</p><p id="note">Note: none</p></body></html>"""
SCRIPT = '''
from webfreeze.recorder.session import record_answer
def run(page):
    page.wait_for_function("performance.getEntriesByName('first-paint').length > 0")
    page.on("dialog", lambda d: d.ACCEPT_CONFIRM if d.type == "confirm" else d.ACCEPT_PROMPT)
    page.get_by_role("button", name="Order").click()
    page.get_by_role("button", name="Add a note").click()
    page.get_by_text("Note: ").wait_for()
    record_answer(page, "ANSWER", evidence=["ANSWER"])
'''


def _script(confirm: str, prompt: str, answer: str) -> str:
    return SCRIPT.replace("ACCEPT_CONFIRM", confirm).replace("ACCEPT_PROMPT", prompt).replace("ANSWER", answer)


def test_dialogs_answered_as_the_environment_does_validate(cli, tmp_path):
    steps = record_session(cli, tmp_path, PAGE, _script("accept()", "accept('Leave at the door')", "Ordered 3 lamps."),
                           "yes")
    clicks = [s for s in steps if s["action"] == "click"]
    assert [c.get("dialogs") for c in clicks] == [
        [{"type": "confirm", "message": "Order 3 lamps?", "answer": True}],
        [{"type": "prompt", "message": "Note for the courier?", "answer": "Leave at the door",
          "offered": "Leave at the door"}]], steps
    validate_as_task(cli, tmp_path, "yes", "Ordered 3 lamps.", "Order three lamps.")


def test_a_cancelled_confirm_and_a_typed_prompt_are_named_by_tasks_add(cli, tmp_path):
    steps = record_session(cli, tmp_path, PAGE, _script("dismiss()", "accept('Ring twice')", "No order."), "no")
    clicks = [s for s in steps if s["action"] == "click"]
    assert [d["answer"] for c in clicks for d in c["dialogs"]] == [False, "Ring twice"], steps
    r = cli("tasks", "add", tmp_path / "suite", "--reference", tmp_path / "no.json", "--answer", "No order.",
            "--id", "no", "--instruction", "Do not order.", "--archive", tmp_path / "no.wfz")
    assert r.returncode == 0, r.stderr
    assert "note: its session cancelled the confirm 'Order 3 lamps?' (reference step 1)" in r.stderr, r.stderr
    assert "note: its session answered the prompt 'Note for the courier?' with 'Ring twice' (reference step 2)" in r.stderr, r.stderr
    # --replace keeps the task's answer when --answer is not given
    r = cli("tasks", "add", tmp_path / "suite", "--reference", tmp_path / "no.json", "--id", "no", "--replace",
            "--category", "orders")
    assert r.returncode == 0, r.stderr
    assert '"answer":{"exact":"No order."}' in (tmp_path / "suite" / "tasks.jsonl").read_text()
    r = cli("tasks", "add", tmp_path / "suite", "--reference", tmp_path / "no.json", "--id", "no", "--replace",
            "--match", "normalised")  # (another kind of check, the same answer)
    assert r.returncode == 0, r.stderr
    assert '"answer":{"normalised":"No order."}' in (tmp_path / "suite" / "tasks.jsonl").read_text()
    # a new task without --answer: the one its session logged
    r = cli("tasks", "add", tmp_path / "suite", "--reference", tmp_path / "no.json", "--id", "other",
            "--instruction", "Do not order.")
    assert r.returncode == 0, r.stderr
    assert '"id":"other"' in (tmp_path / "suite" / "tasks.jsonl").read_text().splitlines()[-1]
    assert '"answer":{"exact":"No order."}' in (tmp_path / "suite" / "tasks.jsonl").read_text().splitlines()[-1]
