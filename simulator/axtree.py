"""The observation tree, built from HTML with lxml, for both backends.

The **text backend** hands :func:`build_tree` the archived HTML; element ids (bids) are assigned
here in document order. The **browser backend** runs :data:`MARK_JS` in the page, which stamps
every element with ``data-wf-bid`` in the same order and returns ``{html, geometry}`` (as JSON
text unless the page has replaced ``JSON``; :func:`marked` reads either): a serialisation of the
live DOM (with the current form state, focus and computed visibility written into it) and
``{bid: [x, y, w, h, visible]}`` in viewport pixels; :func:`build_tree` then reads the bids from the HTML. Either
way the same DOM gives the same tree, byte for byte.

``Tree.axtree_text`` follows BrowserGym's flattened accessibility tree: one line per node,
tab-indented by depth, ``[bid] role 'name'`` then `` value='..'`` and ``, prop=value`` pairs;
``RootWebArea`` first; text as ``StaticText`` lines (dropped when the parent's name already holds
them); unnamed ``generic`` nodes and line breaks skipped with their children moved up;
``level``, ``editable``, ``readonly``, ``settable``, ``multiline``, ``invalid`` and ``focusable``
left out by default as BrowserGym does (``Tree.text(ignored_properties=...)`` to change that).

Roles and names follow HTML-AAM and accname in a practical subset: ``aria-labelledby``,
``aria-label``, ``label[for]`` and wrapping labels, ``alt``, button values, ``placeholder``,
``title``, and text content for the roles named from content. Hidden elements (``hidden``,
``aria-hidden="true"``, an inline ``display:none`` or ``visibility:hidden``, ``type=hidden``,
closed ``details`` and ``dialog``, and in the browser whatever the page's CSS hides) are left out;
the text backend cannot see stylesheet-hidden content.
"""

from __future__ import annotations

import copy as copy_module
import decimal
import functools
import json
import math
import re
import struct
from urllib.parse import urljoin, urlsplit

from lxml import etree

from webfreeze.common.aria import (
    BGYM_MARKED_TAGS,
    GRID_STYLE,
    NO_PSEUDO_TAGS,
    OPEN_ROOTS_JS,
    PRESENTATION_CONFLICTS,
    PSEUDO_TEXT_JS,
    REQUIRED_CONTEXT,
    explicit_role,
)
from webfreeze.common.errors import WebfreezeError

BID_ATTR = "data-wf-bid"
HIDDEN_ATTR = "data-wf-hidden"
# A list item's marker type as the page's style draws it (MARK_JS; CSS's list-style-type, none for
# no marker); without it (a page as served) the HTML defaults (Builder.list_marker)
MARKER_ATTR = "data-wf-marker"
# An element displayed otherwise than its tag is by default (MARK_JS): an inline element shown as a
# block, a block shown inline, a flex or grid box; what the page's style sheets say, which a page as
# served (the text backend) cannot tell
DISPLAY_ATTR = "data-wf-display"
# A table whose cells the page's style draws as a grid (MARK_JS): a data table (Builder.data_table)
TABLE_ATTR = "data-wf-table"
# The case an element's text is drawn in (CSS text-transform, MARK_JS), where it differs from its
# parent's: ``uppercase``, ``lowercase``, ``capitalize``, ``none`` (Builder.text_transform)
TRANSFORM_ATTR = "data-wf-transform"
# The text an element's ::before and ::after draw (MARK_JS; PSEUDO_TEXT_JS): a StaticText of its own
# at the start and the end of the element's content, in its name from content too
BEFORE_ATTR = "data-wf-before"
AFTER_ATTR = "data-wf-after"
FOCUSED_ATTR = "data-wf-focused"
# On a page read as its flat tree (open shadow roots): the shadow root an element belongs to, 1, 2,
# ... (none: the document). Ids are unique only within one root: a shadow root's ids and its
# labels' ``for`` are looked up there, and a CSS path does not stop at them.
SCOPE_ATTR = "data-wf-scope"
# A frame's document, grafted under its frame element (build_tree's ``frames``), carries its URL in
# FRAME_ATTR on its root; a frame the observation cannot show says why in FRAME_NOTE_ATTR.
FRAME_ATTR = "data-wf-frame-url"
FRAME_NOTE_ATTR = "data-wf-frame-note"
FRAME_TAGS = frozenset({"iframe", "frame"})

# Subtrees that get no bids and never appear in the tree (MARK_JS skips the same ones).
SKIPPED_TAGS = frozenset({"head", "script", "style", "template", "noscript"})

# BrowserGym's defaults (browsergym.utils.obs): properties left out of the text, and roles skipped.
IGNORED_PROPERTIES = ("editable", "readonly", "level", "settable", "multiline", "invalid", "focusable")
IGNORED_ROLES = ("LineBreak",)

# Drawn inline by default (not form controls, which Chromium's tree keeps no space beside)
_INLINE_FLOW = frozenset({"a", "abbr", "b", "bdi", "bdo", "big", "cite", "code", "data", "del", "dfn", "em", "font",
                          "i", "img", "ins", "kbd", "label", "mark", "nobr", "q", "s", "samp", "small", "span",
                          "strike", "strong", "sub", "sup", "svg", "time", "tt", "u", "var", "canvas", "picture",
                          "iframe", "object", "embed", "video", "audio", "math", "output", "ruby"})

# A start tag of these ends an open <p> (HTML's parsing rules): MARK_JS writes a paragraph that
# holds one as a wf-p, which _parse makes a p again
_P_CLOSERS = frozenset({"address", "article", "aside", "blockquote", "center", "details", "dialog", "dir", "div", "dl",
                        "dd", "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5",
                        "h6", "header", "hgroup", "hr", "li", "listing", "main", "menu", "nav", "ol", "p", "plaintext",
                        "pre", "search", "section", "summary", "table", "ul", "xmp"})

MARK_JS = r"""
(prefix) => {
  prefix = prefix || '';
__OPEN_ROOTS__  const BID = 'data-wf-bid', HIDDEN = 'data-wf-hidden', FOCUSED = 'data-wf-focused', SCOPE = 'data-wf-scope';
  const SKIP = new Set(['head', 'script', 'style', 'template', 'noscript']);
  const root = document.documentElement;
  if (!root) return {html: '', geometry: {}};
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_ELEMENT, {
    acceptNode: (n) => SKIP.has(n.localName.toLowerCase()) ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT,
  });
  const elements = [];
  let shadowed = false;
  for (let n = walker.currentNode; n; n = walker.nextNode()) {
    if (n === root || !SKIP.has(n.localName.toLowerCase())) {
      elements.push(n);
      if (n.shadowRoot) shadowed = true;
    }
  }
  // A page with open shadow roots (web components) is read as it is drawn, its flat tree: a host's
  // shadow root in place of its children, a slot's assigned nodes in place of its own (its
  // fallback when none are), so what a component shows gets bids and text; children no slot takes
  // are not drawn and get none. A closed shadow root cannot be read. A page without one: the DOM.
  const flatChildren = (n) => {
    if (n.shadowRoot) return n.shadowRoot.childNodes;
    if (n.localName === 'slot' && n.getRootNode() instanceof ShadowRoot) {
      const assigned = n.assignedNodes();
      return assigned.length ? assigned : n.childNodes;
    }
    return n.childNodes;
  };
  const parents = new Map();
  if (shadowed) {
    elements.length = 0;
    const stack = [[root, null]];
    while (stack.length) {
      const [el, parent] = stack.pop();
      elements.push(el);
      parents.set(el, parent);
      const kids = Array.from(flatChildren(el)).filter((c) => c.nodeType === 1 && !SKIP.has(c.localName.toLowerCase()));
      for (let i = kids.length - 1; i >= 0; i--) stack.push([kids[i], el]);
    }
  }
  const parentOf = shadowed ? (el) => parents.get(el) : (el) => el.parentElement;
  if (shadowed) {  // a bid an element kept from an observation before, and is not drawn now, goes
    const drawn = new Set(elements);
    for (const r of openRoots()) for (const el of r.querySelectorAll('[' + BID + ']')) if (!drawn.has(el)) el.removeAttribute(BID);
  }
  const vw = window.innerWidth, vh = window.innerHeight;
  const round = (v) => Math.round(v * 100) / 100;
  const geometry = {};
  const hidden = new Set();
  const markers = new Map();
  const displays = new Map();
  const transforms = new Map(), ownTransform = new Map();  // an element's text-transform; where it changes
  const TABLE_TAGS = new Set(['table', 'tr', 'td', 'th']);
  const P_CLOSERS = __P_CLOSERS__;
__PSEUDO_TEXT__  // The elements a ::before or ::after rule of the page's style sheets that sets content may apply
  // to (every q too, which the browser's own sheet quotes): {found, classes} (a rule on one class
  // alone, an icon font's thousand, is looked up by the element's classes), or null when a sheet
  // cannot be read (another origin's) or a selector not looked up: then every element is asked
  const pseudoHosts = (() => {
    const found = new Set(), classes = new Set(), bases = new Set();
    const PSEUDO = /::?(before|after)\b/i;
    const roots = openRoots();
    const topLevel = (sel) => {  // (the selector list's items: commas inside :is() and [..] are not)
      const parts = [];
      let depth = 0, start = 0;
      for (let i = 0; i < sel.length; i++) {
        const ch = sel[i];
        if (ch === '(' || ch === '[') depth++;
        else if (ch === ')' || ch === ']') depth--;
        else if (ch === ',' && depth === 0) { parts.push(sel.slice(start, i)); start = i + 1; }
      }
      parts.push(sel.slice(start));
      return parts;
    };
    let unread = false;
    const walk = (rules, outer, root) => {
      for (const r of rules) {
        if (r.styleSheet) {  // (an @import)
          try { walk(r.styleSheet.cssRules, outer, root); } catch (e) { unread = true; }
          continue;
        }
        const sel = r.selectorText;
        if (sel && PSEUDO.test(sel)) {
          const content = r.style ? r.style.getPropertyValue('content') : '';
          if (content && content !== 'none' && content !== 'normal') {
            for (const part of topLevel(sel)) {
              if (!PSEUDO.test(part)) continue;
              let base = part.replace(/::?(before|after)\b.*$/i, '').trim();
              if (base.includes('&')) base = outer ? base.replace(/&/g, ':is(' + outer + ')') : '';
              if (/^:host\b/.test(base) && root instanceof ShadowRoot) found.add(root.host);
              else if (/^\.[\w-]+$/.test(base)) classes.add(base.slice(1));
              else bases.add(base || '*');
            }
          }
        }
        if (r.cssRules) walk(r.cssRules, sel || outer, root);
      }
    };
    for (const root of roots) {
      for (const q of root.querySelectorAll('q')) found.add(q);
      for (const sheet of [...root.styleSheets, ...(root.adoptedStyleSheets || [])]) {
        try { walk(sheet.cssRules, null, root); } catch (e) { unread = true; }
      }
    }
    if (unread || bases.has('*')) return null;
    for (const base of bases) {
      for (const root of roots) {
        try { for (const e of root.querySelectorAll(base)) found.add(e); } catch (e) { return null; }
      }
    }
    return {found, classes};
  })();
  const asksPseudo = (el) => pseudoHosts === null || pseudoHosts.found.has(el) ||
    (pseudoHosts.classes.size > 0 && Array.prototype.some.call(el.classList, (c) => pseudoHosts.classes.has(c)));
  const befores = new Map(), afters = new Map(), drawers = [];
  const NO_PSEUDO = new Set(__NO_PSEUDO__);
  const INLINE = new Set(__INLINE_FLOW__);
  const fallback = new Set();  // the elements inside a <canvas>
  // BrowserGym's convention for frames: a frame element's bid is letters (a, b, ..., z, aA, bA, ...),
  // the prefix of the bids inside its document; other elements are numbered 1, 2, 3, ...
  const frames = {};
  let count = 0, letters = 0;
  const ABC = 'abcdefghijklmnopqrstuvwxyz';
  const letter = (n) => {  // BrowserGym's IFrameIdGenerator: a..z, aA..aZ, bA..zZ, aAA, ...
    let len = 1, span = 26;
    while (n >= span) { n -= span; len++; span *= 26; }
    const d = [];
    for (let k = 0; k < len; k++) { d.unshift(n % 26); n = Math.floor(n / 26); }
    return d.map((x, k) => k === 0 ? ABC[x] : ABC[x].toUpperCase()).join('');
  };
  elements.forEach((el) => {
    const tag = el.localName.toLowerCase();
    const framed = tag === 'iframe' || tag === 'frame';
    const bid = prefix + (framed ? letter(letters++) : String(++count));
    el.setAttribute(BID, bid);
    const parent = parentOf(el);
    const parentHidden = parent && hidden.has(parent);
    let rendered = !parentHidden;
    // a canvas's fallback content (glide-data-grid's table of the cells it draws: Streamlit's
    // st.dataframe) has no box, yet Chromium's accessibility tree shows it: only its own styles hide it
    const inCanvas = parent && (parent.localName === 'canvas' || fallback.has(parent));
    if (inCanvas) fallback.add(el);
    if (rendered && (el === root || tag === 'body')) {
      const tt = getComputedStyle(el).textTransform;
      transforms.set(el, tt);
      if (tt !== ((parent && transforms.get(parent)) || 'none')) ownTransform.set(el, tt);
    }
    if (rendered && tag !== 'option' && tag !== 'optgroup' && el !== root && tag !== 'body') {
      const style = getComputedStyle(el);
      // what its ::before and ::after draw (Builder: BEFORE_ATTR, AFTER_ATTR), asked once every
      // element has its bid (a pseudo-element's style asked between two attribute changes is
      // worked out anew each time)
      if (rendered && !NO_PSEUDO.has(tag) && asksPseudo(el)) drawers.push(el);
      // (the case its text is drawn in, where it differs from its parent's: Builder.text_transform)
      const tt = style.textTransform;
      transforms.set(el, tt);
      if (tt !== ((parent && transforms.get(parent)) || 'none')) ownTransform.set(el, tt);
      if (style.display === 'none') rendered = false;
      else if (inCanvas) rendered = style.visibility !== 'hidden' && style.visibility !== 'collapse';
      else if (style.display !== 'contents' && typeof el.checkVisibility === 'function' &&
               !el.checkVisibility({visibilityProperty: true})) rendered = false;
      // a display other than its tag's (Builder._inline: whether a space beside it is drawn; a
      // table's parts drawn by other elements: Builder.css_table_role)
      const shown = style.display;
      if (rendered && tag !== 'br' && tag !== 'wbr' && (INLINE.has(tag) ? shown !== 'inline' :
                       (shown.startsWith('inline') || shown === 'flex' || shown === 'grid' ||
                        (!TABLE_TAGS.has(tag) && (shown === 'table' || shown === 'table-row' || shown === 'table-cell')))))
        displays.set(el, shown);
      // a list item's marker as its style draws it (the tree's ListMarker): the type, none for none
      if (rendered && (tag === 'li' || (style.display === 'list-item' && tag !== 'summary'))) {
        markers.set(el, style.display === 'list-item' ? style.listStyleType : 'none');
      }
    }
    if (!rendered) hidden.add(el);
    const r = el.getBoundingClientRect();
    const visible = rendered && r.width > 0 && r.height > 0 && r.right > 0 && r.bottom > 0 && r.left < vw && r.top < vh;
    geometry[bid] = [round(r.x), round(r.y), round(r.width), round(r.height), visible ? 1 : 0];
    if (framed) {  // where its document's viewport sits: the content box
      const s = getComputedStyle(el);
      const left = el.clientLeft + (parseFloat(s.paddingLeft) || 0);
      const top = el.clientTop + (parseFloat(s.paddingTop) || 0);
      frames[bid] = [round(r.x + left), round(r.y + top), visible ? 1 : 0];
    }
  });
  for (const el of drawers) {
    const before = pseudoText(el, '::before'), after = pseudoText(el, '::after');
    if (before) befores.set(el, before);
    if (after) afters.set(el, after);
  }
  // Serialise a copy in an inert document (its images never load) carrying the live state.
  const inert = document.implementation.createHTMLDocument('');
  const copy = inert.importNode(root, !shadowed);
  if (shadowed) {  // (the flat tree; head, scripts, styles and templates as they are)
    // An element of a shadow root says which (SCOPE: its ids and label-fors are that root's own)
    const scopes = new Map();
    const stack = [[root, copy]];
    while (stack.length) {
      const [el, into] = stack.pop();
      for (const c of flatChildren(el)) {
        const deep = c.nodeType !== 1 || SKIP.has(c.localName.toLowerCase());
        const made = into.appendChild(inert.importNode(c, deep));
        if (c.nodeType !== 1) continue;
        const home = c.getRootNode();
        if (home instanceof ShadowRoot) {
          if (!scopes.has(home)) scopes.set(home, String(scopes.size + 1));
          made.setAttribute(SCOPE, scopes.get(home));
        }
        if (!deep) stack.push([c, made]);
      }
    }
  }
  // The head as the tree reads it: its title, base and meta elements alone. Whatever else a script
  // put there (TensorBoard's Polymer styles leave text and <dom-module>s in it) is never drawn, and
  // our parser, which ends a head at such a node as it does in a page as served, would move it and
  // everything after it into the body, its text shown.
  for (const h of copy.children) {
    if (h.localName !== 'head') continue;
    for (const n of Array.from(h.childNodes)) {
      if (!(n.nodeType === 1 && ['title', 'base', 'meta'].includes(n.localName))) n.remove();
    }
  }
  // A paragraph a script filled with blocks (CodeMirror's editor in a <p>): written as HTML, a
  // parser would end the paragraph at the first block and move the rest out of it. Written as a
  // wf-p (Builder's parser makes it a p again), it keeps them.
  for (const para of Array.from(copy.querySelectorAll('p'))) {
    if (!para.querySelector(P_CLOSERS)) continue;
    const kept = inert.createElement('wf-p');
    for (const a of Array.from(para.attributes)) kept.setAttribute(a.name, a.value);
    while (para.firstChild) kept.appendChild(para.firstChild);
    para.replaceWith(kept);
  }
  const byBid = new Map();
  // The bid goes after the page's own attributes: one a script set after an earlier observation
  // stamped the element (ag-grid styles its cells a frame late) would otherwise come after it, and
  // the same page would serialise in two ways, as a race between the page and the observation went.
  const stampLast = (c) => {
    const v = c.getAttribute(BID);
    if (c.attributes[c.attributes.length - 1].name !== BID) { c.removeAttribute(BID); c.setAttribute(BID, v); }
    byBid.set(v, c);
  };
  copy.querySelectorAll('[' + BID + ']').forEach(stampLast);
  if (copy.hasAttribute(BID)) stampLast(copy);
  for (const el of hidden) {
    const c = byBid.get(el.getAttribute(BID));
    const parent = parentOf(el);
    if (c && !(parent && hidden.has(parent))) c.setAttribute(HIDDEN, '');
  }
  for (const [el, type] of markers) {
    const c = byBid.get(el.getAttribute(BID));
    if (c) c.setAttribute('data-wf-marker', type);
  }
  for (const [el, shown] of displays) {
    const c = byBid.get(el.getAttribute(BID));
    if (c) c.setAttribute('data-wf-display', shown);
  }
  for (const [el, tt] of ownTransform) {
    const c = byBid.get(el.getAttribute(BID));
    if (c) c.setAttribute('data-wf-transform', tt);
  }
  for (const [attr, texts] of [['data-wf-before', befores], ['data-wf-after', afters]]) {
    for (const [el, text] of texts) {
      const c = byBid.get(el.getAttribute(BID));
      if (c) c.setAttribute(attr, text);
    }
  }
  // A table whose cells are drawn as a grid's (bordered, shaded): a data table to Chromium however
  // plain its markup (Builder.data_table)
  for (const t of document.querySelectorAll('table')) {
    const cells = [...t.querySelectorAll('td, th')].filter((c) => c.closest('table') === t);
    if (!cells.length) continue;
    const tableBg = getComputedStyle(t).backgroundColor;
    let bordered = 0, shaded = 0;
    for (const cell of cells) {
      const s = getComputedStyle(cell);
      if (['Top', 'Right', 'Bottom', 'Left'].some((e) => parseFloat(s['border' + e + 'Width']) > 0 &&
                                                      s['border' + e + 'Style'] !== 'none')) bordered++;
      if (s.backgroundColor !== tableBg && s.backgroundColor !== 'rgba(0, 0, 0, 0)') shaded++;
    }
    if (bordered * 2 >= cells.length || shaded * 4 >= cells.length) {
      const c = byBid.get(t.getAttribute(BID));
      if (c) c.setAttribute('data-wf-table', 'styled');
    }
  }
  for (const el of elements) {
    const tag = el.localName.toLowerCase();
    const c = byBid.get(el.getAttribute(BID));
    if (!c) continue;
    if (tag === 'input') {
      if (el.type === 'checkbox' || el.type === 'radio') {
        if (el.checked) c.setAttribute('checked', ''); else c.removeAttribute('checked');
      } else if (!['file', 'submit', 'reset', 'button', 'image'].includes(el.type)) {
        // (a button's value is its attribute: writing '' for an absent one would lose "Submit")
        c.setAttribute('value', el.value);
      }
    } else if (tag === 'textarea') {
      c.textContent = el.value;
    } else if (tag === 'option') {
      if (el.selected) c.setAttribute('selected', ''); else c.removeAttribute('selected');
    }
  }
  let active = document.activeElement;
  while (active && active.shadowRoot && active.shadowRoot.activeElement) active = active.shadowRoot.activeElement;
  if (active && active !== document.body && active !== root && active.hasAttribute(BID)) {
    const c = byBid.get(active.getAttribute(BID));
    if (c) c.setAttribute(FOCUSED, '');
  }
  const doctype = document.doctype ? '<!DOCTYPE ' + document.doctype.name + '>' : '';
  // One JSON string: Playwright's own serialisation of a large object costs ~10 ms more. Not when
  // the page has replaced JSON or added toJSON methods (Prototype.js, old MooTools): then the
  // object itself, which Playwright serialises without them.
  const out = {html: doctype + copy.outerHTML, geometry};
  if (letters) out.frames = frames;
  if (prefix) { out.url = document.URL; out.width = vw; out.height = vh; }
  const native = typeof JSON.stringify === 'function' && /\[native code\]/.test(Function.prototype.toString.call(JSON.stringify)) &&
      [Array, Object, String, Number].every((c) => c.prototype.toJSON === undefined);
  return native ? JSON.stringify(out) : out;
}
"""
MARK_JS = MARK_JS.replace("__OPEN_ROOTS__", OPEN_ROOTS_JS).replace("__PSEUDO_TEXT__", PSEUDO_TEXT_JS).replace(
    "__INLINE_FLOW__", json.dumps(sorted(_INLINE_FLOW))).replace("__P_CLOSERS__", json.dumps(",".join(sorted(_P_CLOSERS)))).replace(
    "__NO_PSEUDO__", json.dumps(sorted(NO_PSEUDO_TAGS)))


