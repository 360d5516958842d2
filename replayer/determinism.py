"""The deterministic runtime injected first into every replayed HTML document.

It makes a page's scripts, and the workers they start, see the same world on every replay:

- ``Date``: ``new Date()`` and ``Date.now()`` start at the capture time of the document and advance
  by exactly 1 ms per reading, so the values a page writes are the same on every run and busy-wait
  loops still end. Dates built from arguments are untouched. ``performance.timeOrigin`` is the
  capture time too. With the pumped timers (below) neither clock stands behind the timers' virtual
  clock: a callback due at virtual time T reads at least T since the page began, so code that
  checks on the clock that its wait has passed (lodash's ``debounce``) goes on as in a browser.
  Without them (the browser's own timers: ``replay serve``, ``replay check``, the crawl's check),
  a ``setTimeout`` or ``setInterval`` callback reads both clocks at least at the time it was due
  (the clock when it was set plus its delay), for the same reason.
- ``Math.random``: a seeded generator (mulberry32); the seed comes from the run seed and the URL.
- ``crypto.getRandomValues`` and ``crypto.randomUUID``: filled from the same generator.
- ``performance.now``: starts at 0 and advances 1 ms per reading (and, with the pumped timers, keeps
  up with their virtual clock as ``Date`` does).
- ``navigator.serviceWorker.register``: refused (a rejected promise), so no worker can bypass replay.
- Workers (``Worker`` and ``SharedWorker``; a ``data:`` URL excepted): the constructor starts the
  worker from a blob that runs this same runtime first, then the worker's own script (``importScripts``,
  or ``import()`` for a module worker; a classic script ``importScripts`` refuses for its type, which
  Chromium runs as a worker all the same, a ``text/plain`` answer, is read with a synchronous XHR
  and run by indirect ``eval``: only when the error is that script's own ``NetworkError``, so a
  script that throws is never run twice), with relative URLs, ``fetch``, XHR and ``location`` resolved
  against the script's own URL. Each worker's generator has a seed of its own, derived from the
  page's seed and the worker's creation order (the n-th worker a page starts); its clock starts
  where the page's stood when it was made.
- Timers, when the replay is asked for them (``timers=True``: the agent environment; people browsing
  ``replay serve`` get the browser's own timers):
  ``setTimeout``, ``setInterval``, ``requestAnimationFrame`` and ``requestIdleCallback`` no longer
  run on the wall clock. They wait in a queue ordered by virtual due time, and run only when the
  environment pumps them (:data:`PUMP_JS`): in due order, advancing a virtual clock, never while a
  request the page's scripts started (fetch, XHR and its body, a script, stylesheet, image or frame
  they added) is still loading. So how far a page has got when it is observed depends on its own
  code and the archive, not on the machine's speed (the rule is in docs/replay-and-environment.md).
  With timers, completions reach scripts in the order of their requests: ``fetch`` answers and XHR
  completions (one sequence, in the order they were sent), and ``Response`` body reads (in the
  order they were asked for), each held until those before it have been delivered (or have not
  come: see ``STALL_MS``); an answer the replay marks ``X-Webfreeze-Held`` (a long poll the site
  was holding when the recording ended: archives/store.py ``UNFINISHED_PREFIX``) is never
  delivered (a fetch's promise stays pending, an XHR's end events never fire), and the pump does not
  wait for it; a fetched body read as a stream (``response.body``) is read whole at
  the page's first read (the pump waits for it) and handed out in chunks of 64 KiB whatever the
  network's cuts, each read answered at once; a ``Blob``'s reads are waited for too; scripts a page creates run in insertion order (``async=false``),
  and the ``load``/``error`` events of the scripts, stylesheets, images and frames it adds come in
  insertion order (one that comes early is stopped at the document and dispatched again in its
  turn). A
  worker's timers run on the page's pump too: once the page has nothing left due, the pump asks
  each worker in creation order to run its own due timers up to the same virtual horizon (after
  its pending loads), and what a worker posts to the page waits for that turn, so it arrives at
  the same point of the page's work on every run. ``ResizeObserver`` and ``IntersectionObserver``
  callbacks run in the pump too, resize observers first, each kind in the order its observers
  were made (Chromium delivers intersection observers in a hash set's order, which varies).

- WebSockets, when the replay serves them in the browser (``sockets=True``: the in-process replays,
  simulator/replay_route.py): each socket a page makes counts a delivery pending from its creation,
  and from each message the page sends, until the replay's marker (:data:`SOCKET_MARK`, taken off
  the socket before the page's listeners see it) says the batch of recorded messages has been
  delivered, or the socket closes. ``__wfSockets`` counts them (the settles of ``replay check`` and
  the crawl's check wait for 0); with the pumped timers the pump waits for them as for a load.
  ``__wfMarks`` counts the markers taken off (the agent environment waits for it to grow after it
  lets through pushes that waited for an action: replayer/websocket.py, ``Conversation.release``).
  ``__wfSocketsOpening`` counts the sockets neither open nor closed yet (the agent environment lets
  them be answered before a worker's socket, which the replay server answers: the k-th socket to a
  URL gets the k-th recording, in the order they were made).
  With ``worker_sockets`` too (a replay server answers workers' sockets, with marks: its proxy, in
  ``replay check``; the agent environment's pump waits for a worker's own), a dedicated worker's pending deliveries count in
  the page (or worker) that started it: the worker posts each change of its count (and gives it
  all back when it closes itself; a terminated worker's share is given back by its starter), and
  the starter's runtime takes that message off before the page's listeners see it. Playwright
  routes no worker's socket, so nobody else waits for one: a rally still going was taken for
  settled. Not where nothing marks a worker's socket (the crawl's check: it would be waited for
  until the settle's time bound).
- ``EventSource``: the runtime's own, over the page's ``fetch`` (with the pumped timers, then, its
  answers arrive in request order and the pump waits for them), reading a stream as Chromium's own
  does (tests/replayer/test_event_source.py holds it to Chromium's on the same bytes). Once a
  stream ends it connects again after the stream's ``retry`` (3 s unless the stream says, as in
  Chromium) on the page's timers: with the pumped timers, on the virtual clock, so whether a page
  has reconnected depends on its virtual time, not on how long an agent thought. A stream the
  recording left open (the replay marks its answer ``X-Webfreeze-Open-Stream``) stays open once
  its events are read, as the site kept it: no error, no reconnection. (Chromium's own
  reconnected after 3 s of real time to the answer the replay had ended, and showed its events
  again.)

The script is small, has no dependencies, and is switchable off (``inject=False``).
"""

