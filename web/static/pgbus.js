/* pgbus dashboard behaviour. Loaded with `defer` after vendor/htmx.min.js.
 *
 * Everything here is an enhancement: every page reads and every action (a plain
 * <form method="post">) works without JavaScript. No inline script, no eval: the page's
 * Content-Security-Policy forbids both.
 *
 *  - theme: the #theme-toggle button, remembered in localStorage ("pgbus-theme");
 *  - refresh: every <section data-refresh="fragment url"> is reloaded every
 *    body[data-refresh-interval] ms by a partial request (htmx.ajax), paused while the tab is
 *    hidden, while any input[data-bulk] is checked, while a <details> inside the region is open,
 *    while keyboard focus (:focus-visible) is inside the region, and while a dialog is open;
 *  - confirm: a form with data-confirm opens the #pgbus-confirm dialog (showModal) and submits
 *    only when Confirm is chosen; Escape or Cancel leaves everything as it was;
 *  - alert: #pgbus-alert, e.g. for a bulk form pressed with nothing selected;
 *  - toasts: #pgbus-toasts output.toast dismiss themselves after 5 s;
 *  - bulk selection: data-bulk-all, data-bulk-count;
 *  - charts: [data-chart] holds ApexCharts options as JSON; their "pgbus" key holds this
 *    file's own: clock_axis, a time axis labelled in clock time (clockLabel).
 */