def tree_ancestors(el, tag: str):
    """``el``'s ancestors of ``tag``, nearest first, in its own tree: on a page read as its flat
    tree, its shadow root's or the document's (SCOPE_ATTR says which), and never past the root of
    a frame's document grafted into its parent's tree (FRAME_ATTR)."""
    scope = el.get(SCOPE_ATTR)
    for anc in el.iterancestors():
        if _tag(anc) == tag and anc.get(SCOPE_ATTR) == scope:
            yield anc
        if anc.get(FRAME_ATTR) is not None:
            return


def form_ancestor(el):
    """The nearest ``form`` around ``el`` in its own tree (:func:`tree_ancestors`): a form of the
    document does not hold the fields of a shadow root inside it, nor a shadow root's form the
    document's fields slotted into it, nor a form around a frame the fields of its document."""
    return next(tree_ancestors(el, "form"), None)


def frame_letter(n: int) -> str:
    """The ``n``-th (from 0) frame id of a document, as MARK_JS and BrowserGym's IFrameIdGenerator
    give them: a, b, ..., z, aA, aB, ..., zZ, aAA, ..."""
    length, span = 1, 26
    while n >= span:
        n -= span
        length += 1
        span *= 26
    digits = []
    for _ in range(length):
        digits.insert(0, n % 26)
        n //= 26
    abc = "abcdefghijklmnopqrstuvwxyz"
    return "".join(abc[d] if k == 0 else abc[d].upper() for k, d in enumerate(digits))


def frame_path(bid: str) -> list[str]:
    """The bids of the frame elements leading to ``bid``, outermost first (BrowserGym's
    ``get_elem_by_bid``): each frame level starts with a lowercase letter, its uppercase ones
    continue it; ``[]`` for an element of the page's own document."""
    path, i = [], 0
    while bid[i:] and not bid[i:].isdigit():
        i += 1
        while bid[i:] and bid[i].isalpha() and bid[i].isupper():
            i += 1
        path.append(bid[:i])
    return path


def _frame_elements(root, prefix: str) -> list:
    """``[(bid, element)]`` of the frame elements of the document ``root`` (none grafted into it
    yet), outside the skipped subtrees: its stamp, else the letter its order gives it."""
    out = []
    skipped: set = set()
    for el in root.iter(*SKIPPED_TAGS):
        skipped.update(el.iter())
    for el in root.iter("iframe", "frame"):
        if el not in skipped:
            out.append((el.get(BID_ATTR) or prefix + frame_letter(len(out)), el))
    return out


def frame_sources(html: str | bytes, base_url: str, prefix: str = "", encoding: str | None = None) -> list[dict]:
    """The frame elements of a page (or of a frame's document, ``prefix`` its frame's bid), in
    document order: ``{bid, src, srcdoc, sandboxed, name}`` (``src`` absolute, None when absent or empty;
    ``sandboxed`` when a ``sandbox`` attribute blocks its scripts, as BrowserGym leaves such frames
    out)."""
    doc = _parse(_decode(html, encoding), declarative_shadow=True)
    base = doc.find(".//head/base[@href]")
    if base is not None:
        try:
            base_url = _join(base_url, base.get("href").strip())
        except ValueError:
            pass
    out = []
    for bid, el in _frame_elements(doc, prefix):
        src = (el.get("src") or "").strip()
        try:
            src = _join(base_url, src) if src else None
        except ValueError:
            src = None
        sandbox = el.get("sandbox")
        out.append({"bid": bid, "src": src, "srcdoc": el.get("srcdoc") if el.tag == "iframe" else None,
                    "sandboxed": sandbox is not None and "allow-scripts" not in sandbox.split(),
                    "name": (el.get("name") or "").strip() or None})
    return out


def _graft(root, prefix: str, frames: dict, depth: int = 0, *, declarative_shadow: bool = False) -> None:
    """Put each frame's document (``frames[bid]["html"]``) under its frame element, its URL in
    FRAME_ATTR on its root, or the frame's note (``frames[bid]["note"]``) on the frame element
    (``declarative_shadow``: as :func:`_parse` has it)."""
    for bid, el in _frame_elements(root, prefix):
        f = frames.get(bid)
        if not f:
            continue
        if f.get("html") is None or depth > 8:
            if f.get("note"):
                el.set(FRAME_NOTE_ATTR, f["note"])
            continue
        sub = _parse(_decode(f["html"], f.get("encoding")), declarative_shadow=declarative_shadow)
        sub.set(FRAME_ATTR, f.get("url") or "about:blank")
        el.text = None
        for child in list(el):
            el.remove(child)
        el.append(sub)
        _graft(sub, bid, frames, depth + 1, declarative_shadow=declarative_shadow)


def marked(result) -> dict:
    """MARK_JS's result as ``{html, geometry}``: its JSON text, or the object itself."""
    return json.loads(result) if isinstance(result, str) else result


class AXTreeError(WebfreezeError, ValueError):
    """A request the tree cannot answer (unknown bid, no form, ...), in one line."""


