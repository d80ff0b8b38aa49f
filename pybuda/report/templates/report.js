"use strict";
// Search: ops whose name or type contains the text are marked in the placement grids and kept in the tables
// (other rows hidden).
function applySearch(text) {
  const needle = text.trim().toLowerCase();
  let hits = 0;
  document.querySelectorAll("[data-op]").forEach(function (el) {
    const match = needle !== "" && (el.dataset.op.toLowerCase().includes(needle) ||
                                    el.dataset.type.toLowerCase().includes(needle));
    if (el.tagName === "g") {
      el.querySelector("rect").classList.toggle("hit", match);
    } else {
      el.hidden = needle !== "" && !match;
    }
    if (match) { hits += 1; }
  });
  document.querySelectorAll("details.stage").forEach(function (d) {
    if (needle !== "" && d.querySelector("tr[data-op]:not([hidden])")) { d.open = true; }
  });
  document.getElementById("search-count").textContent = needle === "" ? "" : hits + " matches";
}

// Sorting: a click on a column header sorts its table's body by that column (again: the other way).
function sortBy(th) {
  const table = th.closest("table");
  const column = Array.prototype.indexOf.call(th.parentNode.children, th);
  const numeric = th.dataset.kind === "num";
  const descending = th.dataset.order !== "desc";
  th.dataset.order = descending ? "desc" : "asc";
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  rows.sort(function (a, b) {
    const x = a.cells[column], y = b.cells[column];
    const vx = numeric ? parseFloat(x.dataset.value || x.textContent.replace(/,/g, "")) : x.textContent;
    const vy = numeric ? parseFloat(y.dataset.value || y.textContent.replace(/,/g, "")) : y.textContent;
    const order = numeric ? vx - vy : vx.localeCompare(vy);
    return descending ? -order : order;
  });
  rows.forEach(function (r) { body.appendChild(r); });
}

document.querySelectorAll("th.sortable").forEach(function (th) {
  th.addEventListener("click", function () { sortBy(th); });
});
const search = document.getElementById("search");
search.addEventListener("input", function () { applySearch(search.value); });
// A link can carry a search and a sort: "#search=<text>&sort=<column header>" (sorted largest first).
const linked = new URLSearchParams(window.location.hash.slice(1));
if (linked.has("search")) {
  search.value = linked.get("search");
  applySearch(search.value);
}
if (linked.has("sort")) {
  document.querySelectorAll("table.ops th.sortable").forEach(function (th) {
    if (th.textContent === linked.get("sort")) { sortBy(th); }
  });
}
