"""BrowserGym's observation, for agents written against BrowserGym (``EnvConfig(observation="browsergym")``).

BrowserGym's ``BrowserEnv`` observes a page as ``chat_messages``, ``goal_object``,
``open_pages_urls``, ``open_pages_titles``, ``active_page_index``, ``axtree_object`` (CDP's
``Accessibility.getFullAXTree``, each element's node carrying ``browsergym_id``), ``dom_object``
(CDP's ``DOMSnapshot.captureSnapshot``, elements carrying a ``bid`` attribute),
``extra_element_properties`` (``{bid: {visibility, bbox, clickable, set_of_marks}}``),
``focused_element_bid``, ``last_action``, ``last_action_error``, ``elapsed_time`` and
``screenshot`` (an RGB array, height x width x 3). This module builds those keys with those shapes,
so that ``browsergym.utils.obs.flatten_axtree_to_str`` / ``flatten_dom_to_str`` and the agents
built on them (AgentLab's GenericAgent) read our pages unchanged:

- **browser backend**: taken the way BrowserGym takes them, through CDP on the live page
  (:func:`capture_browser`). The bids are our own (``data-wf-bid``, stamped in document order by
  the observation's MARK_JS), so the ids an agent reads are the ids our actions take. The two
  snapshots are joined on Chromium's backend node ids; while the accessibility tree is read, each
  element carries BrowserGym's ARIA marks (``browsergym_id_<bid>`` in its role description and
  description, taken off right after, and out of the tree's nodes), because they change which
  nodes Chromium keeps: the tree is BrowserGym's own, node for node, but for the ids (tested
  against ``BrowserEnv`` on the same pages).
- **text backend**: built to the same shapes from our tree (:func:`from_tree`): the accessibility
  nodes of :class:`~webfreeze.simulator.axtree.Tree` (so ``flatten_axtree_to_str`` gives exactly
  our ``axtree_text``) and a DOM snapshot of the page as our DOM snapshots store it (form state
  written in). There is no layout: no boxes, every rendered element counts as visible, and the
  screenshot is a blank page of the viewport's size (BrowserGym always gives one; agents such as
  AgentLab's draw on it).

Determinism: nothing here reads a wall clock. ``elapsed_time`` is the episode's virtual time (the
milliseconds its ``noop`` waits asked for: the page clock is frozen otherwise), chat timestamps
are the task's snapshot time (0 without one) plus that time, and visibility ratios are computed
from the snapshot's boxes, not sampled by an IntersectionObserver.

Approximations (documented in docs/agents.md): ``visibility`` is the share of an element's box
inside the viewport; ``set_of_marks`` is our clickable-and-visible flag with BrowserGym's minimum
area, not its centre-hit test.
"""

from __future__ import annotations

import asyncio
import base64
import io
import itertools
import json
import re
import struct
import weakref

import gymnasium as gym
import numpy as np
from isal import isal_zlib
from lxml import etree

from webfreeze.archives.timeutil import parse_time
from webfreeze.common.aria import BGYM_MARKED_TAGS

from .actions import MAX_WAIT_MS
from .axtree import BID_ATTR, OPEN_ROOTS_JS, Tree
from .browser import has_document

OBSERVATIONS = ("default", "browsergym")
BGYM_BID = "bid"  # BrowserGym's element id attribute (browsergym.core.constants.BROWSERGYM_ID_ATTRIBUTE)
VIEWPORT = (1920, 1080)
GREETING = "Hi! I am your UI assistant, I can perform web tasks for you. What can I help you with?"
CHAT_ROLES = ("user", "user_image", "assistant", "info", "infeasible")  # BrowserGym's Chat.add_message
SOM_MIN_AREA = 20  # BrowserGym's smallest box for a set-of-marks label (frame_mark_elements.js)
# CDP property value types, as Chromium reports them, for the text backend's nodes.
_PROP_TYPES = {"checked": "tristate", "pressed": "tristate", "hasPopup": "token", "orientation": "token",
               "autocomplete": "token", "invalid": "token", "url": "string", "live": "token",
               "relevant": "tokenList"}
KEYS = ("chat_messages", "goal_object", "open_pages_urls", "open_pages_titles", "active_page_index",
        "axtree_object", "dom_object", "extra_element_properties", "focused_element_bid", "last_action",
        "last_action_error", "elapsed_time", "screenshot")


# ------------------------------------------------------------------------------------ browser backend
# One CDP session per page, kept for the page's life (a session per observation costs two round
# trips, and the session outlives navigations: it is attached to the tab, not to a document).
_sessions: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


async def _session(context, page):
    cdp = _sessions.get(page)
    if cdp is None:
        cdp = _sessions[page] = await context.new_cdp_session(page)
    return cdp


def forget_session(page) -> None:
    """Drop ``page``'s kept CDP session (one that failed: the next capture opens another)."""
    _sessions.pop(page, None)