from __future__ import annotations

import hashlib
import json
import re

from webfreeze.archives.timeutil import parse_time

# The runtime, one function of its own configuration: ``t`` the clock's start (ms since the epoch),
# ``s`` the generator's seed, ``x`` 1 for the pumped timers and ordered completions, ``st`` and ``nt``
# the stall bounds (ms: STALL_MS, NETWORK_STALL_MS); in a worker also ``v`` the virtual now, ``b`` the script's URL, ``sh`` 1 for a
# shared worker. A worker gets the function's own source (``Function.prototype.toString`` of it,
# read before any page script runs) with its configuration. ``__wfPump`` is what the environment
# calls; ``__wfNative`` keeps the browser's own timers for the environment's waits (a first paint,
# say), which must not wait for the pump. ``__wfRuntime`` marks a realm the runtime is installed
# in: a page that runs the scripts of an HTML fragment it fetched with ``Accept: text/html`` (jQuery:
# Node-RED's node configurations), which reads as a document's request and gets the runtime, runs
# it again, and it then does nothing (else its timers would wait in a queue nobody pumps, and the
# clock would start over). (Not ``__wfNative``: FRAME_RUNTIME_JS copies that into an iframe's
# initial about:blank, whose window a same-origin document then reuses, with its own runtime.)
RUNTIME_JS = r"""function R(c){
if(self.__wfRuntime){return;}if(!c.ro){try{Object.defineProperty(self,'__wfRuntime',{value:1});}catch(e){}}
var G=self,WK=typeof document==='undefined',SRC='('+Function.prototype.toString.call(R)+')';
var WPOST=WK&&!c.sh&&c.wk&&typeof G.postMessage==='function'?G.postMessage:null;
function sockets(d){G.__wfSockets=(G.__wfSockets||0)+d;if(WPOST){try{WPOST.call(G,{__wf:'sk',d:d});}catch(e){}}}
if(WPOST&&typeof G.close==='function'){var CL=G.close;G.close=function(){var k=G.__wfSockets|0;if(k>0){sockets(-k);}return CL.apply(G,arguments);};}
var T0=c.t,S0=c.s>>>0,S=S0,n=0,p=c.p||0,OD=Date,vt=c.v||0,V0=vt,wk=0,X=!!c.x,ST=c.st||5000,NT=c.nt||120000,B=c.b||null;
function rnd(){S=(S+0x6D2B79F5)>>>0;var t=S;t=Math.imul(t^(t>>>15),t|1);t^=t+Math.imul(t^(t>>>7),t|61);return ((t^(t>>>14))>>>0)/4294967296;}
function now(){if(vt-V0>n){n=vt-V0;}return T0+(n++);}
function D(){var a=arguments;if(!(this instanceof D)){return new OD(now()).toString();}
 if(a.length===0){return new OD(now());}
 return new (Function.prototype.bind.apply(OD,[null].concat(Array.prototype.slice.call(a))))();}
D.prototype=OD.prototype;D.now=now;D.parse=OD.parse;D.UTC=OD.UTC;
Object.defineProperty(D.prototype,'constructor',{value:D,writable:true,configurable:true});
if(!c.ro){G.Date=D;}
Math.random=rnd;
var GV0=G.crypto&&G.Crypto?Crypto.prototype.getRandomValues:null;
if(G.crypto&&G.Crypto){
 var gv=function(a){var b=new Uint8Array(a.buffer,a.byteOffset,a.byteLength);for(var i=0;i<b.length;i++){b[i]=Math.floor(rnd()*256);}return a;};
 try{Object.defineProperty(Crypto.prototype,'getRandomValues',{value:gv,configurable:true,writable:true});}catch(e){}
 try{Object.defineProperty(Crypto.prototype,'randomUUID',{value:function(){var h=[];for(var i=0;i<16;i++){h.push(Math.floor(rnd()*256));}
  h[6]=(h[6]&15)|64;h[8]=(h[8]&63)|128;var s=h.map(function(x){return (x+256).toString(16).slice(1);}).join('');
  return s.slice(0,8)+'-'+s.slice(8,12)+'-'+s.slice(12,16)+'-'+s.slice(16,20)+'-'+s.slice(20);},configurable:true,writable:true});}catch(e){}
}
if(c.ro){try{var me=document.currentScript;if(me){me.remove();}}catch(e){}return;}
if(G.Performance){try{Object.defineProperty(Performance.prototype,'now',{value:function(){if(vt-V0>p){p=vt-V0;}return p++;},configurable:true,writable:true});}catch(e){}
 try{Object.defineProperty(Performance.prototype,'timeOrigin',{get:function(){return T0;},configurable:true});}catch(e){}}
if(G.ServiceWorkerContainer){try{Object.defineProperty(ServiceWorkerContainer.prototype,'register',{value:function(){return Promise.reject(new DOMException('service workers are disabled in replay','SecurityError'));},configurable:true,writable:true});}catch(e){}}
function abs(u){try{return new URL(String(u),B||G.location.href).href;}catch(e){return u;}}
if(B){
 var IS=G.importScripts;if(IS){G.importScripts=function(){return IS.apply(G,Array.prototype.map.call(arguments,abs));};}
 var F0=G.fetch;if(F0){G.fetch=function(u,o){if(typeof u==='string'||(G.URL&&u instanceof URL)){u=abs(u);}return F0.call(G,u,o);};}
 if(G.XMLHttpRequest){var XO=XMLHttpRequest.prototype.open;XMLHttpRequest.prototype.open=function(m,u){var a=Array.prototype.slice.call(arguments);a[1]=abs(u);return XO.apply(this,a);};}
 try{Object.defineProperty(G,'location',{value:new URL(B),configurable:true});}catch(e){}
}
var N={setTimeout:G.setTimeout.bind(G),clearTimeout:G.clearTimeout.bind(G)};
if(G.requestAnimationFrame){N.requestAnimationFrame=G.requestAnimationFrame.bind(G);}
try{Object.defineProperty(G,'__wfNative',{value:N});}catch(e){}
if(!X){var due=function(d,e){if(d>n){n=d;}if(e>p){p=e;}},ms=function(d){d=Number(d)|0;return d<0?0:d;};
 G.setTimeout=function(fn,d){if(typeof fn!=='function'){return N.setTimeout.apply(G,arguments);}
  var a=Array.prototype.slice.call(arguments,2),w=ms(d),at=Math.max(n,vt-V0)+w,ap=Math.max(p,vt-V0)+w;
  return N.setTimeout(function(){due(at,ap);fn.apply(G,a);},d);};
 var SI=G.setInterval.bind(G);
 G.setInterval=function(fn,d){if(typeof fn!=='function'){return SI.apply(G,arguments);}
  var a=Array.prototype.slice.call(arguments,2),e=ms(d),at=Math.max(n,vt-V0),ap=Math.max(p,vt-V0);
  return SI(function(){at+=e;ap+=e;due(at,ap);fn.apply(G,a);},d);};}
function stalled(k){G.__wfStalled=(G.__wfStalled||0)+k;}
var chans=[],made={},WPM=G.Worker&&Worker.prototype.postMessage,PPM=G.MessagePort&&MessagePort.prototype.postMessage;
function wseed(k){var s=(S0^Math.imul(k+1,0x9E3779B1))>>>0;s=Math.imul(s^(s>>>16),0x85EBCA6B)>>>0;
 s=Math.imul(s^(s>>>13),0xC2B2AE35)>>>0;return (s^(s>>>16))>>>0;}
function control(t,w,shared){var ch={t:t,pm:shared?PPM:WPM,cb:null,dead:false};
 t.addEventListener('message',function(e){var d=e.data;if(d&&d.__wf==='ack'){e.stopImmediatePropagation();if(d.s){stalled(d.s|0);}var f=ch.cb;ch.cb=null;if(f){f(d.n|0);}}},true);
 if(shared){try{t.start();}catch(e){}}
 else{var T=w.terminate;w.terminate=function(){ch.dead=true;var f=ch.cb;ch.cb=null;if(f){f(0);}return T.call(w);};}
 chans.push(ch);}
function wrapWorker(name,shared){var O=G[name];if(!O){return;}
 var Wr=function(u,o){if(!(this instanceof Wr)){throw new TypeError("Failed to construct '"+name+"': Please use the 'new' operator");}
  var url=abs(u);if(/^data:/i.test(url)){return new O(u,o);}
  var module=!!(o&&typeof o==='object'&&o.type==='module'),key=url+'\n'+(typeof o==='string'?o:(o&&o.name)||''),blob=shared&&made[key];
  if(!blob){var cfg={t:T0+n,s:wseed(wk++),v:vt,x:X?1:0,st:ST,nt:NT,b:url,sh:shared?1:0,w:c.w,wk:c.wk};
   var U=JSON.stringify(url),src=SRC+'('+JSON.stringify(cfg)+');'+(module?'await import('+U+');':
    'try{importScripts('+U+');}catch(e){if(!e||e.name!=="NetworkError"||String(e.message).indexOf('+U+')<0){throw e;}'+
    'var x=new XMLHttpRequest();x.open("GET",'+U+',false);x.send();'+
    'if(x.status<200||x.status>299){throw e;}(0,eval)(x.responseText);}');
   blob=URL.createObjectURL(new Blob([src],{type:'text/javascript'}));if(shared){made[key]=blob;}}
  var w=new O(blob,o);
  if(X){control(shared?w.port:w,w,shared);}
  if(c.w&&c.wk&&!shared){var owes=0,TM=w.terminate;
   w.addEventListener('message',function(e){var d=e.data;if(d&&d.__wf==='sk'){e.stopImmediatePropagation();owes+=d.d|0;sockets(d.d|0);}},true);
   w.terminate=function(){if(owes){sockets(-owes);owes=0;}return TM.call(w);};}
  return w;};
 Wr.prototype=O.prototype;
 try{Object.defineProperty(O.prototype,'constructor',{value:Wr,configurable:true,writable:true});}catch(e){}
 G[name]=Wr;}
wrapWorker('Worker',false);wrapWorker('SharedWorker',true);
var wsHold=null;
if(X){
var MC=G.MessageChannel;wsHold=hold;
var q=[],ids=0,live=new Map(),nest=0,pending=0,waiters=[],token=null,limit=0,left=0,watching=false;
function ins(t){var lo=0,hi=q.length;while(lo<hi){var m=(lo+hi)>>1,o=q[m];
 if(o.due<t.due||(o.due===t.due&&o.seq<t.seq)){lo=m+1;}else{hi=m;}}q.splice(lo,0,t);}
function add(kind,fn,due,args,every){var id=++ids;var t={id:id,kind:kind,fn:fn,args:args,due:due,seq:id,every:every,nest:nest+1};
 live.set(id,t);ins(t);return id;}
function delay(d){d=Number(d)|0;if(d<0){d=0;}if(nest>=5&&d<4){d=4;}return d;}
G.setTimeout=function(fn,d){var a=Array.prototype.slice.call(arguments,2);return add('t',fn,vt+delay(d),a,0);};
G.setInterval=function(fn,d){var a=Array.prototype.slice.call(arguments,2),e=Math.max(delay(d),1);return add('t',fn,vt+e,a,e);};
function clear(kind){return function(id){var t=live.get(id);if(t&&t.kind===kind){live.delete(id);t.dead=true;}};}
G.clearTimeout=G.clearInterval=clear('t');
if(G.requestAnimationFrame){G.requestAnimationFrame=function(cb){return add('f',cb,(Math.floor(vt/16)+1)*16,null,0);};G.cancelAnimationFrame=clear('f');}
if(G.requestIdleCallback){G.requestIdleCallback=function(cb){return add('i',cb,vt+1,null,0);};G.cancelIdleCallback=clear('i');}
function fire(t){if(t.due>vt){vt=t.due;}var outer=nest;nest=t.nest;
 try{if(t.kind==='f'){t.fn.call(G,t.due);}
  else if(t.kind==='i'){t.fn.call(G,{didTimeout:false,timeRemaining:function(){return 50;}});}
  else if(typeof t.fn==='function'){t.fn.apply(G,t.args);}else{(0,eval)(String(t.fn));}}
 catch(e){if(G.reportError){G.reportError(e);}}
 finally{nest=outer;}
 if(t.every&&!t.dead){t.due=vt+t.every;t.seq=++ids;ins(t);}else{live.delete(t.id);}}
function release(){if(pending>0){pending--;}if(pending===0){var w=waiters;waiters=[];w.forEach(function(f){f();});}}
var fin={},onnet=[],PO=G.PerformanceObserver,po=null;
function took(es){es.forEach(function(e){fin[e.name]=(fin[e.name]||0)+1;});}
if(PO){try{po=new PO(function(l){took(l.getEntries());});po.observe({type:'resource',buffered:true});}catch(e){po=null;}}
function netDone(u){if(po){took(po.takeRecords());}return fin[u]||0;}
function reqUrl(u){try{return abs(u&&typeof u==='object'&&'url' in u?u.url:u).split('#')[0];}catch(e){return null;}}
function onNet(){for(var i=0;i<onnet.length;i++){if(netDone(onnet[i].u)<=onnet[i].k){return true;}}return false;}
function patient(t0,f){var go=function(){if(onNet()&&OD.now()-t0<NT){N.setTimeout(go,ST);}else{f();}};N.setTimeout(go,ST);}
function hold(u){pending++;var done=false,h=null,t0=OD.now();u=po&&u!=null?reqUrl(u):null;
 if(u){h={u:u,k:netDone(u)};onnet.push(h);}
 var off=function(){done=true;if(h){var i=onnet.indexOf(h);if(i>=0){onnet.splice(i,1);}}};
 patient(t0,function(){if(!done){off();stalled(1);release();}});
 return function(){if(!done){off();release();}};}
function orderer(){var seq=0,next=0,got={},armed=-1;
 function drain(){while(got[next]){var f=got[next];delete got[next];next++;try{f();}catch(e){}}arm();}
 function arm(){if(armed===next){return;}for(var k in got){armed=next;var at=next;
   patient(OD.now(),function(){if(next===at){stalled(1);next++;drain();}});return;}}
 return {ticket:function(){return seq++;},ready:function(s){return s===next;},
  arrive:function(s,f){if(s<next){f();return;}got[s]=f;drain();}};}
var net=orderer(),bodies=orderer();
function held(v){try{return !!(v&&typeof v==='object'&&v.headers&&typeof v.headers.get==='function'&&v.headers.get('x-webfreeze-held'));}catch(e){return false;}}
function ordered(o,pr,r,s){return new Promise(function(ok,no){pr.then(function(v){o.arrive(s,function(){r();if(!held(v)){ok(v);}});},
 function(e){o.arrive(s,function(){r();no(e);});});});}
if(G.fetch){var F=G.fetch;G.fetch=function(u){var r=hold(u),s=net.ticket(),pr;try{pr=F.apply(this,arguments);}catch(e){net.arrive(s,r);throw e;}
 return ordered(net,pr.then(function(v){if(v&&typeof v==='object'){fetched.add(v);}return v;}),r,s);};}
var BD=G.Response&&G.ReadableStream&&Object.getOwnPropertyDescriptor(Response.prototype,'body'),fetched=new WeakSet(),views=new WeakMap(),CH=65536;
function rechunk(own){var rd=null,buf=[],have=0,end=false,shut=false,rel=null,wake=null,ctl0=null,out,RSP=G.ReadableStream.prototype;
 function off(){if(rel){var f=rel;rel=null;f();}}
 function woke(){if(wake){var w=wake;wake=null;w();}}
 function shutIfDone(){if(end&&have===0&&!shut&&ctl0){shut=true;ctl0.close();if(ctl0.byobRequest){ctl0.byobRequest.respond(0);}}}
 function fill(){rd.read().then(function(x){if(shut&&!end){return;}
   if(x.done){end=true;off();if(!wake){shutIfDone();}}else{if(x.value&&x.value.byteLength){buf.push(new Uint8Array(x.value));have+=x.value.byteLength;}fill();}woke();},
  function(e){off();if(ctl0&&!shut){shut=true;try{ctl0.error(e);}catch(x){}}woke();});}
 function start(){if(rd){return;}if(own.locked){throw new TypeError("Failed to execute 'getReader' on 'ReadableStream': ReadableStreamDefaultReader constructor can only accept readable streams that are not yet locked to a reader");}
  rd=own.getReader();rel=hold(null);fill();}
 function take(){var o=new Uint8Array(Math.min(have,CH)),k=0;
  while(k<o.length){var b=buf[0],m=Math.min(b.length,o.length-k);o.set(b.subarray(0,m),k);k+=m;
   if(m===b.length){buf.shift();}else{buf[0]=b.subarray(m);}}have-=o.length;return o;}
 out=new G.ReadableStream({type:'bytes',start:function(c){ctl0=c;},
  pull:function(ctl){start();return new Promise(function(ok){(function more(){
    if(shut){return ok();}
    if(have>=CH||(end&&have>0)){ctl.enqueue(take());shutIfDone();return ok();}
    if(end){shutIfDone();return ok();}
    wake=more;})();});},
  cancel:function(why){shut=true;end=true;buf=[];have=0;off();var r=hold(null);
   return Promise.resolve(rd?rd.cancel(why):own.cancel(why)).then(function(){r();},function(e){r();throw e;});}});
 var keys=['getReader','tee','pipeTo','pipeThrough','values'];if(G.Symbol&&Symbol.asyncIterator){keys.push(Symbol.asyncIterator);}
 keys.forEach(function(k){var f=RSP[k];if(typeof f!=='function'){return;}
  Object.defineProperty(out,k,{configurable:true,writable:true,value:function(){if(!rd&&own.locked){start();}var v=f.apply(out,arguments);start();return v;}});});
 var LK=Object.getOwnPropertyDescriptor(RSP,'locked');
 if(LK&&LK.get){Object.defineProperty(out,'locked',{configurable:true,get:function(){return (!rd&&own.locked)||LK.get.call(out);}});}
 return out;}
if(BD&&BD.get){
 Object.defineProperty(Response.prototype,'body',{configurable:true,enumerable:BD.enumerable,get:function(){
  var own=BD.get.call(this);if(!own||!fetched.has(this)){return own;}var v=views.get(own);if(!v){v=rechunk(own);views.set(own,v);}return v;}});
 var RCL=Response.prototype.clone;
 if(RCL){Response.prototype.clone=function(){var c=RCL.apply(this,arguments);if(fetched.has(this)){fetched.add(c);}return c;};}}
if(G.Blob){['arrayBuffer','text','bytes'].forEach(function(m){var o=Blob.prototype[m];
 if(o){Blob.prototype[m]=function(){var r=hold(null),pr;try{pr=o.apply(this,arguments);}catch(e){r();throw e;}
  return pr.then(function(v){r();return v;},function(e){r();throw e;});};}});}
if(G.Response){['text','json','arrayBuffer','blob','formData'].forEach(function(m){var o=Response.prototype[m];
 if(o){Response.prototype[m]=function(){var r=hold(fetched.has(this)?this.url:null),s=bodies.ticket(),pr;try{pr=o.apply(this,arguments);}catch(e){bodies.arrive(s,r);throw e;}
  return ordered(bodies,pr,r,s);};}});}
if(G.XMLHttpRequest){
 var XP=XMLHttpRequest.prototype,XS=XP.send,XOP=XP.open,ET=EventTarget.prototype,XA=ET.addEventListener,XR=ET.removeEventListener,wm=new WeakMap();
 var END={readystatechange:1,load:1,loadend:1,error:1,abort:1,timeout:1};
 var call=function(fn,x,e){return typeof fn==='function'?fn.call(x,e):fn.handleEvent(e);};
 var wrapL=function(fn){if(!fn||(typeof fn!=='function'&&typeof fn!=='object')){return fn;}var w=wm.get(fn);
  if(!w){w=function(e){var x=this;if((x.__wfQ&&!x.__wfGo||x.__wfHeld)&&END[e.type]&&(e.type!=='readystatechange'||x.readyState===4)){if(!x.__wfHeld){x.__wfQ.push([fn,x,e]);}return;}
   return call(fn,x,e);};wm.set(fn,w);}return w;};
 XP.addEventListener=function(t,fn,o){return XA.call(this,t,wrapL(fn),o);};
 XP.removeEventListener=function(t,fn,o){return XR.call(this,t,(fn&&wm.get(fn))||fn,o);};
 ['onreadystatechange','onload','onloadend','onerror','onabort','ontimeout'].forEach(function(h){
  var pr=XP,d=null;while(pr&&!(d=Object.getOwnPropertyDescriptor(pr,h))){pr=Object.getPrototypeOf(pr);}
  if(!d||!d.set){return;}
  Object.defineProperty(XP,h,{configurable:true,enumerable:d.enumerable,get:function(){return (this.__wfH&&this.__wfH[h])||null;},
   set:function(v){if(!this.__wfH){this.__wfH={};}this.__wfH[h]=typeof v==='function'?v:null;d.set.call(this,typeof v==='function'?wrapL(v):v);}});});
 XP.open=function(m,u,a){this.__wfSync=arguments.length>2&&!a;this.__wfU=u;return XOP.apply(this,arguments);};
 XP.send=function(){var x=this;if(x.__wfSync){return XS.apply(x,arguments);}
  var r=hold(x.__wfU),s=net.ticket();x.__wfQ=[];x.__wfGo=false;x.__wfIn=false;x.__wfHeld=false;x.__wfS=s;x.__wfR=r;
  if(!x.__wfL){x.__wfL=true;XA.call(x,'readystatechange',function(){if(x.readyState!==4||x.__wfIn||!x.__wfQ){return;}x.__wfIn=true;
   var s2=x.__wfS,r2=x.__wfR,hd=false;try{hd=!!x.getResponseHeader('x-webfreeze-held');}catch(e){}
   if(hd){x.__wfHeld=true;}
   net.arrive(s2,function(){r2();if(hd){x.__wfQ=null;return;}x.__wfGo=true;var items=x.__wfQ||[];x.__wfQ=null;
    items.forEach(function(it){try{call(it[0],it[1],it[2]);}catch(e){if(G.reportError){G.reportError(e);}}});});});}
  try{return XS.apply(x,arguments);}catch(e){x.__wfQ=null;net.arrive(s,r);throw e;}};}
var notes=[],observers=0;
if(!WK){['ResizeObserver','IntersectionObserver'].forEach(function(name){var O=G[name];if(!O){return;}
 var Wr=function(cb,opts){if(!(this instanceof Wr)){throw new TypeError("Failed to construct '"+name+"': Please use the 'new' operator");}
  var k=(name==='ResizeObserver'?0:1e9)+observers++,o=new O(function(entries){notes.push([cb,entries,o,k]);},opts);return o;};
 Wr.prototype=O.prototype;try{Object.defineProperty(O.prototype,'constructor',{value:Wr,configurable:true,writable:true});}catch(e){}
 G[name]=Wr;});}
function noted(){var ns=notes;notes=[];ns.sort(function(a,b){return a[3]-b[3];});ns.forEach(function(x){try{x[0].call(x[2],x[1],x[2]);}catch(e){if(G.reportError){G.reportError(e);}}});return ns.length;}
var chan=MC?new MC():null,nexts=[];
if(MC&&PPM){G.MessageChannel=function MessageChannel(){var c2=new MC();[c2.port1,c2.port2].forEach(function(port){
  port.postMessage=function(){var a=arguments;live.get(add('t',function(){PPM.apply(port,a);},vt,[],0)).nest=nest;};});return c2;};
 G.MessageChannel.prototype=MC.prototype;}
if(chan){chan.port1.onmessage=function(){var f=nexts.shift();if(f){f();}};}
function later(f){if(chan){nexts.push(f);chan.port2.postMessage(0);}else{N.setTimeout(f,0);}}
function round(i,done,k){if(i>=chans.length){done(k);return;}var ch=chans[i];
 if(ch.dead){round(i+1,done,k);return;}
 var over=false,st=N.setTimeout(function(){if(!over){over=true;ch.cb=null;ch.dead=true;stalled(1);round(i+1,done,k);}},NT);
 ch.cb=function(m){if(!over){over=true;N.clearTimeout(st);round(i+1,done,k+m);}};
 try{ch.pm.call(ch.t,{__wf:'ping',l:limit,c:left});}catch(e){over=true;N.clearTimeout(st);ch.dead=true;round(i+1,done,k);}}
function pump(){return new Promise(function(done){var n=0,framed=false;
 function end(){if(limit>vt){vt=limit;}done(n);}
 function step(){if(pending>0){waiters.push(function(){later(step);});return;}
  while(q.length&&q[0].dead){q.shift();}
  if(left<=0){done(n);return;}
  if(!q.length||q[0].due>limit){
   if(observers&&!framed){framed=true;N.requestAnimationFrame(function(){N.requestAnimationFrame(function(){later(step);});});return;}
   if(notes.length){var k=noted();n+=k;left-=k;framed=false;later(step);return;}
   framed=false;
   if(chans.length){round(0,function(k){if(k>0){n+=k;left-=k;later(step);}else{end();}},0);return;}
   end();return;}
  var t=q.shift();left--;n++;fire(t);later(step);}
 later(step);});}
if(!WK){
 var ended=new WeakSet(),endOf=function(e){ended.add(e.target);};
 document.addEventListener('load',endOf,true);document.addEventListener('error',endOf,true);
 var els=orderer(),tix=new WeakMap(),redo=new WeakSet(),give=function(el){var s=tix.get(el);if(s!=null){tix.delete(el);els.arrive(s,function(){});}};
 var turn=function(e){var el=e.target,s=el&&tix.get(el);if(redo.has(e)||s==null){return;}
  if(els.ready(s)){N.setTimeout(function(){give(el);},0);return;}
  tix.delete(el);e.stopImmediatePropagation();var type=e.type;
  els.arrive(s,function(){var x=new Event(type);redo.add(x);el.dispatchEvent(x);});};
 document.addEventListener('load',turn,true);G.addEventListener('error',turn,true);
 var runs=function(el){var t=(el.type||'').toLowerCase();return !el.noModule&&(!t||t==='module'||/(java|ecma)script/.test(t));};
 var loads=function(el){var tag=el.localName;if(el.__wfHeld||ended.has(el)){return false;}
  if(tag==='script'){return !!el.src&&runs(el)&&mine.has(el);}
  if(tag==='iframe'){return !!el.src&&(el.loading||'').toLowerCase()!=='lazy';}
  if(tag==='link'){var rel=el.rel||'';if(!el.href||el.sheet||el.disabled){return false;}
   return /(^|\s)(stylesheet|modulepreload)(\s|$)/i.test(rel)||(/(^|\s)preload(\s|$)/i.test(rel)&&!!el.as);}
  if(tag==='img'){return !!(el.currentSrc||el.src)&&!el.complete&&(el.loading||'').toLowerCase()!=='lazy';}
  return false;};
 var watch=function(el){if(!loads(el)){return;}el.__wfHeld=true;var r=hold(el.localName==='link'?el.href:el.currentSrc||el.src);el.addEventListener('load',r);el.addEventListener('error',r);
  tix.set(el,els.ticket());var own=function(e){if(!redo.has(e)){give(el);}};el.addEventListener('load',own);el.addEventListener('error',own);};
 var SEL='script[src],link[href],img,iframe[src]';
 var added=function(records){records.forEach(function(rec){rec.addedNodes.forEach(function(nd){if(nd.nodeType!==1||!(watching||mine.has(nd))){return;}
  watch(nd);if(nd.querySelectorAll){nd.querySelectorAll(SEL).forEach(function(el){watch(el);});}});
  rec.removedNodes.forEach(function(nd){if(nd.nodeType!==1||nd.isConnected){return;}
   [nd].concat(nd.querySelectorAll?Array.prototype.slice.call(nd.querySelectorAll('link,iframe')):[]).forEach(function(el){
    if(el.localName==='link'||el.localName==='iframe'){give(el);}});});});};
 new MutationObserver(added).observe(document,{childList:true,subtree:true});
 var startWatching=function(){if(watching){return;}watching=true;
  document.querySelectorAll('iframe[src]').forEach(function(el){watch(el);});
  var d=Object.getOwnPropertyDescriptor(HTMLImageElement.prototype,'src');
  if(d&&d.set){Object.defineProperty(HTMLImageElement.prototype,'src',{configurable:true,enumerable:d.enumerable,get:d.get,
   set:function(v){d.set.call(this,v);if(!this.isConnected){watch(this);}}});}};
 var CE=Document.prototype.createElement,mine=new WeakSet();
 Document.prototype.createElement=function(){var el=CE.apply(this,arguments);if(el.localName==='script'){el.async=false;}mine.add(el);return el;};
 Object.defineProperty(G,'__wfPump',{value:function(tok,horizon,cap){startWatching();
  if(tok!==token){token=tok;limit=vt+horizon;left=cap;}
  while(q.length&&q[0].dead){q.shift();}
  if(pending===0&&!chans.length&&!observers&&(!q.length||q[0].due>limit)){if(limit>vt){vt=limit;}return 0;}
  return pump();}});
}else{
 var out=[],open=false,sent=0;
 var onPing=function(e,reply){var d=e.data;if(!(d&&d.__wf==='ping')){return;}e.stopImmediatePropagation();
  open=true;var k=out.length,o=out;out=[];sent=0;
  o.forEach(function(m){try{m[1].apply(m[0],m[2]);}catch(x){}});
  limit=d.l;left=d.c;pump().then(function(r){open=false;var st=G.__wfStalled||0;G.__wfStalled=0;reply({__wf:'ack',n:k+r+sent,s:st});});};
 if(!c.sh){var OPM=G.postMessage;
  G.postMessage=function(){if(open){sent++;return OPM.apply(G,arguments);}out.push([G,OPM,arguments]);};
  G.addEventListener('message',function(e){onPing(e,function(a){OPM.call(G,a);});});}
 else{G.addEventListener('connect',function(e){var port=e.ports[0];if(!port){return;}var P=port.postMessage;
  port.postMessage=function(){if(open){sent++;return P.apply(port,arguments);}out.push([port,P,arguments]);};
  port.addEventListener('message',function(ev){onPing(ev,function(a){P.call(port,a);});});port.start();});}
}
}
if(G.EventSource&&G.EventTarget&&G.fetch&&G.TextDecoder&&G.MessageEvent){var ESM=new WeakMap(),OSH='x-webfreeze-open-stream';
 var ESW=class EventSource extends EventTarget{
  constructor(u,o){super();var url;try{url=new URL(String(u),B||G.location.href).href;}
   catch(e){throw new DOMException("Failed to construct 'EventSource': The URL '"+u+"' is invalid.",'SyntaxError');}
   var st={url:url,cred:!!(o&&o.withCredentials),rs:0,retry:3000,last:'',ctl:null,timer:null,h:{}};ESM.set(this,st);esGo(this,st);}
  get url(){return ESM.get(this).url;}
  get withCredentials(){return ESM.get(this).cred;}
  get readyState(){return ESM.get(this).rs;}
  close(){var st=ESM.get(this);st.rs=2;var k=st.ctl;st.ctl=null;if(k&&k.abort){try{k.abort();}catch(e){}}
   if(st.timer!==null){G.clearTimeout(st.timer);st.timer=null;}}};
 ['open','message','error'].forEach(function(k){Object.defineProperty(ESW.prototype,'on'+k,{configurable:true,enumerable:true,
  get:function(){return ESM.get(this).h[k]||null;},
  set:function(f){var st=ESM.get(this),had=k in st.h;st.h[k]=typeof f==='function'?f:null;
   if(!had){this.addEventListener(k,function(e){var g=st.h[k];if(g){g.call(this,e);}});}}});});
 [['CONNECTING',0],['OPEN',1],['CLOSED',2]].forEach(function(kv){Object.defineProperty(ESW,kv[0],{value:kv[1],enumerable:true});
  Object.defineProperty(ESW.prototype,kv[0],{value:kv[1],enumerable:true});});
 var esAgain=function(es,st){if(st.rs===2){return;}st.rs=0;st.ctl=null;es.dispatchEvent(new Event('error'));
  if(st.rs===0&&st.timer===null){st.timer=G.setTimeout(function(){st.timer=null;if(st.rs===0&&!st.ctl){esGo(es,st);}},st.retry);}};
 var esFail=function(es,st){if(st.rs===2){return;}st.rs=2;st.ctl=null;es.dispatchEvent(new Event('error'));};
 var esGo=function(es,st){var ctl=G.AbortController?new AbortController():{},hd={Accept:'text/event-stream'},same=false;st.ctl=ctl;
  try{same=new URL(st.url).origin===new URL(B||G.location.href).origin;}catch(e){}
  if(same){hd['Cache-Control']='no-cache';if(st.last){hd['Last-Event-ID']=st.last;}}
  var mine=function(){return st.ctl===ctl&&st.rs!==2;};
  Promise.resolve().then(function(){return G.fetch(st.url,{headers:hd,credentials:st.cred?'include':'same-origin',mode:'cors',cache:'no-store',signal:ctl.signal});}).then(function(r){
   if(!mine()){try{if(r.body){r.body.cancel();}}catch(e){}return;}
   var ct=(r.headers.get('content-type')||'').split(';')[0].trim().toLowerCase();
   if(r.status!==200||ct!=='text/event-stream'||!r.body){esFail(es,st);return;}
   var kept=!!r.headers.get(OSH),origin='',rd=r.body.getReader(),dec=new TextDecoder('utf-8'),buf='',ev={t:'',d:'',id:st.last};
   try{origin=new URL(r.url||st.url).origin;}catch(e){}
   st.rs=1;es.dispatchEvent(new Event('open'));
   var line=function(l){if(l===''){st.last=ev.id;var d=ev.d,t=ev.t||'message';ev.t='';ev.d='';if(d===''){return;}
     if(d.charAt(d.length-1)==='\n'){d=d.slice(0,-1);}
     if(mine()){es.dispatchEvent(new MessageEvent(t,{data:d,origin:origin,lastEventId:st.last}));}return;}
    if(l.charAt(0)===':'){return;}
    var i=l.indexOf(':'),f=i<0?l:l.slice(0,i),v=i<0?'':l.slice(i+1);if(v.charAt(0)===' '){v=v.slice(1);}
    if(f==='event'){ev.t=v;}else if(f==='data'){ev.d+=v+'\n';}else if(f==='id'){if(v.indexOf('\0')<0){ev.id=v;}}
    else if(f==='retry'&&/^[0-9]+$/.test(v)){st.retry=parseInt(v,10);}};
   var feed=function(s,last){buf+=s;var re=/\r\n|\r|\n/g,m,at=0;
    while(mine()&&(m=re.exec(buf))){if(m[0]==='\r'&&m.index===buf.length-1&&!last){break;}line(buf.slice(at,m.index));at=re.lastIndex;}
    buf=buf.slice(at);};
   var more=function(){rd.read().then(function(x){if(!mine()){try{rd.cancel();}catch(e){}return;}
     if(x.done){feed(dec.decode(),true);if(mine()&&!kept){esAgain(es,st);}return;}
     feed(dec.decode(x.value,{stream:true}),false);more();},
    function(){if(mine()){esAgain(es,st);}});};
   more();},
  function(){if(mine()){esAgain(es,st);}});};
 G.EventSource=ESW;}
if(c.w&&G.WebSocket){var WS0=G.WebSocket,MK=c.w,opening=0,made=0;G.__wfSockets=0;
 Object.defineProperty(G,'__wfSocketsOpening',{get:function(){return opening;},configurable:true});
 var WSW=function(u,pr){if(!(this instanceof WSW)){throw new TypeError("Failed to construct 'WebSocket': Please use the 'new' operator");}
  var s0=S,ws;++made;S=GV0?GV0.call(G.crypto,new Uint32Array(1))[0]>>>0:(S0^Math.imul(0x9E3779B9,made))>>>0;try{ws=arguments.length>1?new WS0(u,pr):new WS0(u);}finally{S=s0;}
  var waits=[],was=false;
  var answered=function(){if(!was){was=true;opening--;}};opening++;
  ws.addEventListener('open',answered,true);ws.addEventListener('close',answered,true);
  var wait=function(){sockets(1);waits.push(wsHold?wsHold(null):null);};
  var done=function(){if(waits.length){sockets(-1);var r=waits.shift();if(r){r();}}};
  wait();
  ws.addEventListener('message',function(e){if(e.data===MK){e.stopImmediatePropagation();G.__wfMarks=(G.__wfMarks|0)+1;done();}},true);
  ws.addEventListener('close',function(){while(waits.length){done();}},true);
  var SD=ws.send;Object.defineProperty(ws,'send',{value:function(){var r=SD.apply(ws,arguments);wait();return r;},configurable:true,writable:true});
  return ws;};
 WSW.prototype=WS0.prototype;try{Object.setPrototypeOf(WSW,WS0);}catch(e){}
 try{Object.defineProperty(WS0.prototype,'constructor',{value:WSW,configurable:true,writable:true});}catch(e){}
 G.WebSocket=WSW;}
}"""

