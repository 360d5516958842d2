"""``record session``: a browser through the recording proxy, driven by a person or a script, whose
every action is logged as a reference trajectory (the way benchmark authors annotate ground truth).

The page side is a small listener injected into every document: clicks, text entry, Enter in a
field, selects, form submissions and scrolls are reported with the target's role and accessible
name (as the observation tree has them: :mod:`.accname`), CSS path and text; navigations come from
the browser itself. What the person did is logged, not what the page did in answer:

- Enter in a field is a ``press`` step on that field. The click a browser fires on the form's
  default button for that Enter (implicit submission) is not logged: the page may have hidden that
  button, and the person never touched it. Tab (and Shift+Tab) in a field is a ``press`` step on it
  too: leaving a field is what some pages answer (a change or blur handler).
- A ``navigate`` step says its ``cause``: ``goto`` when the browser itself started it (the address
  bar, ``page.goto`` in a script, back and forward), else the page's reason as Chromium gives it
  (``anchorClick``, ``formSubmissionGet``, ``scriptInitiated``...) or ``sameDocument`` (a
  fragment, ``history.pushState``): the effect of an action already logged.
- A scroll's value says ``by``: ``user`` after wheel, scroll keys, touch or the scrollbar; ``page``
  for the rest (an anchor jump, a script, an element scrolled into view for a click).
- A scroll key (an arrow, Home, End, Page Up or Down, Space) that the page takes for itself, its
  script preventing what the key would do (a slider's or a tab list's own keys, a range input a
  script moves), is a ``press`` step on the focused element (to the page when none is focused),
  except in a text field or an editor; one the page leaves alone scrolls (or moves a range input:
  its ``input`` is logged), as above.

The trajectory is plain JSON, written atomically and also stored in the archive as
``trajectories/<session>.json``. The DOM of each document the session loaded, as its scripts left it
once loaded, is kept in the archive document ``dom-snapshots/<session>.json``, which the text
backend reads to submit a form as a browser would (without the fields a script disabled).
"""

from __future__ import annotations

import json
import re
import runpy
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

from webfreeze.archives.store import UNFINISHED_PREFIX
from webfreeze.archives.timeutil import normalize_time
from webfreeze.common.files import check_output_file, write_output
from webfreeze.common.text import UNSHOWN_INPUT_TYPES, fold_text

from .accname import ROLE_NAME_JS
from .errors import SessionScriptError
from .proxy import RecordingProxy, recording_into

TRAJECTORY_VERSION = 1
# The archive document keeping the DOM of each document a session loaded, once loaded
# (``dom-snapshots/<session>.json``; the text backend reads it: simulator/forms.py says the same).
DOM_SNAPSHOTS = "dom-snapshots/"
DOM_SNAPSHOTS_VERSION = 1

