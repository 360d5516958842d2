"""Direct mode's seal: pages replayed at ``/<timestamp>/<url>`` point only into the archive.

A page opened in any browser from the replay server's direct URLs must render as captured and must
never reach another origin. Three layers do it, the first two here:

- **Server-side rewriting** of what the server can read: HTML (every URL-bearing attribute,
  ``srcset``, inline ``style``, ``<style>`` elements, ``<base>``, ``<meta http-equiv=refresh>``) and
  CSS (``url()``, ``@import``). HTML is read with the standard library's tokenizer
  (:class:`html.parser.HTMLParser`, its own attribute pattern for the spans of values) and CSS with
  a small scanner that follows the CSS syntax's tokens (comments, strings, ``url(``); only the URL
  values are replaced, every other byte is left as archived. An absolute URL ``http://host/p``
  becomes ``/<ts>/http://host/p``, a root-relative ``/p`` becomes ``/<ts>/<origin of the page>/p``;
  relative URLs already resolve inside the archive's URL space and are left alone. Rewritten
  pages are relative to the replay's root, so one rewrite serves every host and port.
- **A client-side shim** (:data:`SHIM`), injected first in the page, for the URLs scripts make:
  ``fetch``, ``XMLHttpRequest``, ``WebSocket``, ``EventSource``, ``sendBeacon``, ``Worker``,
  ``window.open``, the URL properties and ``setAttribute`` of elements, and navigations (the
  Navigation API's ``navigate`` event turns one that leaves the archive into one inside it). Service
  workers are refused.
- **Headers** on every direct-mode response (:func:`seal_headers`): a Content-Security-Policy whose
  only sources are the replay's own origin (``'self'``, data and blob URLs; ``connect-src``,
  ``form-action`` and ``base-uri`` included) and ``X-DNS-Prefetch-Control: off``; the server
  answers a service worker's script request 403. What the rewriting misses is still refused by the
  browser when it is a subresource, a connection or a form post; a top-level navigation, which the
  CSP does not govern, is turned back by the shim's ``navigate`` handler (browsers with the
  Navigation API).

pywb and wabac.js ("wombat") rewrite this way too (server side for markup and styles, a client
side for scripts); this module is our own, simpler take with the seal as its first aim.
"""

from __future__ import annotations

import html as htmlmod
import re
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

try:  # the tokenizer's own patterns: an attribute's span is found exactly as the parser found it
    from html.parser import attrfind_tolerant as _ATTR  # type: ignore[attr-defined]
    from html.parser import tagfind_tolerant as _TAG  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover (every CPython from 3.5 on has them)
    _ATTR = re.compile(r'((?<=[\'"\s/])[^\s/>][^\s/=>]*)(\s*=+\s*(\'[^\']*\'|"[^"]*"|(?![\'"])[^>\s]*))?(?:\s|/(?!>))*')
    _TAG = re.compile(r'([a-zA-Z][^\t\n\r\f />\x00]*)(?:\s|/(?!>))*')

# What the rewriting replaces, by attribute name (any element).
URL_ATTRS = frozenset({"href", "src", "action", "formaction", "poster", "background", "lowsrc", "manifest",
                       "xlink:href", "icon", "codebase", "longdesc", "dynsrc"})
SRCSET_ATTRS = frozenset({"srcset", "imagesrcset"})
# Attributes that only take a URL on some elements: (element, attribute).
ELEMENT_URL_ATTRS = frozenset({("object", "data"), ("applet", "archive")})
# Elements whose content a browser reads as text, never as tags (the standard tokenizer reads them
# as markup): what looks like a tag in them is left as written.
RAW_TEXT = frozenset({"textarea", "title", "xmp", "iframe", "noembed", "noframes", "plaintext"})
# Schemes that never leave the page (or that the CSP refuses anyway): left as they are.
LOCAL_SCHEMES = ("data:", "blob:", "javascript:", "about:", "mailto:", "tel:", "sms:", "urn:", "cid:", "#")
WEB_SCHEMES = ("http://", "https://", "ws://", "wss://")
# A replayed URL: what is already inside the archive's URL space is left alone.
REPLAY_PATH = re.compile(r"^/\d{1,14}(?:[a-z]{2}_)?/")

