"""The shared helpers that replaced local copies (webfreeze.common.http, .files, .text; the
settings checks in simulator/ and agents/): each is checked against a copy of the code it
replaced, over inputs that reach its corners, so that "behaviour unchanged" is a tested claim."""

from __future__ import annotations

import json
import os
import random
import re
import stat
import unicodedata
from urllib.parse import urlsplit

import pytest

from webfreeze.agents import AgentError, check_agent
from webfreeze.common.files import FILE_MODE, json_text, write_atomically, write_json
from webfreeze.common.http import header_value, host_port, split_host_port
from webfreeze.common.text import collapse_ws, fold
from webfreeze.eval.text import normalise
from webfreeze.agents.base import norm
from webfreeze.simulator.backends import BACKENDS, check_backend
from webfreeze.simulator.site_models import SimulatedSiteModel, check_site_models

# ------------------------------------------------------------------ the replaced code, copied
_OLD_DEFAULT_PORTS = {"http": 80, "https": 443}


def old_matching_netloc(url: str) -> str:  # replayer/matching.py split_url, before
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    return host if port is None or _OLD_DEFAULT_PORTS.get(scheme) == port else f"{host}:{port}"


def old_hooks_host_key(url: str) -> str:  # replayer/hooks.py host_key, before
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None or (parts.scheme, port) in (("http", 80), ("https", 443)):
        return host
    return f"{host}:{port}"


def old_own_address_split(host_header: str) -> tuple[str, str]:  # replayer/server.py own_address, before
    host = host_header.rsplit(":", 1)[0].strip("[]").lower() if host_header else ""
    port = host_header.rsplit(":", 1)[1] if host_header and ":" in host_header.strip("[]") else ""
    return host, port


_OLD_QUOTE_MAP = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'",
                                "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u2033": '"',
                                "\u00ab": '"', "\u00bb": '"', "`": "'"})
_OLD_EDGE = " \t\r\n\"'.,;:!?"
_OLD_WS = re.compile(r"\s+")


def old_collapse_ws(text: str) -> str:  # eval/text.py, before
    return _OLD_WS.sub(" ", text).strip()


def old_normalise(text) -> str:  # eval/text.py normalise, before
    if text is None:
        return ""
    text = old_collapse_ws(unicodedata.normalize("NFKC", str(text)).translate(_OLD_QUOTE_MAP).casefold())
    return text.strip(_OLD_EDGE)


def old_norm(text) -> str:  # agents/base.py norm, before
    return " ".join(unicodedata.normalize("NFKC", str(text or "")).casefold().split())


# ------------------------------------------------------------------ host and port
URLS = [
    "http://Example.COM/", "http://example.com:80/a", "https://example.com:443/", "https://example.com:80/",
    "http://example.com:443/", "HTTP://Shop.Test:80/x", "HTTPS://shop.test:8443/x", "ftp://h.test:21/",
    "http://[::1]:8080/", "http://[::1]:80/", "http://[FE80::1]/", "http://user:pw@Host.test:81/",
    "http://h.test:/", "http://h.test:99999/", "http://h.test:abc/", "//h.test:80/", "/just/a/path",
    "", "http://h.test:0/", "https://XN--BCHER-KVA.test/", "http://h.test:080/",
]


@pytest.mark.parametrize("url", URLS)
def test_host_port_is_what_matching_and_site_models_computed(url):
    assert host_port(urlsplit(url)) == old_matching_netloc(url) == old_hooks_host_key(url)


def test_host_port_drops_default_ports_and_lowercases():
    assert host_port(urlsplit("HTTPS://Shop.Test:443/cart")) == "shop.test"
    assert host_port(urlsplit("http://Shop.Test:8001/cart")) == "shop.test:8001"
    assert host_port(urlsplit("http://[::1]:8001/")) == "::1:8001"  # as the keys always were: no brackets
    assert host_port(urlsplit("http://h.test:99999/")) == "h.test"  # a port out of range is no port


@pytest.mark.parametrize("text", ["", "localhost", "LocalHost:8080", "127.0.0.1:80", "[::1]:8080", "[::1]",
                                  "::1", "h.test:", ":80", "[FE80::1]:443", "a:b:c"])