# Reports user actions to the recorder. Runs before any page script; keeps to the DOM standard.
# Its listeners are on `window`, capture phase: registered before any of the page's, they hear an
# action first, before a page's own listener there (a router's: VitePress takes every link click on
# `window` and pushes the new URL from a microtask that runs as soon as its listener returns) has
# changed the URL the step is logged at.
LISTENER_JS = r"""
(() => {
  if (window.__webfreezeInstalled) return;
  window.__webfreezeInstalled = true;
  const clean = (s) => (s || '').replace(/\s+/g, ' ').trim().slice(0, 200);
  // The observation tree's role and name (recorder/accname.py), computed afresh for each action.
  const makeNamer = __ROLE_NAME_JS__;
  // A form's properties are its controls' names first (`form.id` is its <input name="id">: I Hate
  // Money's login form), so the path reads the DOM's own getters, taken before any page script runs.
  const getter = (proto, key) => Object.getOwnPropertyDescriptor(proto, key).get;
  const idOf = getter(Element.prototype, 'id'), tagOf = getter(Element.prototype, 'tagName');
  const parentOf = getter(Node.prototype, 'parentElement'), parentNodeOf = getter(Node.prototype, 'parentNode');
  const previousOf = getter(Element.prototype, 'previousElementSibling');
  const shadowOf = getter(Element.prototype, 'shadowRoot'), slotOf = getter(Element.prototype, 'assignedSlot');
  const hostOf = getter(ShadowRoot.prototype, 'host');
  // In a page with open shadow roots (web components) the observation reads the flat tree, as it is
  // drawn (simulator/axtree.py MARK_JS): a host's shadow root in place of its children, a slot's
  // assigned elements in place of its own. A path steps up that tree, so that it names the element
  // the observation describes: through the slot an element is drawn in, from a shadow root to its host.
  const shadowSlot = (n) => tagOf.call(n) === 'SLOT' && n.getRootNode() instanceof ShadowRoot;
  const flatParent = (n) => {
    const slot = slotOf.call(n);
    if (slot) return slot;
    const up = parentNodeOf.call(n);
    return up instanceof ShadowRoot ? hostOf.call(up) : parentOf.call(n);
  };
  const flatChildren = (n) => {  // (elements) of a shadow host or of a slot in a shadow root
    const root = shadowOf.call(n);
    if (root) return Array.from(root.children);
    const assigned = n.assignedElements();
    return assigned.length || n.assignedNodes().length ? assigned : Array.from(n.children);
  };
  const cssPath = (el) => {
    const parts = [];
    for (let n = el; n && n.nodeType === 1 && n !== document.documentElement;) {
      const id = idOf.call(n), tag = tagOf.call(n);
      // (a shadow root's ids are unique in that root alone: the path goes on up to the document's)
      if (id && !(n.getRootNode() instanceof ShadowRoot)) { parts.unshift('#' + CSS.escape(id)); break; }
      const up = flatParent(n);
      let i = 1;
      if (up && (shadowOf.call(up) || shadowSlot(up))) {
        for (const s of flatChildren(up)) { if (s === n) break; if (tagOf.call(s) === tag) i++; }
      } else {
        for (let s = previousOf.call(n); s; s = previousOf.call(s)) if (tagOf.call(s) === tag) i++;
      }
      parts.unshift(tag.toLowerCase() + ':nth-of-type(' + i + ')');
      n = up;
    }
    return parts.join(' > ');
  };
  // An event's own target: in a shadow root, what it was dispatched to, not the host it reaches the
  // window as (an element of a closed root stays its host); the focused element likewise.
  const targetOf = (e) => (e.composedPath && e.composedPath()[0]) || e.target;
  // The nearest element on the event's path that matches: closest() across shadow boundaries (a
  // component drawn inside a <label> or a <button> is that label's or button's).
  const closestOn = (e, selector) => (e.composedPath ? e.composedPath() : [e.target]).find(
    (n) => n instanceof Element && n.matches(selector)) || null;
  // An element of a closed shadow root is its host, as the observation, which cannot read closed
  // roots, sees it (a listener in the closed root itself hears the element).
  const openAs = (el) => {
    for (let root = el.getRootNode(); root instanceof ShadowRoot && root.mode === 'closed'; root = el.getRootNode()) {
      el = hostOf.call(root);
    }
    return el;
  };
  const focused = () => {
    let f = document.activeElement;
    while (f && shadowOf.call(f) && shadowOf.call(f).activeElement) f = shadowOf.call(f).activeElement;
    return f;
  };
  const describe = (el) => {
    const namer = makeNamer();
    const d = {role: namer.role(el), name: namer.name(el), css: cssPath(el), tag: el.tagName.toLowerCase(),
               text: clean(el.innerText || el.textContent).slice(0, 120)};
    // A password field says so: redaction knows what is typed there whatever the field is called
    // (I Hate Money's "Private code").
    if (el.tagName === 'INPUT' && el.type === 'password') d.type = 'password';
    return d;
  };
  // What a click names: the nearest of these around the element under the pointer. A landmark or a
  // structural role is no such thing (JupyterLab's files, list items with no role, sit in a
  // role="region" panel: a click on one was a click on the panel): the element under the pointer is.
  const structural = ['region', 'main', 'navigation', 'complementary', 'banner', 'contentinfo', 'form', 'search',
    'document', 'application', 'group', 'list', 'presentation', 'none', 'generic', 'log', 'status', 'tabpanel',
    'article', 'feed', 'figure', 'dialog', 'alertdialog', 'table', 'rowgroup', 'grid', 'tree', 'treegrid',
    'tablist', 'menu', 'menubar', 'toolbar', 'listbox', 'radiogroup'];
  const actionable = 'a, button, input, select, textarea, label, summary, [onclick], [role]' +
    structural.map((r) => `:not([role~=${r} i])`).join('');
  // The listeners, installed again (the old ones removed) after the page's document.open(), which
  // erases a document's and its window's listeners: an editor whose iframe its parent's script
  // writes (TiddlyWiki's) would type unseen.
  let listening = null;
  let listenIn = () => {};
  const heard = new WeakSet();  // (an event heard in a shadow root and again at the window: once)
  const listened = new WeakSet();  // (the shadow roots listened in)
  const install = () => {
    if (listening !== null) listening.abort();
    listening = new AbortController();
    const signal = listening.signal;
    const post = (action, el, value, extra) => window.__webfreezeLog(Object.assign(
      {action, target: el ? describe(el) : null, value: value === undefined ? null : value, url: location.href,
       time: Date.now()}, extra || {}));
    // A scroll is logged once it has rested for 150 ms, or at once when anything else is logged or
    // the page is left before that (a click right after a scroll, a link followed): never lost, and
    // always before what came after it.
    // A scroll the page made that left the window where it was (a script scrolling one of its own
    // elements: Verdaccio's lists; the event reaches the window's capture listener) is no step.
    let scrollTimer = null;
    let scrolledTo = [window.scrollX, window.scrollY];
    const flushScroll = () => {
      if (scrollTimer === null) return;
      clearTimeout(scrollTimer);
      scrollTimer = null;
      const at = [window.scrollX, window.scrollY];
      if (userScroll || at[0] !== scrolledTo[0] || at[1] !== scrolledTo[1]) {
        post('scroll', null, {x: at[0], y: at[1], by: userScroll ? 'user' : 'page'});
      }
      scrolledTo = at;
      userScroll = false;
    };
    // Whether the scroll being waited on came from the person (wheel, keys, touch, scrollbar) rather
    // than from the page (an anchor jump, a script, an element scrolled into view for a click).
    let userScroll = false;
    // A scroll key the page took for itself (below) is known once its event has been through the
    // page's handlers: a timer logs it, or anything else logged before the timer ran does first (a
    // script's answer right after the key: a DevTools command may run before a page's timer).
    const pendingPresses = [];
    const flushPresses = () => {
      while (pendingPresses.length && pendingPresses[0][0].eventPhase === Event.NONE) {
        const [e, step] = pendingPresses.shift();
        if (!e.defaultPrevented) continue;
        flushScroll();
        userScroll = false;
        window.__webfreezeLog(step);
      }
    };
    const send = (action, el, value, extra) => {
      flushPresses();
      flushScroll();
      userScroll = false;
      post(action, el, value, extra);
    };
    const textField = (el) => el && el.tagName === 'INPUT' &&
      !['submit', 'button', 'checkbox', 'radio', 'reset', 'image', 'file', 'range', 'color'].includes(el.type);
    const editable = (el) => textField(el) || (el && (el.tagName === 'TEXTAREA' || el.isContentEditable));
    // A click on a <label> is forwarded by the browser to its control as a second click event: the
    // person made one (the label's), so the forwarded one is not logged (replaying both would toggle a
    // checkbox twice). Clicks a page's own script dispatches (isTrusted false) are not the person's.
    let forwardedTo = null;
    // A press that moves more than 5 px before its release is a drag (a slider's handle, a card moved
    // between lists), logged as one from where the press began to where it ended (viewport pixels:
    // the top document only; in a frame a press stays a click, as before), and the click the browser
    // then makes of it, on the two ends' common ancestor, is not the person's. Not a drag: a press in
    // a form field (its own events say what happened), a press and release on one control a person
    // clicks (a button, a link: the hand moved a little), a press that selected text (nothing changed).
    const clickable = 'a[href], button, summary, label, [onclick], [role=button], [role=link], [role=checkbox], ' +
      '[role=radio], [role=tab], [role=menuitem], [role=option], [role=switch], [role=treeitem]';
    let pressed = null;
    let pendingDrag = null;
    // The control a press landed on, described at once: a script-drawn dropdown (Gradio's) takes
    // its choice on mousedown and removes the option, so the browser clicks the common ancestor of
    // the press and of what lay under the release, a panel or a field the person never aimed at.
    let pressedControl = null;
    window.addEventListener('pointerdown', (e) => {
      const control = e.isTrusted && e.button === 0 && closestOn(e, clickable);
      pressedControl = control ? {el: control, target: describe(control)} : null;
    }, {capture: true, signal});
    const logPressed = (press) => {
      flushScroll();
      userScroll = false;
      window.__webfreezeLog({action: 'click', target: press.target, value: null, url: location.href, time: Date.now()});
    };
    // The press is forgotten once its gesture is over (the click, if the browser makes one, comes in
    // the release's task): never taken for a later click (Enter on a focused button). With the whole
    // list removed there is no common ancestor, and the browser makes no click: logged here.
    window.addEventListener('pointerup', (e) => {
      const press = pressedControl;
      if (press === null || !e.isTrusted) return;
      setTimeout(() => {
        if (pressedControl !== press) return;
        pressedControl = null;
        if (!press.el.isConnected) logPressed(press);
      }, 0);
    }, {capture: true, signal});
    // Where a pointer's click landed in an element that is no control, when away from its middle
    // (a slider's track, a chart: where it lands is what it does), as fractions of the element's
    // width and height: {at: [fx, fy]}; the reference agent clicks there, not in the middle.
    const clickAt = (e, el) => {
      if (e.detail === 0 || window.top !== window || (el.matches && el.matches(clickable + ', input, select, textarea, option'))) {
        return null;
      }
      const r = el.getBoundingClientRect();
      if (r.width < 4 || r.height < 4) return null;
      const fx = (e.clientX - r.left) / r.width, fy = (e.clientY - r.top) / r.height;
      if (fx < 0 || fx > 1 || fy < 0 || fy > 1 || (Math.abs(fx - 0.5) <= 0.15 && Math.abs(fy - 0.5) <= 0.15)) return null;
      return {at: [Math.round(fx * 1000) / 1000, Math.round(fy * 1000) / 1000]};
    };
    const logDrag = (d) => {
      if (String(window.getSelection ? window.getSelection() : '')) return;
      send('drag', d.el, {from: d.from, to: d.to});
    };
    window.addEventListener('pointerdown', (e) => {
      const t = targetOf(e);
      const field = closestOn(e, 'input, select, textarea, [contenteditable]');
      pressed = e.isTrusted && e.button === 0 && !field && window.top === window
        ? {x: e.clientX, y: e.clientY, el: t, control: closestOn(e, clickable)} : null;
    }, {capture: true, signal});
    window.addEventListener('pointerup', (e) => {
      const p = pressed;
      pressed = null;
      if (!p || !e.isTrusted || Math.hypot(e.clientX - p.x, e.clientY - p.y) <= 5) return;
      // the element pressed (a handle with no role of its own: not the panel holding it)
      const d = {el: p.el, control: p.control, from: [Math.round(p.x), Math.round(p.y)],
                 to: [Math.round(e.clientX), Math.round(e.clientY)]};
      pendingDrag = d;
      // (the click, if the browser makes one, comes in this same task: decided there, else here)
      setTimeout(() => { if (pendingDrag === d) { pendingDrag = null; logDrag(d); } }, 0);
    }, {capture: true, signal});
    window.addEventListener('click', (e) => {
      const t = targetOf(e);
      if (pendingDrag !== null && e.isTrusted) {
        const d = pendingDrag;
        pendingDrag = null;
        if (!(d.control && closestOn(e, clickable) === d.control)) { logDrag(d); return; }
        // pressed and released on one control: its click, logged below
      }
      if (forwardedTo !== null && t === forwardedTo) { forwardedTo = null; return; }
      forwardedTo = null;
      if (!e.isTrusted) return;
      const press = pressedControl;
      pressedControl = null;
      if (press !== null && !e.composedPath().includes(press.el) && (!press.el.isConnected || t.contains(press.el))) {
        logPressed(press);
        return;
      }
      const el = closestOn(e, actionable) || t;
      // (a combobox's click is a step: it opens the list the next click chooses from)
      if (['INPUT', 'SELECT', 'TEXTAREA'].includes(el.tagName) && !['submit', 'button', 'checkbox', 'radio'].includes(el.type) &&
          !(el.tagName === 'INPUT' && el.getAttribute('role') === 'combobox')) return;
      // Enter in a field clicks the form's default button for it (implicit submission): no pointer
      // (detail 0) and the focus still in the field. The Enter is logged, this click is not.
      const focus = focused();
      if (e.detail === 0 && focus !== el && textField(focus) && el.form && focus.form === el.form) return;
      const label = closestOn(e, 'label');
      const control = label && label.control;
      if (control && control !== t && !control.contains(t)) {
        forwardedTo = control;  // (dispatched at once, in this task; forgotten after it)
        setTimeout(() => { if (forwardedTo === control) forwardedTo = null; }, 0);
      }
      send('click', el, null, clickAt(e, el));
    }, {capture: true, signal});
    // A double-click: the browser's dblclick after its two clicks, which are logged first; the
    // log makes the three one dblclick step (ActionLog.add).
    window.addEventListener('dblclick', (e) => {
      if (!e.isTrusted || e.button !== 0) return;
      send('dblclick', closestOn(e, actionable) || targetOf(e));
    }, {capture: true, signal});
    // Keys typed into a text field: its next input event is typing key by key (page.keyboard.type,
    // a person at the keyboard), which a page may listen to (a search box answering keyup), rather
    // than text put in at once (page.fill, a paste).
    const keyed = new WeakSet();
    const enterClicks = 'a[href], area[href], button, summary, input';  // (the browser clicks these on Enter)
    const notPresses = ['Enter', 'Tab', 'Shift', 'Control', 'Alt', 'Meta', 'AltGraph', 'CapsLock', 'NumLock',
      'ScrollLock', 'Fn', 'FnLock', 'Hyper', 'Super', 'Symbol', 'SymbolLock', 'OS', 'Dead', 'Unidentified', 'Process',
      'Compose'];
    // A key as Playwright names it, its modifiers first (Shift only with a named key: 'A' says it)
    const keyName = (e) => {
      const key = e.key === ' ' ? 'Space' : e.key;
      const mods = [e.ctrlKey && 'Control', e.altKey && 'Alt', e.metaKey && 'Meta', e.shiftKey && key.length > 1 && 'Shift'];
      return mods.filter(Boolean).concat([key]).join('+');
    };
    window.addEventListener('keydown', (e) => {
      if (!e.isTrusted) return;
      // (the element itself: in a shadow root, e.target here is its host, a custom element)
      const t = targetOf(e);
      if (e.key === 'Enter' && !e.isComposing && !e.repeat && textField(t)) {
        send('press', t, 'Enter');
        return;
      }
      const inField = t.isContentEditable || ['INPUT', 'SELECT', 'TEXTAREA'].includes(t.tagName);
      // Tab (or Shift+Tab) in a field leaves it: a press on that field, since a page may act when
      // a field is left (a change or blur handler: form validation, Mesop's on_blur) with nothing
      // clicked after it.
      if (e.key === 'Tab' && !e.isComposing && !e.repeat && inField) {
        send('press', t, keyName(e));
        return;
      }
      // Enter on a focused element the browser does not click for it (a list item a script opens on
      // Enter: JupyterLab's file browser; a custom role=button whose script acts on the key): a
      // press on it. On a link, a button, a summary or an input the browser's own click is logged.
      const page = t === document.body || t === document.documentElement || !(t instanceof Element);
      // (a custom element with no open shadow root may hold a button in a closed one, which the
      // browser clicks on Enter, logged as that click: no press for it)
      const opaque = t instanceof Element && t.tagName.includes('-') && !shadowOf.call(t);
      if (e.key === 'Enter' && !e.isComposing && !e.repeat && !inField && !page && !opaque && !t.matches(enterClicks)) {
        send('press', t, keyName(e));
        return;
      }
      if (editable(t) && (e.key.length === 1 || e.key === 'Backspace' || e.key === 'Delete')) keyed.add(t);
      const scrollKeys = ['PageDown', 'PageUp', 'Home', 'End', 'ArrowDown', 'ArrowUp', 'ArrowLeft', 'ArrowRight', ' '];
      if (scrollKeys.includes(e.key) && !inField) userScroll = true;
      // A scroll key the page takes for itself (a slider's arrows, Streamlit's range input among
      // them, a tab list's Home: its script prevents what the key would do) is a press: on the
      // focused element, or to the page when none is. Known once the event has been through the
      // page's handlers (its defaultPrevented, read after them); the element is described as it was
      // when the key went down. Not in a text field or an editor, whose typing says what happened
      // (a rich text editor prevents its keys and puts the text in itself).
      if (scrollKeys.includes(e.key) && !editable(t) && !e.isComposing) {
        const step = {action: 'press', target: page ? null : describe(t), url: location.href, time: Date.now(),
                      value: keyName(e)};
        pendingPresses.push([e, step]);
        setTimeout(flushPresses, 0);
      }
      // A key pressed outside any field is a step of its own, to the page (VitePress opens its search
      // box on '/' and Ctrl+K): a press with no target, its modifiers first as Playwright names
      // keys. Not: keys that scroll (a scroll step), Enter (a focused link or button makes it a
      // click, logged as one; another focused element's is a press on it, above), Tab, a modifier alone.
      if (!inField && !e.isComposing && !e.repeat && !scrollKeys.includes(e.key) && !notPresses.includes(e.key)) {
        send('press', null, keyName(e));
      }
    }, {capture: true, signal});
    const byUser = () => { userScroll = true; };
    window.addEventListener('wheel', byUser, {capture: true, passive: true, signal});
    window.addEventListener('touchmove', byUser, {capture: true, passive: true, signal});
    // a press on the page's own scrollbar lands on the root element, outside its client area
    window.addEventListener('pointerdown', (e) => {
      const root = document.documentElement;
      if (e.target === root && (e.clientX >= root.clientWidth || e.clientY >= root.clientHeight)) userScroll = true;
    }, {capture: true, signal});
    // A value a page's script sets and announces (isTrusted false) in a field the person is not in is
    // the page's doing. (Playwright's select_option and its fill of a date field announce theirs from
    // script too, in the focused field or a select: those are the person's.)
    const byPerson = (e) => e.isTrusted || targetOf(e) === focused() || targetOf(e).tagName === 'SELECT';
    window.addEventListener('input', (e) => {
      const el = targetOf(e);
      if (el.tagName === 'SELECT' || ['checkbox', 'radio', 'file'].includes(el.type) || !byPerson(e)) return;
      const keys = keyed.has(el);
      keyed.delete(el);
      el.__wfTyped = true;  // (what the person typed is no evidence of the site's: VISIBLE_TEXT_JS)
      // A rich text editor (contenteditable: Draftail, ProseMirror) has no value: its text is what
      // the person left there, its blocks one a line.
      const text = el.isContentEditable && typeof el.value !== 'string' ? el.innerText.replace(/\n+$/, '') : el.value;
      send('type', el, text, keys ? {keys: true} : undefined);
    }, {capture: true, signal});
    // (change and submit stay in the shadow root they happen in: heard there too, listenIn)
    const onChange = (e) => {
      if (heard.has(e)) return;
      heard.add(e);
      const el = openAs(targetOf(e));
      // A file chosen (a person's file chooser, Playwright's set_input_files) is an upload: its
      // files' names, sizes and types, not the value the browser shows (C:\\fakepath\\NAME).
      if (el.tagName === 'INPUT' && el.type === 'file') {
        if (!byPerson(e)) return;
        send('upload', el, {files: Array.from(el.files || [], (f) => ({name: f.name, size: f.size, type: f.type}))});
        return;
      }
      if (el.tagName !== 'SELECT' || !byPerson(e)) return;
      const chosen = Array.from(el.selectedOptions);
      const value = {value: el.value, label: clean((chosen[0] || {}).textContent)};
      if (el.multiple) {  // every option chosen (FlaskBB's search: Post and Topic), not the first alone
        value.values = chosen.map((o) => o.value);
        value.labels = chosen.map((o) => clean(o.textContent));
      }
      send('select', el, value);
    };
    const onSubmit = (e) => {
      if (heard.has(e)) return;
      heard.add(e);
      send('submit', openAs(targetOf(e)));
    };
    window.addEventListener('change', onChange, {capture: true, signal});
    window.addEventListener('submit', onSubmit, {capture: true, signal});
    listenIn = (root) => {
      listened.add(root);
      root.addEventListener('change', onChange, {capture: true, signal});
      root.addEventListener('submit', onSubmit, {capture: true, signal});
    };
    // shadow roots no script attached: those the parser made (declarative ones), once it is done
    document.addEventListener('DOMContentLoaded', () => {
      const roots = [document];
      for (let i = 0; i < roots.length; i++) {
        for (const el of roots[i].querySelectorAll('*')) {
          const root = shadowOf.call(el);
          if (root && !listened.has(root)) { roots.push(root); listenIn(root); }
        }
      }
    }, {signal});
    // A scripted annotator states the task's answer, optionally pointing at the element that shows it.
    window.__webfreezeAnswer = (value, el, evidence) => send('answer', el,
      {text: value, evidence: evidence || (el ? [value] : [])});
    window.addEventListener('scroll', () => {
      clearTimeout(scrollTimer);
      scrollTimer = setTimeout(flushScroll, 150);
    }, {capture: true, signal});
    window.addEventListener('pagehide', flushScroll, {capture: true, signal});
    // The document as its scripts left it once loaded (fields they disabled, controls they added):
    // kept as the page's DOM snapshot, which the text backend reads to submit forms as a browser does.
    if (window.top === window) {
      window.addEventListener('load', () => setTimeout(() => window.__webfreezeLog({
        action: 'snapshot', url: location.href, title: document.title, time: Date.now(),
        html: '<!DOCTYPE html>' + document.documentElement.outerHTML}), 0), {signal});
    }
  };
  install();
  // A JavaScript dialog (alert, confirm, prompt) and how it was answered, whoever answered it (the
  // person, or a script's dialog handler): logged with the step that opened it.
  for (const kind of ['alert', 'confirm', 'prompt']) {
    const native = window[kind];
    if (typeof native !== 'function') continue;
    window[kind] = function (...args) {
      const answer = native.apply(this, args);
      window.__webfreezeLog({action: 'dialog', target: null, url: location.href, time: Date.now(),
                             value: {type: kind, message: args[0] === undefined ? '' : String(args[0]),
                                     answer: kind === 'alert' ? true : answer,
                                     offered: kind === 'prompt' ? (args[1] === undefined ? '' : String(args[1])) : null}});
      return answer;
    };
  }
  // Every shadow root a script attaches (closed ones too) is listened in as it is made.
  const attach = Element.prototype.attachShadow;
  Element.prototype.attachShadow = function (...args) {
    const root = attach.apply(this, args);
    listenIn(root);
    return root;
  };
  const open = Document.prototype.open;
  Document.prototype.open = function (...args) {
    const result = open.apply(this, args);
    if (this === document && args.length < 3) install();  // (with three arguments it is window.open)
    return result;
  };
  // write() into a document whose parser has finished opens it anew, as open() does, without calling it
  for (const name of ['write', 'writeln']) {
    const original = Document.prototype[name];
    Document.prototype[name] = function (...args) {
      const opens = this === document && this.readyState !== 'loading';
      const result = original.apply(this, args);
      if (opens) install();
      return result;
    };
  }
})();
""".replace("__ROLE_NAME_JS__", ROLE_NAME_JS.strip())


