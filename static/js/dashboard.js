// Asterion operator dashboard helpers, no dependencies beyond htmx and its SSE extension.
//
// - Live status: #live-status follows the page's one EventSource (htmx:sseOpen/sseError).
//   While the stream is down, #live-fallback is shown and elements whose hx-trigger names
//   asterion:poll get that event every 2 s from app.js while asterionLive.shouldPoll() (a
//   trigger filter would need eval, which the Content-Security-Policy refuses).
// - Pause: [data-live-toggle] closes the stream (by swapping #live-stream out, which makes the
//   SSE extension close its EventSource) and stops polling; resuming swaps it back in, which
//   reconnects, and every connect starts with a snapshot of the rows on the page.
// - Dialogs: [data-dialog-open] / [data-dialog-close] open and close a <dialog> where the
//   browser does not support command/commandfor itself.
// - Timers: [data-elapsed-since] shows the time since its ISO timestamp, every second.
// - Health: announces a changed set of health banners once through #health-announce.
// - Output: a job's output ([data-output]) is scrolled to its end whenever it is swapped in.
(function () {
  "use strict";

  function outputsToEnd(node) {
    if (!node || !node.querySelectorAll) return;
    var list = node.querySelectorAll("[data-output]");
    for (var i = 0; i < list.length; i++) list[i].scrollTop = list[i].scrollHeight;
  }
  document.addEventListener("htmx:afterSwap", function (ev) { outputsToEnd(ev.detail.target); });
  document.addEventListener("DOMContentLoaded", function () { outputsToEnd(document); });

  var state = { paused: false, down: false, connected: false };
  var savedStream = null;

  window.asterionLive = {
    shouldPoll: function () {
      return state.down && !state.paused && !document.hidden;
    },
    state: function () {
      return state.paused ? "paused" : state.down ? "polling" : state.connected ? "live" : "connecting";
    }
  };

  var labels = {
    live: ["Live", "bg-emerald-500"],
    connecting: ["Connecting…", "bg-slate-400"],
    polling: ["Stream lost: polling every 2 s", "bg-amber-500"],
    paused: ["Paused", "bg-slate-400"]
  };

  function render() {
    var s = window.asterionLive.state();
    var el = document.getElementById("live-status");
    if (el) {
      el.setAttribute("data-live-state", s);
      var text = el.querySelector("[data-live-text]");
      if (text && text.textContent !== labels[s][0]) text.textContent = labels[s][0];
      var dot = el.querySelector("[data-live-dot]");
      if (dot) dot.className = "h-2 w-2 rounded-full " + labels[s][1];
    }
    var fb = document.getElementById("live-fallback");
    if (fb) fb.hidden = s !== "polling";
    var btn = document.querySelector("[data-live-toggle]");
    if (btn) {
      btn.setAttribute("aria-pressed", state.paused ? "true" : "false");
      var t = btn.querySelector("[data-live-toggle-text]");
      if (t) t.textContent = state.paused ? "Resume live updates" : "Pause live updates";
    }
  }

  document.addEventListener("htmx:sseOpen", function () {
    state.down = false;
    state.connected = true;
    render();
  });
  document.addEventListener("htmx:sseError", function () {
    if (state.paused) return;
    state.down = true;
    state.connected = false;
    render();
  });

  function swapOuter(el, html) {
    if (window.htmx && htmx.swap) {
      htmx.swap(el, html, { swapStyle: "outerHTML", swapDelay: 0, settleDelay: 0 });
    } else {
      el.outerHTML = html;
    }
  }

  document.addEventListener("click", function (ev) {
    var t = ev.target.closest ? ev.target : null;
    if (!t) return;
    var toggle = t.closest("[data-live-toggle]");
    if (toggle) {
      var stream = document.getElementById("live-stream");
      if (!stream) return;
      if (!state.paused) {
        savedStream = stream.outerHTML;
        state.paused = true;
        state.down = false;
        state.connected = false;
        swapOuter(stream, '<div id="live-stream" data-live-stream hidden></div>');
      } else if (savedStream) {
        state.paused = false;
        state.connected = false;
        swapOuter(stream, savedStream);
      }
      render();
      return;
    }
    var opener = t.closest("[data-dialog-open]");
    if (opener && !("commandForElement" in opener)) {
      var d = document.getElementById(opener.getAttribute("data-dialog-open"));
      if (d && d.showModal && !d.open) d.showModal();
      return;
    }
    var closer = t.closest("[data-dialog-close]");
    if (closer && !("commandForElement" in closer)) {
      var dc = document.getElementById(closer.getAttribute("data-dialog-close"));
      if (dc && dc.close) dc.close();
    }
  });

  function fmt(ms) {
    var s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) return s + " s";
    var m = Math.floor(s / 60);
    if (m < 60) return s % 60 ? m + " min " + (s % 60) + " s" : m + " min";
    var h = Math.floor(m / 60);
    if (h < 48) return h + " h " + (m % 60) + " min";
    return Math.floor(h / 24) + " d " + (h % 24) + " h";
  }

  function tick() {
    var now = Date.now();
    var els = document.querySelectorAll("[data-elapsed-since]");
    for (var i = 0; i < els.length; i++) {
      var since = Date.parse(els[i].getAttribute("data-elapsed-since"));
      if (isNaN(since)) continue;
      var text = fmt(now - since);
      if (els[i].textContent !== text) els[i].textContent = text;
    }
  }
  setInterval(tick, 1000);

  var lastBanners = null;
  function banners() {
    var els = document.querySelectorAll("[data-health-banners] [data-banner]");
    var parts = [];
    for (var i = 0; i < els.length; i++) parts.push(els[i].textContent.replace(/\s+/g, " ").trim());
    return parts.join(" ");
  }
  document.addEventListener("htmx:afterSwap", function (ev) {
    if (!ev.target || ev.target.id !== "health-panel") return;
    var now = banners();
    if (lastBanners !== null && now !== lastBanners) {
      var live = document.getElementById("health-announce");
      if (live) live.textContent = now || "All clear: workers are alive and nothing is past due.";
    }
    lastBanners = now;
  });

  document.addEventListener("DOMContentLoaded", function () {
    lastBanners = banners();
    render();
  });
})();
