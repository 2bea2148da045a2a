(function () {
'use strict';
var R = window.subletReport;
if (!R) throw new Error('the page script did not run');
var T = JSON.parse(document.getElementById('tune-data').textContent);
var FAM = [{key: 'pytorch', label: 'PyTorch knobs', color: '#3266cc'},
           {key: 'sublet', label: 'all (SUBLET_ALLOC_CONF)', color: '#e0731a'}];
function fmtUs(v) { return v >= 1e6 ? (v / 1e6).toFixed(2) + ' s' : v >= 1e3 ? (v / 1e3).toFixed(1) + ' ms' : v.toFixed(0) + ' \u00b5s'; }
var pts = [];
function chart() {
  var C = R.canvas('c-tune', 260), g = C.g, L = 78, Rt = 16, Tp = 12, B = 34;
  var W = C.w - L - Rt, H = C.h - Tp - B;
  var all = [], lo = Infinity, hi = -Infinity, mlo = Infinity, mhi = -Infinity;
  FAM.forEach(function (f) { T[f.key].forEach(function (p) { all.push(p); }); });
  all.push(T.current);
  all.forEach(function (p) {
    var c = Math.max(p.cost, 1);
    lo = Math.min(lo, c); hi = Math.max(hi, c); mlo = Math.min(mlo, p.m); mhi = Math.max(mhi, p.m);
  });
  var l0 = Math.floor(Math.log(lo) / Math.LN10), l1 = Math.max(l0 + 1, Math.ceil(Math.log(hi) / Math.LN10));
  var pad = Math.max((mhi - mlo) * 0.1, 2 * 1048576);
  var y0 = Math.max(0, mlo - pad), y1 = mhi + pad;
  function X(c) { return L + (Math.log(Math.max(c, 1)) / Math.LN10 - l0) / (l1 - l0) * W; }
  function Y(m) { return Tp + H - (m - y0) / (y1 - y0) * H; }
  g.font = '11px system-ui, sans-serif';
  g.strokeStyle = '#e3e6ea'; g.fillStyle = '#555';
  g.textAlign = 'center'; g.textBaseline = 'top';
  for (var e = l0; e <= l1; e++) {
    var x = X(Math.pow(10, e));
    g.beginPath(); g.moveTo(x, Tp); g.lineTo(x, Tp + H); g.stroke();
    R.xLabel(C, fmtUs(Math.pow(10, e)), x, Tp + H + 6);
  }
  g.textAlign = 'right'; g.textBaseline = 'middle';
  var step = R.niceStep((y1 - y0) / 1048576, 4) * 1048576;
  for (var v = Math.ceil(y0 / step) * step; v <= y1; v += step) {
    var y = Y(v);
    g.beginPath(); g.moveTo(L, y); g.lineTo(L + W, y); g.stroke();
    g.fillText(R.bytes(v), L - 6, y);
  }
  g.strokeStyle = '#888'; g.strokeRect(L, Tp, W, H);
  pts = [];
  FAM.forEach(function (f, fi) {
    var P = T[f.key];
    g.strokeStyle = f.color; g.lineWidth = 1.5; g.beginPath();
    P.forEach(function (p, i) { var x = X(p.cost), y = Y(p.m); if (i) g.lineTo(x, y); else g.moveTo(x, y); });
    g.stroke(); g.lineWidth = 1;
    P.forEach(function (p) {
      var x = X(p.cost) + (fi ? 2 : -2), y = Y(p.m);
      g.fillStyle = f.color; g.beginPath(); g.arc(x, y, p.answer ? 6 : 4, 0, 2 * Math.PI); g.fill();
      if (p.answer) { g.strokeStyle = '#1d2430'; g.lineWidth = 2; g.stroke(); g.lineWidth = 1; }
      pts.push({x: x, y: y, p: p, fam: f.label});
    });
  });
  var cx = X(T.current.cost), cy = Y(T.current.m);
  g.strokeStyle = '#d62b2b'; g.lineWidth = 2;
  g.beginPath(); g.moveTo(cx - 6, cy - 6); g.lineTo(cx + 6, cy + 6); g.moveTo(cx + 6, cy - 6); g.lineTo(cx - 6, cy + 6); g.stroke();
  g.lineWidth = 1;
  pts.push({x: cx, y: cy, p: T.current, fam: 'current settings'});
  var leg = document.getElementById('c-tune-legend');
  leg.innerHTML = '';
  FAM.concat([{label: 'current settings (\u00d7)', color: '#d62b2b'}]).forEach(function (f) {
    var item = R.el('span', {'class': 'key'});
    item.appendChild(R.el('i', {style: 'background:' + f.color}));
    item.appendChild(document.createTextNode(f.label));
    leg.appendChild(item);
  });
  leg.appendChild(document.createTextNode('ringed: the answer; x axis: cost under the model (log), y axis: min capacity'));
  R.drew();
}
var c = document.getElementById('c-tune');
c.addEventListener('mousemove', function (ev) {
  var r = c.getBoundingClientRect(), x = ev.clientX - r.left, y = ev.clientY - r.top, best = null, bd = 100;
  pts.forEach(function (q) { var d = (q.x - x) * (q.x - x) + (q.y - y) * (q.y - y); if (d < bd) { bd = d; best = q; } });
  if (!best) { R.hideTip(); return; }
  var p = best.p;
  R.showTip(ev, '<b>' + R.esc(p.conf || '"" (PyTorch defaults)') + '</b><br>' + R.esc(best.fam) +
    (p.answer ? ' \u2014 the answer' : '') + '<br>min capacity ' + R.bytes(p.m) + ' (' + (100 * p.overhead).toFixed(2) +
    ' % over the live peak)<br>cost ' + fmtUs(p.cost) + ', ' + p.calls + ' device calls');
});
c.addEventListener('mouseleave', R.hideTip);
R.run(chart);
R.onResize.push(chart);
})();