# What a frame's document the replay does not serve (an ``about:srcdoc`` frame, an ``about:blank``
# one its parent's script writes) is made to see: no runtime is injected there, so it takes its
# parent's, where the parent has one: its Date, timers (in the parent's pumped queue), generators,
# performance clock, fetch (held by the parent's pump), WebSocket (served from its recording) and EventSource. Run first in every document of the agent
# environment's browser contexts (Playwright's ``add_init_script``); elsewhere it does nothing.
FRAME_RUNTIME_JS = r"""(() => {
  if (window === window.top || location.protocol !== 'about:') return;
  let P;
  try { P = window.parent; if (!P.__wfNative) return; } catch (e) { return; }
  const own = (k, v) => { try { Object.defineProperty(window, k, {value: v, configurable: true, writable: true}); } catch (e) {} };
  ['Date', 'setTimeout', 'setInterval', 'clearTimeout', 'clearInterval', 'requestAnimationFrame', 'cancelAnimationFrame',
   'requestIdleCallback', 'cancelIdleCallback', 'WebSocket', 'EventSource', '__wfNative'].forEach((k) => { if (k in P) own(k, P[k]); });
  if (P.fetch) own('fetch', function () { return P.fetch.apply(P, arguments); });
  Math.random = P.Math.random;
  try { Object.defineProperty(Performance.prototype, 'now', {value: () => P.performance.now(), configurable: true, writable: true}); } catch (e) {}
  try { Object.defineProperty(Performance.prototype, 'timeOrigin', {get: () => P.performance.timeOrigin, configurable: true}); } catch (e) {}
  if (window.Crypto && P.crypto) {
    try { Object.defineProperty(Crypto.prototype, 'getRandomValues', {value: (a) => P.crypto.getRandomValues(a), configurable: true, writable: true}); } catch (e) {}
    try { Object.defineProperty(Crypto.prototype, 'randomUUID', {value: () => P.crypto.randomUUID(), configurable: true, writable: true}); } catch (e) {}
  }
})();"""

