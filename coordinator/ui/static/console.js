// Live status: rows and pages marked data-live follow their study while it runs, from its
// server-sent events (/ui/studies/{id}/events), or by polling its status every second when the
// browser or the connection cannot stream; a study page reloads once the study ended (to show
// its results). And the study builder's names: each catalog name (an option, a checkbox's
// label, a row of boxes) marked data-datasets is offered only while one of its datasets is
// chosen. No other
// script: without it every name is offered, and the coordinator refuses a name the dataset
// lacks (422 unknown_name, the field marked).
"use strict";
(function () {
  const ended = new Set(["succeeded", "partially_failed", "failed", "failed_resumable", "cancelled"]);
  function follow(el) {
    const id = el.dataset.study;
    const base = "/ui/studies/" + encodeURIComponent(id);
    // Shows a state; whether the study ended.
    function show(data) {
      const row = el.closest("tr") || document;
      const status = row.querySelector("[data-field=status]");
      if (status) { status.textContent = data.status; status.className = "status status-" + data.status; }
      const received = row.querySelector("[data-field=releases_received]");
      if (received) received.textContent = String(data.releases_received);
      if (ended.has(data.status)) {
        if (el.dataset.reload) window.location.reload();
        return true;
      }
      return false;
    }
    async function tick() {
      let answer;
      try {
        answer = await fetch(base + "/status", {credentials: "same-origin", cache: "no-store"});
      } catch (e) { setTimeout(tick, 3000); return; }
      if (!answer.ok) return;
      if (!show(await answer.json())) setTimeout(tick, 1000);
    }
    if (!window.EventSource) { tick(); return; }
    const events = new EventSource(base + "/events");
    let done = false;
    function onEvent(message) {
      if (show(JSON.parse(message.data))) { done = true; events.close(); }
    }
    events.addEventListener("progress", onEvent);
    events.addEventListener("end", onEvent);
    // A stream refused or cut: poll instead (EventSource would retry on its own, quietly).
    events.onerror = function () { events.close(); if (!done) tick(); };
  }
  function offers(el, dataset) {
    return el.dataset.datasets.split(" ").indexOf(dataset) >= 0;
  }
  function filterNames(chooser) {
    const form = chooser.form;
    function apply() {
      const dataset = chooser.value;
      form.querySelectorAll("option[data-datasets]").forEach(function (option) {
        const shown = offers(option, dataset);
        option.hidden = !shown;
        option.disabled = !shown;
      });
      // A checkbox's label, or a row of boxes (bounds per variable): hidden, and what it
      // holds neither posted nor ticked.
      form.querySelectorAll("[data-datasets]:not(option)").forEach(function (el) {
        const shown = offers(el, dataset);
        el.hidden = !shown;
        el.querySelectorAll("input").forEach(function (box) {
          box.disabled = !shown;
          if (!shown && box.type === "checkbox") box.checked = false;
        });
      });
      // A select left on a name the dataset lacks moves to its blank option, else its first
      // name offered (a disabled option is not posted).
      form.querySelectorAll("select").forEach(function (select) {
        const chosen = select.options[select.selectedIndex];
        if (!chosen || !chosen.disabled) return;
        const next = Array.prototype.find.call(select.options, function (o) { return !o.disabled; });
        select.selectedIndex = next ? next.index : -1;
      });
    }
    chooser.addEventListener("change", apply);
    apply();
  }
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-live]").forEach(follow);
    const chooser = document.querySelector("form.builder select#dataset");
    if (chooser) filterNames(chooser);
  });
})();
