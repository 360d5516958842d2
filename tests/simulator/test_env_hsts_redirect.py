"""What the browser backend counts as a miss of the archive: a request the replay could not answer.
Wagtail's admin shows avatars from ``//www.gravatar.com/...`` on an http page; Chromium's HSTS preload
list sends that to https:// with a 307 of its own (``Non-Authoritative-Reason: HSTS``), which never
reached the replay, and the https request is answered from the archive. That 307 was counted as a
miss, so every episode through the admin was called replay-compromised."""

from __future__ import annotations

import pytest

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.env import EnvConfig, WebEnv

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

SITE = "http://cms.test"
AVATAR = "//www.gravatar.com/avatar/abc?s=100"  # (gravatar.com is on Chromium's HSTS preload list)
PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c6360"
                    "00000000050001a5f645400000000049454e44ae426082")
PAGE = f"""<!DOCTYPE html><html><head><title>Dashboard</title></head><body><h1>Dashboard</h1>
<img alt="avatar" src="{AVATAR}"><p id="m">loading</p><script>
fetch('/missing.json').then((r) => r.text().then(() => {{ document.getElementById('m').textContent = 'status ' + r.status; }}));
</script></body></html>"""
TASK = {"id": "dashboard", "start_url": SITE + "/", "instruction": "read the dashboard"}


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("hsts") / "cms.wfz"
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_env_refused_answers")
        at = "2026-01-01T00:00:00Z"
        arc.add_exchange(Exchange(url=SITE + "/", captured_at=at, status=200, reason="OK", session_id=sid,
                                  resp_headers=[("Content-Type", "text/html; charset=utf-8")], payload=PAGE.encode()))
        arc.add_exchange(Exchange(url="https:" + AVATAR, captured_at=at, status=200, reason="OK", session_id=sid,
                                  resp_headers=[("Content-Type", "image/png")], payload=PNG))
    return path


def test_the_browser_s_own_hsts_redirect_is_not_a_miss(archive):
    env = WebEnv(EnvConfig(archive=archive, backend="browser"))
    try:
        obs, _ = env.reset(options={"task": TASK})
        start = env.trajectory()["replay"]["start"]
    finally:
        env.close()
    assert "status 404" in obs["axtree_text"]
    misses = sorted((f["kind"], f["url"]) for f in start["flagged"] if f["level"] == "miss")
    assert misses == [("xhr", SITE + "/missing.json")], start["flagged"]  # the one request not captured
    assert "miss" not in start["requests"].get("subresource", {}), start["requests"]
