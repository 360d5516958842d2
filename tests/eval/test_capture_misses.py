"""Which requests of a replayed reference make its capture incomplete (``tasks validate`` and
``drift``): documents and XHR the archive could not answer, named by the reference step the agent
was replaying; fuzzy answers and subresources do not count."""

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
