// The Compare page: two to four Train or Serve configurations side by side, differences
// highlighted. State: `kind=serve` for Serve configurations (Train without it) and one `c` URL
// parameter per configuration, each a Train or Serve page query.
"use strict";

// [label, value of the command's JSON, format, +1 higher is better / -1 lower is better / 0 neither]
const COMPARE_ROWS = {
  train: [
    ["step time", (d) => d.step_time_s, Fmt.ms, -1],
    ["tokens/s/GPU", (d) => d.tokens_per_s_per_gpu, Fmt.int, +1],
    ["MFU", (d) => d.mfu, Fmt.pct, +1],
    ["TFLOP/s/GPU", (d) => d.tflops_per_gpu, (x) => Fmt.num(x, 4), +1],
    ["peak memory/GPU", (d) => d.peak_memory_bytes, Fmt.gib, -1],
    ["fits", (d) => d.fits, (x) => (x ? "yes" : "no"), 0],
    ["pipeline bubble", (d) => d.bubble_fraction, Fmt.pct, -1],
    ...Object.entries(BREAKDOWN_LABELS).map(([k, label]) => [`time: ${label}`, (d) => d.breakdown_s[k], Fmt.ms, -1]),
  ],
  serve: [
    ["TTFT", (d) => d.ttft_s, Fmt.ms, -1],
    ["TTFT p90", (d) => d.percentiles && d.percentiles.ttft_s.p90, Fmt.ms, -1],
    ["TTFT p99", (d) => d.percentiles && d.percentiles.ttft_s.p99, Fmt.ms, -1],
    ["TPOT", (d) => d.tpot_s, Fmt.ms, -1],
    ["TPOT p90", (d) => d.percentiles && d.percentiles.tpot_s.p90, Fmt.ms, -1],
    ["TPOT p99", (d) => d.percentiles && d.percentiles.tpot_s.p99, Fmt.ms, -1],
    ["end-to-end latency", (d) => d.e2e_latency_s, Fmt.ms, -1],
    ["output tokens/s/GPU", (d) => d.output_tokens_per_s_per_gpu, Fmt.int, +1],
    ["total tokens/s/GPU", (d) => d.total_tokens_per_s_per_gpu, Fmt.int, +1],
    ["requests/s", (d) => d.requests_per_s, Fmt.num, +1],
    ["GPUs", (d) => d.num_gpus, Fmt.int, 0],
    ["replicas", (d) => d.replicas, Fmt.int, 0],
    ["peak memory/GPU", (d) => d.peak_memory_bytes, Fmt.gib, -1],
    ["fits", (d) => d.fits, (x) => (x ? "yes" : "no"), 0],
  ],
};
const COMPARE_KINDS = { train: { command: "train", page: "/train", label: "Train" },
                        serve: { command: "infer", page: "/serve", label: "Serve" } };

