"""The WebSocket replay's rule (replayer/websocket.py), on recordings as the recorder writes them:
which recording answers a socket, and the conversation (open, answers, parting, the close). The
browser's side of it is tested with real Chromium in tests/recorder/test_websocket_pages.py."""

from __future__ import annotations

from webfreeze.archives import Archive
from webfreeze.replayer.matching import AGENT_RULES, Rules
from webfreeze.replayer.websocket import Conversation, SocketIndex, direct_socket_url, read_recording


def doc(url, messages, *, opened, closed_by_client=None, close_code=None):
    """A document as recorder/addon.py writes it; ``messages``: (from_client, text or bytes)."""
    return {"version": 1, "url": url, "opened": opened, "closed_by_client": closed_by_client, "close_code": close_code,
            "messages": [{"from_client": c, "type": "text" if isinstance(m, str) else "binary",
                          "content": m if isinstance(m, str) else m.hex(), "time": opened + i}
                         for i, (c, m) in enumerate(messages)]}


def rec(name, *args, **kw):
    return read_recording(name, doc(*args, **kw))


def test_the_conversation_answers_each_equal_message_and_closes_as_recorded():
    r = rec("websocket/s1/a.json", "http://app.test/ws",
            [(False, "welcome"), (True, "init"), (False, "state 1"), (False, "push"), (True, b"\x01\x02"),
             (False, "bye")], opened=100.0, closed_by_client=False, close_code=1000)
    c = Conversation(r)
    turn = c.open()
    assert turn.send == ["welcome"] and not turn.close
    turn = c.receive("init")
    assert turn.send == ["state 1", "push"] and turn.parted is None  # a push comes with its batch
    turn = c.receive(b"\x01\x02")
    assert turn.send == ["bye"] and turn.close  # the server closed the recording: closed at its end
    assert c.whole and c.served == 4 and c.matched == 2


def test_a_different_message_parts_the_conversation_once_and_nothing_more_is_sent():
    r = rec("websocket/s1/a.json", "http://app.test/ws", [(True, "hello"), (False, "answer")], opened=1.0)
    c = Conversation(r)
    assert c.open().send == []
    turn = c.receive("hello?x=" + "y" * 100)
    assert turn.send == [] and turn.parted.startswith("the page sent 'hello?x=yyy")
    assert "..." in turn.parted and turn.parted.endswith("the recording 'hello'")
    assert len(turn.parted) < 220  # (the page's message quoted up to 80 characters)
    assert c.receive("hello") == type(turn)()  # parted: no answer, no second miss
    assert not c.whole
    # the same text as bytes is another message
    assert Conversation(r).receive(b"hello").parted is not None


def test_a_parting_past_the_first_characters_is_quoted_where_it_is():
    """A Jupyter kernel message differs in its header's date, past the first 80 bytes the reason
    quoted: both quotes were the same. They are quoted from a little before the difference."""
    head = b"\x06\x00\x00\x00" + b'{"msg_id": "9f2c", "username": "", "session": "77ab", "msg_type": "kernel_info_request", '
    r = rec("websocket/s1/k.json", "http://lab.test/ws", [(True, head + b'"date": "2026-12-06T20:01:00.120Z"}')],
            opened=1.0)
    parted = Conversation(r).receive(head + b'"date": "2024-03-01T12:00:00.000Z"}').parted
    at = len(head) + len(b'"date": "202')  # (2026 and 2024 part at their last digit)
    assert parted.endswith(f"(from byte {at - 20} on)"), parted
    assert "'2024-03-01T12:00:00.000Z" not in parted and '"date": "2024-03-01T12:00:00.000Z"}' in parted, parted
    assert '"date": "2026-12-06T20:01:00.120Z"}' in parted.split("the recording", 1)[1], parted


def test_a_page_that_sends_after_the_recording_ran_out_parts():
    r = rec("websocket/s1/a.json", "http://app.test/ws", [(False, "hi")], opened=1.0)
    c = Conversation(r)
    assert c.open().send == ["hi"]  # (left open: the recording was not closed by the server)
    assert "after the recorded conversation ended" in c.receive("more").parted