class TrajectoryLog:
    """Collects steps from the page listener and the browser, in order; consecutive typing into the
    same field is one step holding the final text."""

    def __init__(self):
        self.steps: list[dict] = []
        self.snapshots: list[dict] = []  # each document once loaded: url, title, time, html
        self._lock = threading.Lock()
        self._t0 = time.time()
        self._requested: str | None = None  # the page's reason for the navigation under way, if it asked

    def add(self, step: dict) -> None:
        with self._lock:
            last = self.steps[-1] if self.steps else None
            if (step["action"] == "type" and last and last["action"] == "type"
                    and last["target"] and step["target"] and last["target"]["css"] == step["target"]["css"]):
                last["value"] = step["value"]
                last["time"] = step["time"]
                if step.get("keys"):
                    last["keys"] = True
                return
            if step["action"] == "navigate" and last and last["action"] == "navigate" and last["url"] == step["url"]:
                return
            if step["action"] == "dblclick":  # (its two clicks, logged before it, are the one step)
                css = (step.get("target") or {}).get("css")
                for _ in range(2):
                    if (self.steps and self.steps[-1]["action"] == "click"
                            and (self.steps[-1].get("target") or {}).get("css") == css):
                        step.setdefault("dialogs", []).extend(self.steps.pop().get("dialogs") or [])
                if step.get("dialogs") == []:
                    del step["dialogs"]
            step["step"] = len(self.steps)
            self.steps.append(step)

    def from_page(self, source, event: dict) -> None:
        if event.get("action") == "snapshot":
            if isinstance(event.get("html"), str):
                with self._lock:
                    self.snapshots.append({"url": str(event.get("url") or ""), "title": str(event.get("title") or ""),
                                           "time": event.get("time", 0) / 1000.0, "html": event["html"]})
            return
        if event.get("action") == "dialog":
            self.dialog(event.get("value"))
            return
        step = {"action": event["action"], "target": event.get("target"), "value": event.get("value"),
                "url": event.get("url"), "time": round(event.get("time", 0) / 1000.0, 3)}
        if event["action"] == "type" and event.get("keys") is True:
            step["keys"] = True
        at = event.get("at")
        if event["action"] == "click" and isinstance(at, list) and len(at) == 2 and \
                all(isinstance(v, (int, float)) and 0 <= v <= 1 for v in at):
            step["at"] = [float(v) for v in at]  # (where in the element the click landed: clickAt)
        self.add(step)

    def dialog(self, value) -> None:
        """A JavaScript dialog the page opened and its answer (``{"type", "message", "answer"}``:
        True for OK, False for Cancel, a prompt's text or None; a prompt's also ``offered``, the
        text it offered): kept on the last step logged, the
        one that opened it (the click whose handler asked ``confirm``), as ``dialogs``. The agent
        environment answers every dialog as accepted (``tasks add`` says when the session did not)."""
        if not isinstance(value, dict) or value.get("type") not in ("alert", "confirm", "prompt"):
            return
        answer = value.get("answer")
        entry = {"type": value["type"], "message": str(value.get("message") or "")[:DIALOG_MESSAGE_MAX],
                 "answer": answer if isinstance(answer, (bool, str)) or answer is None else None}
        if value["type"] == "prompt":  # (the text a prompt offers: what the agent environment answers)
            entry["offered"] = str(value.get("offered") or "")
        with self._lock:
            if self.steps:
                self.steps[-1].setdefault("dialogs", []).append(entry)

    def requested(self, reason: str) -> None:
        """The page asked for a navigation of the main frame (Chromium's
        ``Page.frameRequestedNavigation``: a link, a form, a script): the next one is its effect."""
        with self._lock:
            self._requested = reason or "page"

    def navigated(self, url: str, typed: str | None = None, *, by_browser: bool = False) -> None:
        """The main frame committed a new document. Without a request from the page before it, the
        browser started it (address bar, ``page.goto``, back/forward): an action of its own, logged
        with the URL asked for (``typed``) when the server redirected it, and ``landed`` where it
        ended (``/login`` answered with a redirect to ``/`` is still ``/login``: replaying it asks
        the same). ``by_browser``: the browser said it started it (a same-document one: a typed
        ``#/route``), whatever the page asked for before."""
        with self._lock:
            cause, self._requested = "goto" if by_browser else self._requested or "goto", None
        step = {"action": "navigate", "target": None, "value": None, "url": url, "cause": cause,
                "time": round(time.time(), 3)}
        if cause == "goto" and typed and typed != url.split("#", 1)[0]:
            step["url"], step["landed"] = typed, url
        self.add(step)


