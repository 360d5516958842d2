"""The deterministic runtime injected first into every replayed HTML document.

It makes a page's scripts see the same world on every replay:

- ``Date``: ``new Date()`` and ``Date.now()`` start at the capture time of the document and advance
  by exactly 1 ms per reading, so the values a page writes are the same on every run and busy-wait
  loops still end. Dates built from arguments are untouched.
- ``Math.random``: a seeded generator (mulberry32); the seed comes from the run seed and the URL.
- ``crypto.getRandomValues`` and ``crypto.randomUUID``: filled from the same generator.
- ``performance.now``: starts at 0 and advances 1 ms per reading.
- ``navigator.serviceWorker.register``: refused (a rejected promise), so no worker can bypass replay.

The script is small, has no dependencies, and is switchable off (``inject=False``).
"""

from __future__ import annotations

import hashlib
import re

from webfreeze.archives.timeutil import parse_time

RUNTIME_TEMPLATE = r"""(function(){
var T0=%(time)d,S=%(seed)d>>>0,n=0,p=0,OD=Date;
function rnd(){S=(S+0x6D2B79F5)>>>0;var t=S;t=Math.imul(t^(t>>>15),t|1);t^=t+Math.imul(t^(t>>>7),t|61);return ((t^(t>>>14))>>>0)/4294967296;}
function now(){return T0+(n++);}
function D(){var a=arguments;if(!(this instanceof D)){return new OD(now()).toString();}
 if(a.length===0){return new OD(now());}
 return new (Function.prototype.bind.apply(OD,[null].concat(Array.prototype.slice.call(a))))();}
D.prototype=OD.prototype;D.now=now;D.parse=OD.parse;D.UTC=OD.UTC;
Object.defineProperty(D.prototype,'constructor',{value:D,writable:true,configurable:true});
window.Date=D;
Math.random=rnd;
if(window.crypto){
 var gv=function(a){var b=new Uint8Array(a.buffer,a.byteOffset,a.byteLength);for(var i=0;i<b.length;i++){b[i]=Math.floor(rnd()*256);}return a;};
 try{Object.defineProperty(Crypto.prototype,'getRandomValues',{value:gv,configurable:true,writable:true});}catch(e){}
 try{Object.defineProperty(Crypto.prototype,'randomUUID',{value:function(){var h=[];for(var i=0;i<16;i++){h.push(Math.floor(rnd()*256));}
  h[6]=(h[6]&15)|64;h[8]=(h[8]&63)|128;var s=h.map(function(x){return (x+256).toString(16).slice(1);}).join('');
  return s.slice(0,8)+'-'+s.slice(8,12)+'-'+s.slice(12,16)+'-'+s.slice(16,20)+'-'+s.slice(20);},configurable:true,writable:true});}catch(e){}
}
if(window.performance){try{Object.defineProperty(Performance.prototype,'now',{value:function(){return p++;},configurable:true,writable:true});}catch(e){}}
if(navigator.serviceWorker){try{Object.defineProperty(ServiceWorkerContainer.prototype,'register',{value:function(){return Promise.reject(new DOMException('service workers are disabled in replay','SecurityError'));},configurable:true,writable:true});}catch(e){}}
})();"""

_HEAD = re.compile(rb"<head(\s[^>]*)?>", re.IGNORECASE)
_HTML = re.compile(rb"<html(\s[^>]*)?>", re.IGNORECASE)
_DOCTYPE = re.compile(rb"^\s*(<!doctype[^>]*>)", re.IGNORECASE)


def page_seed(run_seed: int, url: str) -> int:
    """The 32-bit seed a page's generator starts from."""
    digest = hashlib.sha256(f"{run_seed}\n{url}".encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big")


def runtime_script(captured_at: str, seed: int) -> bytes:
    ms = int(parse_time(captured_at).timestamp() * 1000)
    return b"<script>" + (RUNTIME_TEMPLATE % {"time": ms, "seed": seed}).encode("ascii") + b"</script>"


def inject(html: bytes, script: bytes) -> bytes:
    """Insert ``script`` first inside ``<head>`` (else after ``<html>``, else after the doctype)."""
    for pattern in (_HEAD, _HTML, _DOCTYPE):
        m = pattern.search(html, 0, 65536)
        if m:
            return html[: m.end()] + script + html[m.end():]
    return script + html
