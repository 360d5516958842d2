"""The shared helpers that replaced local copies (webfreeze.common.http, .files, .text; the
settings checks in simulator/ and agents/). "Behaviour unchanged" is a tested claim: the expected
values below are what the replaced code returned (host keys spelled out; for the text helpers,
over every code point and 300,000 seeded strings, a SHA-256 of the outputs, computed with the old
code when the helpers replaced it)."""

from __future__ import annotations

import hashlib
import json
import os
import random
import stat
import unicodedata
from urllib.parse import urlsplit

import pytest

from webfreeze.agents import AgentError, check_agent
from webfreeze.agents.base import norm
from webfreeze.common.files import FILE_MODE, json_text, write_atomically, write_json
from webfreeze.common.http import header_value, host_port, split_host_port
from webfreeze.common.text import collapse_ws, fold
from webfreeze.eval.text import normalise
from webfreeze.simulator.backends import BACKENDS, check_backend
from webfreeze.simulator.site_models import SimulatedSiteModel, check_site_models

# ------------------------------------------------------------------ host and port
# URL -> the key replayer/matching.py's split_url and replayer/hooks.py's host_key both computed
HOST_KEYS = {
    "http://Example.COM/": "example.com", "http://example.com:80/a": "example.com",
    "https://example.com:443/": "example.com", "https://example.com:80/": "example.com:80",
    "http://example.com:443/": "example.com:443", "HTTP://Shop.Test:80/x": "shop.test",
    "HTTPS://shop.test:8443/x": "shop.test:8443", "ftp://h.test:21/": "h.test:21",
    "http://[::1]:8080/": "::1:8080", "http://[::1]:80/": "::1", "http://[FE80::1]/": "fe80::1",
    "http://user:pw@Host.test:81/": "host.test:81", "http://h.test:/": "h.test", "http://h.test:99999/": "h.test",
    "http://h.test:abc/": "h.test", "//h.test:80/": "h.test:80", "/just/a/path": "", "": "",
    "http://h.test:0/": "h.test:0", "https://XN--BCHER-KVA.test/": "xn--bcher-kva.test", "http://h.test:080/": "h.test",
}


@pytest.mark.parametrize("url", sorted(HOST_KEYS))
def test_host_port_is_what_matching_and_site_models_computed(url):
    assert host_port(urlsplit(url)) == HOST_KEYS[url]


def test_host_port_drops_default_ports_and_lowercases():
    assert host_port(urlsplit("HTTPS://Shop.Test:443/cart")) == "shop.test"
    assert host_port(urlsplit("http://Shop.Test:8001/cart")) == "shop.test:8001"
    assert host_port(urlsplit("http://[::1]:8001/")) == "::1:8001"  # as the keys always were: no brackets
    assert host_port(urlsplit("http://h.test:99999/")) == "h.test"  # a port out of range is no port


# Host header -> what replayer/server.py's own_address split it into (odd inputs included as they were)
HOST_HEADERS = {
    "": ("", ""), "localhost": ("localhost", ""), "LocalHost:8080": ("localhost", "8080"),
    "127.0.0.1:80": ("127.0.0.1", "80"), "[::1]:8080": ("::1", "8080"), "[::1]": (":", "1]"), "::1": (":", "1"),
    "h.test:": ("h.test", ""), ":80": ("", "80"), "[FE80::1]:443": ("fe80::1", "443"), "a:b:c": ("a:b", "c"),
}


@pytest.mark.parametrize("text", sorted(HOST_HEADERS))
def test_split_host_port_is_the_old_host_header_split(text):
    assert split_host_port(text) == HOST_HEADERS[text]


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
# SHA-256 of the old code's outputs (eval/text.py's collapse_ws and normalise, agents/base.py's norm),
# each followed by a NUL. NFKC and case-folding follow Python's Unicode tables, so the digests hold
# for one Unicode version; on another, the examples below still run.
UNICODE = "14.0.0"
ALL_CODE_POINTS = {"collapse_ws": "15efa67cc1f7992737c4ca9b422b06097b0d4695f353c521ed28dec1bbf67cbd",
                   "norm": "cca98f455383b011cb3c7ab156312ede34dd33934e84b3b4af64172e00d010a2",
                   "normalise": "febb7f86522d7181fc35093907861c681ef237bc454f5a3e4a20a252092a695e"}
