// Small SVG charts written for perfcast (no library): horizontal bars, stacked bars, XY plots.
"use strict";

const Charts = {
  palette: ["#2457c5", "#e07b00", "#0e9384", "#c11574", "#6941c6", "#667085", "#b42318", "#4e5ba6",
            "#15b79e", "#a15c07", "#7a5af8", "#344054", "#f04438", "#98a2b3"],

  el(name, attrs = {}, text) {
    const node = document.createElementNS("http://www.w3.org/2000/svg", name);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  },

  // items: [{label, value}] -> horizontal bars, value formatted by fmt.
  bars(items, fmt, width = 560) {
    const rowH = 18, left = 150, right = 90;
    const max = Math.max(...items.map((i) => i.value), 1e-30);
    const svg = Charts.el("svg", { width, height: items.length * rowH + 4, role: "img" });
    items.forEach((item, i) => {
      const y = i * rowH + 2;
      const w = ((width - left - right) * item.value) / max;
      svg.append(Charts.el("text", { x: left - 6, y: y + 12, "text-anchor": "end" }, item.label));
      svg.append(Charts.el("rect", { x: left, y, width: Math.max(w, 0), height: rowH - 4,
                                     fill: Charts.palette[i % Charts.palette.length] }));
      svg.append(Charts.el("text", { x: left + w + 4, y: y + 12 }, fmt(item.value)));
    });
    return svg;
  },

  // rows: [{label, parts: [{label, value}]}] -> stacked horizontal bars with a legend; `limit`
  // draws a vertical line (capacity).
  stacked(rows, fmt, limit, width = 560) {
    const rowH = 22, left = 80, right = 90, legendH = 20;
    const totals = rows.map((r) => r.parts.reduce((a, p) => a + p.value, 0));
    const max = Math.max(...totals, limit || 0, 1e-30);
    const scale = (width - left - right) / max;
    const svg = Charts.el("svg", { width, height: rows.length * rowH + legendH + 6, role: "img" });
    rows.forEach((row, i) => {
      const y = i * rowH + 2;
      let x = left;
      svg.append(Charts.el("text", { x: left - 6, y: y + 14, "text-anchor": "end" }, row.label));
      row.parts.forEach((part, j) => {
        const w = part.value * scale;
        const rect = Charts.el("rect", { x, y, width: Math.max(w, 0), height: rowH - 6,
                                         fill: Charts.palette[j % Charts.palette.length] });
        rect.append(Charts.el("title", {}, `${part.label}: ${fmt(part.value)}`));
        svg.append(rect);
        x += w;
      });
      svg.append(Charts.el("text", { x: x + 4, y: y + 14 }, fmt(totals[i])));
    });
    if (limit) {
      const x = left + limit * scale;
      svg.append(Charts.el("line", { x1: x, x2: x, y1: 0, y2: rows.length * rowH, stroke: "#b42318",
                                     "stroke-dasharray": "4 3" }));
    }
    let lx = left;
    const ly = rows.length * rowH + 8;
    (rows[0] ? rows[0].parts : []).forEach((part, j) => {
      svg.append(Charts.el("rect", { x: lx, y: ly, width: 10, height: 10, fill: Charts.palette[j % Charts.palette.length] }));
      svg.append(Charts.el("text", { x: lx + 14, y: ly + 9 }, part.label));
      lx += 24 + 7.2 * part.label.length;
    });
    return svg;
  },

  // Chrome-trace events (ph 'X' spans, ph 'M' names) -> one Gantt row per process/thread.
  gantt(trace, width = 900) {
    const names = {}, rows = new Map();
    for (const e of trace.traceEvents) {
      if (e.ph === "M" && e.name === "process_name") names[`p${e.pid}`] = e.args.name;
      if (e.ph === "M" && e.name === "thread_name") names[`t${e.pid}.${e.tid}`] = e.args.name;
    }
    const spans = trace.traceEvents.filter((e) => e.ph === "X");
    for (const e of spans) {
      const key = `${e.pid}.${e.tid}`;
      if (!rows.has(key)) rows.set(key, { pid: e.pid, tid: e.tid, spans: [] });
      rows.get(key).spans.push(e);
    }
    const ordered = [...rows.values()].sort((a, b) => a.pid - b.pid || a.tid - b.tid);
    const end = Math.max(...spans.map((e) => e.ts + e.dur), 1e-9);
    const left = 190, rowH = 16, cats = {};
    const svg = Charts.el("svg", { width, height: ordered.length * rowH + 40, role: "img" });
    const scale = (width - left - 10) / end;
    ordered.forEach((row, i) => {
      const y = i * rowH + 2;
      const label = `${names[`p${row.pid}`] || "pid " + row.pid} · ${names[`t${row.pid}.${row.tid}`] || row.tid}`;
      svg.append(Charts.el("text", { x: left - 6, y: y + 11, "text-anchor": "end" }, label));
      for (const e of row.spans) {
        if (!(e.cat in cats)) cats[e.cat] = Object.keys(cats).length;
        const rect = Charts.el("rect", { x: left + e.ts * scale, y, width: Math.max(e.dur * scale, 0.5),
          height: rowH - 3, fill: Charts.palette[cats[e.cat] % Charts.palette.length] });
        rect.append(Charts.el("title", {}, `${e.name} (${e.cat}): ${Fmt.ms(e.dur / 1e6)}`));
        svg.append(rect);
      }
    });
    const y = ordered.length * rowH + 8;
    svg.append(Charts.el("text", { x: left, y: y + 24 }, `0 … ${Fmt.ms(end / 1e6)} (one step)`));
    let x = left;
    for (const [cat, j] of Object.entries(cats)) {
      svg.append(Charts.el("rect", { x, y, width: 10, height: 10, fill: Charts.palette[j % Charts.palette.length] }));
      svg.append(Charts.el("text", { x: x + 14, y: y + 9 }, cat));
      x += 24 + 7.2 * cat.length;
    }
    return svg;
  },

  // points: [{x, y, label}] -> scatter (line: true joins them in x order); log axes optional.
  xy(points, opts) {
    return Charts.series([{ name: "", points, color: "#2457c5" }], opts);
  },

  // series: [{name, color, points: [{x, y, label}]}] -> one scatter (joined in x order with
  // line: true) per series on shared axes, a legend when the series have names.
  series(list, { xLabel, yLabel, line = false, logX = false, width = 560, height = 260 }) {
    const points = list.flatMap((s) => s.points);
    const pad = { l: 64, r: 16, t: 10, b: 40 };
    const fx = (v) => (logX ? Math.log10(v) : v);
    const xs = points.map((p) => fx(p.x)), ys = points.map((p) => p.y);
    const [x0, x1] = [Math.min(...xs), Math.max(...xs)];
    const y1 = Math.max(...ys, 1e-30);
    const sx = (v) => pad.l + ((fx(v) - x0) / (x1 - x0 || 1)) * (width - pad.l - pad.r);
    const sy = (v) => height - pad.b - (v / y1) * (height - pad.t - pad.b);
    const svg = Charts.el("svg", { width, height, role: "img" });
    svg.append(Charts.el("line", { x1: pad.l, x2: width - pad.r, y1: height - pad.b, y2: height - pad.b, stroke: "#98a2b3" }));
    svg.append(Charts.el("line", { x1: pad.l, x2: pad.l, y1: pad.t, y2: height - pad.b, stroke: "#98a2b3" }));
    for (const t of [0, 0.5, 1]) {
      svg.append(Charts.el("text", { x: pad.l - 4, y: sy(t * y1) + 4, "text-anchor": "end" }, Fmt.num(t * y1)));
      const xv = logX ? 10 ** (x0 + t * (x1 - x0)) : x0 + t * (x1 - x0);
      svg.append(Charts.el("text", { x: sx(xv), y: height - pad.b + 14, "text-anchor": "middle" }, Fmt.num(xv)));
    }
    svg.append(Charts.el("text", { x: (width + pad.l) / 2, y: height - 6, "text-anchor": "middle" }, xLabel));
    svg.append(Charts.el("text", { x: 12, y: height / 2, transform: `rotate(-90 12 ${height / 2})`, "text-anchor": "middle" }, yLabel));
    list.forEach((s, i) => {
      const sorted = [...s.points].sort((a, b) => a.x - b.x);
      const g = Charts.el("g", { "data-series": s.name });
      if (line) {
        g.append(Charts.el("polyline", { fill: "none", stroke: s.color, "stroke-width": 1.5,
          points: sorted.map((p) => `${sx(p.x)},${sy(p.y)}`).join(" ") }));
      }
      for (const p of sorted) {
        const c = Charts.el("circle", { cx: sx(p.x), cy: sy(p.y), r: 3.5, fill: s.color });
        if (p.label) c.append(Charts.el("title", {}, p.label));
        g.append(c);
      }
      svg.append(g);
      if (s.name) {
        const ly = pad.t + 4 + 14 * i;
        svg.append(Charts.el("rect", { x: width - pad.r - 130, y: ly, width: 10, height: 10, fill: s.color }));
        svg.append(Charts.el("text", { x: width - pad.r - 116, y: ly + 9 }, s.name));
      }
    });
    return svg;
  },
};
