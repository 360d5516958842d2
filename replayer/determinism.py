"""The deterministic runtime injected first into every replayed HTML document.

It makes a page's scripts see the same world on every replay:

- ``Date``: ``new Date()`` and ``Date.now()`` start at the capture time of the document and advance
  by exactly 1 ms per reading, so the values a page writes are the same on every run and busy-wait
  loops still end. Dates built from arguments are untouched.
- ``Math.random``: a seeded generator (mulberry32); the seed comes from the run seed and the URL.
- ``crypto.getRandomValues`` and ``crypto.randomUUID``: filled from the same generator.
- ``performance.now``: starts at 0 and advances 1 ms per reading.
- ``navigator.serviceWorker.register``: refused (a rejected promise), so no worker can bypass replay.
- Timers, when the replay is asked for them (``timers=True``: the agent environment; people browsing
  ``replay serve`` get the browser's own timers):
  ``setTimeout``, ``setInterval``, ``requestAnimationFrame`` and ``requestIdleCallback`` no longer
  run on the wall clock. They wait in a queue ordered by virtual due time, and run only when the
  environment pumps them (:data:`PUMP_JS`): in due order, advancing a virtual clock, never while a
  request the page's scripts started (fetch, XHR and its body, a script, stylesheet, image or frame
  they added) is still loading. So how far a page has got when it is observed depends on its own
  code and the archive, not on the machine's speed (the rule is in docs/replay-and-environment.md).

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
%(timers)s})();"""

# The controlled timers (see the module's docstring), inserted into RUNTIME_TEMPLATE. ``__wfPump``
# is what the environment calls; ``__wfNative`` keeps the browser's own timers for the
# environment's waits (a first paint, say), which must not wait for the pump.
TIMERS_JS = r"""var W=window,MC=W.MessageChannel,N={setTimeout:W.setTimeout.bind(W),clearTimeout:W.clearTimeout.bind(W),
 requestAnimationFrame:W.requestAnimationFrame.bind(W)};
try{Object.defineProperty(W,'__wfNative',{value:N});}catch(e){}
var vt=0,q=[],ids=0,live=new Map(),nest=0,pending=0,waiters=[],token=null,limit=0,ran=0,watching=false;
function ins(t){var lo=0,hi=q.length;while(lo<hi){var m=(lo+hi)>>1,o=q[m];
 if(o.due<t.due||(o.due===t.due&&o.seq<t.seq)){lo=m+1;}else{hi=m;}}q.splice(lo,0,t);}
function add(kind,fn,due,args,every){var id=++ids;var t={id:id,kind:kind,fn:fn,args:args,due:due,seq:id,every:every,nest:nest+1};
 live.set(id,t);ins(t);return id;}
function delay(d){d=Number(d)||0;if(d<0){d=0;}if(nest>=5&&d<4){d=4;}return d;}
W.setTimeout=function(fn,d){var a=Array.prototype.slice.call(arguments,2);return add('t',fn,vt+delay(d),a,0);};
W.setInterval=function(fn,d){var a=Array.prototype.slice.call(arguments,2),e=Math.max(delay(d),1);return add('t',fn,vt+e,a,e);};
function clear(kind){return function(id){var t=live.get(id);if(t&&t.kind===kind){live.delete(id);t.dead=true;}};}
W.clearTimeout=W.clearInterval=clear('t');
W.requestAnimationFrame=function(cb){return add('f',cb,(Math.floor(vt/16)+1)*16,null,0);};
W.cancelAnimationFrame=clear('f');
W.requestIdleCallback=function(cb){return add('i',cb,vt+1,null,0);};
W.cancelIdleCallback=clear('i');
function fire(t){if(t.due>vt){vt=t.due;}var outer=nest;nest=t.nest;
 try{if(t.kind==='f'){t.fn.call(W,t.due);}
  else if(t.kind==='i'){t.fn.call(W,{didTimeout:false,timeRemaining:function(){return 50;}});}
  else if(typeof t.fn==='function'){t.fn.apply(W,t.args);}else{(0,eval)(String(t.fn));}}
 catch(e){if(W.reportError){W.reportError(e);}}
 finally{nest=outer;}
 if(t.every&&!t.dead){t.due=vt+t.every;t.seq=++ids;ins(t);}else{live.delete(t.id);}}
function release(){if(pending>0){pending--;}if(pending===0){var w=waiters;waiters=[];w.forEach(function(f){f();});}}
function hold(){pending++;var done=false;var stall=N.setTimeout(function(){if(!done){done=true;W.__wfStalled=(W.__wfStalled||0)+1;release();}},%(stall)d);
 return function(){if(!done){done=true;N.clearTimeout(stall);release();}};}
if(W.fetch){var F=W.fetch;W.fetch=function(){var r=hold(),p;try{p=F.apply(this,arguments);}catch(e){r();throw e;}p.then(r,r);return p;};}
if(W.Response){['text','json','arrayBuffer','blob','formData'].forEach(function(m){var o=Response.prototype[m];
 if(o){Response.prototype[m]=function(){var r=hold(),p;try{p=o.apply(this,arguments);}catch(e){r();throw e;}p.then(r,r);return p;};}});}
var XS=XMLHttpRequest.prototype.send;XMLHttpRequest.prototype.send=function(){var r=hold();this.addEventListener('loadend',r);
 try{return XS.apply(this,arguments);}catch(e){r();throw e;}};
function loads(el){var tag=el.localName;if(el.__wfHeld){return false;}
 if(tag==='script'||tag==='iframe'){return !!el.src;}
 if(tag==='link'){return !!el.href&&!el.sheet&&/(^|\s)(stylesheet|preload|modulepreload)(\s|$)/i.test(el.rel||'');}
 if(tag==='img'){return !!(el.currentSrc||el.src)&&!el.complete&&(el.loading||'').toLowerCase()!=='lazy';}
 return false;}
function watch(el){if(!loads(el)){return;}el.__wfHeld=true;var r=hold();el.addEventListener('load',r);el.addEventListener('error',r);}
var SEL='script[src],link[href],img,iframe[src]';
function added(records){records.forEach(function(rec){rec.addedNodes.forEach(function(n){if(n.nodeType!==1){return;}
 watch(n);if(n.querySelectorAll){n.querySelectorAll(SEL).forEach(watch);}});});}
function startWatching(){if(watching){return;}watching=true;new MutationObserver(added).observe(document,{childList:true,subtree:true});
 var d=Object.getOwnPropertyDescriptor(HTMLImageElement.prototype,'src');
 if(d&&d.set){Object.defineProperty(HTMLImageElement.prototype,'src',{configurable:true,enumerable:d.enumerable,get:d.get,
  set:function(v){d.set.call(this,v);if(!this.isConnected){watch(this);}}});}}
var chan=MC?new MC():null,next=[];
if(chan){chan.port1.onmessage=function(){var f=next.shift();if(f){f();}};}
function later(f){if(chan){next.push(f);chan.port2.postMessage(0);}else{N.setTimeout(f,0);}}
Object.defineProperty(W,'__wfPump',{value:function(tok,horizon,cap){startWatching();
 if(tok!==token){token=tok;limit=vt+horizon;ran=0;}
 while(q.length&&q[0].dead){q.shift();}
 if(pending===0&&(!q.length||q[0].due>limit)){if(limit>vt){vt=limit;}return 0;}
 return new Promise(function(done){var n=0;
  function step(){if(pending>0){waiters.push(function(){later(step);});return;}
   while(q.length&&q[0].dead){q.shift();}
   if(ran>=cap){done(n);return;}
   if(!q.length||q[0].due>limit){if(limit>vt){vt=limit;}done(n);return;}
   var t=q.shift();ran++;n++;fire(t);later(step);}
  later(step);});}});"""

