// Entry point: pick the page from the path, mark the nav, start it.
"use strict";

(async function main() {
  const page = location.pathname.replace(/^\//, "") || "train";
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.page === page);
  document.title = `perfcast · ${page}`;
  await Forms.load();
  const form = document.getElementById("form");
  if (page === "compare") return Compare.start(form);
  (Pages[page] || Pages.train)(form);
})();
