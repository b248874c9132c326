// The mission field (/mission) on top of htmx 2 and htmx-ext-sse; no framework.
//
// - Drops arrive as OOB fragments (the SSE stream, the answer to a submit or an action, and
//   polling). A drop the page has not seen yet first gets an empty placeholder at its place:
//   its parent's thread (one level deeper), in prompt created_at order; the OOB swap fills it.
// - A rendering never replaces a newer one of the same drop (data-version), so a late answer
//   cannot move a drop back to an earlier state.
// - Expanded responses stay expanded across live updates.
// - Polling fallback, declared in the page like the dashboard's: #mission-poll's hx-trigger
//   asks asterionMission.shouldPoll() every 2 s, which holds while the stream is down and some
//   drop is queued or running; it then reads GET /sa-core/v1/mission/recent?since=. When that
//   lists changes, #mission-drops fetches the changed drops (OOB fragments) and the cursor
//   moves on. Polling stops as soon as nothing is in flight, and when the stream is back.
// - Live output: the stream appends a running job's text to its drop's output element
//   (#out-<job id>, OOB beforeend); the page scrolls that element to its end after each append
//   and after every rendering of a drop, and ignores appends to a drop no longer running (an
//   action's answer may have rendered it settled, with its final output, first).
// - Live updates never touch the compose bar; a successful submit clears the text it sent.
(function () {
  "use strict";

  var root = document.getElementById("mission");
  if (!root || typeof htmx === "undefined") return;
  var field = document.getElementById("field");
  var form = document.getElementById("compose");
  var text = document.getElementById("compose-text");
  var parentSelect = document.getElementById("compose-parent");
  var status = document.getElementById("live-status");

  var opened = {}; // prompt id -> true while its response is expanded
  var stream = "connecting"; // connecting | open | down
  // polledSince is the since of the mission/recent read under way; fetching holds the since
  // and as_of of a read that listed changes, while #mission-drops fetches them.
  var polledSince = "";
  var fetching = null;

  function num(el, name) {
    return Number(el.getAttribute(name) || 0);
  }
  function promptOf(drop) {
    return drop.id.replace(/^drop-/, "");
  }

  // ---- placing new drops -------------------------------------------------------------------

  function findParent(id) {
    if (!id) return null;
    return document.getElementById("drop-" + id) ||
      field.querySelector('.drop[data-response-id="' + CSS.escape(id) + '"]');
  }

  function insertSorted(container, el, selector) {
    var created = num(el, "data-created");
    var kids = container.querySelectorAll(":scope > " + selector);
    for (var i = 0; i < kids.length; i++) {
      if (num(kids[i], "data-created") > created) {
        container.insertBefore(el, kids[i]);
        return;
      }
    }
    container.appendChild(el);
  }

  function place(drop) {
    var ph = document.createElement("article");
    ph.id = drop.id;
    ph.className = "drop";
    ph.setAttribute("data-version", "0");
    ph.setAttribute("data-created", drop.getAttribute("data-created") || "0");
    var parent = findParent(drop.getAttribute("data-parent"));
    var thread = parent && parent.closest(".thread");
    if (thread) {
      ph.setAttribute("data-depth", String(Math.min(num(parent, "data-depth") + 1, 6)));
    } else {
      ph.setAttribute("data-depth", "0");
      thread = document.createElement("section");
      thread.className = "thread";
      thread.id = "thread-" + promptOf(drop);
      thread.setAttribute("data-created", ph.getAttribute("data-created"));
      var empty = document.getElementById("field-empty");
      if (empty) empty.remove();
      insertSorted(field, thread, ".thread");
    }
    insertSorted(thread, ph, ".drop");
  }

  // prepare makes placeholders for the drops of an HTML answer that are not on the page yet.
  // Fragments come in prompt created_at order, so a parent is placed before its continuations.
  function prepare(html) {
    if (typeof html !== "string" || html.indexOf("data-drop") < 0) return;
    var t = document.createElement("template");
    t.innerHTML = html;
    if (t.content.querySelector("#field")) return; // a snapshot replaces the field whole
    var drops = t.content.querySelectorAll("[data-drop][hx-swap-oob]");
    for (var i = 0; i < drops.length; i++) {
      if (drops[i].id && !document.getElementById(drops[i].id)) place(drops[i]);
    }
  }

  // ---- merging -----------------------------------------------------------------------------

  function restoreOpen(node) {
    var list = node.querySelectorAll("details[data-response]");
    for (var i = 0; i < list.length; i++) {
      var drop = list[i].closest(".drop");
      if (drop && opened[promptOf(drop)]) list[i].open = true;
    }
  }

  document.addEventListener("toggle", function (ev) {
    var d = ev.target;
    if (!d.matches || !d.matches("details[data-response]")) return;
    var drop = d.closest(".drop");
    if (!drop) return;
    if (d.open) opened[promptOf(drop)] = true;
    else delete opened[promptOf(drop)];
  }, true);

  // ---- live output -------------------------------------------------------------------------

  function toEnd(el) {
    el.scrollTop = el.scrollHeight;
  }
  function outputsToEnd(node) {
    if (!node || !node.querySelectorAll) return;
    if (node.hasAttribute && node.hasAttribute("data-output")) toEnd(node);
    var list = node.querySelectorAll("[data-output]");
    for (var i = 0; i < list.length; i++) toEnd(list[i]);
  }

  document.addEventListener("htmx:oobBeforeSwap", function (ev) {
    var target = ev.detail.target;
    if (!target || !target.hasAttribute || !target.hasAttribute("data-output")) return;
    var drop = target.closest(".drop");
    if (!drop || drop.getAttribute("data-state") !== "running") ev.detail.shouldSwap = false;
  });

  document.addEventListener("htmx:oobAfterSwap", function (ev) {
    var target = ev.detail.target;
    if (!target) return;
    // An append's target is the output itself; a drop or the field is found again by id, since
    // an outerHTML swap replaced the element the event names.
    var el = target.id ? document.getElementById(target.id) : null;
    outputsToEnd(el || target);
  });

  document.addEventListener("htmx:oobBeforeSwap", function (ev) {
    var target = ev.detail.target;
    var fragment = ev.detail.fragment;
    if (!target || !fragment) return;
    if (target.id === "field") {
      restoreOpen(fragment);
      return;
    }
    if (!target.classList || !target.classList.contains("drop")) return;
    var incoming = fragment.querySelector(".drop");
    if (!incoming) return;
    if (num(incoming, "data-version") < num(target, "data-version")) {
      ev.detail.shouldSwap = false; // an older rendering: keep what the page shows
      return;
    }
    if (!incoming.hasAttribute("data-depth") && target.hasAttribute("data-depth")) {
      incoming.setAttribute("data-depth", target.getAttribute("data-depth"));
    }
    restoreOpen(incoming);
  });

  // Answers to the page's own requests: place new drops; show 409 (the drop as it is now) and
  // 422 (the compose error) instead of dropping them.
  document.addEventListener("htmx:beforeSwap", function (ev) {
    if (!root.contains(ev.detail.elt)) return;
    var code = ev.detail.xhr.status;
    if (code === 409 || code === 422) {
      ev.detail.shouldSwap = true;
      ev.detail.isError = false;
    }
    if (ev.detail.shouldSwap) prepare(ev.detail.serverResponse);
  });

  // ---- the stream --------------------------------------------------------------------------

  function setStream(s) {
    stream = s;
    root.setAttribute("data-stream", s);
    if (status) {
      status.textContent = s === "open" ? "Live" : s === "down" ? "Reconnecting…" : "Connecting…";
    }
  }

  document.addEventListener("htmx:sseBeforeMessage", function (ev) {
    prepare(ev.detail && ev.detail.data);
  });
  document.addEventListener("htmx:sseOpen", function () {
    setStream("open");
  });
  document.addEventListener("htmx:sseError", function () {
    setStream("down");
  });

  // ---- polling fallback --------------------------------------------------------------------

  function inFlight() {
    return !!field.querySelector(".drop.is-queued, .drop.is-pending");
  }

  function asOf() {
    var s = document.getElementById("mission-sync");
    return s ? s.getAttribute("data-as-of") : "";
  }

  function setAsOf(v) {
    var s = document.getElementById("mission-sync");
    if (s && v) s.setAttribute("data-as-of", v);
  }

  window.asterionMission = {
    shouldPoll: function () {
      return stream === "down" && !fetching && inFlight();
    }
  };

  // Both polling requests carry the cursor: where the last full read or poll left off.
  document.addEventListener("htmx:configRequest", function (ev) {
    var id = ev.detail.elt && ev.detail.elt.id;
    var since;
    if (id === "mission-poll") since = polledSince = asOf();
    else if (id === "mission-drops" && fetching) since = fetching.since;
    if (since) ev.detail.parameters.since = since;
  });

  // mission/recent answers JSON: nothing to swap; fetch the drops when it lists changes.
  document.addEventListener("htmx:beforeSwap", function (ev) {
    if (!ev.detail.elt || ev.detail.elt.id !== "mission-poll") return;
    ev.detail.shouldSwap = false;
    if (ev.detail.xhr.status !== 200) return;
    var body;
    try { body = JSON.parse(ev.detail.xhr.responseText); } catch (e) { return; }
    if (!body.items || body.items.length === 0) {
      setAsOf(body.as_of);
      return;
    }
    fetching = { since: polledSince, asOf: body.as_of };
    htmx.trigger(document.getElementById("mission-drops"), "mission:changed");
  });

  // Once the changed drops are merged (OOB swaps by drop id), the cursor moves on; after a
  // failure it stays, and the next poll asks again.
  document.addEventListener("htmx:afterRequest", function (ev) {
    if (!ev.detail.elt || ev.detail.elt.id !== "mission-drops" || !fetching) return;
    if (ev.detail.successful) setAsOf(fetching.asOf);
    fetching = null;
  });

  // ---- compose bar -------------------------------------------------------------------------

  // syncParents lists every drop in "continue from" (newest first) without touching the choice.
  function syncParents() {
    if (!parentSelect) return;
    var have = {};
    for (var i = 0; i < parentSelect.options.length; i++) have[parentSelect.options[i].value] = true;
    var drops = field.querySelectorAll(".drop[data-drop]");
    for (var j = 0; j < drops.length; j++) {
      var id = promptOf(drops[j]);
      if (have[id]) continue;
      var opt = document.createElement("option");
      opt.value = id;
      opt.textContent = drops[j].getAttribute("data-excerpt") || id;
      parentSelect.insertBefore(opt, parentSelect.options[1] || null);
      have[id] = true;
    }
  }

  // markParent outlines the drop the next prompt continues.
  function markParent() {
    var want = parentSelect ? parentSelect.value : "";
    var marked = field.querySelectorAll(".drop[data-continuing]");
    for (var i = 0; i < marked.length; i++) {
      if (promptOf(marked[i]) !== want) marked[i].removeAttribute("data-continuing");
    }
    var d = want && document.getElementById("drop-" + want);
    if (d) d.setAttribute("data-continuing", "");
  }

  document.addEventListener("click", function (ev) {
    var b = ev.target.closest && ev.target.closest("[data-continue]");
    if (!b || !parentSelect) return;
    ev.preventDefault();
    syncParents();
    parentSelect.value = b.getAttribute("data-continue");
    markParent();
    if (text) text.focus();
  });
  if (parentSelect) parentSelect.addEventListener("change", markParent);

  var sent = null;
  if (form) {
    form.addEventListener("htmx:beforeRequest", function (ev) {
      if (ev.detail.elt === form) sent = text ? text.value : null;
    });
    form.addEventListener("htmx:afterRequest", function (ev) {
      if (ev.detail.elt !== form || !ev.detail.successful) return;
      // Clear only what was sent: text typed while the request was on its way stays.
      if (text && text.value === sent) text.value = "";
      if (parentSelect) parentSelect.value = "";
      sent = null;
      markParent();
    });
  }
  if (text && form) {
    text.addEventListener("keydown", function (ev) {
      if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) {
        ev.preventDefault();
        if (form.requestSubmit) form.requestSubmit();
      }
    });
  }

  var toggle = document.getElementById("show-superseded");
  if (toggle) {
    var applyToggle = function () { root.classList.toggle("show-superseded", toggle.checked); };
    toggle.addEventListener("change", applyToggle);
    applyToggle();
  }

  function afterUpdate() {
    syncParents();
    markParent();
  }
  ["htmx:afterSettle", "htmx:oobAfterSwap", "htmx:sseMessage"].forEach(function (name) {
    document.addEventListener(name, afterUpdate);
  });
  syncParents();
  outputsToEnd(field);
})();