SEAL_CSP = ("default-src 'self' 'unsafe-inline' 'unsafe-eval' data: blob:; "
            "connect-src 'self'; form-action 'self'; base-uri 'self'; "
            "worker-src 'self' blob:; frame-src 'self' data: blob:; manifest-src 'self'; object-src 'self'")


def seal_headers() -> bytes:
    """Header lines every direct-mode response carries (the browser may use no other origin)."""
    return f"Content-Security-Policy: {SEAL_CSP}\r\nX-DNS-Prefetch-Control: off\r\n".encode("latin-1")


class UrlRewriter:
    """Maps the URLs of one archived document (``base``: its original URL) into the archive's
    URL space at timestamp ``ts``; :meth:`__call__` gives the new text of a value, None when it
    is to stay as it is."""

    def __init__(self, ts: str, base: str):
        self.ts = ts
        self.set_base(base)

    def set_base(self, base: str) -> None:
        self.base = base
        parts = urlsplit(base)
        self.scheme = parts.scheme or "http"
        self.origin = f"{self.scheme}://{parts.netloc}" if parts.netloc else ""

    def __call__(self, raw: str) -> str | None:
        """The rewritten form of ``raw`` (an attribute's or CSS's URL text, as written), or None.

        Read as a browser's URL parser reads it: tabs and newlines anywhere are dropped, C0 controls
        and spaces at the ends are trimmed, and a backslash counts as a slash (``\\\\host``,
        ``/\\host`` and ``http:\\\\host`` all name another host)."""
        value = _URL_IGNORED.sub("", raw).strip(_URL_TRIM)
        if not value:
            return None
        low = value[:12].lower()
        if low.startswith(LOCAL_SCHEMES):
            return None
        lead = raw[:len(raw) - len(raw.lstrip())]
        if low.startswith(WEB_SCHEMES):
            return f"{lead}/{self.ts}/{value}"
        if value[:2] in _TWO_SLASHES:  # protocol-relative: another host
            return f"{lead}/{self.ts}/{self.scheme}://{value.lstrip(_SLASHES)}"
        if value[:1] in ("/", "\\"):
            if REPLAY_PATH.match(value) or not self.origin:
                return None
            return f"{lead}/{self.ts}/{self.origin}/{value[1:]}"
        scheme = _SCHEME_AT.match(value)
        if scheme and scheme.group(1).lower() in ("http", "https", "ws", "wss"):
            # ``http:/x``, ``https:\\host``, ``wss:host``: a browser may take what follows for a host
            name, rest = scheme.group(1).lower(), value[scheme.end():]
            if name == self.scheme and rest[:2] not in _TWO_SLASHES:
                return f"{lead}/{self.ts}/{urljoin(self.base, rest.replace(chr(92), '/'))}"
            return f"{lead}/{self.ts}/{name}://{rest.lstrip(_SLASHES)}"
        if scheme:  # another scheme (ftp:, chrome:): the CSP refuses it
            return None
        return None  # relative: already inside the archive's URL space


# How a browser's URL parser reads a value: these are removed anywhere, those trimmed at the ends.
_URL_IGNORED = re.compile("[\t\n\r]")
_URL_TRIM = "".join(chr(c) for c in range(0x21))
_SLASHES = "/\\"
_TWO_SLASHES = frozenset({"//", "/\\", "\\/", "\\\\"})
_SCHEME_AT = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*):")


# ---------------------------------------------------------------------------------------- CSS
def _css_string_end(css: str, i: int) -> int:
    """Index just past the string that starts at ``css[i]`` (a quote), per the CSS syntax."""
    quote = css[i]
    j = i + 1
    n = len(css)
    while j < n:
        c = css[j]
        if c == "\\":
            j += 2
            continue
        if c == quote:
            return j + 1
        if c == "\n":  # a bad string ends at the newline
            return j
        j += 1
    return n


