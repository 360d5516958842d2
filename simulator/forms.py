"""Form submission for the text backend: the request a browser sends when a form is submitted.

The text backend runs no scripts, so a click on a submit button, or Enter in a field, becomes the
HTTP request that HTML's form submission algorithm makes: the form's owner and submitter, its
entry list (HTML's "constructing the entry list" over the listed controls and their current
state), and the method, action and enctype (the submitter's ``formaction``, ``formmethod`` and
``formenctype`` first). Bodies are encoded as Chromium encodes them (``tests/simulator/test_axtree.py``
compares the two): ``application/x-www-form-urlencoded``, ``multipart/form-data`` with a boundary
derived from the entries, so the bytes are deterministic, or ``text/plain``.

The controls and their state come from an observation tree (:mod:`webfreeze.simulator.axtree`):
these functions read the tree's parsed document and form state, which stay private to that
module and this one.
"""

from __future__ import annotations

import copy
import hashlib
from urllib.parse import urlsplit, urlunsplit

from .axtree import (
    FORM_CONTROLS,
    SCOPE_ATTR,
    AXTreeError,
    Tree,
    _Builder,
    _decode,
    _parse,
    _tag,
    form_ancestor,
    join_or_keep,
)


class FormNotValid(AXTreeError):
    """A submission the browser refuses: a control fails HTML's constraint validation (a required
    field left empty, a text shorter than its ``minlength``). Chromium shows its message by the
    control and sends nothing; the message says which control and what Chromium says."""


# Input types whose presence (more than one of them) stops Enter from submitting a form without a button.
_BLOCKS_IMPLICIT_SUBMISSION = frozenset({"text", "search", "email", "url", "tel", "password", "date",
                                         "datetime-local", "month", "time", "week", "number"})


def form_of(tree: Tree, bid):
    """The form the element ``bid`` belongs to (a control's form owner, else its nearest ``form``
    ancestor), or ``None``."""
    el = tree.element(bid)
    return tree.builder.form_owner(el) if _tag(el) in FORM_CONTROLS else form_ancestor(el)


_LABELABLE = ("button", "input", "meter", "output", "progress", "select", "textarea")


def label_control(tree: Tree, bid) -> str | None:
    """The bid of the control a ``label`` (``bid``) labels, which a click on the label activates (its
    ``for`` element, else the first labelable element inside it), or None (not a label, or none)."""
    el = tree.element(bid)
    if _tag(el) != "label":
        return None
    b = tree.builder
    target = el.get("for")
    if target is not None:
        control = b.by_id(el, target)
    else:
        control = next((c for c in el.iterdescendants(*_LABELABLE)
                        if not (_tag(c) == "input" and b.input_type(c) == "hidden")), None)
    if control is None or _tag(control) not in _LABELABLE:
        return None
    return b.bid_of.get(control)


def is_submitter(tree: Tree, bid) -> bool:
    """Whether clicking ``bid`` submits its form (a submit button or image input)."""
    el = tree.element(bid)
    return _is_submit_button(el, tree.builder) and tree.builder.form_owner(el) is not None


_DISABLEABLE_CONTROLS = ("button", "input", "select", "textarea", "fieldset")
# Where ``record session`` keeps the DOM of each document it loaded, once loaded: the archive
# document ``dom-snapshots/<session>.json``, ``{"version", "kind": "dom_snapshots", "session",
# "snapshots": [{"url", "title", "captured_at", "html"}]}`` (a crawl's are its page records). The
# recorder (recorder/session.py), which may not import this module, names it the same.
DOM_SNAPSHOTS = "dom-snapshots/"


def _control_keys(doc) -> dict:
    """The form controls of a document by a key that survives scripts (``(tag, name, id, n)``: the
    n-th control of that tag, name and id in document order). Controls inside an open shadow root
    (a crawl's DOM snapshot holds each as a ``<template shadowrootmode>``; the text backend's tree of
    a page served with declarative shadow roots marks each with SCOPE_ATTR) are left out: they
    belong to no form of the document, and the page's own HTML may have none of them."""
    seen: dict = {}
    keys = {}
    for el in doc.iter(*_DISABLEABLE_CONTROLS):
        if el.get(SCOPE_ATTR) is not None or any(
                _tag(a) == "template" and a.get("shadowrootmode") is not None for a in el.iterancestors()):
            continue
        base = (_tag(el), el.get("name") or "", el.get("id") or "")
        n = seen[base] = seen.get(base, -1) + 1
        keys[base + (n,)] = el
    return keys


