// Everything here draws on randomness, clocks or the order of completions; the visible text
// reaches the same final state on every load, the values go to aria-labels and to the bar's colour.
// crypto.randomUUID is there on secure origins only (the replay's runtime always gives one)
function uuid() {
  if (crypto.randomUUID) return crypto.randomUUID();
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => (b + 256).toString(16).slice(1)).join('');
}
const seen = [];
function label(id, text) { document.getElementById(id).setAttribute('aria-label', text); }
function text(id, value) { document.getElementById(id).textContent = value; }

label('page-values', ['page', Math.random().toFixed(8), Date.now(), performance.now(),
                      uuid(), performance.timeOrigin].join(' '));

const worker = new Worker('worker.js');
let messages = 0;
worker.onmessage = (e) => {
  messages++;
  seen.push(e.data);
  text('worker', 'Worker messages: ' + messages);
  label('worker-values', seen.join(' | '));
};
worker.postMessage('hello');

fetch('data/first.json').then((r) => r.json())
  .then((a) => fetch('data/' + a.next).then((r) => r.json()).then((b) => [a, b]))
  .then(([a, b]) => fetch('data/' + b.next).then((r) => r.json()).then((c) => [a, b, c]))
  .then((docs) => text('chain', 'Fetch chain: ' + docs.map((d) => d.name).join(', ')));

const arrived = [];
['left', 'right'].forEach((side) => {
  fetch('data/' + side + '.json').then((r) => r.json()).then((d) => {
    arrived.push(d.name + ':' + Math.random().toFixed(6));
    if (arrived.length === 2) { text('race', 'Race: done'); label('race-order', arrived.join(' ')); }
  });
});

let ticks = 0;
(function tick() { if (++ticks <= 3) { text('ticks', 'Timer ticks: ' + ticks); setTimeout(tick, 100); } })();
let frames = 0;
(function frame() { if (++frames <= 10) { text('frames', 'Frames: ' + frames); requestAnimationFrame(frame); } })();

let rolls = 0;
document.getElementById('roll').addEventListener('click', () => {
  rolls++;
  text('rolls', 'Rolls: ' + rolls);
  worker.postMessage('roll');
});

window.addEventListener('load', () => {
  const bar = document.getElementById('bar');
  bar.style.backgroundColor = 'hsl(' + Math.floor(Math.random() * 360) + ', 60%, 50%)';
  bar.classList.add('grown');
});
