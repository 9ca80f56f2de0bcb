// The Train, Serve and Search pages: a form, a call to the CLI's JSON, cards and charts.
"use strict";

function card(key, label, value, text, sub) {
  const div = document.createElement("div");
  div.className = "card";
  div.dataset.metric = key;
  div.dataset.value = value === null || value === undefined ? "" : String(value);
  div.innerHTML = `<div class="k"></div><div class="v"></div><div class="s"></div>`;
  div.querySelector(".k").textContent = label;
  div.querySelector(".v").textContent = text;
  div.querySelector(".s").textContent = sub || "";
  return div;
}

function panel(title, child) {
  const div = document.createElement("div");
  div.className = "panel";
  const h = document.createElement("h3");
  h.textContent = title;
  div.append(h, child);
  return div;
}

function cards(items) {
  const div = document.createElement("div");
  div.className = "cards";
  div.append(...items);
  return div;
}

const DEBOUNCE_MS = 80;  // wait this long after a keystroke before asking the server

// How far a search has got: {done, total} from /api/progress/<token>, null before its first report.
async function searchProgress(token) {
  const response = await fetch("/api/progress/" + token, { cache: "no-store" });
  return response.ok ? response.json() : null;
}

function progressText(p) {
  return p && p.total ? ` · ${Fmt.int(p.done)} / ${Fmt.int(p.total)} strategies (${Fmt.pct(p.done / p.total)})` : "";
}

// A page whose result follows the form: every edit re-runs the command (debounced). With
// `progress`, the status line shows the search's done/total while it runs.
function livePage(command, render, { auto = true, extra, progress = false } = {}) {
  return async function start(form) {
    const state = Forms.state(command);
    let controller = null, timer = null, changedAt = null;
    const status = document.getElementById("status");
    async function update() {
      const query = Forms.query(state);
      Forms.writeUrl(query);
      if (controller) controller.abort();
      controller = new AbortController();
      const t0 = performance.now();
      document.body.dataset.state = "busy";
      status.textContent = "computing…";
      const token = progress ? "run" + Math.random().toString(36).slice(2) + Date.now().toString(36) : "";
      let seen = null;
      const ticker = setInterval(async () => {
        if (token) seen = (await searchProgress(token)) || seen;
        if (document.body.dataset.state !== "busy") return;
        status.textContent = `computing… ${((performance.now() - t0) / 1000).toFixed(1)} s` + progressText(seen);
      }, 250);
      let result;
      try {
        result = await Forms.call(command, query, controller.signal, token);
      } catch (e) {
        if (e.name === "AbortError") return;
        result = { ok: false, error: String(e), field: "" };
      } finally {
        clearInterval(ticker);
      }
      if (token) {  // the last report: every strategy evaluated
        seen = await searchProgress(token);
        document.body.dataset.progress = seen ? `${seen.done}/${seen.total}` : "";
      }
      const view = document.getElementById("view");
      if (!result.ok) {
        Forms.showError(form, result);
        view.innerHTML = "";
        Forms.exports(null);
        status.textContent = result.command ? result.command : "";
        document.body.dataset.state = "error";
        return;
      }
      Forms.clearErrors(form);
      view.innerHTML = "";
      render(view, result.data, state);
      Forms.exports(result);
      const ms = performance.now() - t0;
      status.textContent = `computed in ${ms.toFixed(0)} ms` + (token ? progressText(seen) : "");
      document.body.dataset.renderMs = ms.toFixed(1);
      if (changedAt !== null) {  // from the keystroke to the drawn result, debounce included
        document.body.dataset.changeToRenderMs = (performance.now() - changedAt).toFixed(1);
        changedAt = null;
      }
      document.body.dataset.state = "done";
      if (extra) extra(view, state);
    }
    Forms.render(form, command, state, () => {
      if (!auto) return Forms.writeUrl(Forms.query(state));
      changedAt = performance.now();
      clearTimeout(timer);
      timer = setTimeout(update, DEBOUNCE_MS);
    });
    if (!auto) {
      const run = document.createElement("button");
      run.type = "button";
      run.id = "run";
      run.textContent = "Run";
      run.addEventListener("click", update);
      form.appendChild(run);
      if (location.search) update();
    } else {
      update();
    }
  };
}

const BREAKDOWN_LABELS = {
  compute_gemm: "GEMM", compute_attention: "attention", compute_memory_bound: "memory-bound ops",
  recompute: "recompute", tp_comm: "TP comm", cp_comm: "CP comm", ep_comm: "EP comm", host: "host",
  pp_comm: "PP comm", dp_comm: "DP comm", pipeline_bubble: "pipeline bubble", optimizer: "optimizer",
  other: "other", offload: "offload",
};

function breakdownBars(breakdown) {
  const items = Object.entries(breakdown).filter(([, v]) => v > 1e-9)
    .map(([k, v]) => ({ label: BREAKDOWN_LABELS[k] || k, value: v }));
  return Charts.bars(items, Fmt.ms);
}