def rewrite_css(css: str, rewrite: UrlRewriter) -> str:
    """``css`` with the URLs of its ``url(...)`` tokens and ``@import`` strings rewritten.

    A scanner over CSS tokens, not a pattern over the text: comments and strings are skipped as
    wholes, so a ``url(`` inside either is left alone."""
    out: list[str] = []
    last = 0
    i = 0
    n = len(css)
    after_import = False
    lower = css.lower()
    while i < n:
        c = css[i]
        if c == "/" and css.startswith("/*", i):
            end = css.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        if c in "\"'":
            end = _css_string_end(css, i)
            if after_import:
                new = rewrite(css[i + 1:end - 1])
                if new is not None and css[end - 1:end] == c:
                    out.append(css[last:i + 1])
                    out.append(_css_escape(new, c))
                    last = end - 1
                after_import = False
            i = end
            continue
        if c == "@" and lower.startswith("@import", i):
            after_import = True
            i += 7
            continue
        if c in "uU" and lower.startswith("url(", i) and (i == 0 or not (css[i - 1].isalnum() or css[i - 1] in "-_\\")):
            j = i + 4
            while j < n and css[j] in " \t\r\n\f":
                j += 1
            if j < n and css[j] in "\"'":  # url("...") : a function with a string
                end = _css_string_end(css, j)
                new = rewrite(css[j + 1:end - 1])
                if new is not None and css[end - 1:end] == css[j]:
                    out.append(css[last:j + 1])
                    out.append(_css_escape(new, css[j]))
                    last = end - 1
                i = end
            else:  # an unquoted url token runs to the closing parenthesis
                end = css.find(")", j)
                end = n if end < 0 else end
                new = rewrite(css[j:end])
                if new is not None:
                    out.append(css[last:j])
                    out.append(new.strip().replace(" ", "%20").replace(")", "%29"))
                    last = end
                i = end
            after_import = False
            continue
        if c == ";" or c == "{":
            after_import = False
        i += 1
    if not out:
        return css
    out.append(css[last:])
    return "".join(out)


def _css_escape(text: str, quote: str) -> str:
    return text.replace("\\", "\\\\").replace(quote, "\\" + quote).replace("\n", "\\a ")


# ---------------------------------------------------------------------------------------- HTML
def _srcset(value: str, rewrite: UrlRewriter) -> str | None:
    """A ``srcset`` with each candidate's URL rewritten (the HTML standard's parsing of candidates:
    a URL runs to whitespace; a trailing comma on it ends the candidate)."""
    out: list[str] = []
    i = 0
    n = len(value)
    changed = False
    while i < n:
        j = i
        while j < n and (value[j].isspace() or value[j] == ","):
            j += 1
        out.append(value[i:j])
        if j >= n:
            break
        k = j
        while k < n and not value[k].isspace():
            k += 1
        url = value[j:k]
        trail = ""
        while url.endswith(","):
            url, trail = url[:-1], trail + ","
        new = rewrite(url)
        if new is not None:
            changed = True
            url = new
        out.append(url + trail)
        i = k
        if not trail:  # the descriptors, to the next comma outside parentheses
            depth = 0
            m = k
            while m < n:
                ch = value[m]
                if ch == "(":
                    depth += 1
                elif ch == ")":
                    depth = max(0, depth - 1)
                elif ch == "," and depth == 0:
                    break
                m += 1
            out.append(value[k:m])
            i = m
    return "".join(out) if changed else None


_REFRESH = re.compile(r"^(\s*[\d.]*\s*[;,]?\s*(?:url\s*=\s*)?)(['\"]?)(.*?)(\2\s*)$", re.IGNORECASE | re.DOTALL)


def rewrite_refresh(value: str, rewrite: UrlRewriter) -> str | None:
    """A refresh's value (``<meta http-equiv=refresh content>`` or a ``Refresh`` header) with its URL
    rewritten, or None. The ``url=`` is optional, as browsers read it: ``5; http://host/`` navigates."""
    m = _REFRESH.match(value)
    if not m or not m.group(3):
        return None
    target = rewrite(m.group(3))
    return None if target is None else m.group(1) + m.group(2) + target + m.group(4)