def test_the_k_th_socket_gets_the_k_th_connection_of_the_page_s_session():
    recs = [rec("websocket/s1/b.json", "http://app.test/ws?room=1", [(False, "s1 second")], opened=20.0),
            rec("websocket/s1/a.json", "http://app.test/ws?room=1", [(False, "s1 first")], opened=10.0),
            rec("websocket/s2/c.json", "ws://app.test/ws?room=1", [(False, "s2 first")], opened=500.0)]
    index = SocketIndex(recs, Rules.from_dict(AGENT_RULES))
    first = lambda k, **kw: index.pick("ws://app.test/ws?room=1", k, **kw).recording  # noqa: E731
    # the page's document came from s1: its connections in order of opening
    assert first(0, session="s1").messages[0].data == "s1 first"
    assert first(1, session="s1").messages[0].data == "s1 second"
    assert first(2, session="s1") is None
    assert "opened 3 times, recorded 2 times" in index.pick("ws://app.test/ws?room=1", 2, session="s1").why
    # opened after the document's capture: the second load of the page gets the second connection
    assert first(0, session="s1", after=15.0).messages[0].data == "s1 second"
    # no session known: the session of the connection nearest the replay's time
    assert first(0, when=490.0).messages[0].data == "s2 first"
    assert first(0, when=0.0).messages[0].data == "s1 first"
    # wss reads as https, matched canonically (scheme ignored); a tracker parameter is dropped
    assert index.pick("wss://APP.test/ws?room=1&utm_source=x", 0, session="s2").level == "canonical"
    # honest matching: another meaningful parameter is no recording of it
    miss = index.pick("ws://app.test/ws?room=2", 0, session="s1")
    assert miss.recording is None and miss.why == (
        "a WebSocket the archive holds no recording of at these query parameters (recorded with others: "
        "ws://app.test/ws?room=1; parameters that may differ, an id drawn from the clock or at random, go in "
        "replay_rules' ignorable_params)")
    assert index.pick("ws://app.test/other", 0).why == "a WebSocket the archive holds no recording of"


def test_the_index_reads_the_archive_s_documents(tmp_path):
    path = tmp_path / "a.wfz"
    with Archive.create(path) as arc:
        arc.put_document("websocket/s1/x.json", doc("http://app.test/ws", [(False, "hi")], opened=5.0))
        # a document of before WebSocket replay: no opened (the first message's time), no close
        old = doc("http://app.test/old", [(True, "q"), (False, "a")], opened=7.0)
        del old["opened"], old["closed_by_client"], old["close_code"]
        arc.put_document("websocket/s1/y.json", old)
        arc.put_document("websocket/s1/z.json", {"not": "a recording"})
    with Archive.open(path) as arc:
        index = SocketIndex.from_archive(arc)
    assert len(index) == 2
    got = index.pick("ws://app.test/old", 0).recording
    assert got.opened == 7.0 and not got.server_closed and got.session_id == "s1"


def test_a_direct_mode_socket_url_stands_for_its_original():
    assert direct_socket_url("ws://127.0.0.1:28400/20260101000000/http://app.test/ws?a=1") == "http://app.test/ws?a=1"
    assert direct_socket_url("ws://app.test/ws") == "ws://app.test/ws"


def test_the_handshake_answers_the_recorded_subprotocol_when_the_page_offers_it():
    def with_protocol(protocol):
        d = doc("ws://app.test/_stcore/stream", [], opened=1.0)
        if protocol is not None:
            d["protocol"] = protocol
        return read_recording("websocket/s1/a.json", d)

    chose = with_protocol("streamlit")
    assert chose.answer_protocol("streamlit, 2|8c11e35b|2858623e") == "streamlit"
    assert chose.answer_protocol("token, streamlit") == "streamlit"  # the recorded one, wherever offered
    assert chose.answer_protocol("other") == "other"  # not offered now: the page's first
    assert chose.answer_protocol("") == ""  # the page asks for none: none is named
    unknown = with_protocol(None)  # recorded before the recorder kept it: the page's first
    assert unknown.protocol is None and unknown.answer_protocol("streamlit, token") == "streamlit"
    assert with_protocol("").answer_protocol("") == ""


