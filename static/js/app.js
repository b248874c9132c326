// Asterion page helpers, no dependencies.
//
// - Click an element with data-copy to copy its text (or the attribute's value, when it has
//   one) to the clipboard; the element gets data-copied for a moment.
// - <time datetime="..." data-relative> shows "3 min ago", keeps the exact time in its title,
//   and is refreshed every 30 s and whenever htmx adds content.
// - Elements whose hx-trigger names asterion:poll are polled every 2 s while their page says so
//   (see the end).
// - <input type="datetime-local" data-offset-field="NAME"> keeps the hidden input NAME of its
//   form at the time zone offset (minutes west of UTC) of the chosen date, so the server reads
//   the wall-clock value in the reader's zone; <time datetime="..." data-clock> shows HH:MM in
//   the reader's zone.
(function () {
  "use strict";

  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text);
    }
    // Plain-HTTP fallback.
    return new Promise(function (resolve, reject) {
      var ta = document.createElement("textarea");
      ta.value = text;
      ta.setAttribute("readonly", "");
      ta.style.position = "fixed";
      ta.style.opacity = "0";
      document.body.appendChild(ta);
      ta.select();
      var ok = false;
      try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
      document.body.removeChild(ta);
      ok ? resolve() : reject(new Error("copy failed"));
    });
  }

  document.addEventListener("click", function (ev) {
    var el = ev.target.closest && ev.target.closest("[data-copy]");
    if (!el) return;
    var text = el.getAttribute("data-copy") || el.textContent.trim();
    copyText(text).then(function () {
      el.setAttribute("data-copied", "");
      setTimeout(function () { el.removeAttribute("data-copied"); }, 1200);
    }, function () {});
  });

  // [below this many seconds, unit, seconds per unit]
  var units = [
    [3600, "min", 60],
    [86400, "h", 3600],
    [86400 * 30, "d", 86400]
  ];

  function relative(date, now) {
    var secs = Math.round((now - date) / 1000);
    var past = secs >= 0;
    var abs = Math.abs(secs);
    if (abs < 45) return past ? "just now" : "in a moment";
    for (var i = 0; i < units.length; i++) {
      if (abs < units[i][0]) {
        var n = Math.max(1, Math.floor(abs / units[i][2]));
        return past ? n + " " + units[i][1] + " ago" : "in " + n + " " + units[i][1];
      }
    }
    return date.toLocaleDateString(undefined, { year: "numeric", month: "short", day: "numeric" });
  }

  function renderTimes(root) {
    var now = Date.now();
    var els = (root || document).querySelectorAll("time[data-relative][datetime]");
    for (var i = 0; i < els.length; i++) {
      var el = els[i];
      var iso = el.getAttribute("datetime");
      var date = new Date(iso);
      if (isNaN(date)) continue;
      if (!el.title) el.title = iso;
      var text = relative(date, now);
      if (el.textContent !== text) el.textContent = text;
    }
  }

  function two(n) { return n < 10 ? "0" + n : "" + n; }

  function renderClocks(root) {
    var els = (root || document).querySelectorAll("time[data-clock][datetime]");
    for (var i = 0; i < els.length; i++) {
      var el = els[i];
      var date = new Date(el.getAttribute("datetime"));
      if (isNaN(date)) continue;
      if (!el.title) el.title = el.getAttribute("datetime");
      var text = two(date.getHours()) + ":" + two(date.getMinutes());
      if (el.textContent !== text) el.textContent = text;
    }
  }

  function setOffset(input) {
    var name = input.getAttribute("data-offset-field");
    var field = input.form && input.form.elements[name];
    if (!field) return;
    // new Date("YYYY-MM-DDTHH:MM") is that wall-clock time in the reader's zone, so its offset
    // is the one in force at that date (summer time included).
    var date = input.value ? new Date(input.value) : new Date();
    field.value = isNaN(date) ? "" : String(date.getTimezoneOffset());
  }

  function initOffsets(root) {
    var els = (root || document).querySelectorAll("input[data-offset-field]");
    for (var i = 0; i < els.length; i++) setOffset(els[i]);
  }

  document.addEventListener("input", function (ev) {
    if (ev.target.matches && ev.target.matches("input[data-offset-field]")) setOffset(ev.target);
  });
  document.addEventListener("change", function (ev) {
    if (ev.target.matches && ev.target.matches("input[data-offset-field]")) setOffset(ev.target);
  });

  renderTimes(document);
  renderClocks(document);
  initOffsets(document);
  setInterval(function () { renderTimes(document); }, 30000);
  document.addEventListener("htmx:load", function (ev) {
    // The parent, so that a swapped-in <time> itself is found too.
    var elt = ev.detail && ev.detail.elt;
    var root = elt && elt.parentNode && elt.parentNode.querySelectorAll ? elt.parentNode : document;
    renderTimes(root);
    renderClocks(root);
  });

  // Polling fallback without eval (the Content-Security-Policy refuses it, so htmx trigger
  // filters cannot run): every 2 s, an element whose hx-trigger names asterion:poll gets that
  // event while the page object named by its data-poll-while (default asterionLive) says
  // shouldPoll().
  setInterval(function () {
    if (!window.htmx) return;
    var els = document.querySelectorAll('[hx-trigger*="asterion:poll"]');
    for (var i = 0; i < els.length; i++) {
      var o = window[els[i].getAttribute("data-poll-while") || "asterionLive"];
      if (o && typeof o.shouldPoll === "function" && o.shouldPoll()) htmx.trigger(els[i], "asterion:poll");
    }
  }, 2000);
})();
