"use strict";
(function () {
  function openTarget() {
    var id = decodeURIComponent(window.location.hash.slice(1));
    if (!id) { return; }
    var node = document.getElementById(id);
    while (node) {
      if (node.tagName === "DETAILS") { node.open = true; }
      node = node.parentElement;
    }
  }
  function cellKey(row, index) {
    var cell = row.children[index];
    if (!cell) { return ""; }
    var key = cell.getAttribute("data-sort");
    return key === null ? cell.textContent.trim() : key;
  }
  function sortBy(table, index, header) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var descending = header.getAttribute("aria-sort") === "ascending";
    rows.sort(function (a, b) {
      var x = cellKey(a, index), y = cellKey(b, index);
      var nx = parseFloat(x), ny = parseFloat(y);
      var order = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
      return descending ? -order : order;
    });
    Array.prototype.forEach.call(table.querySelectorAll("th"), function (th) { th.removeAttribute("aria-sort"); });
    header.setAttribute("aria-sort", descending ? "descending" : "ascending");
    rows.forEach(function (row) { body.appendChild(row); });
  }
  function applyFilter() {
    var text = (document.getElementById("filter") || { value: "" }).value.toLowerCase();
    var onlyFailing = (document.getElementById("only-failing") || { checked: false }).checked;
    Array.prototype.forEach.call(document.querySelectorAll("[data-scenario]"), function (node) {
      var name = node.getAttribute("data-scenario").toLowerCase();
      var failing = node.getAttribute("data-failing") === "true";
      node.classList.toggle("hidden", name.indexOf(text) < 0 || (onlyFailing && !failing));
    });
  }
  function setAll(open) {
    Array.prototype.forEach.call(document.querySelectorAll("details.trial"), function (d) { d.open = open; });
  }
  document.addEventListener("DOMContentLoaded", function () {
    Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
      Array.prototype.forEach.call(table.querySelectorAll("thead th"), function (th, index) {
        th.classList.add("sortable-key");
        th.addEventListener("click", function () { sortBy(table, index, th); });
      });
    });
    var filter = document.getElementById("filter");
    if (filter) { filter.addEventListener("input", applyFilter); }
    var failing = document.getElementById("only-failing");
    if (failing) { failing.addEventListener("change", applyFilter); }
    var expand = document.getElementById("expand-all");
    if (expand) { expand.addEventListener("click", function () { setAll(true); }); }
    var collapse = document.getElementById("collapse-all");
    if (collapse) { collapse.addEventListener("click", function () { setAll(false); }); }
    Array.prototype.forEach.call(document.querySelectorAll(".toolbar"), function (bar) { bar.classList.remove("hidden"); });
    window.addEventListener("hashchange", openTarget);
    openTarget();
  });
})();