function renderTrain(view, d, state) {
  const band = d.interval ? `${Fmt.int(d.interval.low)}–${Fmt.int(d.interval.high)} (${Fmt.pct(d.interval.level)} band)` : "";
  const mfuBand = d.interval ? `${Fmt.pct(d.mfu * d.interval.low / d.tokens_per_s_per_gpu)}–${Fmt.pct(d.mfu * d.interval.high / d.tokens_per_s_per_gpu)}` : "";
  view.append(cards([
    card("step_time_s", "step time", d.step_time_s, Fmt.ms(d.step_time_s), `${d.num_micro_batches} micro-batches`),
    card("tokens_per_s_per_gpu", "tokens/s/GPU", d.tokens_per_s_per_gpu, Fmt.int(d.tokens_per_s_per_gpu), band),
    card("mfu", "MFU", d.mfu, Fmt.pct(d.mfu), mfuBand),
    card("tflops_per_gpu", "TFLOP/s/GPU", d.tflops_per_gpu, Fmt.num(d.tflops_per_gpu, 4)),
    card("peak_memory_bytes", "peak memory/GPU", d.peak_memory_bytes, Fmt.gib(d.peak_memory_bytes),
         `${d.fits ? "fits" : "does NOT fit"} in ${Fmt.gib(d.memory.capacity_bytes)}`),
  ]));
  view.append(panel("Where the step time goes (critical stage " + d.critical_stage + ")", breakdownBars(d.breakdown_s)));
  const rows = d.memory.stages.map((s) => ({
    label: "stage " + s.stage,
    parts: [{ label: "weights", value: s.weights_bytes }, { label: "grads", value: s.grads_bytes },
            { label: "optimizer", value: s.optimizer_bytes }, { label: "activations", value: s.activations_bytes },
            { label: "other", value: s.other_bytes }],
  }));
  view.append(panel("Memory per GPU by pipeline stage (dashed: capacity)", Charts.stacked(rows, Fmt.gib, d.memory.capacity_bytes)));
  const gantt = document.createElement("div");
  gantt.id = "gantt";
  gantt.textContent = "simulating the pipeline…";
  view.append(panel("Pipeline timeline of one step (`perfcast train --trace`)", gantt));
  const link = document.createElement("a");
  link.href = "/compare?c=" + encodeURIComponent(Forms.query(state)) + "&c=" + encodeURIComponent(Forms.query(state));
  link.id = "compare-link";
  link.textContent = "Compare this configuration with another…";
  view.append(link);
}

function renderServe(view, d, state) {
  const p = d.percentiles;
  const pct = (m) => (p ? `median ${Fmt.ms(p[m].median)} · p90 ${Fmt.ms(p[m].p90)} · p99 ${Fmt.ms(p[m].p99)}` : "");
  view.append(cards([
    card("ttft_s", "TTFT", d.ttft_s, Fmt.ms(d.ttft_s), pct("ttft_s")),
    card("tpot_s", "TPOT", d.tpot_s, Fmt.ms(d.tpot_s), pct("tpot_s")),
    card("output_tokens_per_s_per_gpu", "output tokens/s/GPU", d.output_tokens_per_s_per_gpu,
         Fmt.int(d.output_tokens_per_s_per_gpu)),
    card("requests_per_s", "requests/s", d.requests_per_s, Fmt.num(d.requests_per_s)),
    card("peak_memory_bytes", "peak memory/GPU", d.peak_memory_bytes, Fmt.gib(d.peak_memory_bytes),
         d.fits ? "fits" : "does NOT fit"),
  ]));
  const curve = document.createElement("div");
  curve.id = "curve";
  curve.textContent = "computing the throughput–latency curve…";
  view.append(panel("Throughput vs latency (static batches 1…512, `perfcast infer --curve`)", curve));
  const link = document.createElement("a");
  link.href = "/compare?kind=serve&c=" + encodeURIComponent(Forms.query(state)) + "&c=" + encodeURIComponent(Forms.query(state));
  link.id = "compare-link";
  link.textContent = "Compare this configuration with another…";
  view.append(link);
}

// The Train page's Gantt: the Chrome trace the CLI writes with --trace, drawn per stage/stream.
async function trainGantt(view, state) {
  const t0 = performance.now();
  const response = await fetch("/api/trace/train?" + Forms.query(state));
  const box = view.querySelector("#gantt");
  if (!box) return;
  if (!response.ok) { box.textContent = (await response.json()).error; return; }
  box.textContent = "";
  box.append(Charts.gantt(await response.json()));
  const a = document.createElement("a");
  a.href = response.url;
  a.download = "trace.json";
  a.textContent = "trace.json (open in Perfetto or chrome://tracing)";
  box.append(document.createElement("br"), a);
  document.body.dataset.ganttMs = (performance.now() - t0).toFixed(1);
}