async def capture_browser(context, page, *, screenshot: bool = True) -> dict:
    """BrowserGym's raw material of the live page: ``{dom, axtree, png, rgb, titles, active}`` (the
    CDP DOM snapshot, the merged accessibility tree of all frames, a still screenshot of the
    viewport as a PNG and as BrowserGym's RGB array, the open pages' titles and the index of
    ``page`` among them). Without ``screenshot``, ``png`` and ``rgb`` are None and the caller
    puts a PNG there (the environment's still screenshot, simulator/browser.py
    ``still_screenshot_async``, when its bytes are kept too)."""
    # (imported here: the text backend runs without Playwright)
    from playwright.async_api import Error as PlaywrightError

    pages = context.pages
    titles = asyncio.gather(*(_title(p) for p in pages))  # (meanwhile)
    try:
        try:
            raw = await _capture(await _session(context, page), page, screenshot)
        except PlaywrightError as exc:
            if not _SESSION_GONE.search(str(exc)):
                raise
            forget_session(page)
            raw = await _capture(await _session(context, page), page, screenshot)  # (once more, on a new session)
    finally:
        raw_titles = await titles
    raw["titles"] = list(raw_titles)
    raw["active"] = pages.index(page) if page in pages else 0
    return raw


_SESSION_GONE = re.compile(r"Target (page, context or browser )?(has been )?closed|Session closed|detached",
                           re.IGNORECASE)


async def _title(page) -> str:
    from playwright.async_api import Error as PlaywrightError

    try:
        return await page.title()
    except PlaywrightError:  # a page closing meanwhile
        return ""


