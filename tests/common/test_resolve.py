"""The ``--resolve`` table's parser (common/resolve.py): what record, bench run --live and live
studies accept, and the one-line error for an entry that is not HOST=ADDRESS:PORT."""

from __future__ import annotations

import pytest

from webfreeze.common.errors import WebfreezeError
from webfreeze.common.resolve import ResolveError, parse_resolve


def test_entries_become_a_table_of_lower_case_hosts():
    table = parse_resolve(["Scholar.test=127.0.0.1:8001", "shop.test:443=[::1]:8443", "a=b:1"])
    assert table == {"scholar.test": ("127.0.0.1", 8001), "shop.test:443": ("::1", 8443), "a": ("b", 1)}
    assert parse_resolve(None) == {} and parse_resolve([]) == {}


@pytest.mark.parametrize("entry", ["scholar.test", "=127.0.0.1:1", "h=127.0.0.1", "h=:80", "h=a:0", "h=a:65536",
                                   "h=a:x"])
def test_a_bad_entry_is_one_line_naming_it(entry):
    with pytest.raises(ResolveError) as caught:
        parse_resolve([entry])
    message = str(caught.value)
    assert message.startswith(f"--resolve {entry!r}: expected HOST=ADDRESS:PORT") and "\n" not in message
    assert isinstance(caught.value, WebfreezeError) and isinstance(caught.value, ValueError)