# ------------------------------------------------------------------------------------------ parsing
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_:.+-]+)""", re.I)
_HTML_WS = re.compile(r"[ \t\n\f\r]+")
_HTML_SPACE = " \t\n\f\r"
_COLLAPSIBLE = frozenset(_HTML_SPACE)  # (not a no-break space)


def _decode(html: str | bytes, encoding: str | None) -> str:
    if isinstance(html, str):
        return html
    if html.startswith(b"\xef\xbb\xbf"):
        return html[3:].decode("utf-8", "replace")
    if html.startswith((b"\xff\xfe", b"\xfe\xff")):
        return html.decode("utf-16", "replace")
    enc = encoding
    if not enc:
        m = _META_CHARSET.search(html[:4096])
        enc = m.group(1).decode("ascii") if m else "utf-8"
    try:
        return html.decode(enc, "replace")
    except LookupError:
        return html.decode("utf-8", "replace")


def _parse(text: str, *, declarative_shadow: bool = False):
    """The page's tree; with ``declarative_shadow`` (a page as served, not MARK_JS's copy of a live
    one) its declarative shadow roots read as the browser draws them (:func:`_flat_declarative_shadow`)."""
    # lxml refuses str input with an XML encoding declaration, so parse UTF-8 bytes.
    data = text.encode("utf-8", "surrogatepass")
    # Plain lxml.etree elements: lxml.html's element classes cost a Python lookup per element.
    # No libxml2 id table (collect_ids): ids are looked up through _Builder.ids, never XPath id().
    parser = etree.HTMLParser(encoding="utf-8", remove_comments=True, remove_pis=True, collect_ids=False)
    if not data.strip():
        data = b"<html><body></body></html>"
    try:
        doc = etree.fromstring(data, parser)
    except (etree.ParserError, ValueError):
        doc = None
    if doc is None:
        doc = etree.fromstring(b"<html><body></body></html>", parser)
    if b"<wf-p" in data:  # (MARK_JS's name for a paragraph that holds blocks)
        for kept in doc.iter("wf-p"):
            kept.tag = "p"
    _html5_fixups(doc)
    flat = _flat_declarative_shadow(doc) if declarative_shadow else None
    if flat is not None:
        # parsed again from its HTML, as the browser backend's flat copy is (MARK_JS's outerHTML):
        # our parser nests a shadow root's blocks inside a host's <p> or <h3> as it would there
        return _parse(etree.tostring(flat, method="html", encoding="unicode"))
    return doc


# Elements the HTML parser attaches a declarative shadow root to (the spec's valid shadow hosts:
# these and any custom element, a name with a hyphen).
_SHADOW_HOSTS = frozenset({"article", "aside", "blockquote", "body", "div", "footer", "h1", "h2", "h3", "h4", "h5",
                           "h6", "header", "main", "nav", "p", "section", "span"})
# (names with a hyphen that are no custom element's: they host nothing)
_RESERVED_CUSTOM_NAMES = frozenset({"annotation-xml", "color-profile", "font-face", "font-face-src", "font-face-uri",
                                    "font-face-format", "font-face-name", "missing-glyph"})


def _shadow_template(el):
    """The ``<template shadowrootmode="open|closed">`` child the parser makes ``el``'s shadow root
    (the first one: a host takes one root), or None."""
    tag = _tag(el)
    if tag not in _SHADOW_HOSTS and ("-" not in tag or tag in _RESERVED_CUSTOM_NAMES):
        return None
    for child in el:
        if _tag(child) == "template" and (child.get("shadowrootmode") or "").lower() in ("open", "closed"):
            return child
    return None


def _flat_declarative_shadow(doc):
    """Read a page's declarative shadow roots (``<template shadowrootmode="open">``, what server
    rendering of web components sends) as the browser backend reads live ones (MARK_JS): a copy of
    the page as its flat tree. A host's shadow root stands in for its children, a ``<slot>`` of a shadow root
    for the host's children it is assigned (by ``slot`` name, text to the default slot, as
    ``assignedNodes()`` has them) or for its own when none are; children no slot takes are not
    drawn. Each shadow root's elements carry SCOPE_ATTR (their ids are that root's own). A closed
    root cannot be read in the browser: its host keeps its own children, those it puts in no slot
    not drawn, and nothing of the root itself shows, as in the browser backend. None when the page
    has no declarative shadow root."""
    hosts = (t.getparent() for t in doc.iter("template") if t.get("shadowrootmode") is not None)
    if not any(host is not None and _shadow_template(host) is not None for host in hosts):
        return None

    def items(el) -> list:  # an element's child nodes: text (str) and elements
        out = [el.text] if el.text else []
        for c in el:
            out.append(c)
            if c.tail:
                out.append(c.tail)
        return out

    def slots_of(template) -> list:  # the shadow tree's slots, in tree order (not nested templates')
        found = []

        def walk(el):
            for c in el:
                tag = _tag(c)
                if tag == "slot":
                    found.append(c)
                if tag != "template":
                    walk(c)
        walk(template)
        return found

    def assign(host, template) -> dict:  # slot element -> the host's children assigned to it
        slots = slots_of(template)
        first: dict = {}
        for slot in slots:
            first.setdefault((slot.get("name") or ""), slot)
        given: dict = {}
        for node in items(host):
            if node is template or (not isinstance(node, str) and _tag(node) == "template"
                                    and node.get("shadowrootmode") is not None):
                continue
            name = "" if isinstance(node, str) else (node.get("slot") or "")
            slot = first.get(name)
            if slot is not None:
                given.setdefault(slot, []).append(node)
        return given

    def flat_items(el, ctx) -> list:
        """``[(node, ctx)]``: what is drawn under ``el``, each with the context it belongs to
        (``(scope, assigned, outer)``: its shadow root's key, that root's slot assignment, and the
        context its host's children belong to; None for the document's own)."""
        template = _shadow_template(el)
        if template is not None:
            given = assign(el, template)
            if template.get("shadowrootmode").lower() == "closed":
                drawn = {n for nodes in given.values() for n in nodes if not isinstance(n, str)}
                light = [n for n in items(el) if n is not template]
                unslotted.update(n for n in light if not isinstance(n, str) and n not in drawn)
                return [(n, ctx) for n in light]
            inner = (roots.setdefault(template, str(len(roots) + 1)), given, ctx)
            return [(n, inner) for n in items(template)]
        if ctx is not None and _tag(el) == "slot":
            given = ctx[1].get(el)
            if given:
                return [(n, ctx[2]) for n in given]
        return [(n, ctx) for n in items(el)]

    # (lxml's element objects themselves, kept: an id() of one that was let go is given to another)
    roots: dict = {}  # a shadow root's template -> its key
    unslotted: set = set()  # a closed root's host's children it puts in no slot

    def copy(el, ctx, into=None):
        made = etree.Element(el.tag, dict(el.attrib)) if into is None else etree.SubElement(into, el.tag, dict(el.attrib))
        if ctx is not None:
            made.set(SCOPE_ATTR, ctx[0])
        if el in unslotted:
            made.set(HIDDEN_ATTR, "")
        if _tag(el) in SKIPPED_TAGS:  # (as they are)
            made.text = el.text
            for c in el:
                made.append(copy_module.deepcopy(c))
            return made
        last = None
        for node, node_ctx in flat_items(el, ctx):
            if isinstance(node, str):
                if last is None:
                    made.text = (made.text or "") + node
                else:
                    last.tail = (last.tail or "") + node
            else:
                last = copy(node, node_ctx, made)
                last.tail = None
        return made

    flat = copy(doc, None)
    # the shadow roots numbered 1, 2, ... in the order MARK_JS numbers live ones
    numbers: dict = {}
    stack = [flat]
    while stack:
        el = stack.pop()
        for c in el:
            key = c.get(SCOPE_ATTR)
            if key is not None:
                c.set(SCOPE_ATTR, numbers.setdefault(key, str(len(numbers) + 1)))
            if _tag(c) not in SKIPPED_TAGS:
                stack.append(c)
    return flat


def _html5_fixups(doc) -> None:
    """Bring libxml2's tree closer to the HTML5 tree a browser builds (table parts outside a table
    dropped, implied ``tbody``)."""
    for part in list(doc.iter(*_TABLE_PARTS)):
        if not any(_tag(a) in ("table", "template") for a in part.iterancestors()):
            _unwrap(part)
    for table in doc.iter("table"):
        run = []
        for child in list(table):
            if isinstance(child.tag, str) and child.tag == "tr":
                run.append(child)
                continue
            if run:
                _wrap(table, run)
                run = []
        if run:
            _wrap(table, run)


# An HTML5 parser ignores these start and end tags outside a table ("in body": Roundup's pages put
# their content in a stray <td>); libxml2 makes elements of them, which moves every CSS path below.
_TABLE_PARTS = ("caption", "col", "colgroup", "tbody", "thead", "tfoot", "tr", "td", "th")


def _unwrap(el) -> None:
    """Replace ``el`` by its content (text, children, then its tail) in its parent."""
    parent = el.getparent()
    if parent is None:
        return
    at = parent.index(el)
    _add_text(parent, at, el.text)
    for child in list(el):
        parent.insert(at, child)
        at += 1
    tail = el.tail
    parent.remove(el)  # (lxml drops the tail with the element)
    _add_text(parent, at, tail)


def _add_text(parent, at: int, text: str | None) -> None:
    """Append ``text`` where the child at index ``at`` of ``parent`` would start."""
    if not text:
        return
    if at == 0:
        parent.text = (parent.text or "") + text
    else:
        prev = parent[at - 1]
        prev.tail = (prev.tail or "") + text


def _wrap(parent, rows) -> None:
    tbody = etree.Element("tbody")
    parent.insert(parent.index(rows[0]), tbody)
    for row in rows:
        tail = row.tail
        tbody.append(row)
        row.tail = tail


def _tag(el) -> str:
    tag = el.tag
    # libxml2's HTML parser lowercases element names already
    return tag if type(tag) is str else ""


def _children(el):
    return [c for c in el if isinstance(c.tag, str)]


# A tabindex that parses as an integer (HTML's rules: leading whitespace, a sign, digits; what follows ignored)
_TABINDEX = re.compile(r"[\t\n\f\r ]*[-+]?[0-9]")
# Inside an SVG: what draws no text (a name from content leaves them out)
_SVG_UNDRAWN = frozenset({"title", "desc", "metadata", "script", "style"})
# Shapes, which get a node only when something makes them accessible (Builder.svg_role): a child
# <title> or <desc>, one of these attributes or a tabindex; <text> and its parts, which draw text.
_SVG_SHAPES = frozenset({"rect", "circle", "ellipse", "line", "polyline", "polygon", "path", "image"})
_SVG_INCLUDING = frozenset({"aria-label", "aria-labelledby", "onclick", "onmousedown", "onmouseup"})
_SVG_TEXT = frozenset({"text", "tspan", "textpath"})
_DISABLEABLE = frozenset({"button", "input", "select", "textarea", "optgroup", "option", "fieldset"})
# What Builder.props reads besides focus: the tags it looks at and the attributes (a role, as
# from role=, is an attribute too); an element with neither has no other property.
_PROP_TAGS = frozenset({"input", "select", "textarea", "button", "optgroup", "option", "fieldset", "summary", "hr",
                        "h1", "h2", "h3", "h4", "h5", "h6", "dialog", "progress", "meter", "img"})
_PROP_ATTRS = frozenset({"role", "aria-disabled", "disabled", "list", "aria-haspopup", "aria-level", "multiple",
                         "aria-orientation", "readonly", "required", "aria-required", "aria-valuemin",
                         "aria-valuemax", "min", "max", "type", "aria-checked", "aria-expanded", "aria-pressed",
                         "aria-selected", "href", "xlink:href", "aria-live", "aria-modal",
                         "aria-autocomplete", "aria-busy", "accesskey"})
_HREF_ONLY = frozenset({"href"})
_CLICKABLE_TAGS = frozenset({"button", "select", "textarea", "summary", "label", "option"})
# Builder.name: the tags named by more than aria-label(ledby), content and title, and those attributes.
_NAMED_BY_TAG = frozenset({"input", "select", "textarea", "meter", "progress", "output", "button", "img", "area",
                           "svg", "fieldset", "table", "optgroup"})
_NAMING_ATTRS = frozenset({"aria-label", "aria-labelledby", "title", "summary"})
_ARIA_NAMING = frozenset({"aria-label", "aria-labelledby"})
# What can hide an element besides its tag (Builder._hidden_self): these attributes, an input's
# type, a closed dialog, a closed details parent.
_HIDING_ATTRS = frozenset({HIDDEN_ATTR, "hidden", "aria-hidden", "style"})
_HIDDEN_BY_TAG = frozenset({"input", "dialog"})
_FOCUS_CANDIDATES = f"//*[@{FOCUSED_ATTR} or @autofocus]"
# A password field's value in the tree: one bullet a character, as Chromium's accessibility tree
# (and so BrowserGym's observation) shows it; the password itself is never in an observation.
PASSWORD_MASK = "\u2022"

# Never rendered, whatever their attributes say (a browser's own style sheet hides noframes and
# noembed: it shows frames and embeds; Roundup's help pages carry a noframes text).
_HIDDEN_TAGS = SKIPPED_TAGS | {"datalist", "area", "map", "param", "source", "track", "noframes", "noembed"}


# Elements whose children are not content (a select's options are; Builder._children_into).
# Tags whose role Builder.role works out from more than the tag.
_ROLE_NEEDS_MORE = frozenset({"a", "area", "input", "select", "img", "th", "section", "header", "footer", "summary",
                              "table", "tr", "td", "tbody", "thead", "tfoot"})
# A layout table's parts (Builder.data_table: what Chromium calls them)
_TABLE_PARTS_ROLES = frozenset({"table", "tr", "td", "th", "tbody", "thead", "tfoot"})
_LAYOUT_ROLES = {"table": "LayoutTable", "tr": "LayoutTableRow", "td": "LayoutTableCell", "th": "LayoutTableCell",
                 "tbody": "generic", "thead": "generic", "tfoot": "generic"}
# The roles aria-selected gives a selected state (Chromium's tree), and those it does only in a grid
_SELECTABLE = frozenset({"option", "tab", "treeitem", "gridcell"})
_SELECTABLE_IN_GRID = frozenset({"row", "cell", "columnheader", "rowheader"})
_CELL_HEADERS = frozenset({"headers", "abbr", "axis", "scope"})
_NO_CONTENT = frozenset({"select", "svg", "textarea", "input", "iframe", "img"})
_TEXT_VALUE_TAGS = frozenset({"input", "textarea"})
# An inline element whose role is generic and that BrowserGym does not mark (a custom element):
# Chromium leaves it out of its tree unless an attribute makes it notable (these, an ARIA attribute,
# an event handler, a style that displays it otherwise)
_DATE = re.compile(r"(\d{4,})-(\d\d)-(\d\d)")
_FORM_CONTROLS = frozenset({"input", "button", "select", "textarea", "meter", "progress"})
_INCLUDING_ATTRS = frozenset({"id", "title", "tabindex", "role", "contenteditable", "accesskey", "draggable"})
_PREFORMATTED = frozenset({"pre", "textarea", "listing", "plaintext"})


def _input_type(attr: str | None) -> str:
    """An input's type from its ``type`` attribute (unknown types are text)."""
    t = (attr or "text").strip().lower()
    return t if t in INPUT_ROLES or t == "hidden" else "text"


def _text_content(el) -> str:
    """All text inside ``el`` (what lxml.html's ``text_content()`` returns)."""
    return "".join(el.itertext())


def _attrs(el) -> dict:
    return dict(el.items())


def _given(el, tag: str | None, a: dict | None) -> tuple[str, dict]:
    """``el``'s tag and attribute dict, unless the caller has read them already."""
    return (_tag(el) if tag is None else tag), (_attrs(el) if a is None else a)


# ------------------------------------------------------------------------------------------ roles
INPUT_ROLES = {"button": "button", "submit": "button", "reset": "button", "image": "button", "file": "button",
               "checkbox": "checkbox", "radio": "radio", "range": "slider", "number": "spinbutton",
               "search": "searchbox", "email": "textbox", "tel": "textbox", "text": "textbox", "url": "textbox",
               "password": "textbox", "date": "Date", "datetime-local": "textbox", "month": "textbox",
               "time": "textbox", "week": "textbox", "color": "textbox"}
TAG_ROLES = {
    "button": "button", "textarea": "textbox", "nav": "navigation", "main": "main", "aside": "complementary",
    "article": "article", "form": "form", "ul": "list", "ol": "list", "menu": "list", "li": "listitem",
    "dl": "DescriptionList", "dt": "term", "dd": "definition", "table": "table", "thead": "rowgroup", "tbody": "rowgroup",
    "tfoot": "rowgroup", "tr": "row", "td": "cell", "caption": "caption", "p": "paragraph",
    "h1": "heading", "h2": "heading", "h3": "heading", "h4": "heading", "h5": "heading", "h6": "heading",
    "hr": "separator", "br": "LineBreak", "label": "LabelText", "option": "option", "optgroup": "group",
    "fieldset": "group", "details": "group", "summary": "DisclosureTriangle", "dialog": "dialog",
    "figure": "figure", "blockquote": "blockquote", "strong": "strong", "em": "emphasis", "code": "code",
    "sub": "subscript", "sup": "superscript", "mark": "mark", "time": "time", "del": "deletion", "s": "deletion",
    "ins": "insertion", "progress": "progressbar", "meter": "meter", "output": "status", "math": "math",
    "iframe": "Iframe", "svg": "image", "search": "search", "address": "group", "hgroup": "group", "abbr": "Abbr",
    "legend": "Legend", "dfn": "term", "figcaption": "Figcaption",
}
# Roles a title attribute does not name unless the element takes focus (ARIA's roles that prohibit
# a name; Chromium still takes aria-label and aria-labelledby)
_NO_TITLE_NAME = frozenset({"paragraph", "code", "insertion", "deletion", "emphasis", "strong", "mark", "time",
                            "subscript", "superscript", "caption"})
# Roles whose name comes from their content (accname 2F), as Chromium applies it.
NAME_FROM_CONTENT = frozenset({
    "button", "link", "heading", "cell", "columnheader", "rowheader", "gridcell", "option", "tab", "menuitem",
    "LayoutTableCell",
    "menuitemcheckbox", "menuitemradio", "checkbox", "radio", "switch", "treeitem", "tooltip", "row",
    "DisclosureTriangle", "term", "sectionhead", "comment",
})
LANDMARK_SCOPES = frozenset({"article", "aside", "main", "nav", "section"})
CLICKABLE_ROLES = frozenset({"button", "link", "checkbox", "radio", "tab", "menuitem", "menuitemcheckbox",
                             "menuitemradio", "option", "switch", "combobox", "textbox", "searchbox", "slider",
                             "spinbutton", "treeitem", "DisclosureTriangle", "listbox"})
FORM_CONTROLS = frozenset({"input", "select", "textarea", "button"})
BLOCK_TAGS = frozenset({"address", "article", "aside", "blockquote", "br", "dd", "details", "dialog", "div", "dl",
                        "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5",
                        "h6", "header", "hgroup", "hr", "li", "main", "nav", "ol", "p", "pre", "section", "summary",
                        "table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul", "caption", "legend", "option"})


# Tags whose implicit role depends on nothing else (Builder.role handles the others).
_PLAIN_ROLES = {k: v for k, v in TAG_ROLES.items()
                if k not in _ROLE_NEEDS_MORE}



_LIST_GLYPHS = {"disc": "\u2022", "circle": "\u25e6", "square": "\u25a0", "disclosure-open": "\u25be",
                "disclosure-closed": "\u25b8"}
_OL_TYPES = {"1": "decimal", "a": "lower-alpha", "A": "upper-alpha", "i": "lower-roman", "I": "upper-roman"}


def _alpha(n: int, upper: bool = False) -> str:
    if n < 1:
        return str(n)
    out = ""
    while n:
        n, r = divmod(n - 1, 26)
        out = chr((65 if upper else 97) + r) + out
    return out


def _roman(n: int, upper: bool = False) -> str:
    if not 0 < n < 4000:
        return str(n)
    out = ""
    for value, letters in ((1000, "m"), (900, "cm"), (500, "d"), (400, "cd"), (100, "c"), (90, "xc"), (50, "l"),
                           (40, "xl"), (10, "x"), (9, "ix"), (5, "v"), (4, "iv"), (1, "i")):
        while n >= value:
            out += letters
            n -= value
    return out.upper() if upper else out


_LIST_COUNTERS = {"decimal": str, "lower-alpha": _alpha, "lower-latin": _alpha,
                  "upper-alpha": lambda n: _alpha(n, True), "upper-latin": lambda n: _alpha(n, True),
                  "lower-roman": _roman, "upper-roman": lambda n: _roman(n, True),
                  "decimal-leading-zero": lambda n: f"{n:02d}" if n >= 0 else str(n)}
_LIST_STYLES = frozenset(_LIST_GLYPHS) | frozenset(_LIST_COUNTERS)


def _notable(a: dict) -> bool:
    """An ARIA attribute or an event handler (Chromium keeps an inline element that has one), or a
    style that makes it other than inline."""
    for k in a:
        if k.startswith("aria-") or k.startswith("on"):
            return True
    style = a.get("style")
    return bool(style) and "display:" in style.lower().replace(" ", "") and \
        not re.search(r"display\s*:\s*inline\s*(;|$|!)", style.lower())


_GRID_STYLE = re.compile(GRID_STYLE)


def _undrawn(el) -> bool:
    """Not drawn at all, as its own attributes say (hidden, display:none; MARK_JS's mark), which is
    what a list's numbering skips (aria-hidden or visibility:hidden items still count)."""
    if el.get("hidden") is not None or el.get(HIDDEN_ATTR) is not None:
        return True
    return "display:none" in (el.get("style") or "").lower().replace(" ", "")


def _valid_date(value: str) -> bool:
    """A date input's value as HTML keeps one: yyyy-mm-dd, a real day (year 1 to 275760)."""
    m = _DATE.fullmatch(value)
    if not m:
        return False
    year, month, day = int(m.group(1)), int(m.group(2)), int(m.group(3))
    if not 1 <= year <= 275760 or not 1 <= month <= 12:
        return False
    days = (31, 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28, 31, 30, 31, 30, 31, 31, 30, 31,
            30, 31)[month - 1]
    return 1 <= day <= days


def _maybe_inline(el) -> bool:
    """A quick first look for Builder._inline: an inline tag (a custom element is inline too), or a
    display MARK_JS noted."""
    tag = el.tag
    return tag in _INLINE_FLOW or el.get(DISPLAY_ATTR) is not None or (type(tag) is str and tag not in BGYM_MARKED_TAGS)


def _control_edge(el, last: bool) -> bool:
    """Whether an element's last (else first) drawn piece is a form control (Chromium's tree keeps
    no space beside one): the element itself, or down its last (first) children while no text
    comes after (before) them."""
    while True:
        tag = el.tag
        if tag in _FORM_CONTROLS:
            return True
        kids = [c for c in el if type(c.tag) is str]
        if not kids:
            return False
        if last:
            child = kids[-1]
            if child.tail and child.tail.strip():
                return False
        else:
            if el.text and el.text.strip():
                return False
            child = kids[0]
        el = child


# Drawn as something though they hold no text
_REPLACED = frozenset({"img", "svg", "input", "button", "select", "textarea", "iframe", "canvas", "video", "audio",
                       "object", "embed", "meter", "progress", "math"})


def _has_pseudo(el) -> bool:
    """Whether MARK_JS found text that ``el``'s ::before or ::after draws."""
    return el.get(BEFORE_ATTR) is not None or el.get(AFTER_ATTR) is not None


def _draws_pseudo(el) -> bool:
    """Whether ``el``'s ::before or ::after draws more than white space (a clearfix's " " does not)."""
    return any((el.get(attr) or "").strip(_HTML_SPACE) for attr in (BEFORE_ATTR, AFTER_ATTR))