def test_split_host_port_is_the_old_host_header_split(text):
    assert split_host_port(text) == old_own_address_split(text)


def test_split_host_port_connect_targets():
    assert split_host_port("Shop.Test:443") == ("shop.test", "443")
    assert split_host_port("[::1]:8443") == ("::1", "8443")
    assert split_host_port("no-port") == ("no-port", "")


# ------------------------------------------------------------------ headers
def test_header_value_first_match_any_case_and_default():
    headers = [("Content-Type", "text/html"), ("X-A", "1"), ("content-type", "text/plain")]
    assert header_value(headers, "CONTENT-TYPE") == "text/html"
    assert header_value(headers, "x-a") == "1"
    assert header_value(headers, "range") is None
    assert header_value(headers, "range", "") == ""
    assert header_value(reversed(headers), "content-type") == "text/plain"  # warc_export's last-wins
    assert header_value([("Host", "")], "host", "fallback") == ""  # an empty value is a value


def test_header_value_matches_the_inline_lookups_it_replaced():
    rng = random.Random(7)
    names = ["Content-Type", "content-type", "CONTENT-TYPE", "Referer", "Range", "Host", "Location",
             "Content-Encoding", "\u212aeep-Alive", "keep-alive", "X-\u0130", "x-i\u0307", "Set-Cookie"]
    for _ in range(20000):
        headers = [(rng.choice(names), str(rng.randrange(100))) for _ in range(rng.randrange(6))]
        for name in ("content-type", "referer", "range", "host", "location", "content-encoding", "keep-alive"):
            old = next((v for k, v in headers if k.lower() == name), None)
            assert header_value(headers, name) == old


# ------------------------------------------------------------------ atomic files
def test_write_atomically_writes_text_and_bytes_with_the_usual_mode(tmp_path):
    p = tmp_path / "a.json"
    write_atomically(p, "h\u00e9llo\r\n")
    assert p.read_bytes() == "h\u00e9llo\r\n".encode("utf-8")  # line ends as given
    assert stat.S_IMODE(p.stat().st_mode) == FILE_MODE
    write_atomically(p, b"\x00\xff")
    assert p.read_bytes() == b"\x00\xff"
    assert [f.name for f in tmp_path.iterdir()] == ["a.json"]


def test_write_atomically_keeps_a_replaced_files_mode(tmp_path):
    p = tmp_path / "m.txt"
    p.write_text("old")
    p.chmod(0o640)
    write_atomically(p, "new")
    assert p.read_text() == "new" and stat.S_IMODE(p.stat().st_mode) == 0o640


def test_write_atomically_failure_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "dir"
    target.mkdir()
    (target / "inside").write_text("x")
    with pytest.raises(OSError):  # a rename onto a non-empty folder fails after the bytes are written
        write_atomically(target, "data")
    assert sorted(f.name for f in tmp_path.iterdir()) == ["dir"]
    with pytest.raises(FileNotFoundError):
        write_atomically(tmp_path / "missing" / "f.json", "data")


