"""Set-of-marks screenshots: boxes and bids drawn exactly where the visible clickable elements
are, nothing else changed, and the same page always giving the same PNG bytes."""

from __future__ import annotations

import hashlib
import io
import re

import pytest
from PIL import Image

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.env import EnvConfig, WebEnv
from webfreeze.simulator.marks import BOX_WIDTH, LABEL_TEXT, draw_marks, mark_colour, mark_regions

PAGE_URL = "http://marks.test/"
PAGE = b"""<!DOCTYPE html><html><head><title>Marks</title><style>
body { margin: 0; background: #fff; font: 16px sans-serif; }
#go { position: absolute; left: 300px; top: 200px; width: 160px; height: 40px; border: 0; background: #eee; }
#more { position: absolute; left: 600px; top: 400px; }
#off { position: absolute; left: 50px; top: 600px; visibility: hidden; }
#text { position: absolute; left: 50px; top: 800px; width: 300px; height: 30px; }
</style></head><body>
<button id="go">Go</button><a id="more" href="/more">More</a><a id="off" href="/off">Hidden</a>
<p id="text">Plain text, not clickable</p>
</body></html>"""


def _png(size=(200, 120), colour=(255, 255, 255)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, colour).save(out, "PNG")
    return out.getvalue()


def _pixels(png: bytes) -> Image.Image:
    return Image.open(io.BytesIO(png)).convert("RGB")


def _inside(x, y, rect) -> bool:
    return rect[0] <= x <= rect[2] and rect[1] <= y <= rect[3]


def test_marks_are_drawn_only_on_visible_clickable_elements():
    elements = [
        {"bid": "3", "bbox": [20, 40, 60, 30], "visible": True, "clickable": True},
        {"bid": "4", "bbox": [120, 40, 50, 30], "visible": True, "clickable": False},
        {"bid": "5", "bbox": [120, 80, 50, 30], "visible": False, "clickable": True},
        {"bid": "6", "bbox": [150, 90, 100, 100], "visible": True, "clickable": True},  # runs off the image
    ]
    plain = _png()
    marked = draw_marks(plain, elements)
    assert marked == draw_marks(plain, elements)  # the same input, the same bytes
    img = _pixels(marked)
    assert img.size == (200, 120)
    regions = mark_regions(elements, img.size)
    assert [bid for bid, _, _ in regions] == ["3", "6"]
    # The outline sits on the box's edge, in the element's colour; the middle is untouched.
    assert img.getpixel((20, 40 + 15)) == mark_colour("3")
    assert img.getpixel((20 + BOX_WIDTH - 1, 40 + 15)) == mark_colour("3")
    assert img.getpixel((79, 40 + 15)) == mark_colour("3")
    assert img.getpixel((50, 55)) == (255, 255, 255)
    assert img.getpixel((199, 119)) == mark_colour("6")  # clipped to the image
    # The label holds the bid: white glyph pixels on the mark colour, above the box.
    label = next(lb for bid, _, lb in regions if bid == "3")
    assert label[3] < 40
    colours = {img.getpixel((x, y)) for x in range(label[0], label[2] + 1) for y in range(label[1], label[3] + 1)}
    assert mark_colour("3") in colours and LABEL_TEXT in colours
    # Nothing outside the marks changed; elements 4 and 5 got none.
    for y in range(img.size[1]):
        for x in range(img.size[0]):
            if img.getpixel((x, y)) != (255, 255, 255):
                assert any(_inside(x, y, box) or _inside(x, y, lb) for _, box, lb in regions), (x, y)
    assert draw_marks(plain, elements[1:3]) != marked


@pytest.fixture(scope="module")
def page_archive(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("marks")
    archive = tmp / "marks.wfz"
    with new_archive_atomically(archive) as arc:
        sid = arc.new_session("test", source="test_env_marks")
        arc.add_exchange(Exchange(url=PAGE_URL, captured_at="2026-01-01T00:00:00Z", status=200, reason="OK",
                                  resp_headers=[("Content-Type", "text/html; charset=utf-8")], payload=PAGE,
                                  session_id=sid))
        arc.add_exchange(Exchange(url=PAGE_URL + "more", captured_at="2026-01-01T00:00:00Z", status=200,
                                  reason="OK", resp_headers=[("Content-Type", "text/html; charset=utf-8")],
                                  payload=b"<!DOCTYPE html><title>More</title><h1>More, on a page of its own</h1>",
                                  session_id=sid))
    return archive


def _need_chromium() -> None:
    try:
        chromium_path()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))


