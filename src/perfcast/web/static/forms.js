// Forms built from /api/fields, page state in the URL, and calls to /api/<command>.
"use strict";

const Forms = {
  fields: null,

  async load() {
    if (!Forms.fields) Forms.fields = await (await fetch("/api/fields")).json();
    return Forms.fields;
  },

  // The page's state: URL query values over the field defaults.
  state(command) {
    const params = new URLSearchParams(location.search);
    const state = {};
    for (const f of Forms.fields[command]) {
      if (!f.hidden) state[f.name] = params.has(f.name) ? params.get(f.name) : f.default;
    }
    return state;
  },

  // Non-empty values as a query string (what the API and the URL hold).
  query(state) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(state)) if (v !== "" && v !== null && v !== undefined) q.set(k, v);
    return q.toString();
  },

  writeUrl(query) {
    const url = location.pathname + (query ? "?" + query : "");
    if (url !== location.pathname + location.search) history.replaceState(null, "", url);
  },

  // Build <form> inputs for `command`; onChange(state) fires on every edit.
  render(form, command, state, onChange) {
    form.innerHTML = "";
    for (const f of Forms.fields[command]) {
      if (f.hidden) continue;
      const box = document.createElement("div");
      box.className = "field";
      box.dataset.field = f.name;
      const label = document.createElement("label");
      label.textContent = f.label;
      label.htmlFor = "f-" + f.name;
      let input;
      if (f.choices.length) {
        input = document.createElement("select");
        for (const c of f.choices) {
          const o = document.createElement("option");
          o.value = c;
          o.textContent = c === "" ? "(CLI default)" : c;
          input.appendChild(o);
        }
        if (state[f.name] && !f.choices.includes(state[f.name])) {
          const o = document.createElement("option");
          o.value = o.textContent = state[f.name];
          input.appendChild(o);
        }
      } else {
        input = document.createElement("input");
        input.type = "text";
        input.inputMode = f.kind === "text" || f.kind === "repeat" ? "text" : "decimal";
        input.placeholder = "(CLI default)";
      }
      input.id = "f-" + f.name;
      input.name = f.name;
      input.value = state[f.name];
      input.addEventListener(f.choices.length ? "change" : "input", () => {
        state[f.name] = input.value;
        onChange(state);
      });
      const err = document.createElement("div");
      err.className = "field-error";
      err.id = "e-" + f.name;
      box.append(label, input, err);
      form.appendChild(box);
    }
  },

  // Show an API error next to its field (or above the result when it names none).
  showError(form, body) {
    Forms.clearErrors(form);
    const box = body.field && form.querySelector(`.field[data-field="${body.field}"]`);
    if (box) {
      box.classList.add("invalid");
      box.querySelector(".field-error").textContent = body.error;
    } else {
      document.getElementById("error").textContent = body.error;
    }
  },

  clearErrors(form) {
    document.getElementById("error").textContent = "";
    for (const box of form.querySelectorAll(".field.invalid")) {
      box.classList.remove("invalid");
      box.querySelector(".field-error").textContent = "";
    }
  },

  // GET /api/<command>?query -> {ok, data, text, command, error, field}; a `progress` token
  // lets /api/progress/<token> report the run's search while it lasts.
  async call(command, query, signal, progress) {
    const url = `/api/${command}` + (query ? "?" + query : "");
    const headers = progress ? { "X-Perfcast-Progress": progress } : {};
    const response = await fetch(url, { signal, headers });
    const text = await response.text();
    if (!response.ok) {
      let body;
      try { body = JSON.parse(text); } catch (e) { body = { error: text, field: "" }; }
      return { ok: false, url, ...body };
    }
    return { ok: true, url, text, data: JSON.parse(text), command: response.headers.get("X-Perfcast-Command") };
  },

  // The view's JSON (as the CLI prints it) and the equivalent command.
  exports(result) {
    const box = document.getElementById("exports");
    box.innerHTML = "";
    if (!result || !result.ok) return;
    const h = document.createElement("h3");
    h.textContent = "Equivalent command";
    const cli = document.createElement("div");
    cli.className = "cli";
    cli.id = "cli-command";
    cli.textContent = result.command;
    const details = document.createElement("details");
    const summary = document.createElement("summary");
    const open = document.createElement("a");  // href as a property: '&micro' in HTML text is 'µ'
    open.href = result.url;
    open.target = "_blank";
    open.id = "json-link";
    open.textContent = "open";
    summary.append("JSON (identical to the command's output) — ", open);
    const pre = document.createElement("pre");
    pre.id = "json-output";
    pre.textContent = result.text;
    details.append(summary, pre);
    box.append(h, cli, details);
  },
};

// Number formatting shared by the pages.
const Fmt = {
  num(x, digits = 3) {
    if (x === null || x === undefined || Number.isNaN(x)) return "—";
    return Number(x).toLocaleString("en-US", { maximumSignificantDigits: digits });
  },
  int(x) { return x === null || x === undefined ? "—" : Math.round(x).toLocaleString("en-US"); },
  pct(x) { return x === null || x === undefined ? "—" : (100 * x).toFixed(1) + "%"; },
  ms(s) {
    if (s === null || s === undefined) return "—";
    return Math.abs(s) >= 1 ? Fmt.num(s) + " s" : Fmt.num(1000 * s) + " ms";
  },
  gib(b) { return b === null || b === undefined ? "—" : (b / 2 ** 30).toFixed(1) + " GiB"; },
};
