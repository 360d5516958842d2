"""BrowserGym's ``fill(bid, text, True)`` (``enable_autocomplete_menu``): parsed, printed and
stored with ``args: {"autocomplete": true}``, so that a field answering key events (a JavaScript search box) hears one on
replay; a plain fill, and every trajectory written before, read as they always did."""

from __future__ import annotations

import pytest

from webfreeze.simulator.actions import Action, format_action, parse_action


@pytest.mark.parametrize("text, keys", [("fill('12', 'pune', True)", True), ("fill('12', 'pune')", False),
                                        ("fill('12', 'pune', enable_autocomplete_menu=True)", True),
                                        ("fill('12', 'pune', False)", False)])
def test_fill_with_keys_is_parsed_and_printed_back(text, keys):
    a = parse_action(text, "browsergym")
    assert (a.kind, a.bid, a.text, bool((a.args or {}).get("autocomplete"))) == ("fill", "12", "pune", keys)
    assert format_action(a, "browsergym") == ("fill('12', 'pune', True)" if keys else "fill('12', 'pune')")


def test_keys_is_stored_only_when_set():
    plain = parse_action("fill('3', 'x')", "browsergym").to_dict()
    assert "args" not in plain  # the parsed object of every earlier trajectory, unchanged
    keyed = parse_action("fill('3', 'x', True)", "browsergym").to_dict()
    assert keyed["args"] == {"autocomplete": True} and {k: v for k, v in keyed.items() if k != "args"} == plain
    assert Action.from_dict(keyed).args == {"autocomplete": True} and Action.from_dict(plain).args is None