# What a person reads on the page: its rendered text, and the values shown in its visible form
# fields (an edit form's title input, a text area; a password never, nor a hidden input, nor a field
# the person typed into: that is theirs, not the site's), which the observation tree gives as
# ``value='...'`` and the reference agent reads there too (but in the fields it typed into).
VISIBLE_TEXT_JS = """() => {
  if (!document.body) return {shown: '', typed: []};
  const unshown = new Set(%s);
  // open shadow roots (a web component's widgets: Bokeh's, Shoelace's) are shown as the document is
  const roots = [document];
  for (let i = 0; i < roots.length; i++) {
    for (const el of roots[i].querySelectorAll('*')) if (el.shadowRoot) roots.push(el.shadowRoot);
  }
  const all = (sel) => roots.flatMap((r) => Array.from(r.querySelectorAll(sel)));
  const shadowText = roots.slice(1).flatMap((r) => Array.from(r.children)
    .filter((el) => el.getClientRects().length > 0).map((el) => el.innerText || ''));
  const values = all('input, textarea')
    .filter((el) => !(el.tagName === 'INPUT' && unshown.has((el.type || '').toLowerCase())) && !el.__wfTyped)
    .filter((el) => el.getClientRects().length > 0 && getComputedStyle(el).visibility !== 'hidden')
    .map((el) => el.value).filter((v) => v);
  // a rich text editor the person typed into shows their text, not the site's: given apart
  const typed = all('[contenteditable]')
    .filter((el) => el.__wfTyped).map((el) => el.innerText);
  // (and the fields the person typed into: no evidence, named as such when evidence is only there)
  const typedValues = all('input, textarea').filter((el) => el.__wfTyped).map((el) => el.value).filter((v) => v);
  return {shown: [document.body.innerText, ...shadowText, ...values].join('\\n'), typed, typedValues};
}""" % json.dumps(list(UNSHOWN_INPUT_TYPES))


