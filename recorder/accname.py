"""The role and accessible name the recorder logs for an action's target, computed in the page.

The reference agent finds a recorded target again by role and name in the observation tree, so
the recorder must name an element exactly as ``simulator/axtree.py`` does: that Python builder is
the definition (its rules: docs/replay-and-environment.md, "Roles and accessible names"), and
:data:`ROLE_NAME_JS` is a port of it to the live DOM. It sees the page as the browser backend's
tree does: the form state as the serialisation writes it (an input's current value, a textarea's
text, the options selected now), and an element hidden by the page's CSS counts as hidden exactly
as the observation script marks it. ``tests/recorder/test_accessible_name_parity.py`` holds the two to the
same answers on every element of every page of the demo archive and on hand-made edge cases.
"""

from __future__ import annotations

import json

from webfreeze.common.aria import (
                                   ARIA_ROLE_NAMES,
                                   ARIA_ROLES,
                                   BGYM_MARKED_TAGS,
                                   GRID_STYLE,
                                   NO_PSEUDO_TAGS,
                                   PRESENTATION_CONFLICTS,
                                   PSEUDO_TEXT_JS,
                                   REQUIRED_CONTEXT,
)

# An expression whose value is a factory: ``(ROLE_NAME_JS)()`` gives ``{role(el), name(el), tables}``
# with fresh caches (an element's CSS hiding, the page's ids), so make one per question asked of a
# page that may have changed since. ``tables`` are the role and naming tables, for the parity test.
ROLE_NAME_JS = r"""
(() => {
  const ARIA_ROLES = new Set(__ARIA_ROLES__);  // (common/aria.py's, and its renames)
  const ARIA_ROLE_NAMES = __ARIA_ROLE_NAMES__;
  const PRESENTATION_CONFLICTS = __PRESENTATION_CONFLICTS__;
  const REQUIRED_CONTEXT = __REQUIRED_CONTEXT__;
  const BGYM_MARKED_TAGS = new Set(__BGYM_MARKED_TAGS__);  // (axtree.py's: the tags BrowserGym marks)
  const INPUT_ROLES = {button: 'button', submit: 'button', reset: 'button', image: 'button', file: 'button',
    checkbox: 'checkbox', radio: 'radio', range: 'slider', number: 'spinbutton', search: 'searchbox',
    email: 'textbox', tel: 'textbox', text: 'textbox', url: 'textbox', password: 'textbox', date: 'Date',
    'datetime-local': 'textbox', month: 'textbox', time: 'textbox', week: 'textbox', color: 'textbox'};
  const TAG_ROLES = {
    button: 'button', textarea: 'textbox', nav: 'navigation', main: 'main', aside: 'complementary',
    article: 'article', form: 'form', ul: 'list', ol: 'list', menu: 'list', li: 'listitem', dl: 'DescriptionList',
    dt: 'term', dd: 'definition', table: 'table', thead: 'rowgroup', tbody: 'rowgroup', tfoot: 'rowgroup',
    tr: 'row', td: 'cell', caption: 'caption', p: 'paragraph', h1: 'heading', h2: 'heading', h3: 'heading',
    h4: 'heading', h5: 'heading', h6: 'heading', hr: 'separator', br: 'LineBreak', label: 'LabelText',
    option: 'option', optgroup: 'group', fieldset: 'group', details: 'group', summary: 'DisclosureTriangle',
    dialog: 'dialog', figure: 'figure', blockquote: 'blockquote', strong: 'strong', em: 'emphasis',
    code: 'code', sub: 'subscript', sup: 'superscript', mark: 'mark', time: 'time', del: 'deletion',
    s: 'deletion', ins: 'insertion', progress: 'progressbar', meter: 'meter', output: 'status', math: 'math',
    iframe: 'Iframe', svg: 'image', search: 'search', address: 'group', hgroup: 'group',
    abbr: 'Abbr', legend: 'Legend', dfn: 'term', figcaption: 'Figcaption'};
  // (axtree.py's _NO_TITLE_NAME: roles a title names only when the element takes focus)
  const NO_TITLE_NAME = new Set(['paragraph', 'code', 'insertion', 'deletion', 'emphasis', 'strong', 'mark', 'time',
    'subscript', 'superscript', 'caption']);
  const NAME_FROM_CONTENT = new Set(['button', 'link', 'heading', 'cell', 'columnheader', 'rowheader', 'LayoutTableCell',
    'gridcell', 'option', 'tab', 'menuitem', 'menuitemcheckbox', 'menuitemradio', 'checkbox', 'radio',
    'switch', 'treeitem', 'tooltip', 'row', 'DisclosureTriangle', 'term', 'sectionhead', 'comment']);
  const BLOCK_TAGS = new Set(['address', 'article', 'aside', 'blockquote', 'br', 'dd', 'details', 'dialog',
    'div', 'dl', 'dt', 'fieldset', 'figcaption', 'figure', 'footer', 'form', 'h1', 'h2', 'h3', 'h4', 'h5',
    'h6', 'header', 'hgroup', 'hr', 'li', 'main', 'nav', 'ol', 'p', 'pre', 'section', 'summary', 'table',
    'tbody', 'td', 'tfoot', 'th', 'thead', 'tr', 'ul', 'caption', 'legend', 'option']);
  const SKIPPED_TAGS = new Set(['head', 'script', 'style', 'template', 'noscript']);
  const HIDDEN_TAGS = new Set([...SKIPPED_TAGS, 'datalist', 'area', 'map', 'param', 'source', 'track', 'noframes', 'noembed']);
  const LANDMARK_SCOPES = new Set(['article', 'aside', 'main', 'nav', 'section']);
  const LABELLED_TAGS = new Set(['input', 'select', 'textarea', 'meter', 'progress', 'output']);
  const BUTTON_INPUTS = new Set(['submit', 'reset', 'button']);
  // Button inputs, whose value is their value attribute (absent stays absent: "Submit", "Reset"):
  // the observation script writes every other input's current value into the snapshot the tree reads.
  const DEFAULT_VALUE_INPUTS = new Set(['submit', 'reset', 'button', 'image']);
  const tables = {INPUT_ROLES, TAG_ROLES, NAME_FROM_CONTENT: [...NAME_FROM_CONTENT], BLOCK_TAGS: [...BLOCK_TAGS],
                  SKIPPED_TAGS: [...SKIPPED_TAGS], HIDDEN_TAGS: [...HIDDEN_TAGS],
                  LANDMARK_SCOPES: [...LANDMARK_SCOPES]};

  // Python's str.strip() and str.split() whitespace (JavaScript's \s differs: U+FEFF in, U+001C-1F
  // and U+0085 out), and HTML's whitespace, which the tree collapses to one space.
  const PY_SPACE = '\\t-\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
  const EDGES = new RegExp('^[' + PY_SPACE + ']+|[' + PY_SPACE + ']+$', 'g');
  const SPLIT = new RegExp('[' + PY_SPACE + ']+');
  const HTML_WS = /[ \t\n\f\r]+/g;
  const collapse = (s) => (s || '').replace(HTML_WS, ' ').replace(EDGES, '');
  const words = (s) => s.split(SPLIT).filter((w) => w);
  const strip = (s) => s.replace(EDGES, '');

  return () => {
    const cssHiddenMemo = new Map();
    let ids = null;
    const tagOf = (el) => el.localName.toLowerCase();
    const attr = (el, name) => el.getAttribute(name);
    const has = (el, name) => el.hasAttribute(name);
    const inputType = (el) => {
      const t = strip(attr(el, 'type') || 'text').toLowerCase();
      return (t in INPUT_ROLES || t === 'hidden') ? t : 'text';
    };
    // The value attribute as the tree reads it: the current value for the value-mode inputs.
    const valueAttr = (el) => {
      if (tagOf(el) === 'input') {
        const t = (el.type || '').toLowerCase();
        if (!DEFAULT_VALUE_INPUTS.has(t) && t !== 'checkbox' && t !== 'radio' && t !== 'file') return el.value;
      }
      return attr(el, 'value');
    };
    const valueOf = (el) => tagOf(el) === 'textarea' ? el.value.replace(/^\n/, '') : (valueAttr(el) || '');
    // (an id in a shadow root names an element of that root: the tree's scoped table)
    const byId = (from, id) => {
      const root = from.getRootNode();
      if (root instanceof ShadowRoot) return root.querySelector('[id="' + CSS.escape(id) + '"]');
      if (ids === null) {
        ids = new Map();
        for (const e of document.querySelectorAll('[id]')) {
          const id = attr(e, 'id');
          if (!ids.has(id)) ids.set(id, e);  // the first element with an id, as the tree's table
        }
      }
      return ids.get(id);
    };

    // ---- hiding: the observation script's CSS verdict (its data-wf-hidden mark) and the tree's rules
    const styleHidden = (el) => {
      const style = getComputedStyle(el);
      if (style.display === 'none') return true;
      // a canvas's fallback content has no box, yet is shown (the observation script's rule)
      if (el.parentElement && el.parentElement.closest('canvas')) {
        return style.visibility === 'hidden' || style.visibility === 'collapse';
      }
      return style.display !== 'contents' && typeof el.checkVisibility === 'function' &&
        !el.checkVisibility({visibilityProperty: true});
    };
    const cssHidden = (el) => {  // not rendered, as the observation script decides it
      if (cssHiddenMemo.has(el)) return cssHiddenMemo.get(el);
      const tag = tagOf(el);
      let result = false;
      if (!SKIPPED_TAGS.has(tag)) {
        const parent = el.parentElement;
        result = !!parent && cssHidden(parent);
        if (!result && tag !== 'option' && tag !== 'optgroup' && el !== document.documentElement &&
            tag !== 'body') result = styleHidden(el);
      }
      cssHiddenMemo.set(el, result);
      return result;
    };
    const hiddenSelf = (el) => {
      const tag = tagOf(el);
      if (HIDDEN_TAGS.has(tag) || (has(el, 'hidden') && !inSvg(el))) return true;  // (SVG has no hidden attribute)
      const parent = el.parentElement;
      if (cssHidden(el) && !(parent && cssHidden(parent))) return true;  // where the mark goes
      const ariaHidden = attr(el, 'aria-hidden');
      if (ariaHidden !== null && strip(ariaHidden).toLowerCase() === 'true') return true;
      const type = attr(el, 'type');
      if (tag === 'input' && type !== null && strip(type).toLowerCase() === 'hidden') return true;
      const style = (attr(el, 'style') || '').toLowerCase().replace(/ /g, '');
      if (style.includes('display:none') || style.includes('visibility:hidden') ||
          style.includes('visibility:collapse')) return true;
      if (tag === 'dialog' && !has(el, 'open')) return true;
      if (parent && tagOf(parent) === 'details' && !has(parent, 'open')) {
        const summary = [...parent.children].find((c) => tagOf(c) === 'summary');
        if (el !== summary) return true;
      }
      return false;
    };
    const hidden = (el) => {
      for (let n = el; n; n = n.parentElement) if (hiddenSelf(n)) return true;
      return false;
    };

    // ---- roles
    // (axtree.py's focusable: a link, a control not disabled, a details' summary, a valid tabindex, contenteditable)
    const focusable = (el, tag) => {
      if ((tag === 'a' || tag === 'area') && has(el, 'href')) return true;
      if (['button', 'select', 'textarea'].includes(tag) || (tag === 'input' && inputType(el) !== 'hidden')) {
        return !el.matches(':disabled');
      }
      if (tag === 'summary') {
        const parent = el.parentElement;
        if (parent && tagOf(parent) === 'details' && [...parent.children].find((c) => tagOf(c) === 'summary') === el) return true;
      }
      if (/^[\t\n\f\r ]*[-+]?[0-9]/.test(attr(el, 'tabindex') || '')) return true;
      const editable = attr(el, 'contenteditable');
      return editable !== null && ['', 'true', 'plaintext-only'].includes(editable.toLowerCase());
    };
    // (axtree.py's _in_context, up the flat tree: a slot's, a shadow root's host)
    const flatParent = (n) => n.assignedSlot || n.parentElement || (n.parentNode && n.parentNode.host) || null;
    const inContext = (el, roles) => {
      for (let n = flatParent(el); n; n = flatParent(n)) {
        const r = role(n);
        if ((r !== 'generic' && r !== 'none') || tagOf(n) === 'section') return roles.includes(r);
      }
      return false;
    };
    const firstRole = (el) => {  // (common/aria.py's explicit_role)
      const word = words((attr(el, 'role') || '').toLowerCase()).find((w) => ARIA_ROLES.has(w));
      return word === 'presentation' ? 'none' : word ? (ARIA_ROLE_NAMES[word] || word) : null;
    };
    const role = (el) => {
      const tag = tagOf(el);
      if (inSvg(el)) return svgRole(el) || 'generic';
      if (tag === 'svg' && el instanceof SVGElement) {  // (axtree.py's _svg_root)
        const r = htmlRole(el, tag);
        const shows = svgShows(el, false) || [...el.querySelectorAll('foreignObject')].some((f) => f.children.length);
        return (r === 'image' && firstRole(el) !== 'image') ? (shows ? 'SvgRoot' : 'image') : r;
      }
      const r = htmlRole(el, tag);
      return r === 'generic' ? cssTableRole(el, tag) : r;
    };
    // (axtree.py's css_table_role: an element with no role of its own drawn as a table's part)
    const TABLE_TAGS = new Set(['table', 'tr', 'td', 'th']);
    const cssTableRole = (el, tag) => {
      if (TABLE_TAGS.has(tag)) return 'generic';
      const shown = getComputedStyle(el).display;
      if (shown === 'table' || shown === 'inline-table') return 'LayoutTable';
      const parent = el.parentElement;
      if (!parent || has(parent, 'role') || TABLE_TAGS.has(tagOf(parent))) return 'generic';
      const above = getComputedStyle(parent).display;
      if (shown === 'table-row' && (above === 'table' || above === 'inline-table')) return 'LayoutTableRow';
      if (shown === 'table-cell' && above === 'table-row' && cssTableRole(parent, tagOf(parent)) === 'LayoutTableRow') {
        return 'LayoutTableCell';
      }
      return 'generic';
    };
    // (axtree.py's MARK_JS: what an element's ::before and ::after draw, BEFORE_ATTR and AFTER_ATTR)
__PSEUDO_TEXT__    const NO_PSEUDO = new Set([...__NO_PSEUDO__, 'html', 'body']);  // (MARK_JS asks neither)
    const drawnBy = (el, which) => {  // (MARK_JS asks rendered elements only)
      if (NO_PSEUDO.has(tagOf(el)) || inSvg(el) || cssHidden(el)) return '';
      return transformed(pseudoText(el, which) || '', el);
    };
    // (axtree.py's text_transform: the case an element's own text is drawn in)
    const CAPITAL = /(^|[^\p{L}\p{N}_'\u2019])(\p{L})/gu;
    const transformed = (text, el) => {
      if (!text) return text;
      // (MARK_JS reads the case of rendered elements: a hidden one's text takes its nearest
      // rendered ancestor's, as the tree inherits it)
      let styled = el;
      while (styled.parentElement && cssHidden(styled)) styled = styled.parentElement;
      const how = getComputedStyle(styled).textTransform;
      if (how === 'uppercase') return text.toUpperCase();
      if (how === 'lowercase') return text.toLowerCase();
      if (how === 'capitalize') return text.replace(CAPITAL, (m, before, letter) => before + letter.toUpperCase());
      return text;
    };
    const htmlRole = (el, tag) => {
      let explicit = firstRole(el);
      if (explicit === 'none' && (BGYM_MARKED_TAGS.has(tag) || PRESENTATION_CONFLICTS.some((n) => has(el, n)) ||
                                  focusable(el, tag))) explicit = null;
      if (explicit && REQUIRED_CONTEXT[explicit] && !inContext(el, REQUIRED_CONTEXT[explicit])) explicit = null;
      if (explicit) return explicit;
      if (tag === 'a' || tag === 'area') return has(el, 'href') ? 'link' : 'generic';
      if (tag === 'input') {
        const t = inputType(el);
        if (['text', 'search', 'email', 'tel', 'url'].includes(t) && attr(el, 'list')) return 'combobox';
        return t === 'hidden' ? 'none' : (INPUT_ROLES[t] || 'textbox');
      }
      if (tag === 'select') {
        const size = strip(attr(el, 'size') || '');
        return (has(el, 'multiple') || (/^[0-9]+$/.test(size) && parseInt(size, 10) > 1)) ? 'listbox' : 'combobox';
      }
      if (tag === 'img') return 'image';  // (axtree.py's: BrowserGym's marks keep alt="" from making it none)
      if (TABLE_PARTS.has(tag)) {  // (axtree.py's: a layout table's parts)
        const table = tag === 'table' ? el : el.closest('table');
        if (table && !dataTable(table)) return LAYOUT_ROLES[tag];
        if (tag !== 'th') return TAG_ROLES[tag];
      }
      if (tag === 'th') {  // (axtree.py's: by its scope, else a row header beside data cells)
        const scope = strip(attr(el, 'scope') || '').toLowerCase();
        if (scope === 'row' || scope === 'rowgroup') return 'rowheader';
        if (scope === 'col' || scope === 'colgroup') return 'columnheader';
        const filled = (c) => c && tagOf(c) === 'td' && (c.firstElementChild || strip(c.textContent));
        return (filled(el.previousElementSibling) || filled(el.nextElementSibling)) ? 'rowheader' : 'columnheader';
      }
      if (tag === 'section') return ariaName(el) || collapse(attr(el, 'title')) ? 'region' : 'generic';
      if (tag === 'summary') {  // (axtree.py's: a details' summary)
        const parent = el.parentElement;
        return parent && tagOf(parent) === 'details' ? 'DisclosureTriangle' : 'generic';
      }
      if (tag === 'header' || tag === 'footer') {
        for (let n = el.parentElement; n; n = n.parentElement) if (LANDMARK_SCOPES.has(tagOf(n))) return 'generic';
        return tag === 'header' ? 'banner' : 'contentinfo';
      }
      return Object.prototype.hasOwnProperty.call(TAG_ROLES, tag) ? TAG_ROLES[tag] : 'generic';
    };

    // ---- tables (axtree.py's data_table: Chromium's heuristic, as far as markup and style tell)
    const TABLE_PARTS = new Set(['table', 'tr', 'td', 'th', 'tbody', 'thead', 'tfoot']);
    const LAYOUT_ROLES = {table: 'LayoutTable', tr: 'LayoutTableRow', td: 'LayoutTableCell', th: 'LayoutTableCell',
      tbody: 'generic', thead: 'generic', tfoot: 'generic'};
    const dataTables = new Map();
    const GRID_STYLE = new RegExp(__GRID_STYLE__);  // (axtree.py's _GRID_STYLE)
    const dataTable = (t) => {
      if (dataTables.has(t)) return dataTables.get(t);
      const border = strip(attr(t, 'border') || '');
      let result = strip(attr(t, 'role') || '') !== '' || has(t, 'contenteditable') ||
        strip(attr(t, 'summary') || '') !== '' ||
        [...t.children].some((c) => ['caption', 'thead', 'tfoot', 'colgroup', 'col'].includes(tagOf(c)));
      if (!result) {
        const rows = [...t.querySelectorAll('tr')].filter((r) => r.closest('table') === t);
        const cells = rows.flatMap((r) => [...r.children].filter((c) => tagOf(c) === 'td' || tagOf(c) === 'th'));
        const tableBg = getComputedStyle(t).backgroundColor;
        let bordered = 0, shaded = 0, styled = 0;
        for (const cell of cells) {
          const s = getComputedStyle(cell);
          if (['Top', 'Right', 'Bottom', 'Left'].some((e) => parseFloat(s['border' + e + 'Width']) > 0 &&
                                                          s['border' + e + 'Style'] !== 'none')) bordered++;
          if (s.backgroundColor !== tableBg && s.backgroundColor !== 'rgba(0, 0, 0, 0)') shaded++;
          if (GRID_STYLE.test((attr(cell, 'style') || '').toLowerCase())) styled++;
        }
        result = bordered * 2 >= cells.length && cells.length > 0 || shaded * 4 >= cells.length && cells.length > 0 ||
          (cells.length > 1 && (strip(attr(t, 'rules') || '') !== '' || (border !== '' && border !== '0') ||
            rows.length >= 20 || styled * 2 >= cells.length ||
            cells.some((c) => tagOf(c) === 'th' || ['headers', 'abbr', 'axis', 'scope'].some((n) => has(c, n)))));
      }
      dataTables.set(t, !!result);
      return !!result;
    };

    // ---- inside an SVG (axtree.py's _svg_into, svg_role, svg_name)
    const SVG_SHAPES = new Set(['rect', 'circle', 'ellipse', 'line', 'polyline', 'polygon', 'path', 'image']);
    const SVG_INCLUDING = ['aria-label', 'aria-labelledby', 'onclick', 'onmousedown', 'onmouseup'];
    const SVG_TEXT = new Set(['text', 'tspan', 'textpath']);
    // an element of an SVG below its outermost <svg> (not the HTML of a foreignObject)
    const inSvg = (el) => el instanceof SVGElement && !(tagOf(el) === 'svg' && !(el.parentElement instanceof SVGElement));
    const svgRole = (el) => {  // null: a shape that shows nothing (no node)
      const tag = tagOf(el);
      if (has(el, 'role')) {
        const r = htmlRole(el, tag);
        if (r === firstRole(el)) return r;
      }
      if (tag === 'a') return (has(el, 'href') || has(el, 'xlink:href')) ? 'link' : 'group';
      if (tag === 'svg') return 'group';
      if (SVG_SHAPES.has(tag) || tag === 'g') {
        const included = SVG_INCLUDING.some((n) => has(el, n)) || /^[\t\n\f\r ]*[-+]?[0-9]/.test(attr(el, 'tabindex') || '') ||
          [...el.children].some((c) => tagOf(c) === 'title' || tagOf(c) === 'desc');
        if (!included) return tag === 'g' ? 'generic' : null;
        return tag === 'g' ? 'group' : tag === 'image' ? 'image' : 'graphics-symbol';
      }
      return 'generic';
    };
    const svgSkipped = (el) => SVG_UNDRAWN.has(tagOf(el)) || hiddenSelf(el);
    // whether what an SVG element holds shows in the tree (text drawn, a node neither generic nor none)
    const svgShows = (el, inText) => {
      for (const c of el.childNodes) {
        if (c.nodeType === Node.TEXT_NODE || c.nodeType === Node.CDATA_SECTION_NODE) {
          if (inText && strip(c.data)) return true;
          continue;
        }
        if (c.nodeType !== Node.ELEMENT_NODE || svgSkipped(c)) continue;
        const r = svgRole(c);
        if (r === null) continue;
        if (r !== 'generic' && r !== 'none') return true;
        const ctag = tagOf(c);
        if (ctag === 'foreignobject' ? htmlShows(c) : svgShows(c, inText || SVG_TEXT.has(ctag))) return true;
      }
      return false;
    };
    const htmlShows = (el) => {
      for (const c of drawnNodes(el)) {
        if (c.nodeType === Node.TEXT_NODE || c.nodeType === Node.CDATA_SECTION_NODE) {
          if (strip(c.data)) return true;
          continue;
        }
        if (c.nodeType !== Node.ELEMENT_NODE || hiddenSelf(c)) continue;
        const r = role(c);
        if ((r !== 'generic' && r !== 'none') || htmlShows(c)) return true;
      }
      return false;
    };
    const inSvgText = (el) => {
      for (let n = el.parentElement; n && inSvg(n); n = n.parentElement) if (SVG_TEXT.has(tagOf(n))) return true;
      return false;
    };
    const svgName = (el, r) => {
      let name = ariaName(el);
      if (!name && NAME_FROM_CONTENT.has(r)) {
        if (inSvgText(el)) name = contentText(el);
        else { const parts = []; svgCollect(el, parts, null, false); name = collapse(parts.join('')); }
      }
      if (!name) {
        const title = firstChild(el, 'title');
        name = title ? collapse(title.textContent) : '';
      }
      return name;
    };

    // ---- text: what an element's content says (hidden parts left out unless asked for)
    const selectedOptions = (select) => {
      const options = [...select.querySelectorAll('option')];
      const chosen = options.filter((o) => o.selected);
      if (has(select, 'multiple')) return chosen;
      if (chosen.length) return chosen.slice(-1);
      const size = strip(attr(select, 'size') || '');
      if (/^[0-9]+$/.test(size) && parseInt(size, 10) > 1) return [];
      const disabled = (o) => {
        const aria = attr(o, 'aria-disabled');
        if (aria !== null && strip(aria).toLowerCase() === 'true') return true;
        if (has(o, 'disabled')) return true;
        const parent = o.parentElement;
        return !!parent && tagOf(parent) === 'optgroup' && has(parent, 'disabled');
      };
      const first = options.find((o) => !disabled(o));
      return first ? [first] : [];
    };
    const ownText = (el) => {
      if (tagOf(el) === 'textarea') return el.value;  // the snapshot writes the current value as its text
      let text = '';
      for (const c of el.childNodes) {
        if (c.nodeType === Node.TEXT_NODE || c.nodeType === Node.CDATA_SECTION_NODE) text += c.data;
      }
      return transformed(text, el);
    };
    const collect = (el, parts, exclude, includeHidden, root) => {
      const tag = tagOf(el);
      if (!root) {
        if (el === exclude || SKIPPED_TAGS.has(tag)) return;
        if (!includeHidden && hiddenSelf(el)) return;
        const label = collapse(attr(el, 'aria-label'));
        if (label) { parts.push(' ' + label + ' '); return; }
        if (tag === 'img' || tag === 'area') { parts.push(' ' + collapse(attr(el, 'alt')) + ' '); return; }
        if (tag === 'input') {
          const t = inputType(el);
          if (BUTTON_INPUTS.has(t) || t === 'image') parts.push(' ' + nameOf(el, 'button') + ' ');
          else if (!['checkbox', 'radio', 'file', 'hidden'].includes(t)) parts.push(' ' + valueOf(el) + ' ');
          return;
        }
        if (tag === 'textarea') { parts.push(' ' + valueOf(el) + ' '); return; }
        if (tag === 'select') {
          parts.push(' ' + selectedOptions(el).map((o) => collapse(o.textContent)).join(' ') + ' ');
          return;
        }
        if (tag === 'svg') {  // (axtree.py's: its name, labelledby or its <title>, else the text it draws)
          const title = [...el.children].find((c) => tagOf(c) === 'title');
          const name = ariaName(el) || (title ? collapse(title.textContent) : '');
          if (name) parts.push(' ' + name + ' ');
          else svgCollect(el, parts, exclude, includeHidden);
          return;
        }
      }
      const block = BLOCK_TAGS.has(tag);
      if (block && !root) parts.push(' ');
      if (tag === 'br') parts.push(' ');
      if (tag === 'textarea') parts.push(el.value);
      else {
        parts.push(drawnBy(el, '::before'));
        for (const c of drawnNodes(el)) {
          if (c.nodeType === Node.ELEMENT_NODE) collect(c, parts, exclude, includeHidden, false);
          else if (c.nodeType === Node.TEXT_NODE || c.nodeType === Node.CDATA_SECTION_NODE) parts.push(transformed(c.data, el));
        }
        parts.push(drawnBy(el, '::after'));
      }
      if (block && !root) parts.push(' ');
    };
    const SVG_UNDRAWN = new Set(['title', 'desc', 'metadata', 'script', 'style']);
    const svgCollect = (el, parts, exclude, includeHidden) => {
      for (const c of el.children) {
        const ctag = tagOf(c);
        if (c === exclude || SVG_UNDRAWN.has(ctag) || (!includeHidden && hiddenSelf(c))) continue;
        if (ctag === 'text' || ctag === 'foreignobject') collect(c, parts, exclude, includeHidden, false);
        else svgCollect(c, parts, exclude, includeHidden);
      }
    };
    // The nodes drawn inside an element, as the observation reads a page with open shadow roots
    // (its flat tree): a host's shadow root's, a shadow root's slot's assigned ones (else its own).
    const drawnNodes = (el) => {
      if (el.shadowRoot) return el.shadowRoot.childNodes;
      if (tagOf(el) === 'slot' && el.getRootNode() instanceof ShadowRoot) {
        const assigned = el.assignedNodes();
        return assigned.length ? assigned : el.childNodes;
      }
      return el.childNodes;
    };
    const contentText = (el, exclude = null, includeHidden = false) => {
      const tag = tagOf(el);
      const flat = el.shadowRoot || (tag === 'slot' && el.getRootNode() instanceof ShadowRoot);
      if ((el.firstElementChild === null || tag === 'textarea') && tag !== 'br' && !flat) {
        return collapse(drawnBy(el, '::before') + ownText(el) + drawnBy(el, '::after'));
      }
      const parts = [];
      collect(el, parts, exclude, includeHidden, true);
      return collapse(parts.join(''));
    };
    const textAlternative = (el, exclude, labelledby, naming) => {
      // (axtree.py's: a labelledby target gives what it would inside a name from content; the
      // element named by itself, its aria-label, else its text)
      if (labelledby && el !== naming && !SKIPPED_TAGS.has(tagOf(el))) {
        const parts = [];
        collect(el, parts, exclude, true, false);
        return collapse(parts.join(''));
      }
      const label = collapse(attr(el, 'aria-label'));
      if (label) return label;
      return contentText(el, exclude, labelledby);
    };

    // ---- names
    const ariaName = (el) => {
      const refs = attr(el, 'aria-labelledby');
      if (refs) {
        const parts = words(refs).map((ref) => byId(el, ref)).filter((t) => t).map((t) => textAlternative(t, null, true, el));
        const name = collapse(parts.filter((p) => p).join(' '));
        if (name) return name;
      }
      const label = attr(el, 'aria-label');
      return label ? collapse(label) : '';
    };
    const labels = (el) => {
      const found = [];
      const id = attr(el, 'id');
      if (id) {
        const root = el.getRootNode() instanceof ShadowRoot ? el.getRootNode() : document;
        for (const l of root.querySelectorAll('label[for]')) if (attr(l, 'for') === id && !hidden(l)) found.push(l);
      }
      let wrap = null;
      for (let n = el.parentElement; n; n = n.parentElement) if (tagOf(n) === 'label') { wrap = n; break; }
      if (wrap && !has(wrap, 'for') && !found.includes(wrap)) found.push(wrap);
      return found;
    };
    const firstChild = (el, tag) => [...el.children].find((c) => tagOf(c) === tag);
    const nameOf = (el, role) => {
      const aria = ariaName(el);
      if (aria) return aria;
      const tag = tagOf(el);
      const title = () => collapse(attr(el, 'title'));
      if (LABELLED_TAGS.has(tag) || (tag === 'button' && role === 'button')) {
        const t = tag === 'input' ? inputType(el) : '';
        if (BUTTON_INPUTS.has(t)) {
          const v = valueAttr(el);
          if (v !== null) return collapse(v);
          return t === 'submit' ? 'Submit' : t === 'reset' ? 'Reset' : title();
        }
        if (t === 'image') return collapse(attr(el, 'alt') || valueAttr(el) || attr(el, 'title') || 'Submit');
        const found = labels(el);
        if (found.length) {
          const text = collapse(found.map((l) => textAlternative(l, el, false)).join(' '));
          if (text) return text;
        }
        if (tag === 'button') { const text = contentText(el); if (text) return text; }  // (else its title)
        if (tag === 'input' || tag === 'textarea') {
          const placeholder = collapse(attr(el, 'placeholder') || attr(el, 'aria-placeholder'));
          if (placeholder) return placeholder;
        }
        return title();
      }
      if (tag === 'img' || tag === 'area') {
        const alt = attr(el, 'alt');
        if (alt !== null && collapse(alt)) return collapse(alt);
        return title();
      }
      if (tag === 'optgroup') return collapse(attr(el, 'label'));
      const part = {svg: 'title', fieldset: 'legend', table: 'caption'}[tag];
      if (part) {
        const child = firstChild(el, part);
        if (child) return tag === 'svg' ? collapse(child.textContent) : contentText(child);
        if (tag === 'table' && collapse(attr(el, 'summary'))) return collapse(attr(el, 'summary'));
      }
      if (NAME_FROM_CONTENT.has(role) && (role !== 'row' || inGrid(el))) {
        const text = contentText(el);
        if (text) return text;
      }
      if (NO_TITLE_NAME.has(role) && !focusable(el, tag)) return '';
      return title();
    };
    // (axtree.py's in_grid: a row is named by its cells only in a grid)
    const inGrid = (el) => {
      for (let n = flatParent(el); n; n = flatParent(n)) {
        const r = role(n);
        if (r === 'grid' || r === 'treegrid') return true;
        if (r === 'table') return false;
      }
      return false;
    };
    const name = (el) => {
      const r = role(el);
      if (r === 'none' || r === 'generic') return '';
      return inSvg(el) ? svgName(el, r) : nameOf(el, r);
    };
    return {role, name, tables};
  };
})()
""".replace("__ARIA_ROLES__", json.dumps(sorted(ARIA_ROLES))).replace("__ARIA_ROLE_NAMES__", json.dumps(ARIA_ROLE_NAMES)).replace(
    "__PRESENTATION_CONFLICTS__", json.dumps(sorted(PRESENTATION_CONFLICTS))).replace(
    "__REQUIRED_CONTEXT__", json.dumps(REQUIRED_CONTEXT)).replace("__BGYM_MARKED_TAGS__", json.dumps(sorted(BGYM_MARKED_TAGS))).replace(
    "__PSEUDO_TEXT__", PSEUDO_TEXT_JS).replace("__NO_PSEUDO__", json.dumps(sorted(NO_PSEUDO_TAGS))).replace(
    "__GRID_STYLE__", json.dumps(GRID_STYLE))