def test_a_binary_message_is_quoted_readably_in_the_reason():
    """A binary conversation (Streamlit's protobuf frames) parts with its bytes quoted as bytes, the
    text in them readable (a page reporting its own address where the recording has the site's):
    not as hex, where the URL was a run of digits."""
    recorded = b'Z-\x12\x00B)\n\x03UTC\x1a\x05en-US"\x10http://stl.test/('
    sent = b'ZS\x12\x00BO\n\x03UTC\x1a\x05en-US"6http://127.0.0.1:28400/20261204024816/http://stl.test/(' + b"\x00" * 50
    r = rec("websocket/s1/a.json", "http://app.test/ws", [(True, recorded), (False, b"ok")], opened=1.0)
    turn = Conversation(r).receive(sent)
    assert "http://stl.test/" in turn.parted and "http://127.0.0.1:28400/" in turn.parted, turn.parted
    assert turn.parted.startswith("the page sent b'ZS\\x12\\x00BO\\n\\x03UTC"), turn.parted
    assert turn.parted.endswith("the recording b'Z-\\x12\\x00B)\\n\\x03UTC\\x1a\\x05en-US\"\\x10http://stl.test/('"), \
        turn.parted
    assert "...'" in turn.parted and len(turn.parted) < 240  # (the page's message cut, as a text's is)


def test_volatile_parts_set_aside_by_the_rule_match():
    """``socket_volatile``: what the patterns match in the page's message and in the recorded one
    is set aside in the comparison (a kernel message's date, the live clock when it was recorded);
    the rest must still be equal, and a bad pattern is refused in one line."""
    import pytest

    from webfreeze.replayer.matching import Rules

    head = b'{"msg_type": "kernel_info_request", "date": "'
    r = rec("websocket/s1/k.json", "http://lab.test/ws", [(True, head + b'2026-12-06T20:01:00.120Z"}'), (False, "ok")],
            opened=1.0)
    rules = Rules.from_dict({"socket_volatile": [r'"date": "[^"]*"']})
    c = Conversation(r, rules.socket_volatile)
    turn = c.receive(head + b'2024-03-01T12:00:00.000Z"}')
    assert turn.parted is None and turn.send == ["ok"] and c.volatile_matched == 1 and c.whole
    assert turn.set_aside  # (reported: the first message matched so, and only the first)
    twice = rec("websocket/s1/k2.json", "http://lab.test/ws", [(True, head + b'1"}'), (True, head + b'2"}'),
                                                                (False, "ok")], opened=1.0)
    c2 = Conversation(twice, rules.socket_volatile)
    assert [c2.receive(head + b'3"}').set_aside for _ in range(2)] == [True, False] and c2.whole
    assert not Conversation(twice, rules.socket_volatile).receive(head + b'1"}').set_aside  # (equal: nothing set aside)
    other = Conversation(r, rules.socket_volatile).receive(b'{"msg_type": "execute_request", "date": "x"}')
    assert other.parted is not None  # (only the volatile part may differ)
    assert Conversation(r).receive(head + b'2024-03-01T12:00:00.000Z"}').parted is not None  # (no rule: parted)
    with pytest.raises(ValueError, match="socket_volatile.*not a regular expression"):
        Rules.from_dict({"socket_volatile": ["date: ("]})


def _post(arc, sid: str, url: str, body: bytes, t: float) -> None:
    """A form's POST of ``body`` to ``url``, captured at ``t`` (seconds since the epoch)."""
    from datetime import datetime, timezone

    from webfreeze.archives import Exchange

    at = datetime.fromtimestamp(t, timezone.utc).isoformat().replace("+00:00", "Z")
    arc.add_exchange(Exchange(url=url, method="POST", req_body=body, captured_at=at, status=200, reason="OK",
                              req_headers=[("Content-Type", "application/x-www-form-urlencoded")], payload=b"ok",
                              resp_headers=[], session_id=sid))