def test_each_steps_screenshot_is_the_page_it_acted_on(page_archive):
    """A step's screenshot goes with its url, title and observation digest: the page the action was
    taken on (the start page for step 0), not the page the action led to."""
    _need_chromium()
    env = WebEnv(EnvConfig(page_archive, screenshots=True))
    try:
        start, _ = env.reset(options={"task": {"id": "marks", "start_url": PAGE_URL, "instruction": "look"}})
        (bid,) = re.findall(r"\[(\w+)\] link 'More'", start["axtree_text"])
        after, *_ = env.step(f"click('{bid}')")
        assert after["title"] == "More" and after["screenshot"] != start["screenshot"]
        env.step("send_msg_to_user('seen')")
        steps = env.recorder.steps
        assert [s["url"] for s in steps] == [PAGE_URL, PAGE_URL + "more"]
        assert env.recorder.shots == {0: start["screenshot"], 1: after["screenshot"]}
    finally:
        env.close()


def test_set_of_marks_screenshot_in_the_browser(page_archive, monkeypatch, tmp_path):
    _need_chromium()
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    task = {"id": "marks", "start_url": PAGE_URL, "instruction": "look"}
    shots = {}
    for name, config in (("plain", EnvConfig(page_archive, screenshots=True)),
                         ("marks", EnvConfig(page_archive, set_of_marks=True))):
        env = WebEnv(config)
        try:
            first, _ = env.reset(options={"task": task})
            second, _ = env.reset(options={"task": task})
            after_step, *_ = env.step("noop()")
        finally:
            env.close()
        assert first["title"] == "Marks" and first["screenshot"][:8] == b"\x89PNG\r\n\x1a\n"
        assert first["screenshot"] == second["screenshot"] == after_step["screenshot"], f"{name} PNG not repeatable"
        shots[name] = first
    assert shots["plain"]["elements"] == shots["marks"]["elements"]
    assert shots["plain"]["axtree_text"] == shots["marks"]["axtree_text"]
    elements = shots["marks"]["elements"]
    by_name = {(e["role"], e["name"]): e for e in elements}
    button, link = by_name[("button", "Go")], by_name[("link", "More")]
    assert button["bbox"] == [300, 200, 160, 40] and button["visible"] and button["clickable"]
    assert not any(e["name"] == "Hidden" for e in elements)
    plain, marked = _pixels(shots["plain"]["screenshot"]), _pixels(shots["marks"]["screenshot"])
    assert plain.size == marked.size == (1920, 1080)
    regions = {bid: (box, label) for bid, box, label in mark_regions(elements, marked.size)}
    assert set(regions) == {e["bid"] for e in elements if e["visible"] and e["clickable"]}
    assert {button["bid"], link["bid"]} <= set(regions)
    # The button's box corner carries its mark colour, which the plain screenshot does not have there.
    assert marked.getpixel((300, 200)) == mark_colour(button["bid"]) != plain.getpixel((300, 200))
    assert marked.getpixel((459, 239)) == mark_colour(button["bid"])
    assert marked.getpixel((380, 220)) == plain.getpixel((380, 220))  # inside the box: untouched
    lx0, ly0, lx1, ly1 = regions[link["bid"]][1]
    assert marked.getpixel((lx0, ly0)) == mark_colour(link["bid"])
    # Every pixel that differs lies in a mark (box or label); the text paragraph is unmarked.
    diff = [(x, y) for y in range(0, 1080, 2) for x in range(0, 1920, 2)
            if plain.getpixel((x, y)) != marked.getpixel((x, y))]
    assert diff
    for x, y in diff:
        assert any(_inside(x, y, box) or _inside(x, y, lb) for box, lb in regions.values()), (x, y)
    digests = {hashlib.sha256(shots[k]["screenshot"]).hexdigest() for k in ("plain", "marks")}
    assert len(digests) == 2


def test_text_backend_has_no_screenshot(page_archive):
    env = WebEnv(EnvConfig(page_archive, backend="text", set_of_marks=True))
    try:
        obs, _ = env.reset(options={"task": {"id": "t", "start_url": PAGE_URL}})
    finally:
        env.close()
    assert obs["screenshot"] is None and obs["title"] == "Marks"


@pytest.mark.parametrize("backend", ["text", "browser"])
def test_a_start_page_that_does_not_load_is_in_the_trajectory(page_archive, backend):
    """A task whose start URL is no URL (a scheme left out): the agent is told at reset, and so is
    the trajectory: its start holds the error and the episode is compromised, in either backend."""
    if backend == "browser":
        _need_chromium()
    env = WebEnv(EnvConfig(page_archive, backend=backend))
    try:
        obs, _ = env.reset(options={"task": {"id": "nowhere", "start_url": "marks.test", "instruction": "look"}})
        env.step("send_msg_to_user('nothing')")
        replay = env.trajectory()["replay"]
    finally:
        env.close()
    assert replay["compromised"] is True, replay
    if obs["last_action_error"]:
        assert replay["start"]["error"] == obs["last_action_error"].splitlines()[0]
    else:  # (the text backend asks the replay for it: a miss)
        assert replay["misses"] > 0