def record_answer(page, text: str, locator=None, evidence: list[str] | None = None) -> None:
    """For scripts driving a session: log the task's answer ``text``, read from the element
    ``locator`` points at (a Playwright locator) when given. ``evidence`` lists strings the page must
    show for the answer to hold (default: the answer itself when a locator is given).

    Each evidence string is checked now against the page's visible text and the values of its
    visible form fields (whitespace and case folded, :func:`fold_text`): one the page does not show
    raises :class:`SessionScriptError`
    naming it, so a task never rests on evidence that replay cannot find."""
    if evidence is not None and (not isinstance(evidence, (list, tuple))
                                 or not all(isinstance(e, str) and e.strip() for e in evidence)):
        raise SessionScriptError("record_answer: evidence must be a list of non-empty strings")
    wanted = list(evidence) if evidence is not None else ([text] if locator is not None else [])
    seen = page.evaluate(VISIBLE_TEXT_JS)
    shown = fold_text(seen["shown"])
    for typed in filter(None, seen["typed"]):  # (an editor's text the person typed: cut out of the page's)
        shown = shown.replace(fold_text(typed), "\n", 1)
    missing = [e for e in wanted if fold_text(e) not in shown]
    if missing:
        mine = [fold_text(t) for t in [*seen["typed"], *(seen.get("typedValues") or [])]]
        where = (" outside the fields this session typed into (what the person typed is no evidence of the site's: "
                 "load the page again, or read it where the site shows it)"
                 if any(fold_text(missing[0]) in t for t in mine) else "")
        raise SessionScriptError(f"record_answer: the page ({page.url}) does not show the evidence {missing[0]!r}{where}")
    if locator is not None:
        locator.evaluate("(el, a) => window.__webfreezeAnswer(a[0], el, a[1])", [text, evidence])
    else:
        page.evaluate("(a) => window.__webfreezeAnswer(a[0], null, a[1])", [text, evidence])


