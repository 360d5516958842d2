"""The roles an HTML ``role`` attribute may give, as Chromium reads the attribute: the accessibility
tree (``simulator/axtree.py``) and the recorder's namer (``recorder/accname.py``) take them from here."""

from __future__ import annotations

# The roles a role attribute may give (WAI-ARIA 1.2, DPUB-ARIA 1.1, Graphics ARIA), as Chromium 156
# takes them (measured with its accessibility tree): the first word of the attribute that is one of
# these, in any case, is the role; an abstract role (widget, landmark, ...) or an unknown word is
# skipped, and with none the element keeps its own role. ARIA_ROLE_NAMES: the two Chromium's tree
# names otherwise (so BrowserGym's flattened tree prints them so).
ARIA_ROLES = frozenset("""
alert alertdialog application article banner blockquote button caption cell checkbox code columnheader
combobox comment complementary contentinfo definition deletion dialog directory document emphasis feed
figure form generic grid gridcell group heading image img insertion link list listbox listitem log main
mark marquee math menu menubar menuitem menuitemcheckbox menuitemradio meter navigation none note option
paragraph presentation progressbar radio radiogroup region row rowgroup rowheader scrollbar search
searchbox sectionfooter sectionheader separator slider spinbutton status strong subscript suggestion
superscript switch tab table tablist tabpanel term textbox time timer toolbar tooltip tree treegrid treeitem
doc-abstract doc-acknowledgments doc-afterword doc-appendix doc-backlink doc-biblioentry doc-bibliography
doc-biblioref doc-chapter doc-colophon doc-conclusion doc-cover doc-credit doc-credits doc-dedication
doc-endnote doc-endnotes doc-epigraph doc-epilogue doc-errata doc-example doc-footnote doc-foreword
doc-glossary doc-glossref doc-index doc-introduction doc-noteref doc-notice doc-pagebreak doc-pagefooter
doc-pageheader doc-pagelist doc-part doc-preface doc-prologue doc-pullquote doc-qna doc-subtitle doc-tip
doc-toc graphics-document graphics-object graphics-symbol""".split())
ARIA_ROLE_NAMES = {"img": "image", "directory": "list"}


def explicit_role(value: str | None) -> str | None:
    """The role a role attribute gives (see :data:`ARIA_ROLES`; ``none`` for ``presentation``), or
    None when it names none."""
    for word in (value or "").lower().split():
        if word in ARIA_ROLES:
            return "none" if word == "presentation" else ARIA_ROLE_NAMES.get(word, word)
    return None


# A role of none (or presentation) is not taken where the element has one of these (any value,
# empty too) or can take focus: it keeps its own role then (WAI-ARIA 1.2, "Presentational Roles
# Conflict Resolution"). The global attributes as Chromium 156 counts them (measured): ARIA 1.2's,
# less those it deprecated as global (aria-disabled, -errormessage, -haspopup, -invalid, -hidden,
# -dropeffect, -grabbed), plus ARIA 1.3's aria-description and braille labels.
PRESENTATION_CONFLICTS = frozenset("""
aria-atomic aria-braillelabel aria-brailleroledescription aria-busy aria-controls aria-current
aria-describedby aria-description aria-details aria-flowto aria-keyshortcuts aria-label aria-labelledby
aria-live aria-owns aria-relevant aria-roledescription""".split())


# Roles Chromium takes from a role attribute only inside their container (measured on Chromium 156):
# the nearest ancestor that is neither generic nor none must have one of these roles, else the
# element keeps its own role (a div: generic). Other roles (menuitem, tab, row, cell) go unchecked.
REQUIRED_CONTEXT = {"listitem": ("list", "group"), "option": ("listbox", "group"), "treeitem": ("tree", "group")}

# The tags BrowserGym's BrowserEnv marks (frame_mark_elements.js, tags_to_mark="standard_html", its
# default): an aria-roledescription and an aria-description on each, which Chromium counts as global
# ARIA attributes. So in BrowserGym's tree no such element is left out as uninteresting, and none
# takes role="none" or "presentation" (an <img alt=""> is an image); an SVG's parts other than its
# links and a custom element are not marked and follow Chromium's own rules. The tree follows it.
BGYM_MARKED_TAGS = frozenset("""
a abbr acronym address applet area article aside audio b base basefont bdi bdo big blockquote body br button
canvas caption center cite code col colgroup data datalist dd del details dfn dialog dir div dl dt em embed
fieldset figcaption figure font footer form frame frameset h1 h2 h3 h4 h5 h6 head header hgroup hr html i
iframe img input ins kbd label legend li link main map mark menu meta meter nav noframes noscript object
ol optgroup option output p param picture pre progress q rp rt ruby s samp script search section select
small source span strike strong style sub summary sup svg table tbody td template textarea tfoot th thead
time title tr track tt u ul var video wbr
""".split())

