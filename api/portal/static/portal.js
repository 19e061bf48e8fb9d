// Progressive enhancement only: every page works without it.
(function () {
  "use strict";

  // Show only the inputs of the chosen option (schedule kind, replay mode, value format, registry auth).
  function syncChoices(form) {
    form.querySelectorAll("[data-kind]").forEach(function (el) {
      var chosen = form.querySelector("input[name=schedule_kind]:checked");
      el.hidden = !chosen || chosen.value !== el.dataset.kind;
    });
    form.querySelectorAll("[data-mode]").forEach(function (el) {
      var chosen = form.querySelector("input[name=mode]:checked");
      el.hidden = !chosen || chosen.value !== el.dataset.mode;
    });
    // data-shown-by names a select; data-when, the values (space-separated) that show the element.
    form.querySelectorAll("[data-shown-by]").forEach(function (el) {
      var sel = form.elements.namedItem(el.dataset.shownBy);
      if (sel) el.hidden = el.dataset.when.split(" ").indexOf(sel.value) < 0;
    });
  }

  // Refresh the parts marked data-live while the server says the page is live (a run is active).
  function refresh(main) {
    var every = parseInt(main.dataset.refresh, 10);
    if (!every) return;
    window.setTimeout(function () {
      fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
        .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
        .then(function (html) {
          var next = new DOMParser().parseFromString(html, "text/html").getElementById("main");
          if (!next) return;
          next.querySelectorAll("[data-live]").forEach(function (fresh) {
            var old = main.querySelector('[data-live="' + fresh.dataset.live + '"]');
            if (old) old.replaceWith(fresh);
          });
          if (next.dataset.refresh) { refresh(main); } else { delete main.dataset.refresh; }
        })
        .catch(function () { window.setTimeout(function () { refresh(main); }, every * 2); });
    }, every);
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("form").forEach(function (form) {
      syncChoices(form);
      form.addEventListener("change", function () { syncChoices(form); });
    });
    var main = document.getElementById("main");
    if (main) refresh(main);
  });
})();