DIALOG_MESSAGE_MAX = 2000  # characters of a dialog's message kept on its step
DRAIN_LIMIT_S = 15.0  # a request still open by then (a stream, a long poll) is left as the browser closes it


def _drain(context, inflight, quiet_ms: float) -> None:
    """Once the script is done: wait until no request of the session's pages is in flight and none
    has started or ended for ``quiet_ms`` (an answer the site gives late, a failed login that a
    server delays on purpose, is recorded as the site gave it, not as the proxy's 502 for a
    connection the closing browser cut), and ``quiet_ms`` past the replay's timer horizon at least
    (:data:`~webfreeze.simulator.browser.TIMER_HORIZON_MS`: the settle after a step runs the timers
    due that long after it, so a save a page defers by a timer, TiddlyWiki's syncer one second after
    a click, is recorded for the replay to answer); :data:`DRAIN_LIMIT_S` at most."""
    from playwright.sync_api import Error as PlaywrightError

    from webfreeze.simulator.browser import TIMER_HORIZON_MS

    start = time.monotonic()  # (what the page does once the script returns)
    deadline = start + DRAIN_LIMIT_S
    least = (TIMER_HORIZON_MS + quiet_ms) / 1000
    while time.monotonic() < deadline:
        now = time.monotonic()
        if not inflight and now - start >= least and now - max(inflight.changed, start) >= quiet_ms / 1000:
            return
        live = next((p for p in context.pages if not p.is_closed()), None)
        if live is None:
            return
        try:
            live.wait_for_timeout(25)
        except PlaywrightError:
            pass  # that page closed meanwhile (a popup that closed itself): the next one waits