class _Rewriter(HTMLParser):
    def __init__(self, text: str, rewrite: UrlRewriter, page_url: str):
        super().__init__(convert_charrefs=True)
        self.text = text
        self.rewrite = rewrite
        self.page_url = page_url
        self.edits: list[tuple[int, int, str]] = []
        self.lines = [0]
        for m in re.finditer("\n", text):
            self.lines.append(m.end())
        self._style_start: int | None = None
        # where the shim goes: after <head> (else <html>), and after the determinism runtime when it is there
        self.head_end: int | None = None
        self._script_at: int | None = None
        self._seen_head = False
        self._text_until: str | None = None  # inside an element whose content is text (RAW_TEXT)

    def _pos(self) -> int:
        line, col = self.getpos()
        return self.lines[line - 1] + col

    def handle_starttag(self, tag, attrs):
        self._tag(tag, attrs)

    def handle_startendtag(self, tag, attrs):
        self._tag(tag, attrs)

    def handle_endtag(self, tag):
        if self._text_until is not None:
            if tag == self._text_until:
                self._text_until = None
            return
        if tag == "script" and self._script_at is not None:
            self._script_at = None
            end = self.text.find(">", self._pos())
            if end >= 0:
                self.head_end = end + 1
        if tag == "style" and self._style_start is not None:
            start, end = self._style_start, self._pos()
            self._style_start = None
            if start < end:
                new = rewrite_css(self.text[start:end], self.rewrite)
                if new != self.text[start:end]:
                    self.edits.append((start, end, new))

    def _tag(self, tag, attrs):
        raw = self.get_starttag_text()
        if raw is None or self._text_until is not None:
            return  # (a "tag" in a <textarea> or <title> is text a browser shows as written)
        if tag in RAW_TEXT and not raw.endswith("/>"):
            self._text_until = tag  # its own attributes are read below; its content is left alone
        start = self._pos()
        if (tag == "html" and self.head_end is None) or (tag == "head" and not self._seen_head):
            self._seen_head = self._seen_head or tag == "head"
            self.head_end = start + len(raw)
        elif tag == "script" and start == self.head_end and raw.startswith("<script>"):
            self._script_at = start  # the runtime, first in the head: the shim comes after it
        if tag == "style" and not raw.endswith("/>"):
            self._style_start = start + len(raw)
        values = {name: value for name, value in attrs}
        if tag == "base" and values.get("href"):
            self.rewrite.set_base(urljoin(self.page_url, values["href"].strip()))
        m = _TAG.match(raw, 1)
        if not m:
            return
        k = m.end()
        while k < len(raw):
            a = _ATTR.match(raw, k)
            if not a:
                break
            k = a.end()
            name = a.group(1).lower()
            if a.group(3) is None:
                continue
            vstart, vend = a.span(3)
            quoted = raw[vstart:vstart + 1] in ("'", '"')
            inner = raw[vstart + 1:vend - 1] if quoted else raw[vstart:vend]
            new_inner = self._value(tag, name, values, inner)
            if new_inner is None:
                continue
            q = raw[vstart] if quoted else '"'
            if not quoted:
                new_inner = new_inner.replace('"', "&quot;")
            elif q in new_inner:
                new_inner = new_inner.replace(q, "&quot;" if q == '"' else "&#39;")
            self.edits.append((start + vstart, start + vend, q + new_inner + q))
        # integrity: a rewritten stylesheet no longer has the archived hash; ours is checked by the archive
        if "integrity" in values and tag in ("link", "script"):
            for a in _ATTR.finditer(raw, m.end()):
                if a.group(1).lower() == "integrity":
                    s, _ = a.span(1)
                    self.edits.append((start + s, start + s + len("integrity"), "data-archived-integrity"))
                    break

    def _value(self, tag: str, name: str, values: dict, inner: str) -> str | None:
        """The new text (still escaped as in the markup) of an attribute value, or None."""
        plain = htmlmod.unescape(inner)
        exact = plain == inner  # no character references: the raw text can be edited in place
        if name in URL_ATTRS or (tag, name) in ELEMENT_URL_ATTRS:
            new = self.rewrite(plain)
        elif name in SRCSET_ATTRS:
            new = _srcset(plain, self.rewrite)
        elif name == "ping":
            parts = [self.rewrite(p) or p for p in plain.split()]
            new = " ".join(parts) if parts != plain.split() else None
        elif name == "style":
            css = rewrite_css(plain, self.rewrite)
            new = css if css != plain else None
        elif name == "content" and tag == "meta" and (values.get("http-equiv") or "").lower() == "refresh":
            new = rewrite_refresh(plain, self.rewrite)
        elif name == "http-equiv" and tag == "meta" and plain.strip().lower().startswith("content-security-policy"):
            new = "x-archived-" + plain.strip()  # an archived policy names the live origins: ours replaces it
        else:
            return None
        if new is None:
            return None
        return new if exact else htmlmod.escape(new, quote=False)