def as_loaded(doc, loaded_html: bytes | str):
    """A copy of the parsed page ``doc`` whose form controls are disabled or enabled as they were
    in ``loaded_html``, the page's DOM once its scripts had run (a recorded DOM snapshot): the
    fields a script disabled at load are not sent, as in the browser. Controls the snapshot does
    not have keep the page's own state."""
    loaded = _control_keys(_parse(_decode(loaded_html, None)))
    out = copy.deepcopy(doc)
    for key, el in _control_keys(out).items():
        then = loaded.get(key)
        if then is None:
            continue
        if then.get("disabled") is not None:
            el.set("disabled", "")
        elif el.get("disabled") is not None:
            del el.attrib["disabled"]
    return out


def form_submission(tree: Tree, bid, filled_values: dict | None = None, *,
                    loaded_html: bytes | str | None = None) -> tuple[str, str, bytes, str | None]:
    """The request a browser sends when the form holding ``bid`` is submitted through it.

    ``bid`` is the submit button clicked, or a field in which Enter was pressed (implicit
    submission through the form's first submit button). ``filled_values`` maps bids to what
    the agent entered: text for text fields and textareas, an option's value or label (or a
    list of them) for selects, a boolean for checkboxes and radios; everything else keeps its
    default from the HTML. Returns ``(method, url, body, content_type)``: a GET has the entries
    in the URL's query and an empty body with no content type; a POST body is
    ``application/x-www-form-urlencoded``, ``multipart/form-data`` (a boundary derived from the
    entries, so the bytes are deterministic) or ``text/plain``, as the form's enctype says.
    ``loaded_html``, the page's DOM snapshot once loaded (when the archive has one), says which
    controls its scripts disabled or enabled (:func:`as_loaded`).
    """
    b = tree.builder
    if filled_values or loaded_html:
        merged = dict(b.state)
        merged.update({str(k): v for k, v in (filled_values or {}).items()})
        doc = as_loaded(b.doc, loaded_html) if loaded_html else b.doc
        b = _Builder(doc, b.page_url, b.geometry, merged, None)
    el = b.by_bid.get(str(bid))
    if el is None or b.hidden(el):
        raise AXTreeError(tree.missing(bid))
    form = b.form_owner(el) if _tag(el) in FORM_CONTROLS else form_ancestor(el)
    if form is None:
        raise AXTreeError(f"element {bid} is not in a form")
    if b.disabled(el):
        raise AXTreeError(f"element {bid} is disabled")
    submitter = el if _is_submit_button(el, b) else None
    if submitter is None:
        submitter = next((c for c in _form_controls(b, form) if _is_submit_button(c, b)), None)
        if submitter is not None and b.disabled(submitter):
            raise AXTreeError("the form's default button is disabled; it cannot be submitted")
        if submitter is None:
            blocking = [c for c in _form_controls(b, form) if _tag(c) == "input" and b.input_type(c) in
                        _BLOCKS_IMPLICIT_SUBMISSION]
            if len(blocking) > 1:
                raise AXTreeError("this form has no submit button and several fields, so Enter does not submit it")
    if form.get("novalidate") is None and (submitter is None or submitter.get("formnovalidate") is None):
        invalid = _first_invalid(b, form, filled_values or {})
        if invalid is not None:
            raise FormNotValid(f"the form was not sent: {invalid}")
    entries = _entry_list(b, form, submitter)

    def attr(name: str, form_name: str) -> str | None:
        if submitter is not None and submitter.get(form_name) is not None:
            return submitter.get(form_name)
        return form.get(name)

    action = attr("action", "formaction")
    base = b.base_for(form)  # (a form in a frame's document: that document's URL)
    if base is b.base_url:
        action_url = b.absolute(action) if action and action.strip() else tree.url
    else:
        action_url = join_or_keep(base, action) if action and action.strip() else base
    method = (attr("method", "formmethod") or "get").strip().lower()
    method = "post" if method == "post" else "get"
    enctype = (attr("enctype", "formenctype") or "").strip().lower()
    if method == "get":
        parts = urlsplit(action_url)
        query = _urlencode(entries)
        return "GET", urlunsplit((parts.scheme, parts.netloc, parts.path or "/", query, parts.fragment)), b"", None
    if enctype == "multipart/form-data":
        body, ctype = _multipart(entries)
        return "POST", action_url, body, ctype
    if enctype == "text/plain":
        body = "".join(f"{n}={v}\r\n" for n, v, _ in entries).encode("utf-8")
        return "POST", action_url, body, "text/plain"
    return "POST", action_url, _urlencode(entries).encode("ascii"), "application/x-www-form-urlencoded"


