// A dedicated worker: its own random numbers, clocks and timers.
function values(tag) {
  return [tag, Math.random().toFixed(8), Date.now(), performance.now(), crypto.randomUUID()].join(' ');
}
postMessage(values('start'));
setTimeout(() => postMessage(values('timer')), 50);
onmessage = (e) => { postMessage(values(e.data)); };