// The Serve page draws the curve from a second command: the same model and layout with --curve.
async function serveCurve(view, state) {
  const q = { ...state, curve: "on", concurrency: "", request_rate: "", num_requests: "", engine: "" };
  const result = await Forms.call("infer", Forms.query(q));
  const box = view.querySelector("#curve");
  if (!box) return;
  if (!result.ok) { box.textContent = result.error; return; }
  const points = result.data.points.filter((pt) => pt.fits).map((pt) => ({
    x: pt.tokens_per_s_per_user, y: pt.output_tokens_per_s_per_gpu, label: `batch ${pt.batch_size}`,
  }));
  box.textContent = "";
  box.append(Charts.xy(points, { xLabel: "tokens/s per user (interactivity)", yLabel: "output tokens/s/GPU", line: true, logX: true }));
}

function strategyText(s) {
  const parts = [`TP${s.tp}`, `PP${s.pp}`];
  if (s.vpp > 1) parts.push(`VPP${s.vpp}`);
  if (s.cp > 1) parts.push(`CP${s.cp}`);
  if (s.ep > 1) parts.push(`EP${s.ep}`);
  parts.push(`DP${s.dp}`, `mbs ${s.micro_batch_size}`, s.precision, `recompute ${s.recompute}`);
  if (s.sequence_parallel) parts.push("SP");
  return parts.join(" · ");
}

// The Train page query of a searched strategy: every option the search varies, so the Train
// forecast is the search row's (tests/test_web_browser.py checks the numbers agree).
function trainQueryOf(d, s, framework) {
  const onOff = (x) => (x ? "on" : "off");
  return Forms.query({
    model: d.model, system: d.system, gpus: d.num_gpus, tp: s.tp, pp: s.pp, vpp: s.vpp, cp: s.cp, ep: s.ep,
    micro_batch_size: s.micro_batch_size, global_batch_size: d.global_batch_size, seq_length: d.seq_length,
    precision: s.precision, fp8_recipe: s.fp8_recipe, recompute: s.recompute,
    recompute_num_layers: s.recompute_num_layers ?? "", zero_stage: s.zero_stage, fsdp: onOff(s.fsdp),
    sequence_parallel: onOff(s.sequence_parallel), distributed_optimizer: onOff(s.distributed_optimizer),
    tp_comm_overlap: onOff(s.tp_comm_overlap), first_stage_layers: s.num_layers_in_first_pipeline_stage ?? "",
    last_stage_layers: s.num_layers_in_last_pipeline_stage ?? "",
    account_for_embedding: s.account_for_embedding_in_pipeline_split ? "on" : "",
    account_for_loss: s.account_for_loss_in_pipeline_split ? "on" : "", framework,
  });
}

function renderSearch(view, d, state) {
  view.append(cards([
    card("evaluated", "strategies evaluated", d.evaluated, Fmt.int(d.evaluated)),
    card("feasible", "fit in memory", d.feasible, Fmt.int(d.feasible)),
    card("best_tokens_per_s_per_gpu", "best tokens/s/GPU", d.best[0] ? d.best[0].tokens_per_s_per_gpu : null,
         d.best[0] ? Fmt.int(d.best[0].tokens_per_s_per_gpu) : "—"),
  ]));
  const table = document.createElement("table");
  table.id = "best";
  table.innerHTML = "<tr><th>#</th><th>strategy</th><th>tokens/s/GPU</th><th>MFU</th><th>step</th><th>memory</th><th></th></tr>";
  d.best.forEach((b, i) => {
    const tr = document.createElement("tr");
    tr.innerHTML = `<td>${i + 1}</td><td style="text-align:left"></td><td data-value="${b.tokens_per_s_per_gpu}">${Fmt.int(b.tokens_per_s_per_gpu)}</td>` +
      `<td>${Fmt.pct(b.mfu)}</td><td>${Fmt.ms(b.step_time_s)}</td><td>${Fmt.gib(b.peak_memory_bytes)}</td><td></td>`;
    tr.children[1].textContent = strategyText(b.strategy);
    const open = document.createElement("a");  // set as a property: '&micro' in HTML text is 'µ'
    open.className = "open-train";
    open.href = "/train?" + trainQueryOf(d, b.strategy, d.framework);
    open.textContent = "open in Train";
    tr.children[6].append(open);
    table.append(tr);
  });
  view.append(panel(`Best strategies (objective: ${d.objective}, framework: ${d.framework})`, table));
  const points = d.pareto.map((pt) => ({ x: pt.peak_memory_bytes / 2 ** 30, y: pt.tokens_per_s_per_gpu,
                                         label: strategyText(pt.strategy) }));
  if (points.length) {
    view.append(panel("Pareto front: throughput vs peak memory",
      Charts.xy(points, { xLabel: "peak memory per GPU (GiB)", yLabel: "tokens/s/GPU", line: true })));
  }
}

const Pages = {
  train: livePage("train", renderTrain, { extra: trainGantt }),
  serve: livePage("infer", renderServe, { extra: serveCurve }),
  search: livePage("search", renderSearch, { auto: false, progress: true }),
};