def _in_flow(el) -> bool:
    """Whether an element lays its children out as text does (not a flex or grid box, by its
    style as MARK_JS read it, else its style attribute)."""
    shown = el.get(DISPLAY_ATTR)
    if shown is not None:
        return "flex" not in shown and "grid" not in shown
    style = el.get("style")
    return not (style and re.search(r"display\s*:\s*(inline-)?(flex|grid)", style.lower()))


def _blank_text(text: str) -> str | None:
    """A text node that Python's strip() empties: what Chromium's tree shows of it, a StaticText
    whose text is its no-break (non-HTML) spaces (flattened as ``StaticText ''``), or None when it
    is HTML whitespace alone (no node)."""
    kept = text.strip(_HTML_SPACE)
    return _HTML_WS.sub(" ", kept) if kept else None


_TRANSFORMS = frozenset({"uppercase", "lowercase", "capitalize"})
# A word's first letter, for text-transform: capitalize (after a hyphen too, not after an apostrophe)
_WORD_START = re.compile(r"(?:^|(?<=[^\w'\u2019]))([^\W\d_])")


def _transformed(text: str, how: str | None) -> str:
    """``text`` in the case CSS's text-transform ``how`` draws it (Builder.text_transform)."""
    if how is None:
        return text
    if how == "uppercase":
        return text.upper()
    if how == "lowercase":
        return text.lower()
    return _WORD_START.sub(lambda m: m.group(1).upper(), text)


def _collapse(text: str) -> str:
    if "\n" in text or "  " in text or "\t" in text or "\r" in text or "\f" in text:
        text = _HTML_WS.sub(" ", text)
    return text.strip()


# An http(s) URL with no path (``https://host?q``): where its "/" goes
_NO_PATH = re.compile(r"https?://[^/?#]*(?=[?#]|$)", re.IGNORECASE)


@functools.lru_cache(maxsize=16384)
def _join(base: str, href: str) -> str:
    # Cached: the same links recur on every page of a site (short keys, unlike text).
    return urljoin(base, href)


def join_or_keep(base: str, href: str) -> str:
    """``href`` (stripped) resolved against ``base``; as written when it cannot be (``http://[x``)."""
    href = href.strip()
    try:
        return _join(base, href)
    except ValueError:
        return href


def frame_base(url: str, root, parent_base: str) -> str:
    """The URL a frame's document (``root``, loaded from ``url``) resolves links against: its
    ``<base href>`` against its URL; a document with no URL of its own (``about:srcdoc``, an
    ``about:blank`` its page wrote) starts from its parent's, HTML's fallback base URL."""
    start = parent_base if url.startswith("about:") else url
    base = root.find("head/base[@href]")
    return join_or_keep(start, base.get("href")) if base is not None else start


class _Node:
    """One element's accessibility node; ``children`` holds nodes and, for text (``StaticText``), strs."""
    __slots__ = ("role", "name", "bid", "value", "props", "children", "cname")

    def __init__(self, role: str, name: str, bid: str | None = None, value: str | None = None,
                 props: list | None = None):
        self.role = role
        self.name = name
        # the name its text is compared with (a text that repeats it is not shown, as BrowserGym
        # flattens Chromium's tree); None: an element Chromium leaves out of its tree (an inline
        # generic such as a plain span, or a presentational one), whose text is its parent's
        self.cname = name
        self.bid = bid
        self.value = value
        self.props = [] if props is None else props  # [(name, value)] in Chromium's order
        self.children: list = []