def test_write_json_is_the_house_style(tmp_path):
    obj = {"b": [1, {"\u00e9": None}], "a": "\u2603", "c": 1.5}
    write_json(tmp_path / "o.json", obj)
    want = json.dumps(obj, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    assert (tmp_path / "o.json").read_text(encoding="utf-8") == want == json_text(obj)


# ------------------------------------------------------------------ text
def _all_code_points() -> list[str]:
    return [chr(i) for i in range(0x110000)]


def test_text_helpers_equal_the_old_code_on_every_code_point():
    for c in _all_code_points():
        s = f"A{c} B"
        assert collapse_ws(s) == old_collapse_ws(s), hex(ord(c))
        assert collapse_ws(fold(c)) == old_norm(c) == norm(c), hex(ord(c))
        assert normalise(c) == old_normalise(c), hex(ord(c))


# characters that exercise the rules: every whitespace, quotes, edge punctuation, case-folding
# expansions (ß, ﬁ, İ, final sigma), compatibility forms (full-width, ligatures, ellipsis, ½),
# combining marks
_INTERESTING = ([chr(i) for i in range(0x3000) if chr(i).isspace()] + list(_OLD_EDGE) + list("`'\"")
                + ["\u2018", "\u2019", "\u201a", "\u201b", "\u2032", "\u201c", "\u201d", "\u201e", "\u201f", "\u2033",
                   "\u00ab", "\u00bb", "\u00df", "\ufb01", "\u0130", "\u03a3", "\u03c2", "\uff21", "\uff02", "\u2026",
                   "\u00bd", "\u0301", "\u0307", "\u212a", "\u1e9e", "\u3000", "\u00a0", "\u2028"]
                + list("abcXYZ019.-_"))


def _random_strings(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k = rng.randrange(12)
        out.append("".join(rng.choice(_INTERESTING) if rng.random() < 0.8 else chr(rng.randrange(0x110000))
                           for _ in range(k)))
    return out


def test_text_helpers_equal_the_old_code_on_random_strings():
    for s in _random_strings(300_000, seed=20240315):
        assert normalise(s) == old_normalise(s), repr(s)
        assert norm(s) == old_norm(s), repr(s)
        assert collapse_ws(s) == old_collapse_ws(s), repr(s)


def test_normalise_and_norm_on_none_and_non_strings():
    assert normalise(None) == old_normalise(None) == ""
    assert norm(None) == old_norm(None) == ""
    assert normalise(42) == "42" and norm(0) == old_norm(0) == ""


# ------------------------------------------------------------------ settings checks
def test_check_backend():
    assert BACKENDS == ("browser", "text")
    for name in BACKENDS:
        check_backend(name)
    with pytest.raises(ValueError, match=r"^unknown backend 'firefox' \(browser or text\)$"):
        check_backend("firefox")


def test_check_site_models_and_the_model_itself():
    check_site_models({"shop.test": "shop", "dine.test": "dine"})
    msg = "site model shop.test=nope: unknown kind (known: booking, clinic, dine, hotels, shop, shop2)"
    with pytest.raises(ValueError) as exc:
        check_site_models({"shop.test": "nope"})
    assert str(exc.value) == msg
    with pytest.raises(ValueError) as exc:
        SimulatedSiteModel("nope", "shop.test")
    assert str(exc.value) == msg
    assert SimulatedSiteModel("shop", "Shop.Test").name == "shop.test"


CLOSED: list[str] = []


class ClosingAgent:
    """An agent for check_agent: records that it was closed, and fails to close when told to."""

    def __init__(self, label: str = "x", fail_close: bool = False):
        self.label, self.fail_close = label, fail_close

    def reset(self, task) -> None:
        pass

    def act(self, obs: dict) -> dict:
        return {"action": "noop()"}

    def config(self) -> dict:
        return {"label": self.label}

    def close(self) -> None:
        CLOSED.append(self.label)
        if self.fail_close:
            raise RuntimeError("cannot close")


def test_check_agent_describes_and_closes():
    CLOSED.clear()
    spec = f"{__name__}:ClosingAgent"
    assert check_agent(spec, {"label": "a"}) == {"config": {"label": "a"}, "oracle": False,
                                                  "wants_local_model": False}
    assert check_agent(spec, {"label": "b", "fail_close": True})["config"] == {"label": "b"}  # quietly
    assert CLOSED == ["a", "b"]
    assert check_agent("reference", {})["oracle"] is True
    with pytest.raises(AgentError, match=r"^agent 'keyword' has no setting 'bogus' \(its settings: max_clicks\)$"):
        check_agent("keyword", {"bogus": 1})
    with pytest.raises(AgentError, match=r"^agent 'reference' has no setting 'x' \(it takes none\)$"):
        check_agent("reference", {"x": 1})


def test_no_temporary_files_left_by_a_failed_json_write(tmp_path):
    bad = {"x": object()}  # not JSON: fails before any file is made
    with pytest.raises(TypeError):
        write_json(tmp_path / "bad.json", bad)
    assert os.listdir(tmp_path) == []