(function () {
  "use strict";

  var THEME_KEY = "pgbus-theme";
  var TOAST_MS = 5000;
  var root = document.documentElement;
  var script = document.currentScript;
  var staticBase = script && script.src ? new URL(".", script.src).href : "";

  // Under the strict CSP htmx must neither eval nor inject its indicator <style>. The layout's
  // <meta name="htmx-config"> says so too; this covers a layout that forgets it (htmx reads its
  // meta config and inserts styles on DOMContentLoaded, which comes after this deferred script).
  if (window.htmx) {
    htmx.config.includeIndicatorStyles = false;
    htmx.config.allowEval = false;
    htmx.config.allowScriptTags = false;
    htmx.config.historyEnabled = false;
  }

  // ---- theme ------------------------------------------------------------------------------

  function storedTheme() {
    try {
      var v = window.localStorage.getItem(THEME_KEY);
      return v === "dark" || v === "light" ? v : null;
    } catch (e) {
      return null;
    }
  }

  function effectiveTheme() {
    var chosen = root.getAttribute("data-theme");
    if (chosen === "dark" || chosen === "light") return chosen;
    return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  }

  function applyTheme(theme) {
    if (theme) root.setAttribute("data-theme", theme);
    var button = document.getElementById("theme-toggle");
    var dark = effectiveTheme() === "dark";
    if (button) {
      button.setAttribute("aria-pressed", dark ? "true" : "false");
      button.title = dark ? "Switch to light mode" : "Switch to dark mode";
    }
    charts.forEach(function (chart) {
      chart.updateOptions({ theme: { mode: dark ? "dark" : "light" } }, false, false);
    });
  }

  function setupTheme() {
    applyTheme(storedTheme());
    var button = document.getElementById("theme-toggle");
    if (button) {
      button.addEventListener("click", function () {
        var next = effectiveTheme() === "dark" ? "light" : "dark";
        try {
          window.localStorage.setItem(THEME_KEY, next);
        } catch (e) {
          /* private mode: the choice lasts for this page only */
        }
        applyTheme(next);
      });
    }
    if (window.matchMedia) {
      var query = window.matchMedia("(prefers-color-scheme: dark)");
      if (query.addEventListener) query.addEventListener("change", function () { applyTheme(null); });
    }
  }

  // ---- dialogs ----------------------------------------------------------------------------

  function anyDialogOpen() {
    return document.querySelector("dialog[open]") !== null;
  }

  // Opens the confirm dialog; calls done(true) on Confirm, done(false) on Cancel or Escape.
  function confirmDialog(message, label, danger, done) {
    var dialog = document.getElementById("pgbus-confirm");
    if (!dialog || typeof dialog.showModal !== "function") {
      done(window.confirm(message));
      return;
    }
    if (dialog.open) return; // one question at a time
    var text = document.getElementById("pgbus-confirm-message");
    var ok = document.getElementById("pgbus-confirm-ok");
    var cancel = document.getElementById("pgbus-confirm-cancel");
    if (text) text.textContent = message;
    if (ok) {
      ok.textContent = label || "Confirm";
      ok.classList.toggle("danger", !!danger);
      ok.classList.toggle("warning", !danger);
    }
    var opener = document.activeElement;
    dialog.returnValue = "";
    dialog.addEventListener("close", function onClose() {
      dialog.removeEventListener("close", onClose);
      var confirmed = dialog.returnValue === "confirm";
      if (opener && typeof opener.focus === "function" && document.contains(opener)) opener.focus();
      done(confirmed);
    });
    dialog.showModal();
    // Cancel is the safe default: Enter on an opened dialog never destroys anything.
    if (cancel) cancel.focus();
  }

  function alertDialog(message) {
    var dialog = document.getElementById("pgbus-alert");
    if (!dialog || typeof dialog.showModal !== "function") {
      window.alert(message);
      return;
    }
    if (dialog.open) return;
    var text = document.getElementById("pgbus-alert-message");
    if (text) text.textContent = message;
    var opener = document.activeElement;
    dialog.returnValue = "";
    dialog.addEventListener("close", function onClose() {
      dialog.removeEventListener("close", onClose);
      if (opener && typeof opener.focus === "function" && document.contains(opener)) opener.focus();
    });
    dialog.showModal();
    var ok = document.getElementById("pgbus-alert-ok");
    if (ok) ok.focus();
  }

  function bulkChecked(form) {
    var n = 0;
    for (var i = 0; i < form.elements.length; i++) {
      var el = form.elements[i];
      if (el.matches && el.matches("input[data-bulk]") && el.checked) n++;
    }
    return n;
  }

  function isBulkForm(form) {
    return form.hasAttribute("data-bulk-form") || form.classList.contains("bulk-actions");
  }

  function setupForms() {
    document.addEventListener("submit", function (event) {
      var form = event.target;
      if (!(form instanceof HTMLFormElement)) return;
      if ((form.getAttribute("method") || "").toLowerCase() === "dialog") return;
      if (form.dataset.pgbusConfirmed === "1") {
        delete form.dataset.pgbusConfirmed;
        return; // confirmed: let the browser submit it
      }
      var submitter = event.submitter || null;
      if (isBulkForm(form) && bulkChecked(form) === 0) {
        event.preventDefault();
        alertDialog(form.getAttribute("data-bulk-empty") || "Select at least one row first.");
        return;
      }
      // The sentence may sit on the form or on the button pressed (a bulk form has several).
      var from = submitter && submitter.hasAttribute("data-confirm") ? submitter : form;
      var message = from.getAttribute("data-confirm");
      if (!message) return;
      event.preventDefault();
      confirmDialog(
        message,
        from.getAttribute("data-confirm-label"),
        from.hasAttribute("data-danger") || form.hasAttribute("data-danger"),
        function (confirmed) {
          if (!confirmed || !document.contains(form)) return;
          form.dataset.pgbusConfirmed = "1";
          if (typeof form.requestSubmit === "function") {
            form.requestSubmit(submitter && submitter.form === form ? submitter : undefined);
          } else {
            form.submit();
          }
        }
      );
    });
  }

  // ---- bulk selection ---------------------------------------------------------------------

  function updateBulkCounts() {
    var n = document.querySelectorAll("input[data-bulk]:checked").length;
    document.querySelectorAll("[data-bulk-count]").forEach(function (el) {
      el.textContent = n === 0 ? "" : n === 1 ? "1 selected" : n + " selected";
    });
  }

  function setupBulk() {
    document.addEventListener("change", function (event) {
      var box = event.target;
      if (!(box instanceof HTMLInputElement)) return;
      if (box.hasAttribute("data-bulk-all")) {
        var scope = box.closest("table") || box.closest("section") || document;
        scope.querySelectorAll("input[data-bulk]").forEach(function (b) {
          b.checked = box.checked;
        });
      }
      if (box.hasAttribute("data-bulk") || box.hasAttribute("data-bulk-all")) updateBulkCounts();
    });
    updateBulkCounts();
  }

  // ---- auto-refresh -----------------------------------------------------------------------

  var refreshTimer = null;
  var inFlight = new WeakSet();

  function refreshInterval() {
    var v = parseInt(document.body.getAttribute("data-refresh-interval") || "0", 10);
    return isFinite(v) && v > 0 ? Math.max(v, 250) : 0;
  }

  // Why a region is not refreshed now (a string), or null when it may be.
  function pauseReason(region) {
    if (document.hidden) return "hidden";
    if (document.querySelector("input[data-bulk]:checked")) return "bulk-selection";
    if (anyDialogOpen()) return "dialog";
    if (region) {
      if (region.querySelector("details[open]")) return "details-open";
      // Keyboard focus only (a swap would drop it); a mouse click leaves focus on what was
      // clicked, which must not stop the refresh.
      var active = document.activeElement;
      if (active && active !== document.body && region.contains(active) && focusVisible(active)) {
        return "focus";
      }
    }
    return null;
  }

  function focusVisible(el) {
    try {
      return el.matches(":focus-visible");
    } catch (e) {
      return true;
    }
  }

  function refreshRegion(region) {
    var url = region.getAttribute("data-refresh");
    if (!url || inFlight.has(region) || pauseReason(region)) return;
    inFlight.add(region);
    region.setAttribute("aria-busy", "true");
    var done = function () {
      inFlight.delete(region);
      region.removeAttribute("aria-busy");
    };
    if (window.htmx && htmx.ajax) {
      // htmx leaves the target alone when the response is an error.
      htmx.ajax("GET", url, { target: region, swap: "innerHTML", source: region }).then(done, done);
    } else {
      fetch(url, { headers: { "HX-Request": "true" }, credentials: "same-origin" })
        .then(function (r) {
          if (!r.ok) throw new Error(String(r.status));
          return r.text();
        })
        .then(function (html) {
          if (!pauseReason(region)) {
            region.innerHTML = html;
            afterSwap(region);
          }
        })
        .then(done, done);
    }
  }

  function refreshAll() {
    if (pauseReason(null)) return;
    document.querySelectorAll("[data-refresh]").forEach(refreshRegion);
  }

  function startRefresh() {
    var ms = refreshInterval();
    if (!ms || refreshTimer) return;
    refreshTimer = window.setInterval(refreshAll, ms);
  }

  function stopRefresh() {
    if (refreshTimer) window.clearInterval(refreshTimer);
    refreshTimer = null;
  }

  function setupRefresh() {
    if (!refreshInterval()) return;
    document.addEventListener("visibilitychange", function () {
      if (document.hidden) {
        stopRefresh();
      } else {
        refreshAll(); // catch up at once, then keep the rhythm
        startRefresh();
      }
    });
    if (!document.hidden) startRefresh();
    document.body.addEventListener("htmx:afterSwap", function (event) {
      afterSwap(event.target);
    });
    // A refresh already on its way when its region was paused (a <details> opened, a box
    // checked, a dialog opened) is not swapped in: that would undo what the user just did.
    document.body.addEventListener("htmx:beforeSwap", function (event) {
      var target = event.detail && event.detail.target;
      if (target && inFlight.has(target) && pauseReason(target)) event.detail.shouldSwap = false;
    });
  }

  // Re-applies the behaviour that new content needs (charts, bulk counts).
  function afterSwap(container) {
    renderCharts(container);
    updateBulkCounts();
  }

  // ---- toasts -----------------------------------------------------------------------------

  function dismissLater(toast) {
    var left = TOAST_MS;
    var started = Date.now();
    var timer = null;
    function go() {
      toast.classList.add("leaving");
      window.setTimeout(function () {
        if (toast.parentNode) toast.parentNode.removeChild(toast);
      }, 300);
    }
    function arm() {
      started = Date.now();
      timer = window.setTimeout(go, left);
    }
    // Hovering or focusing a toast holds it, so it can be read to the end.
    toast.addEventListener("mouseenter", function () {
      window.clearTimeout(timer);
      left = Math.max(1000, left - (Date.now() - started));
    });
    toast.addEventListener("mouseleave", arm);
    arm();
  }

  function setupToasts() {
    var box = document.getElementById("pgbus-toasts");
    if (!box) return;
    var toasts = Array.prototype.slice.call(box.querySelectorAll(".toast"));
    if (!toasts.length) return;
    // Re-insert them after load so the aria-live region announces them: content present at
    // load time is not announced by screen readers.
    toasts.forEach(function (t) {
      box.removeChild(t);
    });
    window.setTimeout(function () {
      toasts.forEach(function (t) {
        box.appendChild(t);
        dismissLater(t);
      });
    }, 50);
  }

  // ---- charts -----------------------------------------------------------------------------

  var charts = [];

  function ensureChartStyles() {
    // ApexCharts appends an inline <style id="apexcharts-css"> unless an element with that id
    // exists; the strict CSP would refuse it. Link the vendored stylesheet under that id.
    if (document.getElementById("apexcharts-css")) return;
    var link = document.createElement("link");
    link.id = "apexcharts-css";
    link.rel = "stylesheet";
    link.href = staticBase + "vendor/apexcharts.css";
    document.head.appendChild(link);
  }

  // A time axis' labels in UTC clock time: to the millisecond when the visible span is under
  // 10 s (ApexCharts' own labels are raw epoch numbers then), to the second under two days,
  // else with the date. (Called with the value and either {w} or the chart's globals.)
  function clockLabel(horizontal) {
    return function (value, timestamp, opts) {
      var t = Number(value);
      if (!isFinite(t)) return value;
      var g = opts && (opts.w ? opts.w.globals : opts.globals);
      var span = g ? (horizontal ? g.maxY - g.minY : g.maxX - g.minX) : NaN;
      var iso = new Date(t).toISOString();
      if (span < 10000) return iso.slice(11, 23);
      if (span < 2 * 86400000) return iso.slice(11, 19);
      return iso.slice(0, 10) + " " + iso.slice(11, 16);
    };
  }

  function renderCharts(container) {
    if (!window.ApexCharts) return;
    var holders = (container || document).querySelectorAll("[data-chart]");
    if (!holders.length) return;
    ensureChartStyles();
    var dark = effectiveTheme() === "dark";
    holders.forEach(function (el) {
      if (el.dataset.pgbusChart === "1") return;
      var options;
      try {
        options = JSON.parse(el.getAttribute("data-chart"));
      } catch (e) {
        el.setAttribute("data-chart-error", "bad JSON");
        return;
      }
      options.chart = options.chart || {};
      if (!options.chart.height) options.chart.height = 260;
      options.chart.background = "transparent";
      options.chart.fontFamily = "inherit";
      options.chart.toolbar = options.chart.toolbar || { show: false };
      options.theme = Object.assign({}, options.theme || {}, { mode: dark ? "dark" : "light" });
      var own = options.pgbus || {};
      delete options.pgbus;
      if (own.clock_axis) {
        var horizontal = !!(options.plotOptions && options.plotOptions.bar && options.plotOptions.bar.horizontal);
        options.xaxis = options.xaxis || {};
        options.xaxis.labels = Object.assign({}, options.xaxis.labels, { formatter: clockLabel(horizontal) });
      }
      // The data table beside each chart is the accessible form of its data.
      el.setAttribute("aria-hidden", "true");
      el.dataset.pgbusChart = "1";
      var chart = new ApexCharts(el, options);
      charts.push(chart);
      chart.render();
    });
    // Drop charts whose element a refresh replaced.
    charts = charts.filter(function (c) {
      return c.el && document.contains(c.el);
    });
  }

  // ---- start ------------------------------------------------------------------------------

  function start() {
    setupTheme();
    setupForms();
    setupBulk();
    setupToasts();
    setupRefresh();
    renderCharts(document);
  }

  window.pgbus = {
    confirm: confirmDialog,
    alert: alertDialog,
    refreshNow: refreshAll,
    pauseReason: pauseReason,
  };

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
