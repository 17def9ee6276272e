// Live status: rows and pages marked data-live poll their study's status every second while it
// runs; a study page reloads once the study ended (to show its results). No other script.
"use strict";
(function () {
  const ended = new Set(["succeeded", "partially_failed", "failed", "failed_resumable", "cancelled"]);
  function follow(el) {
    const id = el.dataset.study;
    async function tick() {
      let answer;
      try {
        answer = await fetch("/ui/studies/" + encodeURIComponent(id) + "/status",
                             {credentials: "same-origin", cache: "no-store"});
      } catch (e) { setTimeout(tick, 3000); return; }
      if (!answer.ok) return;
      const data = await answer.json();
      const row = el.closest("tr") || document;
      const status = row.querySelector("[data-field=status]");
      if (status) { status.textContent = data.status; status.className = "status status-" + data.status; }
      const received = row.querySelector("[data-field=releases_received]");
      if (received) received.textContent = String(data.releases_received);
      if (ended.has(data.status)) {
        if (el.dataset.reload) window.location.reload();
        return;
      }
      setTimeout(tick, 1000);
    }
    tick();
  }
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-live]").forEach(follow);
  });
})();