_HEAD = re.compile(rb"<head(\s[^>]*)?>", re.IGNORECASE)
_HTML = re.compile(rb"<html(\s[^>]*)?>", re.IGNORECASE)
_DOCTYPE = re.compile(rb"^\s*(<!doctype[^>]*>)", re.IGNORECASE)


def page_seed(run_seed: int, url: str) -> int:
    """The 32-bit seed a page's generator starts from."""
    digest = hashlib.sha256(f"{run_seed}\n{url}".encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big")


STALL_MS = 5000  # a load the pump waits for that has not ended by then stops counting (a safety net)


def runtime_script(captured_at: str, seed: int, *, timers: bool = False) -> bytes:
    """The runtime for a page captured at ``captured_at``, its generator seeded with ``seed``; with
    ``timers``, the page's timers wait for the environment's pump."""
    ms = int(parse_time(captured_at).timestamp() * 1000)
    timers = TIMERS_JS % {"stall": STALL_MS} + "\n" if timers else ""
    return b"<script>" + (RUNTIME_TEMPLATE % {"time": ms, "seed": seed, "timers": timers}).encode("ascii") + b"</script>"


def inject(html: bytes, script: bytes) -> bytes:
    """Insert ``script`` first inside ``<head>`` (else after ``<html>``, else after the doctype)."""
    for pattern in (_HEAD, _HTML, _DOCTYPE):
        m = pattern.search(html, 0, 65536)
        if m:
            return html[: m.end()] + script + html[m.end():]
    return script + html