def _accept_dialog(dialog) -> None:
    """A person's session: Playwright shows no dialog to the person, and without a handler it
    cancels every one, so a delete behind a ``confirm`` could not be recorded. Each is accepted for
    the person as the agent environment answers it (a ``prompt`` with the text it offers), and is
    logged so on its step."""
    from playwright.sync_api import Error as PlaywrightError

    try:
        if dialog.type == "prompt":
            dialog.accept(dialog.default_value)
        else:
            dialog.accept()
    except PlaywrightError:
        pass  # the page went away meanwhile


def record_session(archive_path, start: str, trajectory_path, *, headed: bool = False,
                   script: str | None = None, driver=None,
                   resolve: dict[str, tuple[str, int]] | None = None, quiet_ms: int = 300,
                   instruction: str | None = None, credentials: tuple[str, str] | None = None,
                   warn=None) -> dict:
    """Open ``start`` in Chromium through the recording proxy; a ``script`` (a Python file defining
    ``run(page)``) or a ``driver`` callable drives it, else a person does until the window is
    closed. ``instruction`` (the task the session performs) is kept in the trajectory.
    ``credentials``: (user, password) for the site's HTTP authentication (as a crawl's). ``warn``
    (a callable taking a line) hears of the answers still coming when the session ended, which are
    not recorded (server-sent events the page kept open, Gradio's heartbeat, are recorded as they
    stood: recorder/addon.py). Returns the trajectory."""
    from playwright.sync_api import sync_playwright

    from webfreeze.simulator.browser import Inflight, launch_chromium, require_display

    from .crawl import check_url, open_context

    # the trajectory goes beside the archive, never over it; checked before anything is recorded
    out = check_output_file(trajectory_path, protect=[archive_path, script], what="trajectory", devices_ok=True)
    run = driver
    if script:
        if not Path(script).is_file():
            raise SessionScriptError(f"{script}: no such script (or not a file)")
        try:
            run = runpy.run_path(script).get("run")
        except (Exception, SystemExit) as exc:  # the script's own error, in one line
            raise SessionScriptError(f"{script}: cannot load it: {one_line_error(exc)}") from None
        if not callable(run):
            raise SessionScriptError(f"{script}: defines no run(page) function")
    elif run is None and not headed:
        raise SessionScriptError("a session needs --headed (a person drives) or --script FILE")
    check_url(start)
    if headed:  # found out before an archive is made
        require_display("run it on a desktop or under xvfb-run, or drive the session with --script FILE")
    log = TrajectoryLog()
    with recording_into(archive_path) as arc:
        proxy = RecordingProxy(arc, port=0, session_kind="session", resolve=resolve, paused=True, seed_pages=True).start()
        try:
            proxy.probe(start)  # through the proxy: its resolver and its certificate policy
            proxy.begin_session()
            with sync_playwright() as pw:
                # a script's session in the headless shell (what Playwright runs for headless
                # Chromium, which the script was written against); a person's in the full browser
                browser = launch_chromium(pw, proxy=proxy.url, headless=not headed, shell=True)
                context = open_context(browser, start, credentials)
                inflight = Inflight()  # (every page's requests: the session ends when they have)
                for event, handler in inflight.handlers():
                    context.on(event, handler)
                context.expose_binding("__webfreezeLog", log.from_page)
                context.add_init_script(LISTENER_JS)
                if run is None:  # (a script answers its dialogs itself, by its own handler)
                    context.on("dialog", _accept_dialog)
                page = context.new_page()
                _watch_navigation_causes(context, page, log)
                page.goto(start, wait_until="load")
                if run is not None:
                    try:
                        run(page)
                    except (Exception, SystemExit) as exc:  # (a script calling sys.exit() too)
                        place = script_place(exc, script) if script else ""
                        raise SessionScriptError(f"the session script failed{' at ' + place if place else ''}: "
                                                 f"{one_line_error(exc)} (what it loaded until then "
                                                 f"stays in {archive_path}; no trajectory written)",
                                                 recorded=list(log.steps)) from None
                    _drain(context, inflight, quiet_ms)  # the last answers and events arrive
                else:
                    page.wait_for_event("close", timeout=0)
                browser.close()
        finally:
            proxy.stop()
        if proxy.recorder.unfinished and warn is not None:
            n = len(proxy.recorder.unfinished)
            warn(f"{n} answer{'s were' if n > 1 else ' was'} still coming when the session ended: the "
                 f"archive keeps {'them' if n > 1 else 'it'} as asked and never answered (a stream the page kept "
                 f"open, or a long poll the site was holding: a replay holds it too, and never answers it): "
                 f"{', '.join(proxy.recorder.unfinished[:5])}{' ...' if n > 5 else ''}")
        trajectory = {
            "version": TRAJECTORY_VERSION,
            "kind": "reference_trajectory",
            "start_url": start,
            "archive_session": proxy.session_id,
            "viewport": {"width": 1920, "height": 1080},
            "recorded_by": "person" if run is None else "script",
            "steps": log.steps,
        }
        if instruction:
            trajectory["instruction"] = instruction.strip()
        arc.put_document(f"trajectories/{proxy.session_id}.json", trajectory)
        if proxy.recorder.unfinished:  # (what the site was still holding: the replay holds it too)
            arc.put_document(f"{UNFINISHED_PREFIX}{proxy.session_id}.json",
                             {"version": 1, "requests": sorted(set(proxy.recorder.unfinished))})
        if log.snapshots:  # the DOM of each document as loaded (not page records: no screenshot, no check)
            arc.put_document(f"{DOM_SNAPSHOTS}{proxy.session_id}.json", {
                "version": DOM_SNAPSHOTS_VERSION, "kind": "dom_snapshots", "session": proxy.session_id,
                "snapshots": [{"url": snap["url"], "title": snap["title"], "html": snap["html"],
                               "captured_at": normalize_time(datetime.fromtimestamp(snap["time"], timezone.utc))}
                              for snap in log.snapshots]})
    write_output(out, json.dumps(trajectory, indent=2, ensure_ascii=False) + "\n")
    return trajectory


