"""The BrowserGym observation's screenshot (simulator/bgym_obs.py): the capture's own still
screenshot (by CDP, optimizeForSpeed) has the pixels of the environment's Playwright still
screenshot, on a page whose caret and animations would show otherwise, and leaves the page as it
was; the decoder of Chromium's Up-filtered PNGs gives Pillow's pixels, and any other PNG goes to
Pillow."""

from __future__ import annotations

import asyncio
import io
import struct
import zlib
from urllib.parse import quote

import numpy as np
import pytest
from PIL import Image

from webfreeze.simulator import bgym_obs
from webfreeze.simulator.bgym_obs import _up_filtered_rgb, png_to_rgb
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path


def pillow_rgb(png: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(png)) as img:
        return np.array(img.convert("RGB"))


def png(width: int, height: int, rows: list[bytes], color: int = 2) -> bytes:
    """A PNG of the given filtered rows (each with its filter byte), written by hand."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    header = struct.pack(">IIBBBBB", width, height, 8, color, 0, 0, 0)
    data = zlib.compress(b"".join(rows))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", data[:50]) + chunk(b"IDAT", data[50:]) \
        + chunk(b"IEND", b"")


def up_rows(pixels: np.ndarray) -> list[bytes]:
    """Each row minus the one above (mod 256), with the Up filter's byte."""
    flat = pixels.reshape(pixels.shape[0], -1).astype(np.int16)
    above = np.vstack([np.zeros_like(flat[:1]), flat[:-1]])
    return [b"\x02" + bytes(((row - up) % 256).astype(np.uint8)) for row, up in zip(flat, above)]


def test_up_filtered_pngs_decode_to_pillows_pixels_and_others_go_to_pillow():
    rng = np.random.default_rng(7)
    pixels = rng.integers(0, 256, size=(37, 53, 3), dtype=np.uint8)
    pixels[10:20] = pixels[9]  # (runs of equal rows too)
    up = png(53, 37, up_rows(pixels))
    assert (pillow_rgb(up) == pixels).all()  # (the hand-written PNG is right)
    fast = _up_filtered_rgb(up)
    assert fast is not None and fast.dtype == np.uint8 and fast.shape == (37, 53, 3)
    assert (fast == pixels).all() and fast.flags.writeable and fast.flags.c_contiguous
    # one row with another filter (Sub of zeros = the raw row): not ours, Pillow's pixels all the same
    rows = up_rows(pixels)
    rows[5] = b"\x00" + bytes(pixels[5].reshape(-1))
    rows[6] = b"\x02" + bytes(((pixels[6].astype(np.int16) - pixels[5]) % 256).astype(np.uint8).reshape(-1))
    mixed = png(53, 37, rows)
    assert _up_filtered_rgb(mixed) is None
    assert (png_to_rgb(mixed) == pixels).all()
    # RGBA, Pillow's own PNG, a truncated one: Pillow's (or its error)
    rgba = np.dstack([pixels, np.full((37, 53), 200, dtype=np.uint8)])
    alpha = png(53, 37, up_rows(rgba), color=6)
    assert _up_filtered_rgb(alpha) is None and (png_to_rgb(alpha) == pixels).all()
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="PNG")
    assert (png_to_rgb(buf.getvalue()) == pixels).all()
    assert _up_filtered_rgb(up[:-40]) is None and _up_filtered_rgb(b"GIF89a") is None


# A page whose screenshot changes with the caret (a focused input) and with animations (an infinite
# one, in the page and in an iframe), beside a finished transition and an image.
PAGE = ("<!DOCTYPE html><title>still</title><style>@keyframes spin {to {transform: rotate(360deg)}}"
        ".spin {width:120px;height:120px;background:linear-gradient(90deg,#c33,#33c);animation:spin 700ms linear infinite}"
        "input {font-size:40px}</style>"
        "<input id=q value='caret here' autofocus><div class=spin id=s></div>"
        "<img src='data:image/svg+xml," + quote("<svg xmlns='http://www.w3.org/2000/svg' width='90' height='60'>"
                                                 "<circle cx='45' cy='30' r='25' fill='teal'/></svg>") + "'>"
        "<iframe srcdoc=\"<style>@keyframes spin {to {transform: rotate(360deg)}} div {width:80px;height:80px;"
        "background:#3a3;animation:spin 500ms linear infinite}</style><div></div>\"></iframe>"
        + "".join(f"<p>line {i}</p>" for i in range(40)))