def test_a_socket_that_sent_the_results_of_an_action_not_taken_is_ahead(tmp_path):
    """marimo acts by HTTP (a widget's POST) and answers on its socket, where the page sends nothing:
    at open, the conversation sends the whole session's pushes, the result of the person's later
    POST among them. The socket is then *ahead* of the page until the replay answers that request
    as recorded; pushes recorded before any action (or after one made before the socket opened,
    or to another host: a beacon), and a heartbeat equal to a message sent before, are not."""
    from webfreeze.replayer.websocket import action_key

    path = tmp_path / "m.wfz"
    with Archive.create(path) as arc:
        sid = arc.new_session("session", source="test")
        for url, t in (("http://app.test/api/login", 1000.0), ("http://beacons.test/collect", 1008.0),
                       ("http://app.test/api/set-value", 1020.0)):
            _post(arc, sid, url, b"x=1", t)
        pushes = doc("ws://app.test/ws", [(False, "rendered"), (False, "hello, stranger")], opened=1005.0)
        arc.put_document(f"websocket/{sid}/a.json", pushes)  # (messages at 1005 and 1006)
        beat = doc("ws://app.test/ws", [(False, "rendered"), (False, "ping"), (False, "ping")], opened=1010.0)
        beat["messages"][2]["time"] = 1021.0  # (a heartbeat after the POST at 1020: tells nothing)
        arc.put_document(f"websocket/{sid}/b.json", beat)
        later = doc("ws://app.test/ws", [(False, "rendered"), (False, "hello, Ada")], opened=1011.0)
        later["messages"][1]["time"] = 1021.0  # (the result of the POST at 1020)
        arc.put_document(f"websocket/{sid}/c.json", later)
    with Archive.open(path) as arc:
        index = SocketIndex.from_archive(arc)
        (key,) = [action_key(e.method, e.url, e.body_key) for e in arc.index_entries() if e.url.endswith("set-value")]
    early, beating, late = sorted(index.recordings, key=lambda r: r.opened)
    assert [k for _, k in late.actions] == [key]  # (the login came before it opened; the beacon went elsewhere)
    c = Conversation(early)
    assert c.open().send == ["rendered", "hello, stranger"] and not c.ahead(set())
    c = Conversation(beating)
    assert c.open().send == ["rendered", "ping", "ping"] and not c.ahead(set())
    c = Conversation(late)
    assert c.open().send == ["rendered", "hello, Ada"]
    assert c.ahead(set())
    assert not c.ahead({key})  # (the page made that POST: the push is its answer)


def test_pushes_recorded_after_an_action_wait_until_the_replay_answers_it(tmp_path):
    """marimo's pushes that followed a widget's POST wait for that POST: at open, what came before
    it; once the replay has answered it as recorded (``answered``), the rest, up to the next push
    that follows another action not yet made. A page that speaks while pushes wait gets them first
    (the order holds; the socket is then ahead), and the actions before its message hold nothing
    after it. Without ``answered`` (None) nothing waits, as before."""
    from webfreeze.replayer.websocket import action_key

    path = tmp_path / "m.wfz"
    with Archive.create(path) as arc:
        sid = arc.new_session("session", source="test")
        for body, t in ((b"x=1", 1002.0), (b"x=2", 1004.0)):
            _post(arc, sid, "http://app.test/api/set", body, t)
        # messages at 1000.5, 1001.5, 1002.5 and 1003.5 (after x=1), 1004.5 (after x=2); the page
        # speaks at 1005.5
        arc.put_document(f"websocket/{sid}/a.json", doc("ws://app.test/ws", [
            (False, "rendered"), (False, "ready"), (False, "x is 1"), (False, "still 1"), (False, "x is 2"),
            (True, "bye"), (False, "bye back")], opened=1000.5, closed_by_client=False, close_code=1000))
    with Archive.open(path) as arc:
        (r,) = SocketIndex.from_archive(arc).recordings
        x1, x2 = [action_key(e.method, e.url, e.body_key) for e in sorted(arc.index_entries(), key=lambda e: e.captured_at)]
    c = Conversation(r)
    assert c.open(set()).send == ["rendered", "ready"] and c.held and not c.ahead(set())
    assert c.release(set()).send == [] and not c.releasable(set())  # (nothing answered yet)
    assert c.releasable({x1}) and c.release({x1}).send == ["x is 1", "still 1"] and c.held
    turn = c.release({x1, x2})
    assert turn.send == ["x is 2"] and not turn.close and not c.held and not c.ahead({x1, x2})
    assert c.receive("bye", {x1, x2}).send == ["bye back"] and c.whole
    # the page speaks while pushes wait: they come first, then the answer; the socket is ahead
    c = Conversation(r)
    c.open(set())
    turn = c.receive("bye", set())
    assert turn.send == ["x is 1", "still 1", "x is 2", "bye back"] and turn.close and c.whole
    assert c.ahead(set()) and not c.ahead({x1, x2})
    # nothing known of the replay's answers: nothing waits
    assert Conversation(r).open().send == ["rendered", "ready", "x is 1", "still 1", "x is 2"]
