(function () {
'use strict';
var body = document.body, errors = 0, rendered = 0;
function noteError(msg) {
  errors++;
  body.setAttribute('data-errors', errors);
  body.setAttribute('data-error-text', String(msg).slice(0, 300));
}
window.addEventListener('error', function (e) { noteError(e.message || 'error'); });
var consoleError = console.error;
console.error = function () { noteError(Array.prototype.join.call(arguments, ' ')); consoleError.apply(console, arguments); };
function drew() {
  rendered++;
  body.setAttribute('data-rendered', rendered);
  body.setAttribute('data-render-ms', Math.round(performance.now()));
}
var D = JSON.parse(document.getElementById('data').textContent);
var UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
var COL = {alloc: '#3266cc', pend: '#f0960e', pinned: '#f3aaaa', free: '#dde1e6', req: '#2e9e57',
           res: '#7d8796', oom: '#d62b2b', ext: '#8e44ad', unused: '#e0731a'};

function bytes(n) {
  var i = 0;
  n = +n;
  while (Math.abs(n) >= 1024 && i < UNITS.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(2) : n.toFixed(0)) + ' ' + UNITS[i];
}
function pow2(k) {
  var i = Math.floor(k / 10);
  return Math.pow(2, k - 10 * i) + ' ' + UNITS[Math.min(i, UNITS.length - 1)];
}
function pct(x) { return (100 * x).toFixed(1) + ' %'; }
function hex(n) { return '0x' + Number(n).toString(16); }
function el(tag, attrs, text) {
  var e = document.createElement(tag);
  for (var k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}
function canvas(id, h) {
  var c = document.getElementById(id);
  c.style.width = '100%';
  var w = Math.max(320, Math.floor(c.getBoundingClientRect().width));
  var r = window.devicePixelRatio || 1;
  c.width = Math.round(w * r);
  c.height = Math.round(h * r);
  c.style.width = w + 'px';
  c.style.height = h + 'px';
  var g = c.getContext('2d');
  g.setTransform(r, 0, 0, r, 0, 0);
  return {c: c, g: g, w: w, h: h};
}
function niceStep(max, n) {
  var raw = max / n, p = Math.pow(10, Math.floor(Math.log(raw) / Math.LN10)), e = raw / p;
  return p * (e >= 7.5 ? 10 : e >= 3.5 ? 5 : e >= 1.5 ? 2 : 1);
}
/* An x-axis label centred under its tick at x, moved left as far as it needs
 * to end inside the canvas: the last tick sits at the plot's right edge, and
 * a long label there ("1000000") would be cut off.  textAlign is 'center'. */
function xLabel(C, text, x, y) {
  var w = C.g.measureText(text).width;
  C.g.fillText(text, Math.min(x, C.w - 2 - w / 2), y);
}
function byteTicks(max) {
  var unit = 1;
  for (var i = UNITS.length - 1; i > 0; i--) if (max >= Math.pow(1024, i)) { unit = Math.pow(1024, i); break; }
  var step = niceStep(max / unit, 5) * unit, t = [];
  for (var v = 0; v <= max * 1.0001; v += step) t.push(v);
  return t;
}
var tip = document.getElementById('tip');
function showTip(ev, html) {
  tip.innerHTML = html;
  tip.style.display = 'block';
  var x = ev.clientX + 14, y = ev.clientY + 14;
  var r = tip.getBoundingClientRect();
  if (x + r.width > window.innerWidth - 8) x = ev.clientX - r.width - 14;
  if (y + r.height > window.innerHeight - 8) y = Math.max(8, ev.clientY - r.height - 14);
  tip.style.left = x + 'px';
  tip.style.top = y + 'px';
}
function hideTip() { tip.style.display = 'none'; }
function esc(s) { return String(s).replace(/[&<>"]/g, function (c) { return {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'}[c]; }); }

/* ---- time charts: min/max band per bucket, the max drawn as a line ---- */
function timeChart(id, h, lines, yMax, yFmt, yTicks) {
  var S = D.series, nb = S.nbuckets, E = S.events;
  var C = canvas(id, h), g = C.g, L = 78, R = 12, T = 10, B = 30, W = C.w - L - R, H = C.h - T - B;
  function X(k) { return L + (k + 0.5) / nb * W; }
  function Y(v) { return T + H - Math.min(v, yMax) / yMax * H; }
  g.font = '11px system-ui, sans-serif';
  g.strokeStyle = '#e3e6ea';
  g.fillStyle = '#555';
  g.textAlign = 'right';
  g.textBaseline = 'middle';
  yTicks.forEach(function (v) {
    var y = Y(v);
    g.beginPath(); g.moveTo(L, y); g.lineTo(L + W, y); g.stroke();
    g.fillText(yFmt(v), L - 6, y);
  });
  g.textAlign = 'center';
  g.textBaseline = 'top';
  var xs = niceStep(Math.max(E, 1), 8);
  for (var e = 0; e <= E; e += xs) xLabel(C, String(e), L + e / E * W, T + H + 6);
  (D.ooms || []).forEach(function (o) {
    var x = L + (o + 0.5) / E * W;
    g.strokeStyle = COL.oom; g.setLineDash([3, 3]);
    g.beginPath(); g.moveTo(x, T); g.lineTo(x, T + H); g.stroke();
    g.setLineDash([]);
  });
  if (D.peak_event !== null) {
    var px = L + (D.peak_event + 0.5) / E * W;
    g.fillStyle = '#222';
    g.beginPath(); g.moveTo(px - 5, T); g.lineTo(px + 5, T); g.lineTo(px, T + 7); g.fill();
  }
  lines.forEach(function (s) {
    var mn = S.min[s.idx], mx = S.max[s.idx], k;
    g.globalAlpha = 0.22;
    g.fillStyle = s.color;
    g.beginPath();
    g.moveTo(X(0), Y(mx[0]));
    for (k = 1; k < nb; k++) g.lineTo(X(k), Y(mx[k]));
    for (k = nb - 1; k >= 0; k--) g.lineTo(X(k), Y(mn[k]));
    g.closePath();
    g.fill();
    g.globalAlpha = 1;
    g.strokeStyle = s.color;
    g.lineWidth = 1.5;
    g.beginPath();
    g.moveTo(X(0), Y(mx[0]));
    for (k = 1; k < nb; k++) g.lineTo(X(k), Y(mx[k]));
    g.stroke();
    g.lineWidth = 1;
  });
  g.strokeStyle = '#888';
  g.strokeRect(L, T, W, H);
  var leg = document.getElementById(id + '-legend');
  lines.forEach(function (s) {
    var item = el('span', {'class': 'key'});
    item.appendChild(el('i', {style: 'background:' + s.color}));
    item.appendChild(document.createTextNode(s.label));
    leg.appendChild(item);
  });
  if ((D.ooms || []).length) {
    var o = el('span', {'class': 'key'});
    o.appendChild(el('i', {style: 'background:' + COL.oom}));
    o.appendChild(document.createTextNode('OOM (' + D.oom_count + ')'));
    leg.appendChild(o);
  }
  C.c.addEventListener('mousemove', function (ev) {
    var r = C.c.getBoundingClientRect(), x = ev.clientX - r.left;
    if (x < L || x > L + W) { hideTip(); return; }
    var k = Math.min(nb - 1, Math.max(0, Math.floor((x - L) / W * nb)));
    var e0 = Math.floor(k * E / nb), e1 = Math.max(e0, Math.floor((k + 1) * E / nb) - 1);
    var html = '<b>events ' + e0 + (e1 > e0 ? '&ndash;' + e1 : '') + '</b>';
    lines.forEach(function (s) {
      var a = S.min[s.idx][k], b = S.max[s.idx][k];
      html += '<br><i style="background:' + s.color + '"></i>' + esc(s.label) + ': ' +
              (a === b ? yFmt(b) : yFmt(a) + ' &ndash; ' + yFmt(b));
    });
    showTip(ev, html);
  });
  C.c.addEventListener('mouseleave', hideTip);
  drew();
}

function memoryChart() {
  var S = D.series, m = 0;
  [0, 1, 2].forEach(function (q) { S.max[q].forEach(function (v) { if (v > m) m = v; }); });
  if (D.device_memory && D.oom_count) m = Math.max(m, D.device_memory);
  m = m > 0 ? m * 1.05 : 1;
  timeChart('c-mem', 300, [
    {idx: 1, color: COL.res, label: 'reserved'},
    {idx: 0, color: COL.alloc, label: 'allocated'},
    {idx: 2, color: COL.req, label: 'requested (live tensors: the lower bound)'}
  ], m, bytes, byteTicks(m));
}

function fragChart() {
  timeChart('c-frag', 220, [
    {idx: 6, color: COL.ext, label: 'external: 1 \u2212 largest free / free'},
    {idx: 7, color: COL.unused, label: 'unused: 1 \u2212 active / reserved'}
  ], 1, function (v) { return (100 * v).toFixed(0) + ' %'; }, [0, 0.25, 0.5, 0.75, 1]);
}

/* ---- segment maps: every byte reserved, packed in rows, to scale ---- */
var mapIndex = 0, highlight = -1, mapGeo = null;
/* With private pools (M.pools; a segment's pool index at s[9]) each pool is
 * its own group: a row naming it, then its segments from a row's start. */
function drawMap() {
  var M = D.maps[mapIndex];
  var segs = M.segs, blocks = M.blocks, n = segs.length, total = 0, i;
  var starts = new Array(n), order = [], labels = [];
  for (i = 0; i < n; i++) total += segs[i][1];
  var rows = Math.max(12, Math.min(64, 10 + Math.ceil(n / 3)));
  var rowH = 11, gap = 3, L = 8, T = 6;
  var per = Math.max(1, Math.ceil(total / rows)), end = 0;
  var groups = M.pools ? M.pools.length : 1;
  for (var p = 0; p < groups; p++) {
    if (M.pools) {
      end = Math.ceil(end / per) * per;
      var P = M.pools[p];
      labels.push({row: end / per, text: P[2] + ': ' + P[3] + ' segment' + (P[3] === 1 ? '' : 's') +
                   ', ' + bytes(P[4]) + ' reserved, ' + bytes(P[6]) + ' free, ' + P[8] + ' pinned'});
      end += per;
    }
    for (i = 0; i < n; i++) {
      if (M.pools && segs[i][9] !== p) continue;
      starts[i] = end; end += segs[i][1]; order.push(i);
    }
  }
  if (M.pools) rows = Math.max(1, Math.ceil(end / per));
  var C = canvas('c-map', T * 2 + rows * (rowH + gap)), g = C.g, W = C.w - 2 * L;
  g.clearRect(0, 0, C.w, C.h);
  g.font = '10px system-ui, sans-serif';
  g.textAlign = 'left'; g.textBaseline = 'middle'; g.fillStyle = '#1d2430';
  labels.forEach(function (lb) { g.fillText(lb.text, L + 2, T + lb.row * (rowH + gap) + rowH / 2, W - 4); });
  function span(off, len, color) {
    while (len > 0) {
      var row = Math.floor(off / per), col = off - row * per, take = Math.min(len, per - col);
      var x0 = L + col / per * W, w = Math.max(take / per * W, 0.7);
      g.fillStyle = color;
      g.fillRect(x0, T + row * (rowH + gap), w, rowH);
      off += take; len -= take;
    }
  }
  for (i = 0; i < n; i++) {
    var s = segs[i], pinned = s[3] & 4;
    for (var b = s[4]; b < s[4] + s[5]; b++) {
      var bl = blocks[b];
      span(starts[i] + bl[0], bl[1], bl[3] === 1 ? COL.alloc : bl[3] === 2 ? COL.pend : pinned ? COL.pinned : COL.free);
    }
  }
  g.fillStyle = '#1d2430';
  for (i = 0; i < n; i++) {
    var r0 = Math.floor(starts[i] / per), c0 = starts[i] - r0 * per;
    g.fillRect(L + c0 / per * W - 0.5, T + r0 * (rowH + gap) - 2, 1.5, rowH + 4);
  }
  if (highlight >= 0 && highlight < n) {
    g.strokeStyle = '#000';
    g.lineWidth = 2;
    var off = starts[highlight], len = segs[highlight][1];
    while (len > 0) {
      var row = Math.floor(off / per), col = off - row * per, take = Math.min(len, per - col);
      g.strokeRect(L + col / per * W, T + row * (rowH + gap) - 1, Math.max(take / per * W, 2), rowH + 2);
      off += take; len -= take;
    }
    g.lineWidth = 1;
  }
  mapGeo = {starts: starts, order: order, per: per, rows: rows, rowH: rowH, gap: gap, L: L, T: T, W: W,
            total: total};
}
function selectMap(i) {
  var M = D.maps[i];
  mapIndex = i;
  highlight = -1;
  drawMap();
  document.getElementById('map-note').textContent = M.title + ': ' + M.segs.length + ' segments, ' +
    bytes(mapGeo.total) + ' reserved; one row = ' + bytes(mapGeo.per) + '.';
  metricsTable(M);
  pinTable(M);
}
function blockAt(x, y) {
  var G = mapGeo, M = D.maps[mapIndex];
  if (!G) return null;
  var row = Math.floor((y - G.T) / (G.rowH + G.gap));
  if (row < 0 || row >= G.rows || x < G.L || x > G.L + G.W) return null;
  var off = row * G.per + (x - G.L) / G.W * G.per, O = G.order;
  if (!O.length || off < G.starts[O[0]]) return null;
  var lo = 0, hi = O.length - 1;
  while (lo < hi) { var mid = (lo + hi + 1) >> 1; if (G.starts[O[mid]] <= off) lo = mid; else hi = mid - 1; }
  lo = O[lo];
  var s = M.segs[lo], rel = off - G.starts[lo], a = s[4], b = s[4] + s[5] - 1;
  if (rel >= s[1]) return null;
  while (a < b) { var m2 = (a + b + 1) >> 1; if (M.blocks[m2][0] <= rel) a = m2; else b = m2 - 1; }
  return {seg: lo, block: a};
}
function stackHtml(id) {
  if (!id || !D.stacks[id - 1]) return '';
  return '<pre>' + esc(D.stacks[id - 1]) + '</pre>';
}
function mapHover(ev) {
  var r = ev.target.getBoundingClientRect(), hit = blockAt(ev.clientX - r.left, ev.clientY - r.top);
  if (!hit) { hideTip(); return; }
  var M = D.maps[mapIndex], s = M.segs[hit.seg], b = M.blocks[hit.block];
  var state = ['free (cached)', 'allocated', 'freed, pending on another stream'][b[3]];
  var html = '<b>block ' + hex(s[0] + b[0]) + '</b>: ' + bytes(b[1]) + ', ' + state;
  if (b[3]) html += '<br>requested ' + bytes(b[2]) + ', stream ' + s[2];
  html += '<br>segment ' + hex(s[0]) + ': ' + bytes(s[1]) + ', ' + (s[3] & 1 ? 'small' : 'large') +
          ' pool' + (s[3] & 2 ? ', expandable' : '') + ', stream ' + s[2] + ', ' + s[6] + ' live block' +
          (s[6] === 1 ? '' : 's') + ', ' + bytes(s[7]) + ' free';
  if (M.pools) html += '<br>' + esc(M.pools[s[9]][2]);
  html += stackHtml(b[4]);
  showTip(ev, html);
}
function metricsTable(M) {
  var t = document.getElementById('metrics'), m = M.metrics;
  t.innerHTML = '';
  var rows = [['reserved', bytes(m.reserved)], ['allocated', bytes(m.allocated)],
              ['requested (live tensors)', bytes(m.requested)], ['free blocks', m.free_blocks],
              ['free bytes', bytes(m.free_bytes)], ['largest free block', bytes(m.largest)],
              ['max allocatable, stream ' + m.stream + ' (no device call)', bytes(m.max_allocatable)],
              ['external: 1 \u2212 largest / free', pct(m.external)],
              ['unused: 1 \u2212 active / reserved', pct(m.unused)],
              ['spread: 1 \u2212 \u03a3f\u00b2 / (\u03a3f)\u00b2', pct(m.spread)],
              ['internal waste: allocated \u2212 requested', bytes(m.internal_waste)],
              ['inactive split (non-releasable)', bytes(m.inactive_split)]];
  (M.pools || []).forEach(function (P) {
    rows.push([P[2], bytes(P[4]) + ' reserved, ' + bytes(P[5]) + ' allocated, ' + bytes(P[6]) +
               ' free (largest ' + bytes(P[7]) + '), ' + P[8] + ' segment' + (P[8] === 1 ? '' : 's') +
               ' pinned holding ' + bytes(P[9]) + ' free']);
  });
  rows.forEach(function (r) {
    var tr = el('tr');
    tr.appendChild(el('th', {}, r[0]));
    tr.appendChild(el('td', {}, String(r[1])));
    t.appendChild(tr);
  });
}
function pinTable(M) {
  var t = document.getElementById('pins');
  t.innerHTML = '<tr><th>#</th><th>segment</th><th>pool, stream</th><th>size</th><th>free held</th>' +
                '<th>live blocks</th><th>biggest live block: where it was allocated</th></tr>';
  if (!M.pins.length) {
    var none = el('tr');
    none.appendChild(el('td', {colspan: 7}, 'No segment holds free memory next to live blocks.'));
    t.appendChild(none);
  }
  M.pins.forEach(function (si, rank) {
    var s = M.segs[si], big = -1;
    for (var b = s[4]; b < s[4] + s[5]; b++)
      if (M.blocks[b][3] && (big < 0 || M.blocks[b][1] > M.blocks[big][1])) big = b;
    var tr = el('tr', {'data-seg': si});
    tr.appendChild(el('td', {}, String(rank + 1)));
    tr.appendChild(el('td', {'class': 'mono'}, hex(s[0])));
    tr.appendChild(el('td', {}, (M.pools && s[9] ? M.pools[s[9]][2] + ': ' : '') +
                          (s[3] & 1 ? 'small' : 'large') + ', ' + s[2]));
    tr.appendChild(el('td', {}, bytes(s[1])));
    tr.appendChild(el('td', {}, bytes(s[1] - s[8]) + ' (' + pct((s[1] - s[8]) / s[1]) + ')'));
    tr.appendChild(el('td', {}, String(s[6])));
    var where = big >= 0 ? bytes(M.blocks[big][1]) : '';
    var st = big >= 0 && M.blocks[big][4] ? D.stacks[M.blocks[big][4] - 1].split('\n')[0] : '';
    tr.appendChild(el('td', {'class': 'mono'}, where + (st ? ' \u2014 ' + st : '')));
    tr.addEventListener('mouseenter', function () { highlight = si; drawMap(); });
    tr.addEventListener('mouseleave', function () { highlight = -1; drawMap(); });
    t.appendChild(tr);
  });
}
function mapSection() {
  var tabs = document.getElementById('map-tabs');
  D.maps.forEach(function (M, i) {
    var b = el('button', {type: 'button'}, M.title);
    if (i === 0) b.className = 'on';
    b.addEventListener('click', function () {
      Array.prototype.forEach.call(tabs.children, function (x) { x.className = ''; });
      b.className = 'on';
      selectMap(i);
    });
    tabs.appendChild(b);
  });
  var c = document.getElementById('c-map');
  c.addEventListener('mousemove', mapHover);
  c.addEventListener('mouseleave', hideTip);
  selectMap(0);
  drew();
}

/* ---- request sizes ---- */
function histChart() {
  var H = D.request_hist, C = canvas('c-hist', 200), g = C.g, L = 56, R = 10, T = 10, B = 34;
  var W = C.w - L - R, h = C.h - T - B, n = H.length, max = 1;
  H.forEach(function (r) { if (r[1] > max) max = r[1]; });
  g.font = '11px system-ui, sans-serif';
  g.textAlign = 'right'; g.textBaseline = 'middle'; g.fillStyle = '#555'; g.strokeStyle = '#e3e6ea';
  var step = niceStep(max, 4);
  for (var v = 0; v <= max; v += step) {
    var y = T + h - v / max * h;
    g.beginPath(); g.moveTo(L, y); g.lineTo(L + W, y); g.stroke();
    g.fillText(String(v), L - 6, y);
  }
  var bw = n ? W / n : W;
  H.forEach(function (r, i) {
    var bh = r[1] / max * h;
    g.fillStyle = COL.alloc;
    g.fillRect(L + i * bw + 2, T + h - bh, Math.max(bw - 4, 1), bh);
    g.save();
    g.fillStyle = '#555'; g.textAlign = 'center'; g.textBaseline = 'top';
    g.fillText(pow2(r[0]), L + (i + 0.5) * bw, T + h + 6);
    g.restore();
  });
  g.strokeStyle = '#888';
  g.strokeRect(L, T, W, h);
  C.c.addEventListener('mousemove', function (ev) {
    var rc = C.c.getBoundingClientRect(), i = Math.floor((ev.clientX - rc.left - L) / bw);
    if (i < 0 || i >= n) { hideTip(); return; }
    var r = H[i];
    showTip(ev, '<b>[' + pow2(r[0]) + ', ' + pow2(r[0] + 1) + ')</b><br>' + r[1] + ' requests, ' + bytes(r[2]));
  });
  C.c.addEventListener('mouseleave', hideTip);
  drew();
}

function run(f) { try { f(); } catch (e) { noteError(e && e.stack ? e.stack : e); } }
/* for the sections drawn by later scripts (the tuning result) */
window.subletReport = {drew: drew, run: run, canvas: canvas, bytes: bytes, niceStep: niceStep,
  byteTicks: byteTicks, xLabel: xLabel, showTip: showTip, hideTip: hideTip, esc: esc, el: el,
  COL: COL, onResize: []};
if (D.series) { run(memoryChart); run(fragChart); }
run(mapSection);
run(histChart);
body.setAttribute('data-render-ms', Math.round(performance.now()));
var resizeTimer = null;
window.addEventListener('resize', function () {
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(function () {
    ['c-mem-legend', 'c-frag-legend'].forEach(function (id) {
      var e = document.getElementById(id);
      if (e) e.innerHTML = '';
    });
    var keep = rendered;
    if (D.series) { run(memoryChart); run(fragChart); }
    run(drawMap); run(histChart);
    window.subletReport.onResize.forEach(run);
    rendered = keep;
    body.setAttribute('data-rendered', rendered);
  }, 150);
});
})();