class _Builder:
    def __init__(self, doc, base_url: str, geometry: dict | None, state: dict | None, focused: str | None,
                 focus_marks: bool = True, transforms: bool = False, pseudo: bool = False):
        """``focus_marks=False``: the source has no ``autofocus`` or FOCUSED_ATTR attribute (no
        need to look for one)."""
        self.doc = doc
        self._focus_marks = focus_marks
        self._transforms: dict | None = {} if transforms else None  # element -> its text-transform (or None)
        self._pseudo = pseudo  # (some element carries BEFORE_ATTR or AFTER_ATTR)
        self.page_url = base_url
        base = doc.find(".//head/base[@href]")
        self.base_url = urljoin(base_url, base.get("href").strip()) if base is not None else base_url
        self._origin, self._origin_of = "", None  # (Builder.absolute's shortcut: the base's origin)
        self.geometry = {str(k): v for k, v in (geometry or {}).items()}
        self.by_bid: dict = {}
        self._ordinals: dict = {}  # a list element -> {item: its number} (Builder._ordinal)
        self._data_tables: dict = {}  # a table element -> whether it holds data (Builder.data_table)
        self.bid_of: dict = {}
        self.grafted = False  # frames' documents grafted under their frame elements (build_tree's frames)
        self._assign_bids()
        self.hidden_cache: dict = {}
        self.state = {str(k): v for k, v in (state or {}).items()}
        self.focused = self._focused(focused)
        self._radio_overrides()

    @functools.cached_property
    def ids(self) -> dict:
        """``{(shadow root or None, id): element}``, the first element with each id in its own tree,
        the document's or a shadow root's (SCOPE_ATTR); made when first needed: most pages never ask."""
        ids: dict = {}
        for el in self.doc.xpath("//*[@id]"):
            ids.setdefault((el.get(SCOPE_ATTR), el.get("id")), el)
        return ids

    def by_id(self, el, ref: str):
        """The element ``ref`` names from ``el``'s own tree (the document's, or its shadow root's)."""
        return self.ids.get((el.get(SCOPE_ATTR), ref))

    @functools.cached_property
    def labels_for(self) -> dict:
        """``{(shadow root or None, id): [label elements whose for= names it]}``."""
        labels: dict = {}
        for label in self.doc.xpath("//label[@for]"):
            target = label.get("for")
            if target:
                labels.setdefault((label.get(SCOPE_ATTR), target), []).append(label)
        return labels

    # ---------------------------------------------------------------- bids
    def _assign_bids(self) -> None:
        """Bids in document order for every element outside SKIPPED_TAGS: the ones the page was
        stamped with (MARK_JS) if any element has one, else 1, 2, 3, ..."""
        doc = self.doc
        skipped: set = set()
        for el in doc.iter(*SKIPPED_TAGS):
            skipped.update(el.iter())
        every = list(doc.iter(etree.Element))
        order = [el for el in every if el not in skipped] if skipped else every
        self.stamped = any(el.get(BID_ATTR) is not None for el in every)
        if self.stamped:
            for el in order:
                bid = el.get(BID_ATTR)
                if bid is not None:
                    self.by_bid.setdefault(bid, el)
                    self.bid_of[el] = bid
        elif next(doc.iter("iframe", "frame"), None) is not None:
            self._assign_framed(order)
        else:
            bids = [str(i) for i in range(1, len(order) + 1)]
            self.by_bid = dict(zip(bids, order))
            self.bid_of = dict(zip(order, bids))

    def _assign_framed(self, order: list) -> None:
        """MARK_JS's bids for a document with frames: each frame element gets letters (the prefix of
        the bids in its grafted document), other elements 1, 2, 3, ... in their own document."""
        context: dict = {}  # element -> the bid prefix of its document
        counts: dict = {}  # prefix -> [elements numbered, frames lettered]
        for el in order:
            parent = el.getparent()
            if parent is None or parent not in context:
                prefix = ""
            elif el.get(FRAME_ATTR) is not None:
                prefix = self.bid_of[parent]
                self.grafted = True
            else:
                prefix = context[parent]
            context[el] = prefix
            n = counts.setdefault(prefix, [0, 0])
            if el.tag in FRAME_TAGS:
                bid = prefix + frame_letter(n[1])
                n[1] += 1
            else:
                n[0] += 1
                bid = prefix + str(n[0])
            self.by_bid[bid] = el
            self.bid_of[el] = bid

    def base_for(self, el) -> str:
        """The URL ``el``'s links resolve against: its frame's document's, else the page's."""
        if not self.grafted:
            return self.base_url
        roots = [a for a in el.iterancestors() if a.get(FRAME_ATTR) is not None]
        if not roots:
            return self.base_url
        base = self.base_url
        for root in reversed(roots):  # (outermost first: an about: document's base is its parent's)
            base = frame_base(root.get(FRAME_ATTR), root, base)
        return base

    def _focused(self, focused: str | None):
        if focused is not None:
            return self.by_bid.get(str(focused))
        if not self._focus_marks:
            return None  # nothing marked as focused, nothing to focus on load
        candidates = self.doc.xpath(_FOCUS_CANDIDATES)
        # (the last one: focus in a frame marks the frame element too, and its document follows it)
        for el in reversed(candidates):
            if el.get(FOCUSED_ATTR) is not None:
                return el
        if self.stamped:
            return None  # the browser said nothing is focused
        for el in candidates:
            if el.get("autofocus") is not None and not self.hidden(el) and not self.disabled(el):
                return el
        return None

    def focus_document(self):
        """The root of the frame's document (grafted, FRAME_ATTR) that holds the focused element;
        None when it is the page's own (or nothing is focused)."""
        el = self.focused
        if el is None or not self.grafted:
            return None
        if _tag(el) in FRAME_TAGS:  # (a frame focused on no element of its document)
            sub = next((c for c in el if isinstance(c.tag, str) and c.get(FRAME_ATTR) is not None), None)
            if sub is not None:
                return sub
        for anc in el.iterancestors():
            if anc.get(FRAME_ATTR) is not None:
                return anc
        return None

    # ---------------------------------------------------------------- hiding
    def hidden_self(self, el) -> bool:
        parent = el.getparent()
        return self._hidden_self(el, _tag(el), _attrs(el), parent, _tag(parent) if parent is not None else "")

    @staticmethod
    def _hidden_self(el, tag: str, a: dict, parent, parent_tag: str) -> bool:
        """``hidden_self`` with the element's tag, attributes, parent and parent's tag known."""
        if tag in _HIDDEN_TAGS:
            return True
        if a:
            if HIDDEN_ATTR in a or "hidden" in a:
                return True
            v = a.get("aria-hidden")
            if v is not None and v.strip().lower() == "true":
                return True
            if tag == "input":
                v = a.get("type")
                if v is not None and v.strip().lower() == "hidden":
                    return True
            v = a.get("style")
            if v:
                style = v.lower().replace(" ", "")
                if "display:none" in style or "visibility:hidden" in style or "visibility:collapse" in style:
                    return True
        if tag == "dialog" and "open" not in a:
            return True
        if parent_tag == "details" and parent.get("open") is None:
            first_summary = next((c for c in _children(parent) if _tag(c) == "summary"), None)
            if el is not first_summary:
                return True
        return False

    def hidden(self, el) -> bool:
        """Not rendered: the element or an ancestor is hidden."""
        key = el
        if key in self.hidden_cache:
            return self.hidden_cache[key]
        parent = el.getparent()
        result = self.hidden_self(el) or (parent is not None and self.hidden(parent))
        self.hidden_cache[key] = result
        return result

    # ---------------------------------------------------------------- form state
    def _radio_overrides(self) -> None:
        """A radio set on in ``state`` turns the others of its group off."""
        self.radio_off: set = set()
        for bid, v in self.state.items():
            el = self.by_bid.get(bid)
            if el is None or _tag(el) != "input" or self.input_type(el) != "radio" or not _truthy(v):
                continue
            for other in self.radio_group(el):
                if other is not el:
                    self.radio_off.add(other)

    def radio_group(self, el) -> list:
        name = el.get("name")
        if not name:
            return [el]
        owner = self.form_owner(el)
        return [r for r in self.doc.iter("input") if self.input_type(r) == "radio" and r.get("name") == name
                and self.form_owner(r) is owner]

    @staticmethod
    def input_type(el) -> str:
        return _input_type(el.get("type"))

    def value_of(self, el) -> str:
        """Current value of a text-like input or textarea."""
        bid = self.bid_of.get(el)
        if bid in self.state and not isinstance(self.state[bid], bool):
            return str(self.state[bid])
        if _tag(el) == "textarea":
            text = _text_content(el)
            return text[1:] if text.startswith("\n") else text
        return el.get("value") or ""

    def checked(self, el) -> bool:
        bid = self.bid_of.get(el)
        if bid in self.state:
            return _truthy(self.state[bid])
        if el in self.radio_off:
            return False
        if self.input_type(el) == "radio" and el.get("checked") is not None:
            # Only the last checked radio of a group is checked (HTML parser behaviour).
            group = [r for r in self.radio_group(el) if r.get("checked") is not None]
            return group[-1] is el
        return el.get("checked") is not None

    def options(self, select) -> list:
        return [o for o in select.iter("option")]

    def option_value(self, option) -> str:
        v = option.get("value")
        return v if v is not None else _collapse(_text_content(option))

    def selected_options(self, select) -> list:
        opts = self.options(select)
        bid = self.bid_of.get(select)
        if bid in self.state:
            wanted = self.state[bid]
            wanted = list(wanted) if isinstance(wanted, (list, tuple)) else [wanted]
            chosen = []
            for w in wanted:
                w = str(w)
                match = next((o for o in opts if self.option_value(o) == w), None)
                if match is None:
                    match = next((o for o in opts if _collapse(_text_content(o)) == _collapse(w)), None)
                if match is not None:
                    chosen.append(match)
            if chosen:
                return chosen if select.get("multiple") is not None else chosen[-1:]
        chosen = [o for o in opts if o.get("selected") is not None]
        if select.get("multiple") is not None:
            return chosen
        if chosen:
            return chosen[-1:]
        size = select.get("size")
        if size and size.strip().isdigit() and int(size) > 1:
            return []
        first = next((o for o in opts if not self.disabled(o)), None)
        return [first] if first is not None else []

    def _in_context(self, el, roles: tuple) -> bool:
        """Whether the nearest ancestor that is neither generic nor none has one of ``roles`` (the
        container a listitem, an option or a treeitem needs: common/aria.py's REQUIRED_CONTEXT)."""
        for anc in el.iterancestors():
            if anc.get(FRAME_ATTR) is not None:  # (a frame's document: its context ends there)
                return False
            r = self.role(anc)
            if r not in ("generic", "none") or _tag(anc) == "section":  # (a section is no generic to Chromium)
                return r in roles
        return False

    def focusable(self, el, tag: str | None = None, a: dict | None = None) -> bool:
        """Whether the element can take focus, as its markup says (a link, a control not disabled,
        a details' summary, a valid tabindex, contenteditable)."""
        tag, a = _given(el, tag, a)
        if tag in ("a", "area") and ("href" in a or (tag == "a" and "xlink:href" in a)):
            return True
        if tag in ("button", "select", "textarea") or (tag == "input" and _input_type(a.get("type")) != "hidden"):
            return not self.natively_disabled(el, tag, a)
        if tag == "summary":
            parent = el.getparent()
            if parent is not None and _tag(parent) == "details" and \
                    next((c for c in _children(parent) if _tag(c) == "summary"), None) is el:
                return True
        if _TABINDEX.match(a.get("tabindex") or ""):
            return True
        editable = a.get("contenteditable")
        return editable is not None and editable.lower() in ("", "true", "plaintext-only")  # (not trimmed)

    def disabled(self, el, tag: str | None = None, a: dict | None = None) -> bool:
        tag, a = _given(el, tag, a)
        v = a.get("aria-disabled")
        if v is not None and v.strip().lower() == "true":
            return True
        return self.natively_disabled(el, tag, a)

    def natively_disabled(self, el, tag: str | None = None, a: dict | None = None) -> bool:
        """Disabled by its markup (``disabled``, a disabled optgroup or fieldset), aria-disabled aside."""
        tag, a = _given(el, tag, a)
        if tag in _DISABLEABLE:
            if "disabled" in a:
                return True
            if tag == "option":
                parent = el.getparent()
                return parent is not None and _tag(parent) == "optgroup" and parent.get("disabled") is not None
            for anc in tree_ancestors(el, "fieldset"):
                if anc.get("disabled") is not None:
                    legend = next((c for c in _children(anc) if _tag(c) == "legend"), None)
                    if legend is None or not any(a is legend for a in el.iterancestors()):
                        return True
        return False

    def form_owner(self, el):
        ref = el.get("form")
        if ref is not None:
            target = self.by_id(el, ref)
            return target if target is not None and _tag(target) == "form" else None
        return form_ancestor(el)

    # ---------------------------------------------------------------- roles and names
    def role(self, el, tag: str | None = None, a: dict | None = None) -> str:
        tag, a = _given(el, tag, a)
        explicit = explicit_role(a.get("role"))
        # (none does not take on an element BrowserGym marks: its marks are global ARIA attributes)
        if explicit and not (explicit == "none" and (tag in BGYM_MARKED_TAGS or not PRESENTATION_CONFLICTS.isdisjoint(a)
                                                     or self.focusable(el, tag, a))) and \
                (explicit not in REQUIRED_CONTEXT or self._in_context(el, REQUIRED_CONTEXT[explicit])):
            return explicit
        if tag in _PLAIN_ROLES:
            return _PLAIN_ROLES[tag]
        if tag == "a" or tag == "area":
            return "link" if "href" in a else "generic"
        if tag == "input":
            t = _input_type(a.get("type"))
            if t in ("text", "search", "email", "tel", "url") and a.get("list"):
                return "combobox"
            return "none" if t == "hidden" else INPUT_ROLES.get(t, "textbox")  # (a hidden input: no node)
        if tag == "select":
            size = (a.get("size") or "").strip()
            if "multiple" in a or (size.isdigit() and int(size) > 1):
                return "listbox"
            return "combobox"
        if tag == "img":  # (alt="" would make it presentational, but BrowserGym marks it: an image)
            return "image"
        if tag in _TABLE_PARTS_ROLES:
            table = el if tag == "table" else next(el.iterancestors("table"), None)
            if table is not None and not self.data_table(table):
                return _LAYOUT_ROLES[tag]
            if tag != "th":
                return TAG_ROLES[tag]
        if tag == "th":
            scope = (a.get("scope") or "").strip().lower()
            if scope in ("row", "rowgroup"):
                return "rowheader"
            if scope in ("col", "colgroup"):
                return "columnheader"
            # (Chromium: a header cell beside a data cell with something in it heads its row)
            return "rowheader" if any(c is not None and _tag(c) == "td" and (len(c) or (c.text or "").strip())
                                      for c in (el.getprevious(), el.getnext())) else "columnheader"
        if tag == "section":  # (named, a title too: a region)
            return "region" if self.aria_name(el, a) or _collapse(a.get("title") or "") else "generic"
        if tag == "summary":  # (a details' summary; one outside a details is a plain element)
            parent = el.getparent()
            return "DisclosureTriangle" if parent is not None and _tag(parent) == "details" else "generic"
        if tag in ("header", "footer"):
            scoped = any(_tag(a) in LANDMARK_SCOPES for a in el.iterancestors())
            if scoped:
                return "generic"
            return "banner" if tag == "header" else "contentinfo"
        return TAG_ROLES.get(tag, "generic")

    def aria_name(self, el, a: dict | None = None) -> str:
        if a is None:
            a = _attrs(el)
        if not a:
            return ""
        ids = a.get("aria-labelledby")
        if ids:
            ids = ids.split()
            named = (self.by_id(el, i) for i in ids)
            parts = [self.text_alternative(t, labelledby=True, naming=el) for t in named if t is not None]
            name = _collapse(" ".join(p for p in parts if p))
            if name:
                return name
        label = a.get("aria-label")
        return _collapse(label) if label else ""

    def name(self, el, role: str, tag: str | None = None, a: dict | None = None) -> str:
        if a is None:
            a = _attrs(el)
        name = self.aria_name(el, a)
        if name:
            return name
        if tag is None:
            tag = _tag(el)
        if tag in ("input", "select", "textarea", "meter", "progress", "output") or \
                (tag == "button" and role == "button"):
            t = _input_type(a.get("type")) if tag == "input" else ""
            if tag == "input" and t in ("submit", "reset", "button"):
                v = a.get("value")
                if v is not None:
                    return _collapse(v)
                return {"submit": "Submit", "reset": "Reset"}.get(t, _collapse(a.get("title") or ""))
            if tag == "input" and t == "image":
                return _collapse(a.get("alt") or a.get("value") or a.get("title") or "Submit")
            labels = self.labels(el)
            if labels:
                text = _collapse(" ".join(self.text_alternative(lab, exclude=el) for lab in labels))
                if text:
                    return text
            if tag == "button":  # (its content, else its title: an icon button's tooltip, as Chromium names it)
                text = self.content_text(el)
                if text:
                    return text
            if tag in ("input", "textarea"):
                ph = _collapse(a.get("placeholder") or a.get("aria-placeholder") or "")
                if ph:
                    return ph
            return _collapse(a.get("title") or "")
        if tag == "img" or (tag == "area"):
            alt = a.get("alt")
            if alt is not None and _collapse(alt):
                return _collapse(alt)
            return _collapse(a.get("title") or "")
        if tag == "svg":
            title = next((c for c in _children(el) if _tag(c) == "title"), None)
            if title is not None:
                return _collapse(_text_content(title))
        if tag == "optgroup":
            return _collapse(a.get("label") or "")
        if tag == "fieldset":
            legend = next((c for c in _children(el) if _tag(c) == "legend"), None)
            if legend is not None:
                return self.content_text(legend)
        if tag == "table":
            caption = next((c for c in _children(el) if _tag(c) == "caption"), None)
            if caption is not None:
                return self.content_text(caption)
            if (a.get("summary") or "").strip():  # (Chromium names a table by its summary too)
                return _collapse(a["summary"])
        if role in NAME_FROM_CONTENT and (role != "row" or self.in_grid(el)):
            text = self.content_text(el)
            if text:
                return text
        if role in _NO_TITLE_NAME and not self.focusable(el, tag, a):
            return ""
        return _collapse(a.get("title") or "")

    def data_table(self, table) -> bool:
        """Whether Chromium takes a table for data (a ``table``, its ``row``s and ``cell``s) rather
        than layout (``LayoutTable``, ``LayoutTableRow``, ``LayoutTableCell``), by its heuristic as
        far as the markup tells: a role attribute (any), an editable table, a summary, rules or border, a
        caption, a header or footer section, columns; more than one cell and a header cell or a cell
        with headers, abbr, axis or scope; 20 rows or more; or cells its style draws as a grid (read
        by MARK_JS, or a border or background in the cells' style attributes)."""
        known = self._data_tables.get(table)
        if known is not None:
            return known
        a = dict(table.items())
        if (a.get("role") or "").strip() or \
                a.get(TABLE_ATTR) is not None or "contenteditable" in a or (a.get("summary") or "").strip():
            result = True
        elif any(_tag(c) in ("caption", "thead", "tfoot", "colgroup", "col") for c in table):
            result = True
        else:
            rows = [r for r in table.iter("tr") if next(r.iterancestors("table"), None) is table]
            cells = [c for r in rows for c in r if _tag(c) in ("td", "th")]
            styled = sum(1 for c in cells if _GRID_STYLE.search((c.get("style") or "").lower()))
            result = len(cells) > 1 and (
                (a.get("rules") or "").strip() != "" or (a.get("border") or "").strip() not in ("", "0") or
                len(rows) >= 20 or styled * 2 >= len(cells) or
                any(_tag(c) == "th" or not _CELL_HEADERS.isdisjoint(c.keys()) for c in cells))
        self._data_tables[table] = bool(result)
        return bool(result)

    def in_grid(self, el) -> bool:
        """Whether a row is a grid's (or a treegrid's): only there does Chromium name a row by its
        cells; a table's rows have no name."""
        for anc in el.iterancestors():
            if anc.get(FRAME_ATTR) is not None:
                return False
            r = self.role(anc)
            if r in ("grid", "treegrid"):
                return True
            if r == "table":
                return False
        return False

    def labels(self, el) -> list:
        found = []
        i = el.get("id")
        if i is not None:
            found.extend(lab for lab in self.labels_for.get((el.get(SCOPE_ATTR), i), []) if not self.hidden(lab))
        wrap = next(el.iterancestors("label"), None)
        if wrap is not None and wrap.get("for") is None and wrap not in found:
            found.append(wrap)
        return found

    def text_alternative(self, el, *, exclude=None, labelledby: bool = False, naming=None) -> str:
        """The text an element contributes when it names another (label, labelledby target).

        An aria-labelledby target (``naming``: the element being named) gives what it would give
        inside a name from content, as Chromium takes it: its aria-label, a control's value (a
        field's, a select's chosen options), an image's alt, else its text, hidden parts included.
        The element named by itself (react-aria's slider lists its own id first) gives its
        aria-label, else its text: a control's own value is no part of its name."""
        if labelledby and el is not naming and _tag(el) not in SKIPPED_TAGS:
            parts: list = []
            self._collect(el, parts, exclude, True)
            return _collapse("".join(parts))
        label = _collapse(el.get("aria-label") or "")
        if label:
            return label
        return self.content_text(el, exclude=exclude, include_hidden=labelledby)

    def content_text(self, el, *, exclude=None, include_hidden: bool = False) -> str:
        if not len(el) and el.tag != "br" and not (self._pseudo and _has_pseudo(el)):
            text = el.text  # no children: just its text
            if not text:
                return ""
            return _transformed(_collapse(text), self.text_transform(el))
        parts: list = []
        self._collect(el, parts, exclude, include_hidden, root=True)
        return _collapse("".join(parts))

    def _collect(self, el, parts, exclude, include_hidden, root=False) -> None:
        tag = _tag(el)
        if not root:
            if el is exclude or tag in SKIPPED_TAGS:
                return
            if not include_hidden and self.hidden_self(el):
                return
            label = _collapse(el.get("aria-label") or "")
            if label:
                parts.append(" " + label + " ")
                return
            if tag == "img" or tag == "area":
                parts.append(" " + _collapse(el.get("alt") or "") + " ")
                return
            if tag == "input":
                t = self.input_type(el)
                if t in ("submit", "reset", "button", "image"):
                    parts.append(" " + self.name(el, "button") + " ")
                elif t not in ("checkbox", "radio", "file", "hidden"):
                    parts.append(" " + self.value_of(el) + " ")
                return
            if tag == "textarea":
                parts.append(" " + self.value_of(el) + " ")
                return
            if tag == "select":
                parts.append(" " + " ".join(_collapse(_text_content(o)) for o in self.selected_options(el)) + " ")
                return
            if tag == "svg":  # its name (labelledby, its <title>), else the text it draws
                title = next((c for c in _children(el) if _tag(c) == "title"), None)
                name = self.aria_name(el) or (_collapse(_text_content(title)) if title is not None else "")
                if name:
                    parts.append(" " + name + " ")
                else:
                    self._svg_collect(el, parts, exclude, include_hidden)
                return
        block = tag in BLOCK_TAGS
        if block and not root:
            parts.append(" ")
        if tag == "br":
            parts.append(" ")
        how = self.text_transform(el)
        before = after = None
        if self._pseudo:
            before, after = el.get(BEFORE_ATTR), el.get(AFTER_ATTR)
            if before:
                parts.append(_transformed(before, how))
        if el.text:
            parts.append(_transformed(el.text, how))
        for child in el:
            if isinstance(child.tag, str):
                self._collect(child, parts, exclude, include_hidden)
            if child.tail:
                parts.append(_transformed(child.tail, how))
        if after:
            parts.append(_transformed(after, how))
        if block and not root:
            parts.append(" ")

    def _svg_collect(self, el, parts, exclude, include_hidden) -> None:
        """The text an SVG element draws, for a name from content: its ``<text>`` elements' (their
        spans too) and what a ``<foreignObject>`` holds; not a ``<title>``'s or a ``<desc>``'s, and
        not the text between its elements, which SVG does not draw."""
        for child in el:
            if not isinstance(child.tag, str) or child is exclude:
                continue
            ctag = _tag(child)
            if ctag in _SVG_UNDRAWN or (not include_hidden and _svg_hidden(dict(child.items()))):
                continue
            if ctag in ("text", "foreignobject"):
                self._collect(child, parts, exclude, include_hidden)
            else:  # (a group, a link, a shape: what they hold)
                self._svg_collect(child, parts, exclude, include_hidden)

    # ---------------------------------------------------------------- properties
    def props(self, el, role: str, tag: str | None = None, a: dict | None = None) -> tuple[str | None, list]:
        """(node value, [(property, value)]) in Chromium's order."""
        tag, a = _given(el, tag, a)
        props = []
        value = None
        if self.focused is el and not (tag in FRAME_TAGS and self.grafted and len(el)):  # (else its document's)
            props.append(("focused", True))
        if tag not in _PROP_TAGS and (not a or a.keys().isdisjoint(_PROP_ATTRS)):
            return value, props  # nothing below applies (the usual div, span, li, p, td, ...)
        if self.disabled(el, tag, a):
            props.append(("disabled", True))
        if (a.get("aria-busy") or "").strip().lower() == "true":
            props.append(("busy", 1))  # (so Chromium's tree gives it)
        autocomplete = (a.get("aria-autocomplete") or "").strip().lower()
        if autocomplete in ("inline", "list", "both"):
            props.append(("autocomplete", autocomplete))
        elif role == "combobox" and tag == "input" and a.get("list"):
            props.append(("autocomplete", "list"))
        popup = (a.get("aria-haspopup") or "").strip().lower()
        if tag == "select" and role == "combobox":
            props.append(("hasPopup", "menu"))
        elif popup and popup != "false":
            props.append(("hasPopup", "menu" if popup == "true" else popup))
        elif role == "combobox":  # (a combobox's popup is a listbox unless it says otherwise)
            props.append(("hasPopup", "listbox"))
        if role == "heading":
            level = a.get("aria-level") if a.get("role") else None
            if tag in ("h1", "h2", "h3", "h4", "h5", "h6") and not level:
                level = tag[1]
            if level and level.strip().isdigit():
                props.append(("level", int(level)))
        if role in _MULTISELECTABLE_ROLES:
            multiple = a.get("multiple") is not None if tag == "select" else \
                (a.get("aria-multiselectable") or "").strip().lower() == "true"
            props.append(("multiselectable", multiple))
        orientation = _ORIENTATIONS.get(role)
        if orientation is not None:
            given = (a.get("aria-orientation") or "").strip().lower()
            props.append(("orientation", given if given in ("horizontal", "vertical") else orientation))
        if role in ("textbox", "searchbox") and tag == "textarea":
            props.append(("multiline", True))
        if a.get("readonly") is not None and tag in ("input", "textarea"):
            props.append(("readonly", True))
        if (a.get("required") is not None and tag in ("input", "select", "textarea")) or \
                (a.get("aria-required") or "").lower() == "true":
            props.append(("required", True))
        aria_range = role in _RANGE_ROLES and tag not in ("input", "progress", "meter") and \
            (role != "separator" or self.focusable(el, tag, a))
        if aria_range:  # an ARIA widget's values, with Chromium's defaults
            value = _aria_range(role, a, props)
        elif tag in ("progress", "meter") or (tag == "input" and role in ("slider", "spinbutton")):
            value = self._native_range(el, tag, a, props, role)
        elif role in ("slider", "spinbutton", "progressbar", "meter"):
            for attr, pname in (("min", "valuemin"), ("max", "valuemax")):
                raw = a.get("aria-" + pname) or a.get(attr)
                num = _number(raw)
                if num is not None:
                    props.append((pname, num))
        if tag == "input" and _input_type(a.get("type")) in ("checkbox", "radio"):
            props.append(("checked", "true" if self.checked(el) else "false"))
        elif role in ("checkbox", "radio", "switch", "menuitemcheckbox", "menuitemradio"):
            # (Chromium's reading of aria-checked: absent, empty, false or undefined is false; mixed
            # only where the role allows it; any other word true)
            v = (a.get("aria-checked") or "").strip().lower()
            props.append(("checked", "false" if v in ("", "false", "undefined") else "true" if v != "mixed" else
                          "mixed" if role in ("checkbox", "menuitemcheckbox") else "false"))
        elif a.get("aria-checked") is not None and role in ("treeitem", "option"):
            v = a.get("aria-checked").strip().lower()
            props.append(("checked", v if v in ("true", "false", "mixed") else "false"))
        if tag == "select" and role == "combobox":
            props.append(("expanded", False))
        elif tag == "summary" and role == "DisclosureTriangle":
            parent = el.getparent()
            props.append(("expanded", parent is not None and _tag(parent) == "details" and parent.get("open") is not None))
        elif a.get("aria-expanded") is not None:
            props.append(("expanded", a.get("aria-expanded").strip().lower() == "true"))
        if a.get("aria-pressed") is not None:
            v = a.get("aria-pressed").strip().lower()
            props.append(("pressed", v if v in ("true", "false", "mixed") else "false"))
        if tag == "option":
            select = next(el.iterancestors("select"), None)
            selected = select is not None and any(o is el for o in self.selected_options(select))
            props.append(("selected", selected))
        elif a.get("aria-selected") is not None and (role in _SELECTABLE or (role in _SELECTABLE_IN_GRID and
                                                                         self.in_grid(el))):
            # (a state only the roles that take it show, as Chromium's tree has it)
            props.append(("selected", a.get("aria-selected").strip().lower() == "true"))
        elif role in ("treeitem", "option") and self._selection_follows_focus(el):
            props.append(("selected", self.focused is el))  # (the focused one is the selected one)
        if role in ("dialog", "alertdialog"):
            props.append(("modal", (a.get("aria-modal") or "").strip().lower() == "true"))
        live = (a.get("aria-live") or "").strip().lower()
        live = live if live in ("polite", "assertive") else _LIVE_ROLES.get(role) if "aria-live" not in a else None
        if live:  # a live region (its role's, or aria-live's)
            props.append(("live", live))
            atomic = a.get("aria-atomic")
            if atomic.strip().lower() == "true" if atomic is not None else role in ("alert", "status"):
                props.append(("atomic", True))
            props.append(("relevant", _collapse(a.get("aria-relevant") or "") or "additions text"))
        href = a.get("href", a.get("xlink:href"))  # (an SVG link's may be an xlink:href)
        if role == "link" and href is not None:
            props.append(("url", self.absolute(href)))
        elif tag == "img" and role == "image":  # (its src, else its srcset's first candidate)
            src = (a.get("src") or "").strip() or (a.get("srcset") or "").strip().split(" ")[0].rstrip(",")
            if src:
                props.append(("url", self.absolute(src)))
        key = a.get("accesskey")
        if key and key.strip():
            props.append(("keyshortcuts", "Alt+" + key.strip()))
        # the node value
        if tag == "input" and role in ("slider", "spinbutton"):
            pass  # (its value: _native_range)
        elif tag == "input" and _input_type(a.get("type")) not in ("checkbox", "radio", "submit", "reset", "button",
                                                            "image", "file", "hidden"):
            value = self.value_of(el) or None
            if value and role == "Date" and not _valid_date(value):
                value = None  # (a date input holds a valid date or nothing)
            if value and _input_type(a.get("type")) == "password":
                value = PASSWORD_MASK * len(value)  # (as Chromium's tree gives it: never the password)
        elif tag == "textarea":
            value = self.value_of(el) or None
        elif role in ("textbox", "searchbox") and tag != "input":  # (an ARIA textbox: its text)
            value = self.content_text(el) or None
        elif tag == "select" and role == "combobox":
            chosen = self.selected_options(el)
            value = _collapse(_text_content(chosen[0])) if chosen else None
        return value, props

    def _selection_follows_focus(self, el) -> bool:
        """Whether an option or treeitem with no aria-selected is unselected in Chromium's tree (it
        says nothing otherwise): in a single-selection listbox or tree (the nearest such ancestor)
        where no item says aria-selected, the selected one is the focused one."""
        for anc in el.iterancestors():
            if anc.get(FRAME_ATTR) is not None:
                return False
            if self.role(anc) in ("listbox", "tree", "treegrid"):
                return (anc.get("aria-multiselectable") or "").strip().lower() != "true" and \
                    not anc.xpath(".//*[@aria-selected]")
        return False

    def _date_fields(self, el, node: _Node) -> list:
        """A date input's parts as Chromium's tree shows them (its own fields, in the en-US order
        our browser contexts use): month, day and year spin buttons, each with its number or its
        placeholder, the separators, and the picker's button unless the input is disabled."""
        m = _DATE.fullmatch(node.value or "") if _valid_date(node.value or "") else None
        disabled = [("disabled", True)] if self.disabled(el) else []
        out: list = []
        for i, (label, high, blank) in enumerate((("Month", 12, "mm"), ("Day", 31, "dd"), ("Year", 275760, "yyyy"))):
            if i:
                out.append("/")
            text = m.group((2, 3, 1)[i]) if m else blank
            field = _Node("spinbutton", f"{label} {label}", None, int(text) if m else 0,
                          [*disabled, ("valuemin", 1), ("valuemax", high), ("valuetext", "")])
            field.children.append(text)
            out.append(field)
        if not disabled:
            out.append(_Node("button", "Show date picker Show date picker", None, None, [("hasPopup", "menu")]))
        return out

    def _native_range(self, el, tag: str, a: dict, props: list, role: str = ""):
        """A range input's, ``<progress>``'s or ``<meter>``'s value (the node's), with valuemin,
        valuemax and valuetext appended to ``props``, as HTML's rules make them and Chromium's tree
        gives them: a range input's value held between its minimum and maximum (0 and 100 unless
        said, a maximum below the minimum taken as the minimum) and on its step (the middle when it
        has none), its valuetext that number; a progress bar's between 0 and its maximum (1 unless a
        positive one is said), none when it has no value (indeterminate); a meter's between its
        minimum and maximum (0 and 1 unless said)."""
        if tag == "progress":
            high = _number(a.get("max"))
            high = high if high is not None and high > 0 else 1
            now = _number(a.get("value"))
            now = None if now is None else min(max(now, 0), high)
            props.extend((("valuemin", 0), ("valuemax", _float32(high)), ("valuetext", "")))
            return None if now is None else _float32(now)
        low, high = _number(a.get("min")), _number(a.get("max"))
        if role == "spinbutton":  # (a number input: bounds 0 unless said, its value as typed)
            raw = self.value_of(el).strip()
            now = _number(raw) if raw else None
            props.extend((("valuemin", _float32(0 if low is None else low)), ("valuemax", _float32(0 if high is None else high)),
                          ("valuetext", raw if now is not None else "")))
            return None if now is None else _float32(now)
        if tag == "meter":
            low = 0 if low is None else low
            high = max(low, 1 if high is None else high)
            now = _number(a.get("value"))
            now = min(max(0 if now is None else now, low), high)
            props.extend((("valuemin", _float32(low)), ("valuemax", _float32(high)), ("valuetext", "")))
            return _float32(now)
        low = 0 if low is None else low
        high = max(low, 100 if high is None else high)
        raw = self.value_of(el)
        now = _number(raw) if raw else None
        step_raw = (a.get("step") or "").strip().lower()
        step = None if step_raw == "any" else _number(step_raw)
        step = 1 if step is None or step <= 0 else step
        if now is None:
            now = low + (high - low) / 2
        now = min(max(now, low), high)
        if step_raw != "any" and step >= 1e-9:  # (to the nearest step from the minimum, the higher one on a tie)
            now = low + math.floor((now - low) / step + 0.5) * step
            if now > high:
                now -= step
        props.extend((("valuemin", _float32(low)), ("valuemax", _float32(high)), ("valuetext", _js_number(now))))
        aria = _number(a.get("aria-valuenow"))  # (Chromium takes an aria-valuenow for the value, not the text)
        return _float32(now if aria is None else aria)

    def absolute(self, href: str) -> str:
        """``href`` resolved against the page (its frame's document): an empty fragment or query
        kept, as Chromium's tree keeps it (``page#``), which urljoin drops."""
        href = href.strip()
        if self._origin_of != self.base_url:  # (a frame's document has its own base)
            parts = urlsplit(self.base_url)
            self._origin = f"{parts.scheme}://{parts.netloc}" if parts.scheme in ("http", "https") and parts.netloc else ""
            self._origin_of = self.base_url
        if href[:1] == "/" and href[1:2] != "/" and "/." not in href and "\\" not in href and self._origin:
            url = self._origin + href  # (a path from the root: urljoin's answer, without its cost)
        else:
            try:
                url = _join(self.base_url, href)
            except ValueError:
                return href
        if url[:4] == "http" and (m := _NO_PATH.match(url)):  # (no path: Chromium writes it "/")
            url = url[:m.end()] + "/" + url[m.end():]
        if href.endswith("#") and not url.endswith("#"):
            url += "#"
        elif href.endswith("?") and "#" not in href and not url.endswith("?"):
            url += "?"
        return url

    # ---------------------------------------------------------------- the tree
    def build(self):
        head_title = self.doc.find(".//head/title")
        if head_title is None:  # (the document's first title element: an SVG's own title is none)
            head_title = next((t for t in self.doc.iter("title")
                               if not any(_tag(a) == "svg" for a in t.iterancestors())), None)
        title = _collapse(_text_content(head_title)) if head_title is not None else ""
        # (the page has focus: the document that holds the focus is focused in Chromium's tree,
        # whether or not an element of it is too; the page's unless the focus is in a frame's.
        # Measured on Chromium 156's headless shell, BrowserGym's browser, with its own extraction)
        root_props = [] if self.focus_document() is not None else [("focused", True)]
        root_props.append(("url", self.page_url))
        root = _Node("RootWebArea", title, props=root_props)
        body = self.doc.find("body")
        top = body if body is not None else self.doc
        # [(element, node, tag, attributes, css path, xpath)] in document order
        self.records: list = []
        self._children_into(top, _tag(top), False, root.children, css_path(top), xpath(top))
        return root, title

    def _children_into(self, el, tag: str, preformatted: bool, nodes: list, css: str, xp: str) -> None:
        """Append the nodes of ``el``'s children (elements and text) to ``nodes``; ``css`` and
        ``xp`` are ``el``'s paths (:func:`css_path`, :func:`xpath`)."""
        if not len(el):  # no children at all
            if tag not in _NO_CONTENT:
                text = el.text
                if text and text.strip():
                    nodes.append(_transformed(text.strip() if preformatted else _collapse(text),
                                              self.text_transform(el)))
            return
        children = list(el)  # held, so lxml makes each child's Python object once
        totals: dict = {}
        for child in children:
            t = child.tag
            if type(t) is str:  # comments and processing instructions have a function as tag
                totals[t] = totals.get(t, 0) + 1
        seen: dict = {}
        if tag in _NO_CONTENT:
            if tag == "select":
                for child in children:
                    ctag = child.tag
                    if type(ctag) is str:
                        n = seen[ctag] = seen.get(ctag, 0) + 1
                        self._element(child, ctag, el, tag, preformatted, nodes, css, xp, n, totals[ctag])
            return
        # (a closed details shows its first summary alone: its text is not drawn either)
        drawn = tag != "details" or el.get("open") is not None
        how = self.text_transform(el)
        text = el.text
        if drawn and text:
            if text.strip():
                nodes.append(_transformed(text.strip() if preformatted else _collapse(text), how))
            elif (blank := _blank_text(text)) is not None or preformatted:
                nodes.append(blank or " ")  # (white space in preformatted text is drawn)
        flowing = drawn and not preformatted
        last = len(children) - 1
        for i, child in enumerate(children):
            ctag = child.tag
            if type(ctag) is str:
                n = seen[ctag] = seen.get(ctag, 0) + 1
                self._element(child, ctag, el, tag, preformatted, nodes, css, xp, n, totals[ctag])
            text = child.tail
            if drawn and text:
                if text.strip():
                    nodes.append(_transformed(text.strip() if preformatted else _collapse(text), how))
                elif (blank := _blank_text(text)) is not None or preformatted:
                    nodes.append(blank or " ")
                elif flowing and i < last and _maybe_inline(child) and _maybe_inline(children[i + 1]) \
                        and _in_flow(el) and self._inline(child, el, tag) and self._inline(children[i + 1], el, tag) \
                        and "".join(child.itertext())[-1:] not in _COLLAPSIBLE and not _control_edge(child, True) \
                        and not _control_edge(children[i + 1], False) and self._draws(child) \
                        and self._draws(children[i + 1]):
                    # a space between two inline elements that draw something (not after one that
                    # ends in a space, which takes it): drawn, so in Chromium's tree
                    nodes.append(" ")

    def _element(self, el, tag: str, parent, parent_tag: str, preformatted: bool, nodes: list,
                 parent_css: str, parent_xp: str, n: int, same_tag: int) -> None:
        """The node of ``el``, the ``n``-th of ``same_tag`` children of ``parent`` with its tag."""
        a = dict(el.items())
        if tag in _HIDDEN_TAGS or ((tag in _HIDDEN_BY_TAG or parent_tag == "details" or
                                    (a and not a.keys().isdisjoint(_HIDING_ATTRS))) and
                                   self._hidden_self(el, tag, a, parent, parent_tag)):
            return
        if "role" in a:
            role = self.role(el, tag, a)
        elif tag == "a":
            role = "link" if "href" in a else "generic"
        elif tag in _ROLE_NEEDS_MORE:
            role = self.role(el, tag, a)
        else:
            role = _PLAIN_ROLES.get(tag, "generic")
        if role == "generic" and a and "table" in a.get(DISPLAY_ATTR, ""):  # (a table's part by its style)
            role = self.css_table_role(el, a[DISPLAY_ATTR])
        leaf = not len(el)
        if role == "none" or role == "generic":
            name = ""
        elif tag in _NAMED_BY_TAG:
            name = self.name(el, role, tag, a)
        elif role in NAME_FROM_CONTENT:
            # Builder.name for these: aria-label(ledby), else the content, else the title
            name = self.aria_name(el, a) if a and not a.keys().isdisjoint(_ARIA_NAMING) else ""
            if not name and role == "row" and not self.in_grid(el):
                name = _collapse(a.get("title") or "")
            elif not name:
                if leaf and tag != "br" and not (self._pseudo and _has_pseudo(el)):
                    text = el.text
                    name = _collapse(text) if text else ""
                    if name:
                        name = _transformed(name, self.text_transform(el))
                else:
                    name = self.content_text(el)
                if not name and "title" in a:
                    name = _collapse(a["title"])
        elif not a or a.keys().isdisjoint(_NAMING_ATTRS):
            name = ""  # nothing that could name it
        else:
            name = self.name(el, role, tag, a)
        focused = self.focused is el and not (tag in FRAME_TAGS and self.grafted and len(el))
        if tag not in _PROP_TAGS and (not a or a.keys().isdisjoint(_PROP_ATTRS)):
            node = _Node(role, name, self.bid_of.get(el), None, [("focused", True)] if focused else [])
        elif tag == "a" and "href" in a and (len(a) == 1 or a.keys() & _PROP_ATTRS == _HREF_ONLY):
            # a plain link: its url is its only property (role link, from the href)
            url = ("url", self.absolute(a["href"]))
            node = _Node(role, name, self.bid_of.get(el), None, [("focused", True), url] if focused else [url])
        else:
            value, props = self.props(el, role, tag, a)
            node = _Node(role, name, self.bid_of.get(el), value, props)
        if tag == "details" and not any(_tag(c) == "summary" for c in el):
            node.children.append(_Node("DisclosureTriangle", "Details"))  # (the summary a browser gives it)
        if tag == "li" or (a and MARKER_ATTR in a):
            marker = self.list_marker(el, tag, a)
            if marker:
                node.children.append(_Node("ListMarker", marker))
        start = len(node.children)  # (where the content goes: after a marker)
        if role == "none":
            node.cname = None
        elif role == "generic":
            if tag not in BGYM_MARKED_TAGS and (not a or (a.keys().isdisjoint(_INCLUDING_ATTRS) and not _notable(a) and
                                                          (a.get(DISPLAY_ATTR) or "inline").startswith("inline"))):
                node.cname = None  # (an element BrowserGym does not mark, shown inline: a custom element)
            elif a and not a.keys().isdisjoint(_ARIA_NAMING):
                node.cname = self.aria_name(el, a)  # (Chromium names it, though it shows no name)
        css, xp, summary = self._place(el, node, tag, a, parent_css, parent_xp, n, same_tag)
        nodes.append(node)
        if tag in FRAME_TAGS:
            self._frame_into(el, node)
        elif tag == "svg":
            self._svg_root(el, node, a, css, xp, summary)
        elif not leaf:
            into = node.children
            if tag == "select" and role == "combobox":  # (its options in a popup, as in Chromium's tree)
                popup = _Node("MenuListPopup", "")
                into.append(popup)
                into = popup.children
            self._children_into(el, tag, preformatted or tag in _PREFORMATTED, into, css, xp)
        elif tag not in _NO_CONTENT and (tag != "details" or "open" in a):
            text = el.text
            if text:
                pre = preformatted or tag in _PREFORMATTED
                if text.strip():
                    node.children.append(_transformed(text.strip() if pre else _collapse(text),
                                                      self.text_transform(el)))
                elif (blank := _blank_text(text)) is not None or pre:
                    node.children.append(blank or " ")
        if self._pseudo and (BEFORE_ATTR in a or AFTER_ATTR in a):
            self._pseudo_into(el, node, a, start)
        if role == "Date" and tag == "input":
            node.children.extend(self._date_fields(el, node))
        elif node.value is not None and tag in _TEXT_VALUE_TAGS and role != "slider":
            # a text field's value, again as the text inside it (Chromium's tree: a StaticText)
            node.children.append(_transformed(self.value_of(el) if role == "spinbutton" else node.value,
                                              self.text_transform(el)))


    def _draws(self, el) -> bool:
        """Whether an inline element draws something: text (no-break spaces count, and what a
        ::before or ::after draws) or a replaced element (an image, a control), not in a part that
        is hidden or never drawn (a script). Chromium's tree keeps no space beside one that draws
        nothing."""
        tag = el.tag
        if type(tag) is not str or tag in SKIPPED_TAGS or self.hidden_self(el):
            return False
        if tag in _REPLACED or (self._pseudo and _draws_pseudo(el)):
            return True
        if el.text and el.text.strip(_HTML_SPACE):
            return True
        for child in el:
            if self._draws(child) or (child.tail and child.tail.strip(_HTML_SPACE)):
                return True
        return False

    def _pseudo_into(self, el, node: _Node, a: dict, start: int) -> None:
        """What ``el``'s ::before and ::after draw (MARK_JS's BEFORE_ATTR, AFTER_ATTR), at the
        start and the end of its content: a StaticText inside an unnamed generic node, as Chromium's
        tree has it (so not left out for repeating the element's name)."""
        how = self.text_transform(el)
        for attr, at in ((BEFORE_ATTR, start), (AFTER_ATTR, None)):
            text = _collapse(a.get(attr) or "")
            if not text:
                continue
            drawn = _Node("generic", "")
            drawn.children.append(_transformed(text, how))
            if at is None:
                node.children.append(drawn)
            else:
                node.children.insert(at, drawn)

    def text_transform(self, el) -> str | None:
        """The case ``el``'s own text is drawn in (``uppercase``, ``lowercase``, ``capitalize``),
        inherited from the nearest element MARK_JS stamped (TRANSFORM_ATTR); None for as written."""
        cache = self._transforms
        if cache is None:
            return None
        if el in cache:
            return cache[el]
        given = el.get(TRANSFORM_ATTR) if type(el.tag) is str else None
        if given is not None:
            found = given if given in _TRANSFORMS else None
        elif el.get(FRAME_ATTR) is not None:  # (a frame's document: its own style, not its frame's page's)
            found = None
        else:
            parent = el.getparent()
            found = self.text_transform(parent) if parent is not None else None
        cache[el] = found
        return found

    def css_table_role(self, el, shown: str) -> str:
        """The role of an element with no role of its own that the page's style draws as a table's
        part (MARK_JS's DISPLAY_ATTR): a table (``LayoutTable``), a row of one, a cell of such a
        row, as Chromium's tree shows them; else generic."""
        if shown == "table" or shown == "inline-table":
            return "LayoutTable"
        parent = el.getparent()
        if parent is None or parent.get("role") is not None:
            return "generic"
        above = parent.get(DISPLAY_ATTR)
        if shown == "table-row" and above in ("table", "inline-table"):
            return "LayoutTableRow"
        if shown == "table-cell" and above == "table-row" and self.css_table_role(parent, above) == "LayoutTableRow":
            return "LayoutTableCell"
        return "generic"

    def list_marker(self, el, tag: str, a: dict) -> str | None:
        """The text of a list item's marker as Chromium's tree shows it (``•``, ``◦``, ``▪``,
        ``3.``, ``c.``, ``iv.``), or None: the type MARK_JS read from the page's style, else HTML's
        defaults (a ``ul``'s disc, circle inside one list, square deeper; an ``ol``'s numbers by
        its ``type``) unless a style attribute says ``none`` or another display."""
        kind = a.get(MARKER_ATTR) if a else None
        parent = el.getparent()
        ptag = _tag(parent) if parent is not None else ""
        if kind is None and (a or (parent is not None and parent.get("style") is not None)):
            for holder in (a, dict(parent.items()) if parent is not None else {}):
                style = (holder.get("style") or "").lower()
                if holder is a and re.search(r"display\s*:", style) and not re.search(r"display\s*:\s*list-item", style):
                    return None
                found = re.search(r"list-style(?:-type)?\s*:\s*([^;!]+)", style)
                if found:
                    words = found.group(1).split()
                    kind = next((w for w in words if w in _LIST_STYLES or w == "none"), None)
                    if kind:
                        break
        if kind is None:
            if ptag == "ol":
                kind = _OL_TYPES.get(((a or {}).get("type") or parent.get("type") or "1").strip(), "decimal")
            elif ptag in ("ul", "menu", "dir"):
                depth = sum(1 for anc in parent.iterancestors() if _tag(anc) in ("ul", "ol", "menu", "dir"))
                kind = "disc" if depth == 0 else "circle" if depth == 1 else "square"
            else:
                kind = "disc"
        kind = kind.strip()
        if kind == "none" or not kind:
            return None
        if kind[:1] in ("'", '"'):  # (a string: itself)
            return kind[1:-1].strip() or None
        glyph = _LIST_GLYPHS.get(kind)
        if glyph is not None:
            return glyph
        counter = _LIST_COUNTERS.get(kind)
        if counter is None or parent is None:
            return None
        return counter(self._ordinal(el, parent)) + "."

    def _ordinal(self, el, parent) -> int:
        """A list item's number: its list's ``start`` (the count of items for ``reversed``), a step
        for each item before it, an item's ``value`` taken as it is."""
        numbers = self._ordinals.get(parent)
        if numbers is None:
            items = [c for c in parent if _tag(c) == "li" and not _undrawn(c)]
            ascending = parent.get("reversed") is None or _tag(parent) != "ol"
            start = _number(parent.get("start")) if _tag(parent) == "ol" else None
            n = (int(start) if start is not None else 1) if ascending else \
                (int(start) if start is not None else len(items))
            numbers = {}
            for item in items:
                value = _number(item.get("value"))
                if value is not None:
                    n = int(value)
                numbers[item] = n
                n += 1 if ascending else -1
            self._ordinals[parent] = numbers
        return numbers.get(el, 1)

    def _inline(self, el, parent, parent_tag: str) -> bool:
        """Whether an element is drawn inline beside its text (a link, a span, an image; not a
        block, a line break, a form control, nor anything hidden), as its tag and style say."""
        tag = el.tag
        if type(tag) is not str or tag == "br" or tag == "wbr":
            return False
        a = dict(el.items())
        shown = a.get(DISPLAY_ATTR)
        if shown is not None:  # (the page's style, as MARK_JS read it: an inline-block is not)
            return shown == "inline" and tag not in _FORM_CONTROLS and \
                not self._hidden_self(el, tag, a, parent, parent_tag)
        if tag not in _INLINE_FLOW and tag in BGYM_MARKED_TAGS:  # (a custom element is inline)
            return False
        if a and self._hidden_self(el, tag, a, parent, parent_tag):
            return False
        style = a.get("style") if a else None
        return not (style and "display:" in style.lower().replace(" ", "") and
                    not re.search(r"display\s*:\s*inline\s*(;|$|!)", style.lower()))

    def _place(self, el, node: _Node, tag: str, a: dict, parent_css: str, parent_xp: str, n: int,
               same_tag: int) -> tuple[str, str, dict | None]:
        """Record ``el``'s node: (its css path, its xpath, the observation's element entry or None
        when it has no bid)."""
        ident = a.get("id")
        if ident and SCOPE_ATTR not in a:  # (a shadow root's id is unique in that root alone)
            css = "#" + css_escape(ident)
        else:
            css = f"{parent_css} > {tag}:nth-of-type({n})" if parent_css else f"{tag}:nth-of-type({n})"
        xp = f"{parent_xp}/{tag}[{n}]" if same_tag > 1 else f"{parent_xp}/{tag}"
        bid = node.bid
        if bid is None:
            summary = None
        else:
            # the observation's element entry (Tree.summaries), made while everything is at hand
            role = node.role
            if role in CLICKABLE_ROLES or tag in _CLICKABLE_TAGS:
                clickable = True
            elif a:
                clickable = _clickable(el, role, tag, a)
            else:
                clickable = tag == "input"  # (_clickable with no attributes)
            g = self.geometry.get(bid) if self.geometry else None
            summary = {"bid": bid, "role": role, "name": node.name, "tag": tag, "css": css,
                       "bbox": [g[0], g[1], g[2], g[3]] if g is not None else None,
                       "visible": bool(g[4]) if g is not None and len(g) > 4 else True, "clickable": clickable}
        self.records.append((el, node, tag, a, css, xp, summary))
        return css, xp, summary

    # ---------------------------------------------------------------- SVG
    def _svg_root(self, el, node: _Node, a: dict, css: str, xp: str, summary: dict | None) -> None:
        """An ``<svg>`` of the page and what it holds, by SVG's rules (:meth:`_svg_into`). With no
        role attribute it is, as in Chromium's tree, an ``SvgRoot`` when it shows something (text it
        draws, a link, a titled or focusable shape or group, a foreignObject's content) and else an
        ``image`` with nothing inside (an icon); ``role="img"`` keeps what it shows below it."""
        mark = len(self.records)
        self._svg_into(el, node.children, css, xp, False)
        if node.role == "image" and explicit_role(a.get("role")) != "image":
            # (what a foreignObject holds is HTML, which BrowserGym marks: never left out)
            if _shows(node.children) or any(len(fo) for fo in el.iter("foreignobject")):
                node.role = "SvgRoot"
                if summary is not None:
                    summary["role"] = "SvgRoot"
            else:
                node.children.clear()
                del self.records[mark:]

    def _svg_into(self, el, nodes: list, css: str, xp: str, in_text: bool) -> None:
        """Append the nodes of an SVG element's children to ``nodes``: text only where SVG draws it
        (``in_text``: inside a ``<text>``), each text node one ``StaticText``."""
        children = list(el)
        totals: dict = {}
        for child in children:
            t = child.tag
            if type(t) is str:
                totals[t] = totals.get(t, 0) + 1
        seen: dict = {}
        if in_text:
            text = el.text
            if text and text.strip():
                nodes.append(_collapse(text))
        for child in children:
            ctag = child.tag
            if type(ctag) is str:
                n = seen[ctag] = seen.get(ctag, 0) + 1
                self._svg_element(child, ctag, nodes, css, xp, n, totals[ctag], in_text)
            if in_text:
                text = child.tail
                if text and text.strip():
                    nodes.append(_collapse(text))

    def _svg_element(self, el, tag: str, nodes: list, parent_css: str, parent_xp: str, n: int, same_tag: int,
                     in_text: bool) -> None:
        """The node of an element inside an SVG (none for what SVG does not draw, for a hidden
        element, and for a shape that shows nothing)."""
        a = dict(el.items())
        if tag in _SVG_UNDRAWN or (a and _svg_hidden(a)):
            return
        role = self.svg_role(el, tag, a)
        if role is None:
            return
        name = "" if role in ("generic", "none") else self.svg_name(el, role, a, in_text)
        value, props = self.props(el, role, tag, a)
        node = _Node(role, name, self.bid_of.get(el), value, props)
        css, xp, _ = self._place(el, node, tag, a, parent_css, parent_xp, n, same_tag)
        nodes.append(node)
        if tag == "foreignobject":  # (HTML inside)
            self._children_into(el, tag, False, node.children, css, xp)
        else:
            self._svg_into(el, node.children, css, xp, in_text or tag in _SVG_TEXT)

    def svg_role(self, el, tag: str | None = None, a: dict | None = None) -> str | None:
        """The role of an element inside an SVG, as Chromium gives it: its role attribute's (see
        :meth:`role`); a link for an ``<a>`` with an href; a ``graphics-symbol`` for a shape (an
        ``image`` for ``<image>``) and a ``group`` for a ``<g>`` when it has a ``<title>`` or
        ``<desc>``, an aria-label(ledby), a tabindex or a click handler attribute, else a shape
        gets no node (None) and a group is generic; every other element is generic."""
        tag, a = _given(el, tag, a)
        if a and "role" in a:
            role = self.role(el, tag, a)
            if role == explicit_role(a["role"]):
                return role
        if tag == "a":  # (BrowserGym marks an <a> and an <svg>: never left out, a group without a link)
            return "link" if "href" in a or "xlink:href" in a else "group"
        if tag == "svg":
            return "group"
        if tag in _SVG_SHAPES or tag == "g":
            if not ((a and (not _SVG_INCLUDING.isdisjoint(a) or _TABINDEX.match(a.get("tabindex") or "")))
                    or any(_tag(c) in ("title", "desc") for c in el)):
                return None if tag != "g" else "generic"
            return "group" if tag == "g" else "image" if tag == "image" else "graphics-symbol"
        return "generic"

    def svg_name(self, el, role: str, a: dict, in_text: bool = False) -> str:
        """An SVG element's name: aria-labelledby or aria-label, else (for a link, a button, ...:
        NAME_FROM_CONTENT) the text it draws (all of its text inside a ``<text>``: ``in_text``),
        else its ``<title>``."""
        name = self.aria_name(el, a)
        if not name and role in NAME_FROM_CONTENT:
            if in_text:
                name = self.content_text(el)
            else:
                parts: list = []
                self._svg_collect(el, parts, None, False)
                name = _collapse("".join(parts))
        if not name:
            title = next((c for c in el if _tag(c) == "title"), None)
            name = _collapse(_text_content(title)) if title is not None else ""
        return name

    def _frame_into(self, el, node: _Node) -> None:
        """The frame element's document (grafted by build_tree's ``frames``) as its node's child, a
        ``RootWebArea`` as in Chromium's tree; or the line that says why it is not shown."""
        note = el.get(FRAME_NOTE_ATTR)
        if note:
            node.children.append(note)
        sub = next((c for c in el if isinstance(c.tag, str) and c.get(FRAME_ATTR) is not None), None)
        if sub is None:
            return
        head_title = sub.find("head/title")
        title = _collapse(_text_content(head_title)) if head_title is not None else ""
        url = sub.get(FRAME_ATTR)
        # (focus in the frame, on an element of its own or none: its document has it, as in Chromium's tree)
        focused = [("focused", True)] if self.focused is el or self.focus_document() is sub else []
        root = _Node("RootWebArea", title, props=[*focused, ("url", url)])
        node.children.append(root)
        body = sub.find("body")
        top = body if body is not None else sub
        saved = self.base_url
        self.base_url = frame_base(url, sub, saved)
        try:
            # (paths within the frame's document, as a recorder listening in the frame writes them)
            self._children_into(top, _tag(top), False, root.children, css_path(top), "/html/" + _tag(top))
        finally:
            self.base_url = saved