def _evaluate(cdp, function: str, arg) -> asyncio.Future:
    """``function(arg)`` in the page's main world by CDP, queued now (in order with the session's
    other commands); the future of its value."""
    async def run():
        from playwright.async_api import Error as PlaywrightError

        answer = await cdp.send("Runtime.evaluate", {"expression": f"({function})({json.dumps(arg)})",
                                                     "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in answer:
            details = answer["exceptionDetails"]
            raise PlaywrightError(str((details.get("exception") or {}).get("description") or details.get("text")))
        return (answer.get("result") or {}).get("value")
    return asyncio.ensure_future(run())


async def _capture(cdp, page, screenshot: bool) -> dict:
    from playwright.async_api import Error as PlaywrightError

    # The commands go out together, and a session's commands start in the page in the order sent,
    # so each snapshot sees the page as the commands before it left it:
    # - the DOM snapshot first, as the page is;
    # - then BrowserGym's marks: it writes each element's id into its ARIA description before
    #   reading the accessibility tree, and that makes Chromium keep nodes it would otherwise leave
    #   out (a label around a checkbox, say); the same marks for the same tree, taken off at once;
    # - then, for the screenshot, the page made still (STILL_JS) and let settle (PAINT_SETTLE_JS:
    #   its frames go by while the snapshots above are taken).
    dom = asyncio.ensure_future(cdp.send("DOMSnapshot.captureSnapshot", {
        "computedStyles": [], "includeDOMRects": True, "includePaintOrder": True}))
    marked = _evaluate(cdp, ARIA_MARK_JS, True)
    subframes = len(page.main_frame.child_frames) > 0
    if subframes:  # the marks in the other frames too (by Playwright), once the DOM snapshot is in
        await asyncio.gather(dom, return_exceptions=True)
        await _in_frames(page, ARIA_MARK_JS, True, main=False)
    frames = asyncio.ensure_future(cdp.send("Page.getFrameTree"))
    main = asyncio.ensure_future(cdp.send("Accessibility.getFullAXTree"))  # (the main frame's)
    ids: list = []
    others: list = []
    stilled = settled = None
    try:
        todo = [(await frames)["frameTree"]]
        while todo:
            frame = todo.pop()
            ids.append(frame["frame"]["id"])
            todo.extend(frame.get("childFrames", []))
        others = [asyncio.ensure_future(cdp.send("Accessibility.getFullAXTree", {"frameId": fid})) for fid in ids[1:]]
    finally:
        unmarked = _evaluate(cdp, ARIA_MARK_JS, False)
        if screenshot:
            stilled, settled = _still(cdp, page, bool(others))
            early = asyncio.ensure_future(_shot(cdp))  # (see _still_shots)
        done = await asyncio.gather(dom, marked, frames, main, *others, unmarked, return_exceptions=True)
        if subframes:
            await _in_frames(page, ARIA_MARK_JS, False, main=False)
        failed = next((r for r in done if isinstance(r, BaseException)), None)
        if failed is not None and screenshot:
            await asyncio.gather(early, return_exceptions=True)
            await _unstill(page, stilled, settled)
    if failed is not None:
        raise failed
    trees = dict(zip(ids, [main.result(), *(t.result() for t in others)]))
    nodes = []
    for tree in trees.values():
        nodes.extend(tree["nodes"])
    # An iframe's node leads to the root of its frame's tree, as in BrowserGym's merged tree.
    for node in nodes:
        if node.get("role", {}).get("value") == "Iframe" and "backendDOMNodeId" in node:
            try:
                described = await cdp.send("DOM.describeNode", {"backendNodeId": node["backendDOMNodeId"]})
            except PlaywrightError:  # a frame that went away: its tree is left out, as BrowserGym does
                continue
            fid = described.get("node", {}).get("frameId")
            if fid in trees and fid != ids[0] and trees[fid]["nodes"]:
                node.setdefault("childIds", []).append(trees[fid]["nodes"][0]["nodeId"])
    raw = {"dom": dom.result(), "axtree": {"nodes": nodes}, "png": None, "rgb": None}
    if screenshot:
        raw["png"], raw["rgb"], raw["shots"] = await _still_shots(cdp, page, stilled, settled, early,
                                                                  lambda: _prepare(raw))
    else:
        _prepare(raw)
    return raw


def _still(cdp, page, subframes: bool) -> tuple:
    """Make the page still for a screenshot (STILL_JS in the main frame, queued on the session; in
    the other frames, if any, by Playwright once the snapshots are in) and let it settle
    (PAINT_SETTLE_JS); the futures of both."""
    from .browser import PAINT_SETTLE_JS, PAINT_SETTLE_LIMIT_MS

    stilled = _evaluate(cdp, STILL_JS, True)
    settled = _evaluate(cdp, PAINT_SETTLE_JS, PAINT_SETTLE_LIMIT_MS)
    if subframes:
        stilled = asyncio.ensure_future(_after(stilled, _in_frames(page, STILL_JS, False, main=False)))
    return stilled, settled


async def _after(first, then):
    try:
        await first
    finally:
        await then


async def _in_frames(page, code: str, arg, *, main: bool) -> None:
    """``code(arg)`` in each frame of ``page`` (the main one too if ``main``); a frame gone meanwhile
    is skipped, as Playwright's own screenshot does."""
    from playwright.async_api import Error as PlaywrightError

    async def one(frame):
        try:
            await frame.evaluate(code, arg)
        except PlaywrightError:
            pass
    await asyncio.gather(*(one(f) for f in page.frames if (main or f is not page.main_frame) and has_document(f)))


async def _unstill(page, stilled, settled) -> None:
    """Undo STILL_JS (in every frame), once it and the settle are done, whatever became of them."""
    await asyncio.gather(stilled, settled, return_exceptions=True)
    await _in_frames(page, UNSTILL_JS, None, main=True)


def _prepare(raw: dict) -> None:
    """The snapshots as BrowserGym's keys hold them (in place): Chromium's ids renumbered, our
    ``data-wf-bid`` as BrowserGym's ``bid`` attribute, each element's accessibility node with its
    ``browsergym_id`` and BrowserGym's ARIA marks taken out."""
    dom, axtree = raw["dom"], raw["axtree"]
    _canonical_ids(dom, axtree)
    bids = _rename_bids(dom)
    for node in axtree["nodes"]:
        _unmark(node)
        bid = bids.get(node.get("backendDOMNodeId"))
        if bid is not None:
            node["browsergym_id"] = bid
    raw["prepared"] = True


async def _shot(cdp) -> bytes:
    """A PNG of the viewport by CDP, ``optimizeForSpeed``: the pixels of Playwright's screenshot,
    faster to encode and to decode. One that does not come in SHOT_TIMEOUT_MS is asked for
    again, as the environment's screenshots are (simulator/browser.py)."""
    from playwright.async_api import Error as PlaywrightError

    from .browser import SHOT_ATTEMPTS, SHOT_TIMEOUT_MS

    for _ in range(SHOT_ATTEMPTS):
        try:
            shot = await asyncio.wait_for(cdp.send("Page.captureScreenshot", {"format": "png", "optimizeForSpeed": True}),
                                          SHOT_TIMEOUT_MS / 1000)
            return base64.b64decode(shot["data"])
        except asyncio.TimeoutError:
            pass
    raise PlaywrightError(f"no screenshot in {SHOT_ATTEMPTS} x {SHOT_TIMEOUT_MS} ms")


async def _still_shots(cdp, page, stilled, settled, early, meanwhile) -> tuple[bytes, np.ndarray, int]:
    """The still screenshot of the environment's (simulator/browser.py ``still_screenshot_async``:
    the page settled, CSS animations finished or stopped and the caret hidden as Playwright's
    ``animations="disabled", caret="hide"`` have it, then screenshots until two in a row agree,
    STILL_SHOT_TRIES at most) as a PNG and as BrowserGym's RGB array, and how many screenshots it
    took. ``early`` is a screenshot asked for with the snapshots, before the settle is over: when
    the first one after it agrees, the page was still across the settle and a third is spared.
    ``meanwhile()`` runs while the page settles, and each screenshot is decoded while the next one
    is taken. (Two screenshots in a row agree now and then on an animated image, whose frames need
    not change between them: docs/benchmarks.md, bgym_obs, has a proof by Chromium's screencast
    that catches it, measured slower.)"""
    from playwright.async_api import Error as PlaywrightError

    from .browser import STILL_SHOT_TRIES

    try:
        meanwhile()
        for step in (stilled, settled):
            try:
                await step
            except PlaywrightError:
                pass  # the document went away: the screenshot shows what is there now
        shot = await early
        decoded = asyncio.ensure_future(asyncio.to_thread(png_to_rgb, shot))
        shots = 1
        for _ in range(STILL_SHOT_TRIES):
            again = await _shot(cdp)
            shots += 1
            if again == shot:
                break
            shot = again
            await asyncio.gather(decoded, return_exceptions=True)  # (a frame still changing: this one)
            decoded = asyncio.ensure_future(asyncio.to_thread(png_to_rgb, shot))
    finally:
        await asyncio.gather(early, return_exceptions=True)
        await _unstill(page, stilled, settled)
    return shot, await decoded, shots


# Before a screenshot (in each frame): the caret hidden and CSS animations finished (the infinite
# ones stopped), also those that start meanwhile, as Playwright's screenshot options
# animations="disabled", caret="hide" do (in every shadow root too), and, in the main frame, web
# fonts loaded; UNSTILL_JS puts everything back.
STILL_JS = r"""
async (main) => {
  const roots = [document];
  for (let i = 0; i < roots.length; i++) {
    const walker = document.createTreeWalker(roots[i], NodeFilter.SHOW_ELEMENT);
    for (let el = walker.currentNode; el; el = walker.nextNode()) {
      if (el instanceof Element && el.shadowRoot) roots.push(el.shadowRoot);
    }
  }
  const undo = [];
  const carets = new Map();
  for (const root of roots) {
    for (const el of root.querySelectorAll('input,textarea,[contenteditable]')) {
      carets.set(el, [el.style.getPropertyValue('caret-color'), el.style.getPropertyPriority('caret-color')]);
      el.style.setProperty('caret-color', 'transparent', 'important');
    }
  }
  undo.push(() => { for (const [el, [v, p]] of carets) el.style.setProperty('caret-color', v, p); });
  const stopped = new Set();
  const still = (root) => {
    for (const a of root.getAnimations()) {
      if (!a.effect || a.playbackRate === 0 || stopped.has(a)) continue;
      if (Number.isFinite(a.effect.getComputedTiming().endTime)) {
        try { a.finish(); } catch (e) {}
      } else {
        try { a.cancel(); stopped.add(a); } catch (e) {}
      }
    }
  };
  for (const root of roots) {
    const handler = () => still(root);
    handler();
    root.addEventListener('transitionrun', handler);
    root.addEventListener('animationstart', handler);
    undo.push(() => {
      root.removeEventListener('transitionrun', handler);
      root.removeEventListener('animationstart', handler);
    });
  }
  undo.push(() => { for (const a of stopped) { try { a.play(); } catch (e) {} } });
  Object.defineProperty(window, '__wfUnstill', {value: () => { for (const f of undo) f(); }, configurable: true});
  if (main && document.fonts && document.fonts.ready) await document.fonts.ready;
}
"""
UNSTILL_JS = r"""
() => {
  if (window.__wfUnstill) { window.__wfUnstill(); delete window.__wfUnstill; }
}
"""


# Put (true) or take off (false) BrowserGym's marks: "browsergym_id_<bid> " before the
# aria-roledescription and aria-description of every element of a standard HTML tag with one of our
# bids, as BrowserGym's frame_mark_elements.js does by default (an SVG's shapes and groups and a
# custom element are not marked); taking them off restores what the page had.
ARIA_MARK_JS = r"""
(on) => {
  const ATTRS = ['aria-roledescription', 'aria-description'];
  const MARKED = new Set(__MARKED_TAGS__);  // (BrowserEnv's tags_to_mark="standard_html")
__OPEN_ROOTS__  if (on) {
    const saved = [];
    // (open shadow roots too: the observation gives their elements bids)
    for (const el of openRoots().flatMap((r) => Array.from(r.querySelectorAll('[data-wf-bid]')))) {
      if (!MARKED.has(el.tagName.toLowerCase())) continue;
      const bid = el.getAttribute('data-wf-bid');
      for (const a of ATTRS) {
        const old = el.getAttribute(a);
        saved.push([el, a, old]);
        el.setAttribute(a, 'browsergym_id_' + bid + ' ' + (old === null ? '' : old));
      }
    }
    Object.defineProperty(window, '__wfBgymMarks', {value: saved, configurable: true});
    return saved.length;
  }
  const saved = window.__wfBgymMarks || [];
  for (const [el, a, old] of saved) {
    if (old === null) el.removeAttribute(a); else el.setAttribute(a, old);
  }
  delete window.__wfBgymMarks;
  return saved.length;
}
""".replace("__OPEN_ROOTS__", OPEN_ROOTS_JS).replace("__MARKED_TAGS__", json.dumps(sorted(BGYM_MARKED_TAGS)))
_ARIA_MARK = re.compile(r"browsergym_id_([A-Za-z0-9]+)\s?(.*)", re.DOTALL)


def _unmark(node: dict) -> None:
    """Take BrowserGym's marks out of an accessibility node's role description and description
    (dropping them when nothing else was there), as BrowserGym does."""
    props = node.get("properties") or []
    for i, prop in enumerate(props):
        if prop.get("name") == "roledescription":
            m = _ARIA_MARK.fullmatch(str(prop.get("value", {}).get("value", "")))
            if m:
                if m.group(2):
                    prop["value"]["value"] = m.group(2)
                else:
                    del props[i]
            break
    description = node.get("description")
    if isinstance(description, dict):
        m = _ARIA_MARK.fullmatch(str(description.get("value", "")))
        if m:
            if m.group(2):
                description["value"] = m.group(2)
            else:
                del node["description"]


def from_capture(raw: dict, tree: Tree) -> dict:
    """``dom_object``, ``axtree_object``, ``extra_element_properties`` and ``screenshot`` from
    :func:`capture_browser`'s result: our ``data-wf-bid`` becomes BrowserGym's ``bid`` attribute
    and each element's accessibility node gets its ``browsergym_id``."""
    if not raw.get("prepared"):
        _prepare(raw)
    dom = raw["dom"]
    return {"dom_object": dom, "axtree_object": raw["axtree"], "extra_element_properties": _extra_from_snapshot(dom, tree),
            "screenshot": raw["rgb"] if raw.get("rgb") is not None else png_to_rgb(raw["png"])}


def _canonical_ids(dom: dict, axtree: dict) -> None:
    """Renumber Chromium's ids in both snapshots (in place) by their order: backend node ids,
    accessibility node ids and frame ids change with every browser and context, and an
    observation must not. What refers to what is kept."""
    strings = dom["strings"]
    backend, frames = {}, {}
    for document in dom["documents"]:
        nodes = document["nodes"]
        ids = nodes.get("backendNodeId") or []
        for i, old in enumerate(ids):
            ids[i] = backend.setdefault(old, len(backend) + 1)
        fid = document.get("frameId", -1)
        if fid >= 0 and strings[fid] not in frames.values():  # (the string itself: nothing else names a frame)
            strings[fid] = frames.setdefault(strings[fid], f"frame-{len(frames)}")
    nodes = axtree["nodes"]
    renumber = {node["nodeId"]: str(i + 1) for i, node in enumerate(nodes)}
    for node in nodes:
        node["nodeId"] = renumber[node["nodeId"]]
        if "parentId" in node:
            if node["parentId"] in renumber:
                node["parentId"] = renumber[node["parentId"]]
            else:
                del node["parentId"]
        if "childIds" in node:
            node["childIds"] = [renumber[c] for c in node["childIds"] if c in renumber]
        _renumber_backend(node, backend)  # (names' and relations' related nodes carry them too)
        if "frameId" in node:
            node["frameId"] = frames.setdefault(node["frameId"], f"frame-{len(frames)}")


def _renumber_backend(value, backend: dict) -> None:
    """Every ``backendDOMNodeId`` inside ``value`` (a dict or list, in place), by ``backend``; one
    it lacks gets the next number (in the order met, so the same tree gets the same numbers)."""
    for key, item in value.items() if type(value) is dict else enumerate(value):
        kind = type(item)
        if kind is dict or kind is list:
            _renumber_backend(item, backend)
        elif kind is int and key == "backendDOMNodeId":
            value[key] = backend.setdefault(item, len(backend) + 1)


def _rename_bids(dom: dict) -> dict:
    """Turn ``data-wf-bid`` attributes into ``bid`` ones in a CDP DOM snapshot (in place; a page's
    own ``bid`` attribute is dropped: ids are ours); ``{backendNodeId: bid}``."""
    strings = dom["strings"]
    try:
        ours = strings.index(BID_ATTR)
    except ValueError:
        return {}
    try:
        theirs = strings.index(BGYM_BID)
    except ValueError:
        theirs = len(strings)
        strings.append(BGYM_BID)
    found = {}

    def string(text: str) -> int:
        strings.append(text)
        return len(strings) - 1

    value_name, checked_name, empty = string("value"), string("checked"), string("")
    for document in dom["documents"]:
        nodes = document["nodes"]
        backend = nodes.get("backendNodeId") or []
        # BrowserGym writes form controls' live state into the DOM (value, checked) before its
        # snapshot; the snapshot reports the same state beside the attributes, so it goes there.
        values = dict(zip(nodes.get("inputValue", {}).get("index", []), nodes.get("inputValue", {}).get("value", [])))
        values.update(zip(nodes.get("textValue", {}).get("index", []), nodes.get("textValue", {}).get("value", [])))
        checked = set(nodes.get("inputChecked", {}).get("index", []))
        inputs = {i for i, n in enumerate(nodes.get("nodeName", [])) if strings[n] == "INPUT"}
        for i, attrs in enumerate(nodes["attributes"]):
            if not attrs and i not in values and i not in inputs:
                continue
            kept = []
            for k in range(0, len(attrs), 2):
                name, value = attrs[k], attrs[k + 1]
                if name == theirs or (i in values and strings[name] == "value") or \
                        (i in inputs and strings[name] == "checked"):
                    continue
                if name == ours:
                    name = theirs
                    if i < len(backend):
                        found[backend[i]] = strings[value]
                kept += (name, value)
            if i in values:
                kept += (value_name, values[i])
            if i in checked:
                kept += (checked_name, empty)
            attrs[:] = kept
    return found


def _ratio(box, viewport=VIEWPORT) -> float:
    """The share of ``box`` ([x, y, w, h], viewport pixels) inside the viewport, to 2 decimals."""
    x, y, w, h = box
    ix = max(0.0, min(x + w, viewport[0]) - max(x, 0.0))
    iy = max(0.0, min(y + h, viewport[1]) - max(y, 0.0))
    if w <= 0 or h <= 0:  # an empty box on screen intersects, as IntersectionObserver has it
        return 1.0 if 0 <= x <= viewport[0] and 0 <= y <= viewport[1] else 0.0
    return round(ix * iy / (w * h), 2)


def _som(summary: dict | None, box) -> bool:
    if summary is None or not (summary["clickable"] and summary["visible"]) or box is None:
        return False
    return box[2] * box[3] >= SOM_MIN_AREA


def _extra_from_snapshot(dom: dict, tree: Tree) -> dict:
    """``{bid: {visibility, bbox, clickable, set_of_marks}}`` of the elements of the page and its frames."""
    if not dom.get("documents"):
        return {}
    strings = dom["strings"]
    document = dom["documents"][0]
    nodes = document["nodes"]
    try:
        bid_name = strings.index(BGYM_BID)
    except ValueError:
        return {}
    sx, sy = document.get("scrollOffsetX", 0), document.get("scrollOffsetY", 0)
    boxes = {}
    layout = document.get("layout") or {}
    for index, bounds, rects in zip(layout.get("nodeIndex", []), layout.get("bounds", []),
                                    layout.get("clientRects", [])):
        if rects:  # (no client rect: laid out but not rendered)
            boxes[index] = [bounds[0] - sx, bounds[1] - sy, bounds[2], bounds[3]]
    clickable = set(nodes.get("isClickable", {}).get("index", []))
    summaries = {s["bid"]: s for s in tree.summaries()}
    extra = {}
    for i, attrs in enumerate(nodes["attributes"]):
        for k in range(0, len(attrs), 2):
            if attrs[k] == bid_name:
                bid = strings[attrs[k + 1]]
                box = boxes.get(i)
                extra[bid] = {"visibility": _ratio(box) if box is not None else 0.0, "bbox": box,
                              "clickable": i in clickable, "set_of_marks": _som(summaries.get(bid), box)}
                break
    # The frames' documents: their boxes are the observation's (page coordinates, from MARK_JS in
    # each frame), where their elements are rendered (a laid-out node in the frame's snapshot).
    for document in dom["documents"][1:]:
        nodes = document["nodes"]
        laid = set((document.get("layout") or {}).get("nodeIndex", []))
        clickable = set(nodes.get("isClickable", {}).get("index", []))
        for i, attrs in enumerate(nodes["attributes"]):
            for k in range(0, len(attrs), 2):
                if attrs[k] == bid_name:
                    bid = strings[attrs[k + 1]]
                    summary = summaries.get(bid)
                    box = list(summary["bbox"]) if summary and summary["bbox"] and i in laid else None
                    extra[bid] = {"visibility": _ratio(box) if box is not None and summary["visible"] else 0.0,
                                  "bbox": box, "clickable": i in clickable, "set_of_marks": _som(summary, box)}
                    break
    return extra


def png_to_rgb(png: bytes) -> np.ndarray:
    """A PNG as BrowserGym's screenshot: a uint8 array, height x width x 3 (RGB)."""
    rgb = _up_filtered_rgb(png)
    if rgb is not None:
        return rgb
    from PIL import Image

    with Image.open(io.BytesIO(png)) as img:
        return np.array(img if img.mode == "RGB" else img.convert("RGB"))


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _up_filtered_rgb(png: bytes) -> np.ndarray | None:
    """The pixels of an 8-bit RGB PNG whose every row has the "Up" filter (what Chromium's
    ``optimizeForSpeed`` screenshots are), decoded in two passes: ISA-L's inflate, then each row
    added to the one above it (mod 256). None for any other PNG (Pillow decodes those)."""
    if not png.startswith(_PNG_SIGNATURE):
        return None
    pos, header, data = len(_PNG_SIGNATURE), None, []
    try:
        while pos < len(png):
            size, kind = struct.unpack_from(">I4s", png, pos)
            body = png[pos + 8:pos + 8 + size]
            pos += 12 + size
            if kind == b"IHDR":
                header = struct.unpack(">IIBBBBB", body)
            elif kind == b"IDAT":
                data.append(body)
            elif kind == b"IEND":
                break
            elif kind[0] & 0x20 == 0:  # a critical chunk other than these (a palette): not ours
                return None
        if header is None:
            return None
        width, height, depth, color, compression, filtering, interlace = header
        if (depth, color, compression, filtering, interlace) != (8, 2, 0, 0, 0) or not width or not height:
            return None
        rows = np.frombuffer(isal_zlib.decompress(b"".join(data)), dtype=np.uint8)
    except (struct.error, isal_zlib.error):  # type: ignore[misc]
        return None
    if rows.size != height * (width * 3 + 1):
        return None
    rows = rows.reshape(height, width * 3 + 1)
    if not (rows[:, 0] == 2).all():
        return None
    out = np.empty((height, width * 3), dtype=np.uint8)
    out[0] = rows[0, 1:]  # (the row above the first is zeros)
    for y in range(1, height):  # (a row at a time: numpy's cumsum down the columns is ten times slower)
        np.add(out[y - 1], rows[y, 1:], out=out[y])
    return out.reshape(height, width, 3)


# ------------------------------------------------------------------------------------ text backend
def from_tree(tree: Tree) -> dict:
    """``dom_object``, ``axtree_object``, ``extra_element_properties`` and ``screenshot`` of a page
    of the text backend, in CDP's shapes, from our tree alone."""
    summaries = {s["bid"]: s for s in tree.summaries()}
    dom, backend_of = _dom_from_html(tree.snapshot, tree.url, tree.title, summaries)
    extra = {}
    for bid in backend_of:
        s = summaries.get(bid)
        shown = s is not None
        extra[bid] = {"visibility": 1.0 if shown else 0.0, "bbox": None, "clickable": bool(shown and s["clickable"]),
                      "set_of_marks": bool(shown and s["clickable"])}
    return {"dom_object": dom, "axtree_object": _ax_from_tree(tree, backend_of),
            "extra_element_properties": extra, "screenshot": blank_screenshot()}


def blank_screenshot() -> np.ndarray:
    """A white viewport: the text backend has no pixels to show. A new array each time (users
    keep what an observation gives them)."""
    return np.full((VIEWPORT[1], VIEWPORT[0], 3), 255, dtype=np.uint8)


def _dom_from_html(html: bytes, url: str, title: str, summaries: dict) -> tuple[dict, dict]:
    """A CDP-shaped DOM snapshot of ``html`` (our DOM snapshot: bids in ``data-wf-bid``, form
    state written in) and ``{bid: backendNodeId}``."""
    strings: list = []
    ids: dict = {}

    def s(text) -> int:
        if text is None:
            return -1
        i = ids.get(text)
        if i is None:
            i = ids[text] = len(strings)
            strings.append(text)
        return i

    parent, kind, name, value, attributes = [], [], [], [], []
    backend_of: dict = {}
    clickable: list = []

    def add(node_type: int, node_name: str, node_value, up: int, attrs: list) -> int:
        parent.append(up)
        kind.append(node_type)
        name.append(s(node_name))
        value.append(s(node_value))
        attributes.append(attrs)
        return len(parent) - 1

    parser = etree.HTMLParser(encoding="utf-8", remove_comments=True, remove_pis=True)
    root = etree.fromstring(html, parser) if html.strip() else None
    add(9, "#document", None, -1, [])
    if html.lstrip()[:9].lower() == b"<!doctype":
        add(10, "html", None, 0, [])

    def walk(el, up: int) -> None:
        attrs, bid = [], None
        for k, v in el.items():
            if k == BID_ATTR:
                bid = v
            else:
                attrs += (s(k), s(v))
        if bid is not None:
            attrs += (s(BGYM_BID), s(bid))
        i = add(1, el.tag.upper(), None, up, attrs)
        if bid is not None:
            backend_of[bid] = i + 1
            summary = summaries.get(bid)
            if summary is not None and summary["clickable"]:
                clickable.append(i)
        if el.text:
            add(3, "#text", el.text, i, [])
        for child in el:
            if isinstance(child.tag, str):
                walk(child, i)
            if child.tail:
                add(3, "#text", child.tail, i, [])

    if root is not None:
        walk(root, 0)
    n = len(parent)
    document = {
        "documentURL": s(url), "title": s(title), "baseURL": s(url), "contentLanguage": -1, "encodingName": s("UTF-8"),
        "publicId": -1, "systemId": -1, "frameId": s("text"),
        "nodes": {"parentIndex": parent, "nodeType": kind, "nodeName": name, "nodeValue": value,
                  "backendNodeId": list(range(1, n + 1)), "attributes": attributes,
                  "textValue": {"index": [], "value": []}, "inputValue": {"index": [], "value": []},
                  "inputChecked": {"index": []}, "optionSelected": {"index": []},
                  "contentDocumentIndex": {"index": [], "value": []}, "isClickable": {"index": clickable}},
        "layout": {"nodeIndex": [], "styles": [], "bounds": [], "text": [], "stackingContexts": {"index": []},
                   "paintOrders": [], "offsetRects": [], "scrollRects": [], "clientRects": []},
        "textBoxes": {"layoutIndex": [], "bounds": [], "start": [], "length": []},
        "scrollOffsetX": 0, "scrollOffsetY": 0, "contentWidth": VIEWPORT[0], "contentHeight": VIEWPORT[1],
    }
    return {"documents": [document], "strings": strings}, backend_of


def _prop(name: str, value) -> dict:
    if isinstance(value, bool):
        kind = "boolean"
    elif isinstance(value, int):
        kind = "integer"
    elif isinstance(value, float):
        kind = "number"
    else:
        kind = _PROP_TYPES.get(name, "string")
    return {"name": name, "value": {"type": kind, "value": value}}


def _ax_from_tree(tree: Tree, backend_of: dict) -> dict:
    """Our tree as CDP accessibility nodes (root first, then depth first): text as ``StaticText``
    nodes; an element Chromium leaves out of its tree (an inline generic, a presentational one:
    ``cname`` None) left out, its children given to its parent, as ``axtree_text`` reads them."""
    nodes: list = []
    counter = itertools.count(1)

    def add(node, up: str | None) -> str:
        nid = str(next(counter))
        entry = {"nodeId": nid, "ignored": node.role == "none",
                 "role": {"type": "role", "value": node.role}}
        if node.role != "none":  # (a generic's is the aria-label its text is compared with)
            entry["name"] = {"type": "computedString",
                             "value": node.cname if node.role == "generic" and node.cname else node.name}
        if node.value is not None:
            entry["value"] = {"type": "string" if isinstance(node.value, str) else "number", "value": node.value}
        entry["properties"] = [_prop(k, v) for k, v in node.props]
        entry["childIds"] = []
        if up is not None:
            entry["parentId"] = up
        if node.bid is not None:
            entry["browsergym_id"] = node.bid
            if node.bid in backend_of:
                entry["backendDOMNodeId"] = backend_of[node.bid]
        nodes.append(entry)
        add_children(node, entry, nid)
        return nid

    def add_children(node, entry: dict, nid: str) -> None:
        for child in node.children:
            if type(child) is str:
                cid = str(next(counter))
                nodes.append({"nodeId": cid, "ignored": False, "role": {"type": "internalRole", "value": "StaticText"},
                              "name": {"type": "computedString", "value": child}, "properties": [],
                              "childIds": [], "parentId": nid})
            elif child.cname is None:  # left out of Chromium's tree: its children are its parent's
                add_children(child, entry, nid)
                continue
            else:
                cid = add(child, nid)
            entry["childIds"].append(cid)

    add(tree.root, None)
    return {"nodes": nodes}


# ------------------------------------------------------------------------------------ the episode
class BrowserGymView:
    """The episode state behind BrowserGym's keys that no page holds: the chat (BrowserGym's
    greeting, the goal as the user's message, the agent's ``send_msg_to_user`` answer or
    ``report_infeasible`` reason), the last action and the virtual time."""

    def __init__(self):
        self.reset({})

    def reset(self, task: dict) -> None:
        """A new episode of ``task`` (a task dict)."""
        self.goal = task.get("instruction") or ""
        when = task.get("snapshot_time")
        try:
            self.t0 = parse_time(when).timestamp() if when else 0.0
        except (ValueError, TypeError):
            self.t0 = 0.0
        self.waited_ms = 0
        self.last_action = ""
        self.chat = [{"role": "assistant", "timestamp": self.t0, "message": GREETING}]
        if self.goal:
            self.chat.append({"role": "user", "timestamp": self.t0, "message": self.goal})

    @property
    def elapsed_s(self) -> float:
        return self.waited_ms / 1000

    def stepped(self, action: str, parsed) -> None:
        """Note the action of a step (``parsed``: its :class:`~webfreeze.simulator.actions.Action`,
        None when it did not parse)."""
        self.last_action = action
        if parsed is None:
            return
        if parsed.kind == "noop":
            self.waited_ms += min(parsed.amount or 0, MAX_WAIT_MS)  # (the cap the environment's wait has)
        elif parsed.kind in ("answer", "infeasible"):
            self.chat.append({"role": "assistant" if parsed.kind == "answer" else "infeasible",
                              "timestamp": self.t0 + self.elapsed_s, "message": parsed.text or ""})

    @property
    def messages(self) -> list:
        """The chat so far (BrowserGym's ``Chat.messages``)."""
        return self.chat

    def add_message(self, role: str, msg: str) -> None:
        """A message put in the chat from outside the episode (a harness's, as BrowserGym's
        ``Chat.add_message``): ``info`` messages are shown to nobody and kept out, as there."""
        if role not in CHAT_ROLES:
            raise ValueError(f"unknown chat role {role!r} (one of {', '.join(CHAT_ROLES)})")
        if role != "info":
            self.chat.append({"role": role, "timestamp": self.t0 + self.elapsed_s, "message": msg})

    def keys(self, *, tree: Tree, url: str, urls: list, titles: list, active: int, error: str, page: dict) -> dict:
        """BrowserGym's keys for one observation; ``page`` is :func:`from_capture`'s or
        :func:`from_tree`'s result."""
        return {
            "chat_messages": tuple(dict(m) for m in self.chat),
            "goal_object": ({"type": "text", "text": self.goal},) if self.goal else (),
            "open_pages_urls": tuple(urls), "open_pages_titles": tuple(titles),
            "active_page_index": np.asarray([active]), "url": url,
            "focused_element_bid": tree.focused_bid, "last_action": self.last_action,
            "last_action_error": error, "elapsed_time": np.asarray([self.elapsed_s]), **page,
        }


# ------------------------------------------------------------------------------------ spaces
class _Any(gym.Space):
    """Values of one Python type (BrowserGym's own spaces are as loose: AnyDict, Unicode)."""

    def __init__(self, kind, sample, seed=None):
        self.kind, self._sample = kind, sample
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask=None, probability=None):
        return self._sample

    def contains(self, x) -> bool:
        return isinstance(x, self.kind)

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and other.kind == self.kind


def observation_space(base: gym.spaces.Dict) -> gym.spaces.Dict:
    """``base`` (our observation's space) with BrowserGym's keys added; ``screenshot`` becomes an
    RGB array."""
    spaces = dict(base.spaces)
    spaces.update({
        "chat_messages": _Any(tuple, ()), "goal_object": _Any(tuple, ()), "open_pages_urls": _Any(tuple, ()),
        "open_pages_titles": _Any(tuple, ()), "active_page_index": _Any(np.ndarray, np.zeros(1, dtype=int)),
        "axtree_object": _Any(dict, {"nodes": []}), "dom_object": _Any(dict, {"documents": [], "strings": []}),
        "extra_element_properties": _Any(dict, {}), "focused_element_bid": _Any(str, ""),
        "last_action": _Any(str, ""), "elapsed_time": _Any(np.ndarray, np.zeros(1)),
        "screenshot": _Any(np.ndarray, np.zeros((1, 1, 3), dtype=np.uint8)),
    })
    return gym.spaces.Dict(spaces)