# Input types that ``readonly`` bars from constraint validation (HTML: where the attribute applies).
_READONLY_APPLIES = frozenset({"text", "search", "url", "tel", "email", "password", "date", "month", "week", "time",
                               "datetime-local", "number"})
# Input types whose value ``required`` and ``minlength`` apply to.
_TEXT_VALUE_TYPES = _READONLY_APPLIES - {"date", "month", "week", "time", "datetime-local", "number"}


def _label(b: _Builder, el) -> str:
    """What the agent's observation calls the control (its accessible name), else its name."""
    return b.name(el, b.role(el)) or el.get("name") or el.get("id") or _tag(el)


def _first_invalid(b: _Builder, form, filled: dict) -> str | None:
    """Why HTML's interactive constraint validation stops the submission of ``form`` (the first
    control, in tree order, that fails it: what Chromium reports), or None when it passes.

    Checked as Chromium checks them: ``required`` on text fields, text areas, file inputs,
    checkboxes, radio groups and selects (a multiple select with nothing chosen, a single one
    showing its placeholder option: an empty-valued first option); ``minlength`` on a text field
    or text area whose value the agent typed (a default value is never too short). Controls
    barred from validation (disabled, ``readonly`` fields, hidden inputs, buttons, controls in a
    ``datalist``) are skipped. Not checked: ``pattern``, ``type`` mismatches (email, url) and
    number ranges."""
    typed = {str(k) for k in filled}
    for el in _form_controls(b, form):
        tag = _tag(el)
        if tag == "button" or b.disabled(el) or next(el.iterancestors("datalist"), None) is not None:
            continue
        t = b.input_type(el) if tag == "input" else ""
        if tag == "input" and t in ("hidden", "submit", "image", "reset", "button"):
            continue
        if el.get("readonly") is not None and (tag == "textarea" or t in _READONLY_APPLIES):
            continue
        required = el.get("required") is not None
        name = _label(b, el)
        if tag == "select":
            if not required:
                continue
            chosen = [o for o in b.selected_options(el) if not b.disabled(o)]
            multiple = el.get("multiple") is not None
            size = (el.get("size") or "").strip()
            options = b.options(el)
            placeholder = (not multiple and (not size.isdigit() or int(size) <= 1) and options
                           and options[0].get("value") == "" and options[0].getparent() is el)
            if not chosen or (placeholder and chosen[0] is options[0]):
                return f"the list '{name}' is required (Please select an item in the list.)"
            continue
        if tag == "input" and t == "checkbox":
            if required and not b.checked(el):
                return f"the checkbox '{name}' is required (Please check this box if you want to proceed.)"
            continue
        if tag == "input" and t == "radio":
            group = b.radio_group(el)
            if el is group[0] and any(r.get("required") is not None for r in group) \
                    and not any(b.checked(r) for r in group):
                names = ", ".join(dict.fromkeys(_label(b, r) for r in group if not b.disabled(r)))
                return f"the options '{names}' are required (Please select one of these options.)"
            continue
        if tag == "input" and t == "file":
            if required:
                return f"the field '{name}' is required (Please select a file.)"
            continue
        if tag != "textarea" and t not in _TEXT_VALUE_TYPES and t not in _READONLY_APPLIES:
            continue  # colour, range: always have a value
        value = b.value_of(el)
        if required and value == "":
            return f"the field '{name}' is required (Please fill out this field.)"
        minlength = (el.get("minlength") or "").strip()
        bid = b.bid_of.get(el)
        if value and minlength.isdigit() and bid in typed and (tag == "textarea" or t in _TEXT_VALUE_TYPES):
            n = len(value.encode("utf-16-le")) // 2
            if n < int(minlength):
                return f"the field '{name}' needs at least {int(minlength)} characters ({n} given)"
    return None