def test_the_capture_screenshot_has_the_pixels_of_the_still_screenshot_and_leaves_the_page_as_it_was():
    try:
        chromium_path()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))
    from playwright.async_api import async_playwright

    from webfreeze.simulator.browser import launch_chromium, new_context, still_screenshot_async

    state_js = """() => ({caret: document.getElementById('q').style.getPropertyValue('caret-color'),
                         focused: document.activeElement && document.activeElement.id,
                         spinning: document.getElementById('s').getAnimations().map((a) => a.playState),
                         inner: document.querySelector('iframe').contentDocument.querySelector('div')
                                  .getAnimations().map((a) => a.playState),
                         left: ['__wfUnstill', '__wfBgymMarks'].filter((k) => k in window)})"""

    async def run():
        async with async_playwright() as pw:
            browser = await launch_chromium(pw, shell=True)
            try:
                context = await new_context(browser)
                page = await context.new_page()
                results = []
                for i in range(2):  # (the second on the kept session, after a navigation)
                    await page.goto("data:text/html," + quote(PAGE + f"<!-- {i} -->"))
                    await page.focus("#q")
                    before = await page.evaluate(state_js)
                    raw = await bgym_obs.capture_browser(context, page)
                    after = await page.evaluate(state_js)
                    theirs = await still_screenshot_async(page)
                    # caret and animations as they are, the spinners turned a while after their restart
                    await page.wait_for_timeout(300)
                    plain = await page.screenshot(type="png")
                    results.append((raw, before, after, theirs, plain))
                assert page in bgym_obs._sessions
                return results
            finally:
                await browser.close()

    for raw, before, after, theirs, plain in asyncio.run(run()):
        assert before == after == {"caret": "", "focused": "q", "spinning": ["running"], "inner": ["running"],
                                   "left": []}
        assert _up_filtered_rgb(raw["png"]) is not None  # (Chromium's fast PNG: the decoder's own path)
        assert raw["rgb"].shape == (1080, 1920, 3)
        assert (raw["rgb"] == pillow_rgb(raw["png"])).all()
        assert (raw["rgb"] == pillow_rgb(theirs)).all()
        assert not np.array_equal(raw["rgb"], pillow_rgb(plain))  # (stilling it changed what is seen)
        assert raw["titles"] == ["still"] and raw["active"] == 0
        assert raw["axtree"]["nodes"] and raw["dom"]["documents"]


def animated_gif() -> bytes:
    """A 200x200 GIF that alternates two colours every 20 ms, forever."""
    frames = [Image.new("RGB", (200, 200), colour) for colour in ((200, 30, 30), (30, 30, 200), (30, 160, 30))]
    buf = io.BytesIO()
    frames[0].save(buf, format="GIF", save_all=True, append_images=frames[1:], duration=30, loop=0)
    return buf.getvalue()


STILL_PAGE = ("<!DOCTYPE html><title>rest</title><h1>At rest</h1><input value='no focus'><button>Go</button>"
              + "".join(f"<p>paragraph {i} of a page that does not move</p>" for i in range(30)))


def test_a_page_at_rest_takes_two_screenshots_with_the_still_screenshots_pixels():
    """The still screenshot's rule on a page at rest: the screenshot asked for with the snapshots
    and the one after the settle agree (no third), with the pixels of the environment's still
    screenshot, capture after capture. On an animated image, which nothing stops, the capture
    takes more screenshots, or gives up after STILL_SHOT_TRIES more (now and then two agree on
    it: see docs/benchmarks.md, bgym_obs), and never more than that."""
    try:
        chromium_path()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))
    import base64

    from playwright.async_api import async_playwright

    from webfreeze.simulator.browser import (
        STILL_SHOT_TRIES,
        launch_chromium,
        new_context,
        still_screenshot_async,
        wait_painted,
    )

    gif = "data:image/gif;base64," + base64.b64encode(animated_gif()).decode()
    moving = f"<!DOCTYPE html><title>moving</title><h1>An animated image</h1><img src='{gif}'>"

    async def run():
        async with async_playwright() as pw:
            browser = await launch_chromium(pw, shell=True)
            try:
                context = await new_context(browser)
                page = await context.new_page()
                out = {}
                for name, html in (("still", STILL_PAGE), ("moving", moving)):
                    await page.goto("data:text/html," + quote(html))
                    await wait_painted(page)
                    raws = [await bgym_obs.capture_browser(context, page) for _ in range(3)]
                    out[name] = (raws, await still_screenshot_async(page))
                return out
            finally:
                await browser.close()

    out = asyncio.run(run())
    raws, theirs = out["still"]
    assert [raw["shots"] for raw in raws] == [2, 2, 2]
    for i, raw in enumerate(raws):
        differ = (raw["rgb"] != pillow_rgb(theirs)).any(axis=2)
        assert not differ.any(), (i, raw["shots"], int(differ.sum()), [(a.min(), a.max()) for a in differ.nonzero()])
    raws, _ = out["moving"]
    # (how many it takes there is the animation's timing against the machine's: no verdict on that,
    # beyond the bound; two screenshots agree on it now and then)
    for raw in raws:
        assert 2 <= raw["shots"] <= 1 + STILL_SHOT_TRIES