RANDOM_STRINGS = {"collapse_ws": "d16ef509d980497a6c93532e943e5145464e426922de8bbc981fe5694c7b2d43",
                  "norm": "d984ca48e7c961cbb0326d010aedf1f3fae492ffe4299b6c7f55d7ecff040eb9",
                  "normalise": "c4067bacb83bbce1bf51589334a4c2f0e40298819d028386d0e12116f186feb8"}


def _digest(fn, texts) -> str:
    h = hashlib.sha256()
    for s in texts:
        h.update(fn(s).encode("utf-8", "surrogatepass") + b"\0")
    return h.hexdigest()


def _same_unicode() -> None:
    if unicodedata.unidata_version != UNICODE:
        pytest.skip(f"digests computed with Unicode {UNICODE}, this Python has {unicodedata.unidata_version}")


def test_text_helpers_equal_the_old_code_on_every_code_point():
    _same_unicode()
    points = [chr(i) for i in range(0x110000)]
    assert _digest(lambda c: collapse_ws(f"A{c} B"), points) == ALL_CODE_POINTS["collapse_ws"]
    assert _digest(norm, points) == ALL_CODE_POINTS["norm"]
    assert _digest(normalise, points) == ALL_CODE_POINTS["normalise"]
    for c in points:  # norm is fold, then collapse_ws
        assert collapse_ws(fold(c)) == norm(c), hex(ord(c))


# characters that exercise the rules: every whitespace, quotes, edge punctuation, case-folding
# expansions (ß, ﬁ, İ, final sigma), compatibility forms (full-width, ligatures, ellipsis, ½),
# combining marks
_EDGE = " \t\r\n\"'.,;:!?"
_INTERESTING = ([chr(i) for i in range(0x3000) if chr(i).isspace()] + list(_EDGE) + list("`'\"")
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
    _same_unicode()
    texts = _random_strings(300_000, seed=20240315)
    assert _digest(normalise, texts) == RANDOM_STRINGS["normalise"]
    # norm was fold, then collapse_ws (the old code's digest); since it leaves icon fonts' glyphs
    # (Unicode's private-use characters) out where other text remains, it equals that on every
    # string without one, and on one with one once they are blanks
    assert _digest(lambda t: collapse_ws(fold(t)), texts) == RANDOM_STRINGS["norm"]
    private = 0
    for t in texts:
        if any(unicodedata.category(c) == "Co" for c in t):
            private += 1
            blanked = "".join(" " if unicodedata.category(c) == "Co" else c for c in fold(t))
            assert norm(t) == (collapse_ws(blanked) or collapse_ws(fold(t))), repr(t)
        else:
            assert norm(t) == collapse_ws(fold(t)), repr(t)
    assert 0 < private < len(texts)
    assert _digest(collapse_ws, texts) == RANDOM_STRINGS["collapse_ws"]


@pytest.mark.parametrize("text, normalised, normed", [
    ("  \u201cHello,\u00a0 World!\u201d ", "hello, world", "\u201chello, world!\u201d"),
    ("Stra\u00dfe \ufb01ve\u2026", "strasse five", "strasse five..."),
    ("`It\u2019s\u2028\uff21`", "it's a", "`it\u2019s a`"),
    ("\u0130stanbul", "i\u0307stanbul", "i\u0307stanbul"),
    ("\t\n", "", ""),
])
def test_text_helpers_examples(text, normalised, normed):
    assert normalise(text) == normalised
    assert norm(text) == normed
    assert collapse_ws(text) == " ".join(text.split())


def test_normalise_and_norm_on_none_and_non_strings():
    assert normalise(None) == ""
    assert norm(None) == ""
    assert normalise(42) == "42" and norm(0) == ""


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


def test_page_url_keeps_a_hash_route_and_drops_an_anchor():
    """``#/guide`` and ``#!/guide`` are pages of a hash-routed application; ``#top`` is a place in
    the page, and ``#/``, ``#!`` and ``#!/`` (the first route; the placeholder link ``href="#!"`` of
    many templates) are the page itself."""
    from webfreeze.common.http import page_url

    for kept in ("http://d.test/#/guide", "http://d.test/x#!/guide", "http://d.test/#/guide?id=intro"):
        assert page_url(kept) == kept
    for url in ("http://d.test/x#top", "http://d.test/x#/", "http://d.test/x#!", "http://d.test/x#!/", "http://d.test/x#"):
        assert page_url(url) == "http://d.test/x", url
