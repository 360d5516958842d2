"""What a page's scripts put in its head is never drawn, and is not in the observation: TensorBoard's
Polymer styles leave text (a CSS comment) and ``<dom-module>`` elements in the head, and the tree's
HTML parser, which ends a head at such a node as it would in a page as served, moved them and
everything after them into the body, so every observation began with four lines of CSS comments.
The observation's copy keeps a head's title, base and meta elements alone. On the same page, an
icon button (no text inside) is named by its title, as Chromium names it."""

from __future__ import annotations

import pytest

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.env import EnvConfig, WebEnv

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

URL = "http://head.test/app/"
PAGE = b"""<!DOCTYPE html><html><head><title>Board</title><base href="/docs/"><script>
const head = document.head;
head.appendChild(document.createTextNode('/* Most common used flex styles */'));
const mod = document.createElement('dom-module');
mod.innerHTML = '<template><style>.x { color: red }</style></template>';
head.appendChild(mod);
head.appendChild(document.createTextNode('/* Flexbox alignment */'));
const meta = document.createElement('meta');
meta.name = 'late';
head.appendChild(meta);
</script></head><body><h1>Runs</h1><a href="guide.html">Guide</a>
<button title="Reload"><span></span><i aria-hidden="true"><svg width="10" height="10"><path d="M0 0h9v9z"/></svg></i></button>
</body></html>"""


def test_a_heads_script_content_is_not_shown_and_an_icon_button_has_its_title(tmp_path):
    path = tmp_path / "head.wfz"
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_env_head")
        arc.add_exchange(Exchange(url=URL, captured_at="2026-01-01T00:00:00Z", status=200, reason="OK",
                                  resp_headers=[("Content-Type", "text/html")], payload=PAGE, session_id=sid))
    with WebEnv(EnvConfig(path, backend="browser")) as env:
        obs, _ = env.reset(options={"task": {"id": "head", "start_url": URL, "instruction": "read"}})
    text = obs["axtree_text"]
    assert "/*" not in text, text
    assert text.splitlines()[0].startswith("RootWebArea 'Board'"), text
    assert "link 'Guide', url='http://head.test/docs/guide.html'" in text, text  # (the head's base, still read)
    assert "button 'Reload'" in text, text