# What may come before a document's first element without starting its body: a byte order mark,
# white space, comments, a doctype, processing instructions (XHTML); then the start tags of <html>
# and <head> (attribute values quoted with '>' inside them included).
_LEADING = re.compile(rb"\xef\xbb\xbf|\s+|<!--(?:-?>|.*?--!?>)|<!doctype[^>]*>|<\?[^>]*>", re.IGNORECASE | re.DOTALL)
_ATTRS = rb"""(?:[\s/](?:[^>"']|"[^"]*"|'[^']*')*)?>"""
_HTML = re.compile(rb"<html" + _ATTRS, re.IGNORECASE)
_HEAD = re.compile(rb"<head" + _ATTRS, re.IGNORECASE)


def page_seed(run_seed: int, url: str) -> int:
    """The 32-bit seed a page's generator starts from."""
    digest = hashlib.sha256(f"{run_seed}\n{url}".encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big")


# How long the pump waits for a load (and the completions' order for an answer) before it stops
# waiting and counts it in ``__wfStalled`` (which the browser backend records in the step's
# provenance). What the page waits for decides: while any load the page waits for is still on the
# network (no Resource Timing entry of its URL has come since it began), the wait goes on, up to
# NETWORK_STALL_MS, a safety net far above what a loaded machine takes (Dash's 3.5 MB plotly.js:
# under 4 s beside a dozen busy processes, and 5 s was the whole bound once); a load whose request
# has ended but whose event has not come (an element removed while it loaded) is given up after
# STALL_MS. A worker that does not answer the pump's turn within NETWORK_STALL_MS is left out.
STALL_MS = 5000
NETWORK_STALL_MS = 60_000


# The message an in-process replay sends on a page's WebSocket after each batch of the recorded
# conversation it delivers (simulator/replay_route.py): the runtime (with ``sockets``) takes it off
# the socket before any of the page's listeners and counts the batch delivered. From a socket's
# creation, and from each message the page sends, until that batch (or the socket's close), the
# page has a delivery pending: ``__wfSockets`` counts them (the settles of ``replay check`` and the
# crawl's check wait for 0) and, with the pumped timers, the pump waits for them as for a load.
SOCKET_MARK = "\u0000webfreeze:socket-delivered"


def runtime_config(captured_at: str, seed: int, *, timers: bool = False, sockets: bool = False,
                   worker_sockets: bool = False) -> dict:
    """The runtime's configuration for a page captured at ``captured_at`` (see RUNTIME_JS)."""
    ms = int(parse_time(captured_at).timestamp() * 1000)
    config = {"t": ms, "s": seed, "x": 1 if timers else 0, "st": STALL_MS, "nt": NETWORK_STALL_MS}
    if sockets:
        config["w"] = SOCKET_MARK
        if worker_sockets:
            config["wk"] = 1
    return config


def runtime_script(captured_at: str, seed: int, *, timers: bool = False, sockets: bool = False,
                   worker_sockets: bool = False) -> bytes:
    """The runtime for a page captured at ``captured_at``, its generator seeded with ``seed``; with
    ``timers``, the page's timers (and its workers') wait for the environment's pump and its
    network completions are delivered in request order; with ``sockets``, the page's WebSockets
    count their pending deliveries (:data:`SOCKET_MARK`), and with ``worker_sockets`` too, its
    dedicated workers' (theirs counted in the page's)."""
    config = json.dumps(runtime_config(captured_at, seed, timers=timers, sockets=sockets,
                                       worker_sockets=worker_sockets), separators=(",", ":"))
    return (b"<script>(function(){(" + RUNTIME_JS.encode("ascii") + b")(" + config.encode("ascii")
            + b");})();</script>")


def random_script(seed: int) -> bytes:
    """The runtime's generator alone (``Math.random``, ``crypto.getRandomValues``, ``crypto.randomUUID``),
    seeded with ``seed``, for a page a recording browser loads (recorder/addon.py): the page draws
    the numbers a replay's page draws, so an id it makes up and sends (a message id over a
    WebSocket, a cache-busting parameter) is the one the replay's page will send. Nothing else of
    the page's world is touched (its clock and timers are the live ones), the page's seed is left
    for a replay's runtime to take again (``__wfRuntime`` is not set), and the script takes itself
    out of the document once run."""
    config = json.dumps({"t": 0, "s": seed, "ro": 1}, separators=(",", ":"))
    return (b"<script>(function(){(" + RUNTIME_JS.encode("ascii") + b")(" + config.encode("ascii")
            + b");})();</script>")


def parsed_as_xml(content_type: str) -> bool:
    """Whether a document of ``content_type`` is parsed as XML (XHTML served as such): :func:`inject`'s ``xml``."""
    return content_type.lower().lstrip().startswith("application/xhtml+xml")


def inject(html: bytes, script: bytes, *, xml: bool = False) -> bytes:
    """Insert ``script`` before anything of the page can run: first inside ``<head>`` when its
    start tag opens the document (after a byte order mark, a doctype, comments and ``<html>``),
    else where the document's first other content begins. Tags are found by walking the document's
    start, as a parser meets them, not by searching: a ``<head>`` written in a comment or in a
    script's string is not the head. ``xml``: the document is parsed as XML (XHTML served as
    ``application/xhtml+xml``), where the script's ``&&`` and ``<`` would end the page in a parse
    error: its code goes inside a CDATA section (behind ``//``, so that it reads as JavaScript too)."""
    if xml and script.startswith(b"<script>") and script.endswith(b"</script>"):
        script = b"<script>//<![CDATA[\n" + script[8:-9] + b"\n//]]></script>"
    at = pos = 0
    while pos < len(html):
        m = _LEADING.match(html, pos)
        if m:
            pos = at = m.end()
            continue
        m = _HEAD.match(html, pos)
        if m:
            return html[: m.end()] + script + html[m.end():]
        m = _HTML.match(html, pos)
        if not m:
            break  # the document's content begins: the runtime goes first
        pos = at = m.end()
    return html[:at] + script + html[at:]