# A table cell's style attribute that draws it as a grid's (a border or a background that is one):
# half the cells so drawn make a table a data table to Chromium (simulator/axtree.py data_table; a
# regular expression both Python and JavaScript read)
GRID_STYLE = (r"border(?:-(?:top|right|bottom|left))?(?:-width)?\s*:\s*(?!0\b|none|hidden)[^;]|"
              r"background(?:-color)?\s*:\s*(?!none|transparent)[^;]")

# Elements whose ::before and ::after the tree does not read (replaced elements, controls, an SVG or
# MathML root, a select's options): the observation script and the recorder's namer skip the same
NO_PSEUDO_TAGS = frozenset({"img", "input", "select", "textarea", "iframe", "frame", "video", "audio", "canvas",
                            "object", "embed", "br", "wbr", "option", "optgroup", "svg", "math", "meter", "progress"})

# The text a ``::before`` or ``::after`` of an element draws, as Chromium's tree shows it (a
# JavaScript statement the observation script and the recorder's namer share): its computed content's
# strings (attr() comes resolved) and quotation marks (CSS ``quotes``, or English marks by how many
# ``<q>`` hold the element), its alt text instead where it has one (after a "/", set apart by a
# space); '' when it draws nothing; null where it holds what the tree does not follow (a counter, an
# image).
PSEUDO_TEXT_JS = r"""
  const pseudoText = (el, which) => {
    const s = getComputedStyle(el, which);
    const content = s.content;
    if (!content || content === 'none' || content === 'normal' || s.display === 'none') return '';
    // (nor one that draws nothing: a hidden ::after that holds room for a bold label, Streamlit's)
    if (s.visibility === 'hidden' || s.visibility === 'collapse') return '';
    // (CSS escapes as the computed value writes them: "\a " for a line break, "\"" for a quote)
    const unescape = (q) => q.slice(1, -1).replace(/\\([0-9a-fA-F]{1,6})[ \t\n]?|\\([\s\S])/g,
      (m, hex, ch) => hex ? String.fromCodePoint(Math.min(parseInt(hex, 16), 0x10FFFF) || 0xFFFD) : ch);
    const items = content.match(/"(?:[^"\\]|\\[\s\S])*"|[^\s"]+/g) || [];
    const slash = items.indexOf('/');
    let marks = null;
    if (s.quotes === 'none') marks = [];
    else if (s.quotes && s.quotes !== 'auto') {
      marks = (s.quotes.match(/"(?:[^"\\]|\\[\s\S])*"/g) || []).map(unescape);
    }
    let depth = 0;
    for (let n = el.parentElement; n; n = n.parentElement) if (n.localName === 'q') depth++;
    const mark = (close) => {
      if (marks === null) return depth ? (close ? '\u2019' : '\u2018') : (close ? '\u201d' : '\u201c');
      const pair = Math.min(depth, marks.length / 2 - 1) * 2;
      return pair >= 0 && marks.length >= 2 ? marks[pair + (close ? 1 : 0)] : '';
    };
    let text = '';
    for (const item of slash >= 0 ? items.slice(slash + 1) : items) {
      if (item[0] === '"') text += unescape(item);
      else if (item === 'open-quote' || item === 'close-quote') text += mark(item === 'close-quote');
      else if (item !== 'no-open-quote' && item !== 'no-close-quote') return null;
    }
    return slash >= 0 && text ? (which === '::before' ? text + ' ' : ' ' + text) : text;
  };
"""


# The document and every open shadow root in it, nested ones too (a statement for page scripts:
# the tree's, BrowserGym's marks, the crawl's anchors).
OPEN_ROOTS_JS = r"""
  const openRoots = () => {
    const roots = [document];
    for (let i = 0; i < roots.length; i++) {
      for (const el of roots[i].querySelectorAll('*')) if (el.shadowRoot) roots.push(el.shadowRoot);
    }
    return roots;
  };
"""
