"""Which requests of a replayed reference make its capture incomplete (``tasks validate`` and
``drift``): documents and XHR the archive could not answer, named by the reference step the agent
was replaying; fuzzy answers do not count, nor subresources of a reference that was reached."""

from __future__ import annotations

from webfreeze.eval.authoring import capture_misses, describe_miss


def test_capture_misses_name_the_reference_step():
    def replay(*flagged):
        return {"flagged": list(flagged)}

    miss = {"kind": "document", "level": "miss", "method": "POST", "url": "http://site.test/note", "status": 404}
    fuzzy = {"kind": "document", "level": "fuzzy", "method": "GET", "url": "http://site.test/a", "status": 200}
    image = {"kind": "subresource", "level": "miss", "method": "GET", "url": "http://site.test/logo.png"}
    xhr = {"kind": "xhr", "level": "miss", "method": "GET", "url": "http://site.test/api?q=p"}
    traj = {"replay": {"start": replay(image)},
            "steps": [{"step": 0, "agent_fields": {"thought": "reference step 2: click button 'Save'"},
                       "replay": replay(fuzzy, miss)},
                      {"step": 1, "replay": replay(xhr)}]}
    misses = capture_misses(traj)
    assert misses == [{"step": 2, "kind": "document", "method": "POST", "url": "http://site.test/note"},
                      {"step": 1, "kind": "xhr", "method": "GET", "url": "http://site.test/api?q=p"}]
    assert describe_miss(misses[0]) == "reference step 2: POST http://site.test/note (document) was not captured"
    assert capture_misses({"steps": [{"replay": replay(fuzzy, image)}]}) == []


def test_a_reference_that_was_not_reached_counts_every_kind_once():
    """A reference that did not reach its ground truth: a missed script chunk (VitePress's search box,
    imported on a click) is a capture miss too, named once though the browser reports it twice (the
    replay's 404, then the browser's refusal of it as a module script)."""
    chunk = {"kind": "subresource", "level": "miss", "method": "GET", "url": "http://docs.test/assets/box.js"}
    traj = {"steps": [{"step": 0, "agent_fields": {"thought": "reference step 1: click button 'Search'"},
                       "replay": {"flagged": [dict(chunk, status=404), dict(chunk, status=0)]}}]}
    assert capture_misses(traj) == []  # reached: a subresource does not count
    assert capture_misses(traj, reached=False) == [
        {"step": 1, "kind": "subresource", "method": "GET", "url": "http://docs.test/assets/box.js"}]


def test_a_websocket_miss_says_why_the_replay_could_not_serve_it():
    """Bokeh's first socket message carries a random msgid, so its conversation parts from the
    recording: tasks validate named the socket but only guessed the reason ("no recording of it,
    or ..."), though the replay had said which; it now quotes the replay's reason."""
    why = ("a WebSocket whose conversation parted from the recording: the page sent '{\"msgid\":\"A1\"}', "
           "the recording '{\"msgid\":\"B2\"}'")
    sock = {"kind": "xhr", "level": "miss", "method": "GET", "url": "ws://bokeh.test/app/ws", "status": 0, "why": why}
    misses = capture_misses({"replay": {"start": {"flagged": [sock, {**sock, "why": None}]}}})
    assert misses == [{"step": None, "kind": "xhr", "method": "GET", "url": "ws://bokeh.test/app/ws", "why": why}]
    # a conversation that parted: recording it again as it was does not mend it (Shiny groups the
    # messages of quick actions live; the replay's steps send their own), and the line says so
    from webfreeze.eval.authoring import PARTED_HINT, WEBSOCKET_PARTED_WORDS
    from webfreeze.replayer.websocket import WEBSOCKET_PARTED

    assert WEBSOCKET_PARTED_WORDS == WEBSOCKET_PARTED  # (the hint keys on the replay's own words)
    # on the start page no action came too soon: the reason alone, no advice about pausing
    assert describe_miss(misses[0]) == (
        f"the start page: GET ws://bokeh.test/app/ws (xhr) is a WebSocket the replay could not serve ({why})")
    after = describe_miss(dict(misses[0], step=2))
    assert after.endswith(f"could not serve ({why})" + PARTED_HINT) and after.startswith("reference step 2")
    assert "recording it again as it was will not mend it" in PARTED_HINT and "pausing a second" in PARTED_HINT
    assert "socket_volatile" in PARTED_HINT
    bare = {k: v for k, v in misses[0].items() if k != "why"}
    assert describe_miss(bare).endswith("(no recording of it, or the page's messages parted from the recording)")
    unrecorded = dict(misses[0], why="a WebSocket the archive holds no recording of")
    assert describe_miss(unrecorded).endswith("(a WebSocket the archive holds no recording of)")