# Chromium's defaults for properties it gives whatever the markup says (Builder.props)
_MULTISELECTABLE_ROLES = frozenset({"tablist", "listbox", "tree", "grid", "treegrid"})
_ORIENTATIONS = {"tablist": "horizontal", "listbox": "vertical", "tree": "vertical", "menubar": "horizontal",
                 "menu": "vertical", "toolbar": "horizontal", "separator": "horizontal", "slider": "horizontal",
                 "scrollbar": "vertical"}
_RANGE_ROLES = frozenset({"slider", "scrollbar", "spinbutton", "progressbar", "meter", "separator"})
_LIVE_ROLES = {"alert": "assertive", "status": "polite", "log": "polite"}


def _float32(x: float):
    """``x`` as Chromium's tree gives a range value: a single-precision float (0.3 is
    0.30000001192092896), an int when whole."""
    f = struct.unpack("f", struct.pack("f", x))[0]
    return int(f) if f.is_integer() else f


def _aria_range(role: str, a: dict, props: list):
    """An ARIA range widget's value (the node's), and its valuemin, valuemax and valuetext appended
    to ``props``, with Chromium's defaults: a minimum of 0, a maximum of 100 (0 for a spinbutton);
    no aria-valuenow gives a slider, scrollbar or separator the middle, a spinbutton or meter 0 and a
    progressbar none; one that is not a number gives 0; a slider's, scrollbar's, separator's or
    progressbar's is held between the two. valuetext is empty (Chromium does not give aria-valuetext there)."""
    low = _number(a.get("aria-valuemin"))
    high = _number(a.get("aria-valuemax"))
    low = 0 if low is None else low
    high = (0 if role == "spinbutton" else 100) if high is None else high
    raw = a.get("aria-valuenow")
    now = _number(raw)
    if raw is None:
        now = (low + high) / 2 if role in ("slider", "scrollbar", "separator") else \
            None if role == "progressbar" else 0
    elif now is None:
        now = 0
    if now is not None and role in ("slider", "scrollbar", "separator", "progressbar"):
        now = min(max(now, low), high)
    props.extend((("valuemin", _float32(low)), ("valuemax", _float32(high)), ("valuetext", "")))
    return None if now is None else _float32(now)


