// A dedicated worker: its own random numbers, clocks and timers.
// crypto.randomUUID is there on secure origins only (the replay's runtime always gives one)
function uuid() {
  if (crypto.randomUUID) return crypto.randomUUID();
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => (b + 256).toString(16).slice(1)).join('');
}
function values(tag) {
  return [tag, Math.random().toFixed(8), Date.now(), performance.now(), uuid()].join(' ');
}
postMessage(values('start'));
setTimeout(() => postMessage(values('timer')), 50);
onmessage = (e) => { postMessage(values(e.data)); };
