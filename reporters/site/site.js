// RACE leaderboard: sorting and filtering of the main table, in the browser, no dependencies.
// Reads only the DOM the server rendered (data-* attributes and text): no submission data is
// ever evaluated or inserted as markup.
(function () {
  "use strict";
  var table = document.getElementById("board");
  if (!table) { return; }
  var bodies = Array.prototype.slice.call(table.tBodies);   // runs; the reference cells kept apart
  var heads = table.tHead.rows[0].cells;
  function runRows(tbody) {
    return Array.prototype.filter.call(tbody.rows, function (r) { return r.hasAttribute("data-origin"); });
  }

  function key(row, col) {
    var cell = row.cells[col];
    var raw = cell.getAttribute("data-sort");
    if (raw === null) { raw = cell.textContent.trim(); }
    if (raw === "") { return null; }           // missing values sort last either way
    var num = Number(raw);
    return isNaN(num) ? raw.toLowerCase() : num;
  }

  function sortBy(col, dir) {
    bodies.forEach(function (tbody) {       // each body on its own: the groups never interleave
      var rows = runRows(tbody);
      rows.sort(function (a, b) {
        var ka = key(a, col), kb = key(b, col);
        if (ka === null || kb === null) { return ka === kb ? 0 : (ka === null ? 1 : -1); }
        if (typeof ka !== typeof kb) { ka = String(ka); kb = String(kb); }
        return ka < kb ? -dir : (ka > kb ? dir : 0);
      });
      rows.forEach(function (r) { tbody.appendChild(r); });
    });
    for (var i = 0; i < heads.length; i++) {
      if (i === col) { heads[i].setAttribute("aria-sort", dir > 0 ? "ascending" : "descending"); }
      else { heads[i].removeAttribute("aria-sort"); }
    }
  }

  Array.prototype.forEach.call(heads, function (th, col) {
    var button = th.querySelector("button");
    if (!button) { return; }
    button.addEventListener("click", function () {
      var now = th.getAttribute("aria-sort");
      // First click: numbers largest first, text A..Z; a second click reverses.
      var dir = now === "descending" ? 1 : now === "ascending" ? -1 : (th.classList.contains("num") ? -1 : 1);
      sortBy(col, dir);
    });
  });

  var filters = document.querySelectorAll("form.filters select");
  var shown = document.getElementById("shown");
  function applyFilters() {
    var n = 0;
    bodies.forEach(function (tbody) {
      var inBody = 0;
      runRows(tbody).forEach(function (row) {
        var keep = true;
        Array.prototype.forEach.call(filters, function (sel) {
          if (sel.value !== "" && row.getAttribute("data-" + sel.name) !== sel.value) { keep = false; }
        });
        row.hidden = !keep;
        if (keep) { n++; inBody++; }
      });
      Array.prototype.forEach.call(tbody.querySelectorAll("tr.group"), function (g) { g.hidden = inBody === 0; });
    });
    if (shown) { shown.textContent = String(n); }
  }
  Array.prototype.forEach.call(filters, function (sel) { sel.addEventListener("change", applyFilters); });
  var form = document.querySelector("form.filters");
  if (form) { form.addEventListener("reset", function () { setTimeout(applyFilters, 0); }); }
  applyFilters();
})();