def _is_submit_button(el, b: _Builder) -> bool:
    tag = _tag(el)
    if tag == "button":
        return (el.get("type") or "submit").strip().lower() not in ("button", "reset", "menu")
    return tag == "input" and b.input_type(el) in ("submit", "image")


def _form_controls(b: _Builder, form) -> list:
    """Listed form controls whose owner is ``form``, in tree order (not those of a ``template``'s
    content, which is no part of the document)."""
    return [el for el in b.doc.iter("button", "input", "select", "textarea") if b.form_owner(el) is form
            and next(el.iterancestors("template"), None) is None]


def _normalise_newlines(s: str) -> str:
    return s.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\r\n")


def _entry_list(b: _Builder, form, submitter) -> list:
    """HTML's "constructing the entry list": [(name, value, is_file)]."""
    entries = []
    for el in _form_controls(b, form):
        tag = _tag(el)
        if b.disabled(el) or next((a for a in el.iterancestors("datalist")), None) is not None:
            continue
        if _is_submit_button(el, b) and el is not submitter:
            continue
        if tag == "button" and not _is_submit_button(el, b):
            continue
        t = b.input_type(el) if tag == "input" else ""
        if tag == "input" and t in ("reset", "button"):
            continue
        name = el.get("name") or ""
        if tag == "input" and t == "image":
            prefix = f"{name}." if name else ""
            entries.append((prefix + "x", "0", False))
            entries.append((prefix + "y", "0", False))
            continue
        if not name:
            continue
        if tag == "input" and t in ("checkbox", "radio"):
            if not b.checked(el):
                continue
            entries.append((name, el.get("value") if el.get("value") is not None else "on", False))
        elif tag == "select":
            for opt in b.selected_options(el):
                if not b.disabled(opt):
                    entries.append((name, b.option_value(opt), False))
        elif tag == "input" and t == "file":
            entries.append((name, "", True))
        elif tag == "input" and t == "hidden" and name.lower() == "_charset_" and el.get("value") is None:
            entries.append((name, "UTF-8", False))
        elif tag == "input" and t == "submit":
            entries.append((name, el.get("value") if el.get("value") is not None else "Submit", False))
        elif tag == "textarea":
            entries.append((name, _normalise_newlines(b.value_of(el)), False))
        elif tag == "button":
            entries.append((name, el.get("value") or "", False))
        else:
            value = b.value_of(el)
            if t not in ("hidden",):
                value = value.replace("\r", "").replace("\n", "")
            entries.append((name, value, False))
    return [(_normalise_newlines(n), v if f else _normalise_newlines(v), f) for n, v, f in entries]


_URLENCODE_SAFE = frozenset(b"*-._0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


def _urlencode_part(s: str) -> str:
    out = []
    for byte in s.encode("utf-8", "surrogatepass"):
        if byte in _URLENCODE_SAFE:
            out.append(chr(byte))
        elif byte == 0x20:
            out.append("+")
        else:
            out.append(f"%{byte:02X}")
    return "".join(out)


def _urlencode(entries) -> str:
    """The application/x-www-form-urlencoded serializer browsers use (UTF-8, space as +)."""
    return "&".join(f"{_urlencode_part(n)}={_urlencode_part(v)}" for n, v, _ in entries)


def _multipart(entries) -> tuple[bytes, str]:
    digest = hashlib.sha256(repr(entries).encode("utf-8", "surrogatepass")).hexdigest()[:24]
    boundary = f"----WebfreezeFormBoundary{digest}"

    def esc(s: str) -> str:
        return s.replace("\n", "%0A").replace("\r", "%0D").replace('"', "%22")

    out = bytearray()
    for name, value, is_file in entries:
        out += f"--{boundary}\r\n".encode()
        if is_file:
            out += f'Content-Disposition: form-data; name="{esc(name)}"; filename=""\r\n'.encode("utf-8")
            out += b"Content-Type: application/octet-stream\r\n\r\n\r\n"
        else:
            out += f'Content-Disposition: form-data; name="{esc(name)}"\r\n\r\n'.encode("utf-8")
            out += value.encode("utf-8", "surrogatepass") + b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return bytes(out), f"multipart/form-data; boundary={boundary}"