def _js_number(x: float) -> str:
    """``x`` as JavaScript writes a number (``3``, ``0.3``, ``0.00003``, ``1.5e-7``, ``1e+21``): a
    range input's valuetext. To 15 significant digits: HTML steps in decimal (3 steps of 0.1 are 0.3)."""
    if not math.isfinite(x):
        return "NaN" if x != x else ("Infinity" if x > 0 else "-Infinity")
    if x == int(x) and abs(x) < 1e21:
        return str(int(x))
    text = repr(float(f"{x:.15g}"))
    if "e" not in text:
        return text
    mantissa, _, exp = text.partition("e")
    power = int(exp)
    if -7 < power < 21:  # (written out in full, as JavaScript does down to 1e-6)
        return format(decimal.Decimal(text), "f")
    return f"{mantissa}e{'+' if power > 0 else '-'}{abs(power)}"


def _number(raw):
    """A number as HTML's attributes give one (a finite float; not Python's ``1_0``), or None."""
    if raw is None or "_" in raw:
        return None
    try:
        f = float(raw)
    except ValueError:
        return None
    if not math.isfinite(f):
        return None
    return int(f) if f.is_integer() else f


def _truthy(v) -> bool:
    if isinstance(v, str):
        return v.strip().lower() not in ("", "0", "false", "off", "no")
    return bool(v)


# ------------------------------------------------------------------------------------------ paths
# Identifiers CSS.escape() returns unchanged: ASCII letters, digits, - and _, not starting with a
# digit, "-" + digit, or "--".
_CSS_PLAIN_IDENT = re.compile(r"-?[A-Za-z_][A-Za-z0-9_-]*\Z")


@functools.lru_cache(maxsize=4096)
def css_escape(ident: str) -> str:
    """CSS.escape() as the CSSOM spec defines it (cached: ids are short and recur across a site's pages)."""
    if _CSS_PLAIN_IDENT.match(ident):
        return ident  # nothing to escape (the usual id)
    out = []
    for i, ch in enumerate(ident):
        code = ord(ch)
        if code == 0:
            out.append("\ufffd")
        elif 0x1 <= code <= 0x1f or code == 0x7f or (i == 0 and ch.isdigit() and ch.isascii()) or \
                (i == 1 and ch.isascii() and ch.isdigit() and ident[0] == "-"):
            out.append(f"\\{code:x} ")
        elif i == 0 and ch == "-" and len(ident) == 1:
            out.append("\\-")
        elif code >= 0x80 or ch in "-_" or (ch.isascii() and ch.isalnum()):
            out.append(ch)
        else:
            out.append("\\" + ch)
    return "".join(out)