const Compare = {
  MAX: 4,

  kind() {
    const kind = new URLSearchParams(location.search).get("kind");
    return kind in COMPARE_KINDS ? kind : "train";
  },

  configs(kind) {
    const list = new URLSearchParams(location.search).getAll("c");
    if (list.length >= 2) return list.slice(0, Compare.MAX);
    const base = Forms.query(Forms.state(COMPARE_KINDS[kind].command));
    return [list[0] || base, list[0] || base];
  },

  writeUrl(kind, configs) {
    const parts = (kind === "train" ? [] : ["kind=" + kind]).concat(configs.map((c) => "c=" + encodeURIComponent(c)));
    Forms.writeUrl(parts.join("&"));
  },

  start(form) {
    const kind = Compare.kind(), spec = COMPARE_KINDS[kind];
    const configs = Compare.configs(kind);
    let timer = null;
    const rerun = () => { clearTimeout(timer); timer = setTimeout(() => Compare.update(form, kind, configs), 150); };
    const draw = () => {
      form.innerHTML = "";
      configs.forEach((config, i) => {
        const box = document.createElement("div");
        box.className = "field";
        box.dataset.field = "c" + i;
        box.innerHTML = `<label for="c-${i}">configuration ${String.fromCharCode(65 + i)} (${spec.label} query)</label>`;
        const text = document.createElement("textarea");
        text.id = "c-" + i;
        text.rows = 3;
        text.value = config;
        text.addEventListener("input", () => { configs[i] = text.value.trim(); rerun(); });
        const err = document.createElement("div");
        err.className = "field-error";
        const edit = document.createElement("a");
        edit.href = spec.page + "?" + config;
        edit.textContent = "edit in " + spec.label;
        box.append(text, err, edit);
        if (configs.length > 2) {
          const remove = document.createElement("button");
          remove.type = "button";
          remove.className = "secondary";
          remove.textContent = "remove";
          remove.addEventListener("click", () => { configs.splice(i, 1); draw(); rerun(); });
          box.append(" ", remove);
        }
        form.append(box);
      });
      if (configs.length < Compare.MAX) {
        const add = document.createElement("button");
        add.type = "button";
        add.id = "add-config";
        add.textContent = "+ add configuration";
        add.addEventListener("click", () => { configs.push(configs[configs.length - 1]); draw(); rerun(); });
        form.append(add);
      }
    };
    draw();
    Compare.update(form, kind, configs);
  },

  async update(form, kind, configs) {
    Compare.writeUrl(kind, configs);
    const status = document.getElementById("status");
    const t0 = performance.now();
    document.body.dataset.state = "busy";
    status.textContent = "computing…";
    const results = await Promise.all(configs.map((c) => Forms.call(COMPARE_KINDS[kind].command, c)));
    results.forEach((r, i) => {
      const box = form.querySelector(`.field[data-field="c${i}"]`);
      if (!box) return;
      box.classList.toggle("invalid", !r.ok);
      box.querySelector(".field-error").textContent = r.ok ? "" : (r.field ? r.field + ": " : "") + r.error;
    });
    const view = document.getElementById("view");
    view.innerHTML = "";
    view.append(Compare.table(COMPARE_ROWS[kind], configs, results));
    Compare.exports(results);
    status.textContent = `computed in ${(performance.now() - t0).toFixed(0)} ms`;
    document.body.dataset.state = "done";
  },

  table(rows, configs, results) {
    const table = document.createElement("table");
    table.id = "compare";
    const head = document.createElement("tr");
    head.innerHTML = "<th></th>" + configs.map((_, i) => `<th>${String.fromCharCode(65 + i)}</th>`).join("");
    table.append(head);
    const inputs = configs.map((c) => Object.fromEntries(new URLSearchParams(c)));
    const keys = [...new Set(inputs.flatMap(Object.keys))];
    const differing = keys.filter((k) => inputs.some((q) => q[k] !== inputs[0][k]));
    for (const k of differing) {
      const tr = document.createElement("tr");
      tr.innerHTML = `<td>input: ${k}</td>` + inputs.map((q) => `<td class="${q[k] !== inputs[0][k] ? "differs" : ""}"></td>`).join("");
      inputs.forEach((q, i) => { tr.children[i + 1].textContent = q[k] ?? "(default)"; });
      table.append(tr);
    }
    for (const [label, get, fmt, sense] of rows) {
      const values = results.map((r) => (r.ok ? get(r.data) ?? undefined : undefined));
      if (label.startsWith("time: ") && values.every((v) => !v)) continue;
      if (results.some((r) => r.ok) && values.every((v) => v === undefined)) continue;  // e.g. no percentiles
      const tr = document.createElement("tr");
      tr.innerHTML = `<td></td>` + values.map(() => "<td></td>").join("");
      tr.children[0].textContent = label;
      values.forEach((v, i) => {
        const td = tr.children[i + 1];
        td.textContent = results[i].ok ? fmt(v) : "error";
        td.dataset.value = v === undefined ? "" : String(v);
        if (i === 0 || v === undefined || values[0] === undefined || v === values[0]) return;
        const rel = typeof v === "number" ? (v - values[0]) / (Math.abs(values[0]) || 1) : 1;
        if (Math.abs(rel) < 1e-9) return;
        td.className = sense === 0 ? "differs" : sense * rel > 0 ? "better" : "worse";
        if (typeof v === "number" && values[0]) td.title = `${rel > 0 ? "+" : ""}${(100 * rel).toFixed(1)}% vs A`;
      });
      table.append(tr);
    }
    return table;
  },

  exports(results) {
    const box = document.getElementById("exports");
    box.innerHTML = "<h3>Equivalent commands</h3>";
    results.forEach((r, i) => {
      const div = document.createElement("div");
      div.className = "cli";
      div.textContent = `# ${String.fromCharCode(65 + i)}\n${r.command || ""}`;
      const a = document.createElement("a");
      a.href = r.url;
      a.target = "_blank";
      a.textContent = `JSON of ${String.fromCharCode(65 + i)}`;
      box.append(div, a);
    });
  },
};
