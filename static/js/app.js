// Asterion page helpers, no dependencies.
//
// - Click an element with data-copy to copy its text (or the attribute's value, when it has
//   one) to the clipboard; the element gets data-copied for a moment.
// - <time datetime="..." data-relative> shows "3 min ago", keeps the exact time in its title,
//   and is refreshed every 30 s and whenever htmx adds content.
// - Elements whose hx-trigger names asterion:poll are polled every 2 s while their page says so
//   (see the end).
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

  renderTimes(document);
  setInterval(function () { renderTimes(document); }, 30000);
  document.addEventListener("htmx:load", function (ev) {
    // The parent, so that a swapped-in <time> itself is found too.
    var elt = ev.detail && ev.detail.elt;
    renderTimes(elt && elt.parentNode && elt.parentNode.querySelectorAll ? elt.parentNode : document);
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