def css_path(el) -> str:
    """The recorder's CSS path (recorder/session.py): ``tag:nth-of-type(i)`` steps up to an id (the
    document's, not a shadow root's: SCOPE_ATTR) or ``html``."""
    parts = []
    node = el
    while node is not None and isinstance(node.tag, str) and _tag(node) != "html":
        ident = node.get("id")
        if ident and node.get(SCOPE_ATTR) is None:
            parts.insert(0, "#" + css_escape(ident))
            break
        i = 1
        for sib in node.itersiblings(preceding=True):
            if isinstance(sib.tag, str) and _tag(sib) == _tag(node):
                i += 1
        parts.insert(0, f"{_tag(node)}:nth-of-type({i})")
        node = node.getparent()
    return " > ".join(parts)


def _position(el) -> dict:
    """``{"tag", "id", "classes", "nth_child", "nth_of_type"}`` of one element (positions 1-based
    among its element siblings, as CSS counts them)."""
    tag = _tag(el)
    nth_child = nth_of_type = 1
    for sib in el.itersiblings(preceding=True):
        if isinstance(sib.tag, str):
            nth_child += 1
            if sib.tag == tag:
                nth_of_type += 1
    return {"tag": tag, "id": el.get("id"), "classes": (el.get("class") or "").split(),
            "nth_child": nth_child, "nth_of_type": nth_of_type}


def xpath(el) -> str:
    """Absolute XPath; an index only where siblings share the tag (``/html/body/div[2]/a``)."""
    steps = []
    node = el
    while node is not None and isinstance(node.tag, str):
        tag = _tag(node)
        parent = node.getparent()
        if parent is None:
            steps.insert(0, tag)
            break
        same = [s for s in parent if isinstance(s.tag, str) and _tag(s) == tag]
        steps.insert(0, f"{tag}[{same.index(node) + 1}]" if len(same) > 1 else tag)
        node = parent
    return "/" + "/".join(steps)


# ------------------------------------------------------------------------------------------ the Tree
_FLAG_PROPERTIES = frozenset({"required", "focused", "atomic"})


def _prop_attrs(props: list, ignored) -> list:
    """A node's properties as the flattened tree shows them (``focused``, ``level=2``)."""
    attrs = []
    for pname, pvalue in props:
        if pname in ignored:
            continue
        if pname in _FLAG_PROPERTIES:
            if pvalue:
                attrs.append(pname)
        else:
            attrs.append(f"{pname}={pvalue!r}")
    return attrs


def _node_line(node: _Node, attrs: list) -> str:
    """``[bid] role 'name' value='v', attr, attr`` (no indent)."""
    name = node.cname if node.role == "generic" and node.cname else node.name  # (a generic's aria-label)
    line = node.role if node.role == "generic" and not name else f"{node.role} {name.strip()!r}"
    if node.bid is not None:
        line = f"[{node.bid}] {line}"
    if node.value is not None:
        line += f" value={node.value!r}"
    if attrs:
        line += ", " + ", ".join(attrs)
    return line


def _svg_hidden(a: dict) -> bool:
    """An SVG element hidden by its own attributes: the observation script's mark, aria-hidden, a
    style or a presentation attribute (``display``, ``visibility``) that hides it."""
    if HIDDEN_ATTR in a:
        return True
    v = a.get("aria-hidden")
    if v is not None and v.strip().lower() == "true":
        return True
    if (a.get("display") or "").strip().lower() == "none" or \
            (a.get("visibility") or "").strip().lower() in ("hidden", "collapse"):
        return True
    v = a.get("style")
    if v:
        style = v.lower().replace(" ", "")
        return "display:none" in style or "visibility:hidden" in style or "visibility:collapse" in style
    return False


def _shows(children: list) -> bool:
    """Whether these nodes show anything in the tree: text, or a node neither generic nor none."""
    for child in children:
        if type(child) is str or child.role not in ("generic", "none") or _shows(child.children):
            return True
    return False


def _render_plain(node: _Node, depth: int, lines: list, ignored: frozenset, inherited: str = "") -> None:
    """``Tree.text()`` with no box, clickable or visible marks (the observation's ``axtree_text``);
    ``inherited``: the name the text of a node Chromium leaves out is compared with."""
    role = node.role
    attrs = _prop_attrs(node.props, ignored) if node.props else None
    name = node.cname if node.cname is not None else inherited
    if not (role == "none" or role in IGNORED_ROLES or (role == "generic" and not attrs)):
        lines.append("\t" * depth + _node_line(node, attrs))
        depth += 1
    indent = None
    for child in node.children:
        if type(child) is str:  # text, unless the name already says it
            if child not in name:
                if indent is None:
                    indent = "\t" * depth
                lines.append(f"{indent}StaticText {child.strip()!r}")
        else:
            _render_plain(child, depth, lines, ignored, name)


class Tree:
    """An observation of one page: ``axtree_text``, ``title``, ``descriptions`` (one per element
    shown) and lookups by bid; :meth:`summaries` is the observation's ``elements`` list."""

    def __init__(self, builder: _Builder, root: _Node, title: str):
        self._b = builder
        self._root = root
        self.url = builder.page_url
        self.title = title
        self.axtree_text = self.text()
        # The elements shown (records with a bid), and where each bid's record is (the last
        # record wins, as in ``descriptions``' index). Their full descriptions are made on demand:
        # a step needs the summaries and one element's description, not all of them.
        self._shown = [r for r in builder.records if r[1].bid is not None]
        self._position = {r[1].bid: i for i, r in enumerate(self._shown)}
        self._described: dict = {}  # position -> description made by get() before ``descriptions``

    @property
    def builder(self) -> _Builder:
        """The parse the tree was built from (document, bids, controls' state): what
        :mod:`webfreeze.simulator.forms` builds a form's submission from."""
        return self._b

    # ---------------------------------------------------------------- for other observation shapes
    @property
    def root(self) -> "_Node":
        """The tree's root node (``RootWebArea``): nodes have ``role``, ``name``, ``bid``, ``value``,
        ``props`` and ``children`` (nodes, and strs for text), as ``axtree_text`` renders them."""
        return self._root

    @property
    def focused_bid(self) -> str:
        """The focused element's bid ("" when nothing has focus), as BrowserGym reports it."""
        el = self._b.focused
        if el is not None and el.tag in FRAME_TAGS and self._b.grafted:
            # focus in the frame on no element of its own: its body, as BrowserGym reads the focus
            sub = next((c for c in el if isinstance(c.tag, str) and c.get(FRAME_ATTR) is not None), None)
            body = sub.find("body") if sub is not None else None
            if body is not None:
                el = body
        return (self._b.bid_of.get(el) or "") if el is not None else ""

    @functools.cached_property
    def descriptions(self) -> list[dict]:
        """Every element shown, described: bid, role, name, tag, bbox, visible, clickable, value,
        href, css, xpath (and checked, options, disabled for form controls)."""
        described = self._described
        return [described.get(i) or self._describe(*r) for i, r in enumerate(self._shown)]

    def summaries(self) -> list[dict]:
        """The observation's ``elements``: bid, role, name, tag, css, bbox, visible and clickable of
        every element shown (a subset of :attr:`descriptions`' fields, in this order). Fresh dicts on
        each call."""
        out = []
        for r in self._shown:
            d = r[6].copy()
            if d["bbox"] is not None:
                d["bbox"] = list(d["bbox"])
            out.append(d)
        return out

    # ---------------------------------------------------------------- text
    def text(self, *, with_visible: bool = False, with_clickable: bool = False, with_bbox: bool = False,
             filter_visible_only: bool = False, ignored_properties=IGNORED_PROPERTIES,
             remove_redundant_static_text: bool = True) -> str:
        """The flattened tree with BrowserGym's options; ``axtree_text`` is ``text()``."""
        lines: list = []
        if not (with_visible or with_clickable or with_bbox or filter_visible_only or
                isinstance(ignored_properties, str)) and remove_redundant_static_text:
            _render_plain(self._root, 0, lines, frozenset(ignored_properties))
            return "\n".join(lines)
        geometry = self._b.geometry

        def visit(node, depth: int, parent_name: str) -> None:
            if type(node) is str:
                if not (remove_redundant_static_text and node in parent_name):
                    lines.append("\t" * depth + f"StaticText {node.strip()!r}")
                return
            skip = node.role in IGNORED_ROLES or node.role == "none"
            attrs = _prop_attrs(node.props, ignored_properties)
            if node.role == "generic" and not attrs:
                skip = True
            if node.bid is not None and not skip:
                extra = []
                g = geometry.get(node.bid)
                visible = bool(g[4]) if g is not None and len(g) > 4 else True
                if filter_visible_only and not visible:
                    skip = True
                # BrowserGym's order: box, clickable, visible
                if with_bbox and g is not None:
                    x, y, w, h = (float(c) for c in g[:4])
                    extra.append(f"box='({x:.0f},{y:.0f},{x + w:.0f},{y + h:.0f})'")
                if with_clickable and _clickable(self._b.by_bid[node.bid], node.role):
                    extra.append("clickable")
                if with_visible and visible:
                    extra.append("visible")
                attrs = extra + attrs
            if not skip:
                lines.append("\t" * depth + _node_line(node, attrs))
            for child in node.children:
                visit(child, depth if skip else depth + 1, node.cname if node.cname is not None else parent_name)

        visit(self._root, 0, "")
        return "\n".join(lines)

    # ---------------------------------------------------------------- descriptions
    def _describe(self, el, node: _Node, tag: str, a: dict, css: str, xp: str, summary: dict) -> dict:
        b = self._b
        g = b.geometry.get(node.bid)
        bbox = [g[0], g[1], g[2], g[3]] if g is not None else None
        visible = bool(g[4]) if g is not None and len(g) > 4 else True
        href = a.get("href") if tag == "a" or tag == "area" else None
        if href is not None:
            base = b.base_for(el)
            href = b.absolute(href) if base is b.base_url else join_or_keep(base, href)
        value = node.value
        toggle = tag == "input" and _input_type(a.get("type")) in ("checkbox", "radio")
        if toggle:
            value = a.get("value", "on")
        d = {"bid": node.bid, "role": node.role, "name": node.name, "tag": tag, "bbox": bbox, "visible": visible,
             "clickable": summary["clickable"], "value": value, "href": href, "css": css, "xpath": xp}
        if toggle:
            d["checked"] = b.checked(el)
        if tag == "select":
            chosen = b.selected_options(el)
            d["options"] = [{"value": b.option_value(o), "label": _collapse(_text_content(o)),
                             "selected": any(o is c for c in chosen)} for o in b.options(el)]
            if el.get("multiple") is not None:
                d["multiple"] = True
        if tag in FORM_CONTROLS:
            d["disabled"] = b.disabled(el, tag, a)
        return d

    def __getitem__(self, bid) -> dict:
        d = self.get(bid)
        if d is None:
            raise AXTreeError(self.missing(bid))
        return d

    def __contains__(self, bid) -> bool:
        return str(bid) in self._position

    def get(self, bid, default=None):
        """The element dict for a bid shown in the tree, else ``default``."""
        i = self._position.get(str(bid))
        if i is None:
            return default
        if "descriptions" in self.__dict__:
            return self.descriptions[i]
        d = self._described.get(i)
        if d is None:
            d = self._described[i] = self._describe(*self._shown[i])
        return d

    def missing(self, bid) -> str:
        """Why ``bid`` cannot be acted on, in one line: not visible, or no such element."""
        el = self._b.by_bid.get(str(bid))
        if el is not None:
            return f"element {bid!s} is not visible on the page"
        return f"no element with bid {bid!s} on the page"

    def element(self, bid):
        """The lxml element of ``bid`` when it is shown (an :class:`AXTreeError` otherwise)."""
        el = self._b.by_bid.get(str(bid))
        if el is None or self._b.hidden(el):
            raise AXTreeError(self.missing(bid))
        return el

    # ---------------------------------------------------------------- what a step records
    def element_record(self, bid) -> dict:
        """Where the element ``bid`` sits, for matching selectors offline: its ``id``, ``classes``,
        ``nth_child`` and ``nth_of_type`` (1-based, among element siblings) and ``ancestors``, the
        same for each ancestor from ``html`` down to the parent (plus its ``tag``). Empty when the
        bid is unknown."""
        el = self._b.by_bid.get(str(bid))
        if el is None:
            return {}
        chain = [_position(a) for a in reversed(list(el.iterancestors())) if isinstance(a.tag, str)]
        own = _position(el)
        own.pop("tag")
        return {**own, "ancestors": chain}

    @functools.cached_property
    def snapshot(self) -> bytes:
        """The page's DOM at this observation, serialised (UTF-8 HTML, ``<!DOCTYPE html>`` first):
        every element that has a bid carries it in ``data-wf-bid`` (the browser's own stamps, or the
        text backend's document-order bids), form state is written into it as the browser backend's
        serialisation does (``value``, ``checked``, ``selected``, a textarea's text), and the text
        of ``script`` and ``style`` elements is dropped (the elements stay, so positions hold). The
        same tree always gives the same bytes."""
        b = self._b
        doc = b.doc
        copy = copy_module.deepcopy(doc)  # (element for element in the same order as doc)
        for c in copy.iter("script", "style"):
            c.text = None
        if not b.stamped:  # the browser stamped its bids and wrote its live state already
            bid_of = b.bid_of
            for o, c in zip(doc.iter(), copy.iter()):
                bid = bid_of.get(o)
                if bid is not None:
                    c.set(BID_ATTR, bid)
            if b.state:
                self._write_state(copy)
        return b"<!DOCTYPE html>\n" + etree.tostring(copy, method="html", encoding="utf-8")

    def _write_state(self, copy) -> None:
        """Write the text backend's form state (what the agent typed, ticked and chose) into
        ``copy``, a copy of the document, as the browser's serialisation carries it."""
        b = self._b
        clone = dict(zip(b.doc.iter(), copy.iter()))
        for o in b.doc.iter("input", "textarea", "select"):
            c = clone[o]
            if o.tag == "input":
                kind = b.input_type(o)
                if kind in ("checkbox", "radio"):
                    if b.checked(o):
                        c.set("checked", "")
                    elif c.get("checked") is not None:
                        del c.attrib["checked"]
                elif kind != "file":
                    c.set("value", b.value_of(o))
            elif o.tag == "textarea":
                for child in list(c):
                    c.remove(child)
                c.text = b.value_of(o)
            else:
                chosen = b.selected_options(o)
                for opt in b.options(o):
                    oc = clone[opt]
                    if any(opt is x for x in chosen):
                        oc.set("selected", "")
                    elif oc.get("selected") is not None:
                        del oc.attrib["selected"]

    # ---------------------------------------------------------------- text-backend helpers
    def link_target(self, bid) -> str | None:
        """Absolute URL a click on ``bid`` follows: its own ``href`` or its nearest link ancestor's;
        ``None`` when the element is not (inside) a link."""
        el = self.element(bid)
        for node in [el, *el.iterancestors()]:
            if _tag(node) in ("a", "area") and node.get("href") is not None:
                href = node.get("href").strip()
                if href.lower().startswith(("javascript:", "mailto:", "tel:", "data:")):
                    return None
                base = self._b.base_for(el)
                if base is not self._b.base_url:
                    try:
                        return _join(base, href)
                    except ValueError:
                        return href
                return self._b.absolute(href)
        return None


def _clickable(el, role: str, tag: str | None = None, a: dict | None = None) -> bool:
    tag, a = _given(el, tag, a)
    if tag == "a" and "href" in a:
        return True
    if tag in _CLICKABLE_TAGS:
        return True
    if tag == "input" and (a.get("type") or "").lower() != "hidden":
        return True
    if role in CLICKABLE_ROLES:
        return True
    if "onclick" in a:
        return True
    tab = (a.get("tabindex") or "").strip()
    return tab.lstrip("-").isdigit() and int(tab) >= 0


def _stamped(low: str, frames: dict | None, *attrs: str) -> bool:
    """Whether MARK_JS stamped one of ``attrs`` on the page (``low``: its HTML) or a frame's document."""
    texts = [low, *(str(f.get("html", "")) for f in (frames or {}).values())]
    return any(attr in text for text in texts for attr in attrs)


def build_tree(html: str | bytes, base_url: str, geometry: dict | None = None, *, state: dict | None = None,
               focused: str | None = None, encoding: str | None = None, frames: dict | None = None) -> Tree:
    """The observation tree of a page.

    ``html`` is the page's HTML (bytes are decoded with ``encoding``, else the BOM or ``<meta charset>``,
    else UTF-8); ``base_url`` the page's URL (links resolve against it, or against ``<base href>``).
    ``geometry`` is MARK_JS's ``{bid: [x, y, w, h, visible]}``. ``state`` maps bids to entered values
    (text, an option's value or label, True/False for checkboxes and radios) for the text backend;
    ``focused`` is the focused element's bid. ``frames`` maps a frame element's bid to its document,
    ``{"html", "url"}`` (shown under the frame element, its bids prefixed with the frame's), or to
    ``{"note"}``, a line that says why it is not shown. The same arguments always give the same tree.
    """
    text = _decode(html, encoding)
    doc = _parse(text, declarative_shadow=geometry is None)
    low = text.lower()
    if frames:
        _graft(doc, "", frames, declarative_shadow=geometry is None)
    builder = _Builder(doc, base_url, geometry, state, focused,
                       focus_marks="autofocus" in low or FOCUSED_ATTR in low,
                       transforms=_stamped(low, frames, TRANSFORM_ATTR),
                       pseudo=_stamped(low, frames, BEFORE_ATTR, AFTER_ATTR))
    if frames:
        builder.grafted = True
    root, title = builder.build()
    return Tree(builder, root, title)