def _watch_navigation_causes(context, page, log: TrajectoryLog) -> None:
    """Log the main frame's navigations with their causes, from Chromium's own events on one CDP
    session (so that each request comes before its commit): every navigation the page asks for (a
    link, a form, a script) is announced by ``Page.frameRequestedNavigation`` before it commits;
    one the browser starts (the address bar, ``page.goto``, back and forward) comes unannounced;
    a same-document one (a fragment, ``history.pushState``) is the page's doing, unless the browser
    announced it as its own (``Page.frameStartedNavigating``, which a page's link or script never
    fires: a ``#/route`` typed into the address bar or given to ``page.goto``, back and forward
    within the document). The URL a
    navigation first asked for, before any redirect, is its document request's first URL
    (``Network.requestWillBeSent`` without ``redirectResponse``; the request's id is the
    navigation's loader id)."""
    cdp = context.new_cdp_session(page)
    cdp.send("Page.enable")
    cdp.send("Network.enable")
    main = cdp.send("Page.getFrameTree")["frameTree"]["frame"]["id"]
    first_urls: dict[str, str] = {}  # loader id -> the URL its navigation asked for

    def requested(event: dict) -> None:
        if event.get("frameId") == main and event.get("disposition", "currentTab") == "currentTab":
            log.requested(event.get("reason") or "page")

    def request(event: dict) -> None:
        if (event.get("type") == "Document" and event.get("frameId") == main and "redirectResponse" not in event
                and event.get("requestId") == event.get("loaderId")):
            if len(first_urls) > 64:
                first_urls.clear()
            first_urls[event["requestId"]] = (event.get("request") or {}).get("url", "")

    def committed(event: dict) -> None:
        frame = event.get("frame") or {}
        if frame.get("id") == main and not frame.get("parentId"):
            url = frame.get("url", "") + frame.get("urlFragment", "")
            log.navigated(url, first_urls.pop(frame.get("loaderId"), None))

    started: set[str] = set()  # the URLs of same-document navigations the browser started

    def browser_started(event: dict) -> None:
        if event.get("frameId") == main and event.get("navigationType") in ("sameDocument", "historySameDocument"):
            started.add(event.get("url", ""))

    def within_document(event: dict) -> None:
        if event.get("frameId") == main:
            url = event.get("url", "")
            if url in started:
                started.discard(url)
                log.navigated(url, by_browser=True)
                return
            log.requested("sameDocument")
            log.navigated(url)

    cdp.on("Page.frameRequestedNavigation", requested)
    cdp.on("Network.requestWillBeSent", request)
    cdp.on("Page.frameNavigated", committed)
    cdp.on("Page.navigatedWithinDocument", within_document)
    cdp.on("Page.frameStartedNavigating", browser_started)


ONE_LINE_MAX = 400  # characters of an error's first lines kept on the one line


def one_line_error(exc: BaseException) -> str:
    """``Type: message`` on one line. A first line that ends in a colon goes on with the lines after
    it, up to a blank line or Playwright's ``Call log:`` (a strict mode violation lists the
    elements a locator matched there: what the script's author needs to choose one). An action
    that timed out says only ``Timeout 30000ms exceeded.`` on its first line: what it waited for
    and the last reason its call log gives (``element is not visible``) follow in parentheses."""
    lines = str(exc).strip().splitlines()
    if not lines:
        return type(exc).__name__
    text = lines[0].rstrip()
    if text.endswith(":"):
        more = []
        for line in lines[1:]:
            if not line.strip() or line.strip() == "Call log:":
                break
            more.append(line.strip())
        text = " ".join([text, "; ".join(more)]) if more else text
    else:
        log = next((i for i, line in enumerate(lines) if line.strip() == "Call log:" or _LOGS_RULE.match(line.strip())),
                   None)
        waited = _call_log_summary(lines[log + 1:]) if log is not None else ""
        if waited:
            text = f"{text.rstrip('.')} ({waited})"
    if len(text) > ONE_LINE_MAX:
        text = text[:ONE_LINE_MAX - 3].rstrip() + "..."
    return f"{type(exc).__name__}: {text}"


_LOGS_RULE = re.compile(r"^=+ logs =+$")  # Playwright's other call log (a page's waits: wait_for_url)


def _call_log_summary(log: list[str]) -> str:
    """From a Playwright call log, what the action waited for (its first ``waiting for ...``
    entry) and the last entry that says why it could not go on (``element is not visible``,
    ``... intercepts pointer events``): ``waiting for locator("#save"): element is not visible``."""
    entries = [line.strip().removeprefix("- ").strip() for line in log if line.strip().strip("=")]
    entries = [e.split(" × ", 1)[1] if " × " in e and e.split(" × ", 1)[0].isdigit() else e for e in entries]
    waited = next((e for e in entries if e.startswith("waiting for ")), "")
    why = next((e for e in reversed(entries)
                if e.startswith("element ") or "intercepts pointer events" in e or e.startswith("locator resolved to")), "")
    return f"{waited}: {why}" if waited and why else waited or why


def script_place(exc: BaseException, script) -> str:
    """``NAME:LINE`` of the deepest frame of ``exc``'s traceback in the file ``script`` (the session
    or login script that raised it, or called what did), or "" when none is."""
    target = Path(script).resolve()
    place = ""
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        try:
            if Path(code.co_filename).resolve() == target:
                place = f"{target.name}:{tb.tb_lineno}"
        except (OSError, ValueError):
            pass
        tb = tb.tb_next
    return place