def rewrite_html(body: bytes, ts: str, page_url: str, shim: bytes | None = None) -> bytes:
    """The archived HTML ``body`` of ``page_url`` with its URLs rewritten into ``/<ts>/...`` and
    ``shim`` (a ``<script>``) inserted first in the document. Bytes are read as Latin-1, so every
    byte outside the rewritten values comes back as it was, whatever the page's encoding (UTF-16
    pages, rare, are left as they are)."""
    if body[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return body
    text = body.decode("latin-1")
    parser = _Rewriter(text, UrlRewriter(ts, page_url), page_url)
    try:
        parser.feed(text)
        parser.close()
    except Exception:  # the tokenizer is tolerant; anything it still cannot read is served as archived, sealed
        parser.edits = [e for e in parser.edits if e[1] <= len(text)]
    edits = sorted(parser.edits)
    out: list[str] = []
    last = 0
    shim_at = parser.head_end
    shim_text = shim.decode("latin-1") if shim else ""
    for start, end, new in edits:
        if start < last:
            continue  # (overlapping edits cannot happen; keep the first)
        if shim_text and shim_at is not None and shim_at <= start and shim_at >= last:
            out.append(text[last:shim_at])
            out.append(shim_text)
            last = shim_at
            shim_text = ""
        out.append(text[last:start])
        out.append(new)
        last = end
    if shim_text and shim_at is not None and shim_at >= last:
        out.append(text[last:shim_at])
        out.append(shim_text)
        last = shim_at
        shim_text = ""
    out.append(text[last:])
    result = "".join(out).encode("latin-1")
    if shim_text:  # no <head>: before everything else (the determinism runtime's own rule)
        from .determinism import inject

        result = inject(result, shim_text.encode("latin-1"))
    return result


def rewrite_css_bytes(body: bytes, ts: str, url: str) -> bytes:
    """An archived stylesheet with its URLs rewritten (bytes read as Latin-1: the rest unchanged)."""
    text = body.decode("latin-1")
    new = rewrite_css(text, UrlRewriter(ts, url))
    return body if new is text else new.encode("latin-1")


# ---------------------------------------------------------------------------------------- the shim
_SHIM_JS = r"""(function(){
"use strict";
var TS=%(ts)s, BASE=%(base)s, W=window, L=W.location, ORIGIN=L.origin;
var REPLAY=/^\/\d{1,14}(?:[a-z]{2}_)?\//, LOCAL=/^(data|blob|javascript|about|mailto|tel):/i;
function orig(){
  try { var m=(L.pathname+L.search+L.hash).match(/^\/\d{1,14}(?:[a-z]{2}_)?\/(.*)$/); return m ? m[1] : BASE; }
  catch(e){ return BASE; }
}
function rw(u){
  if (u===null||u===undefined) return u;
  if (typeof u!=="string") {
    if (u instanceof URL) u=u.href;
    else if (typeof Request!=="undefined"&&u instanceof Request) return u;
    else u=String(u);
  }
  var t=u.trim(); if (!t||t.charAt(0)==="#"||LOCAL.test(t)) return u;
  var abs; try { abs=new URL(t, document.baseURI); } catch(e){ return u; }
  if (abs.origin===ORIGIN) {
    if (REPLAY.test(abs.pathname)||abs.pathname.indexOf("/_webfreeze/")===0) return abs.href;
    var o; try { o=new URL(orig()); } catch(e){ o=new URL(BASE); }
    return ORIGIN+"/"+TS+"/"+o.origin+abs.pathname+abs.search+abs.hash;
  }
  if (!/^(https?|wss?):$/.test(abs.protocol)) return u;
  var ws=abs.protocol==="ws:"||abs.protocol==="wss:";
  return (ws ? ORIGIN.replace(/^http/,"ws") : ORIGIN)+"/"+TS+"/"+abs.href;
}
W.__webfreeze_rewrite=rw;
function wrapCtor(name){
  var C=W[name]; if (!C) return;
  var F=function(u,o){ return arguments.length>1 ? new C(rw(u),o) : new C(rw(u)); };
  F.prototype=C.prototype; try { Object.setPrototypeOf(F,C); } catch(e){}
  ["CONNECTING","OPEN","CLOSING","CLOSED"].forEach(function(k){
    if (k in C) try { Object.defineProperty(F,k,{value:C[k]}); } catch(e){} });
  W[name]=F;
}
var f=W.fetch;
if (f) W.fetch=function(input,init){
  if (typeof Request!=="undefined"&&input instanceof Request) {
    var n=rw(input.url); if (n!==input.url) input=new Request(n,input); return f.call(this,input,init);
  }
  return f.call(this,rw(input),init);
};
var xo=XMLHttpRequest.prototype.open;
XMLHttpRequest.prototype.open=function(m,u){ var a=[].slice.call(arguments); a[1]=rw(u); return xo.apply(this,a); };
["WebSocket","EventSource","Worker","SharedWorker"].forEach(wrapCtor);
if (navigator.sendBeacon) {
  var sb=navigator.sendBeacon; navigator.sendBeacon=function(u,d){ return sb.call(navigator,rw(u),d); };
}
var wo=W.open; W.open=function(u){ var a=[].slice.call(arguments); if (a.length) a[0]=rw(u); return wo.apply(W,a); };
if (navigator.serviceWorker) try {
  Object.defineProperty(navigator.serviceWorker,"register",{value:function(){
    return Promise.reject(new DOMException("service workers are refused in a replay","SecurityError")); }});
} catch(e){}
function prop(C,name){
  if (!C) return; var d=Object.getOwnPropertyDescriptor(C.prototype,name); if (!d||!d.set) return;
  Object.defineProperty(C.prototype,name,{configurable:true,enumerable:d.enumerable,get:d.get,
    set:function(v){ d.set.call(this,rw(v)); }});
}
[[W.HTMLImageElement,"src"],[W.HTMLScriptElement,"src"],[W.HTMLIFrameElement,"src"],[W.HTMLFrameElement,"src"],
 [W.HTMLLinkElement,"href"],[W.HTMLSourceElement,"src"],[W.HTMLMediaElement,"src"],[W.HTMLEmbedElement,"src"],
 [W.HTMLTrackElement,"src"],[W.HTMLInputElement,"src"],[W.HTMLFormElement,"action"],[W.HTMLObjectElement,"data"],
 [W.HTMLAnchorElement,"href"],[W.HTMLAreaElement,"href"],[W.HTMLBaseElement,"href"]
].forEach(function(p){ prop(p[0],p[1]); });
var sa=Element.prototype.setAttribute, URLA={src:1,href:1,action:1,formaction:1,poster:1,data:1,background:1};
Element.prototype.setAttribute=function(n,v){
  var k=String(n).toLowerCase(), url=URLA[k]===1&&!(k==="data"&&this.tagName!=="OBJECT");
  return sa.call(this,n,url ? rw(v) : v);
};
if (W.navigation&&W.navigation.addEventListener) W.navigation.addEventListener("navigate",function(e){
  try {
    var d=new URL(e.destination.url);
    if (d.origin===ORIGIN&&(REPLAY.test(d.pathname)||d.pathname.indexOf("/_webfreeze/")===0)) return;
    var n=rw(d.href); if (n===d.href||!e.cancelable) return;
    e.preventDefault(); L.assign(n);
  } catch(err){}
});
})();"""


def shim_script(ts: str, page_url: str) -> bytes:
    """The ``<script>`` of the client-side shim for a page captured at ``page_url``, replayed at ``ts``."""
    import json

    js = _SHIM_JS % {"ts": json.dumps(ts), "base": json.dumps(page_url).replace("</", "<\\/")}
    return b'<script data-webfreeze="seal">' + js.encode("utf-8") + b"</script>"
