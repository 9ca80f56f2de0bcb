// The Deploy page: `perfcast infer-search` (best serving deployments under TTFT/TPOT targets),
// its ranked table, both Pareto fronts and, per aggregated row, the Serve page that forecasts it.
"use strict";

// The Serve page query of an aggregated deployment: the arguments `perfcast infer-search` prints
// to reproduce it (serving_search/space.py, Deployment.infer_args), so the numbers are equal
// (tests/test_web_browser.py checks them).
function serveQueryOf(d, dep) {
  return Forms.query({
    model: d.model, system: d.system, gpus: dep.num_gpus, tp: dep.tp, pp: dep.pp, ep: dep.ep,
    precision: dep.precision, kv_precision: dep.kv_precision, input_len: d.input_len,
    output_len: d.output_len, concurrency: dep.concurrency, engine: d.engine,
    attention_dp: dep.attention_dp ? "on" : "",
  });
}

function deploymentRows(d) {
  const table = document.createElement("table");
  table.id = "deployments";
  table.innerHTML = "<tr><th>#</th><th>deployment</th><th>mode</th><th>TTFT</th><th>TPOT</th>" +
    "<th>tokens/s/user</th><th>tokens/s/GPU</th><th>targets</th><th></th></tr>";
  d.best.forEach((b, i) => {
    const tr = document.createElement("tr");
    tr.dataset.mode = b.deployment.mode;
    tr.innerHTML = `<td>${i + 1}</td><td style="text-align:left"></td><td></td>` +
      `<td data-metric="ttft_s" data-value="${b.ttft_s}">${Fmt.ms(b.ttft_s)}</td>` +
      `<td data-metric="tpot_s" data-value="${b.tpot_s}">${Fmt.ms(b.tpot_s)}</td>` +
      `<td>${Fmt.num(b.output_tokens_per_s_per_user)}</td>` +
      `<td data-metric="output_tokens_per_s_per_gpu" data-value="${b.output_tokens_per_s_per_gpu}">` +
      `${Fmt.int(b.output_tokens_per_s_per_gpu)}</td><td>${b.meets_targets ? "met" : "missed"}</td><td></td>`;
    tr.children[1].textContent = b.label;
    tr.children[2].textContent = b.deployment.mode;
    if (b.deployment.mode === "aggregated") {
      const open = document.createElement("a");  // href as a property: '&micro' in HTML is 'µ'
      open.className = "open-serve";
      open.href = "/serve?" + serveQueryOf(d, b.deployment);
      open.textContent = "open in Serve";
      tr.children[8].append(open);
    }
    table.append(tr);
  });
  return table;
}

function renderDeploy(view, d) {
  const best = d.best[0];
  const t = d.targets;
  const targets = [t.ttft_s && `TTFT ≤ ${Fmt.ms(t.ttft_s)}`, t.tpot_s && `TPOT ≤ ${Fmt.ms(t.tpot_s)}`,
                   t.min_tokens_per_s_per_user && `≥ ${Fmt.num(t.min_tokens_per_s_per_user)} tokens/s/user`]
    .filter(Boolean).join(", ") || "no targets";
  view.append(cards([
    card("evaluated", "deployments evaluated", d.evaluated, Fmt.int(d.evaluated), `${Fmt.int(d.rescored)} re-scored exactly`),
    card("feasible", "fit in memory", d.feasible, Fmt.int(d.feasible)),
    card("best_output_tokens_per_s_per_gpu", "best output tokens/s/GPU",
         best ? best.output_tokens_per_s_per_gpu : null, best ? Fmt.int(best.output_tokens_per_s_per_gpu) : "—",
         best ? best.label : "no deployment meets the targets"),
  ]));
  const ranked = panel(`Best deployments on ${d.num_gpus} × ${d.gpu} (${d.engine}, ${targets})`, deploymentRows(d));
  const aggregated = d.best.filter((b) => b.deployment.mode === "aggregated").slice(0, Compare.MAX);
  if (aggregated.length >= 2) {
    const link = document.createElement("a");
    link.id = "compare-deployments";
    link.href = "/compare?kind=serve&" + aggregated.map((b) => "c=" + encodeURIComponent(serveQueryOf(d, b.deployment))).join("&");
    link.textContent = `Compare the ${aggregated.length} best aggregated deployments in Serve…`;
    ranked.append(link);
  }
  view.append(ranked);
  const colors = { aggregated: "#2457c5", disaggregated: "#e07b00" };
  const series = Object.entries(d.pareto_by_mode).filter(([, pts]) => pts.length).map(([mode, pts]) => ({
    name: mode, color: colors[mode] || "#667085",
    points: pts.map((pt) => ({ x: pt.output_tokens_per_s_per_user, y: pt.output_tokens_per_s_per_gpu, label: pt.label })),
  }));
  if (series.length) {
    const box = document.createElement("div");
    box.id = "pareto";
    box.append(Charts.series(series, { xLabel: "output tokens/s per user (1/TPOT)", yLabel: "output tokens/s/GPU",
                                       line: true, logX: true }));
    view.append(panel("Pareto front: throughput per GPU vs interactivity", box));
  }
}

Pages.deploy = livePage("infer-search", renderDeploy, { auto: false });
