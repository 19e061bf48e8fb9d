// Progressive enhancement only: every page works without it.
(function () {
  "use strict";

  // The value an element named by data-shown-by has: a select's or a checked radio's value, a
  // checkbox's value when checked ("" when not).
  function valueOf(form, name) {
    var field = form.elements.namedItem(name);
    if (!field) return null;
    if (field.type === "checkbox") return field.checked ? field.value : "";
    return field.value;
  }

  // Show only the inputs of the chosen option (schedule kind, replay mode, protocol, formats, target).
  function syncChoices(form) {
    form.querySelectorAll("[data-kind]").forEach(function (el) {
      var chosen = form.querySelector("input[name=schedule_kind]:checked");
      el.hidden = !chosen || chosen.value !== el.dataset.kind;
    });
    form.querySelectorAll("[data-mode]").forEach(function (el) {
      var chosen = form.querySelector("input[name=mode]:checked");
      el.hidden = !chosen || chosen.value !== el.dataset.mode;
    });
    // data-shown-by names an input; data-when, the values (space-separated) that show the element.
    form.querySelectorAll("[data-shown-by]").forEach(function (el) {
      var value = valueOf(form, el.dataset.shownBy);
      if (value !== null) el.hidden = el.dataset.when.split(" ").indexOf(value) < 0;
    });
  }

  // A copy button (data-copy: the id of the input it copies; data-copied: where to say it did).
  function copyButton(button) {
    var source = document.getElementById(button.dataset.copy);
    var said = document.getElementById(button.dataset.copied);
    if (!source) return;
    button.hidden = false;
    button.addEventListener("click", function () {
      function done(ok) {
        if (said) said.textContent = ok ? "Copied to the clipboard." : "Select the key and copy it (Ctrl+C).";
      }
      source.select();
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(source.value).then(function () { done(true); }, function () {
          done(document.execCommand("copy"));
        });
      } else {
        done(document.execCommand("copy"));
      }
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
    document.querySelectorAll("button[data-copy]").forEach(copyButton);
    var main = document.getElementById("main");
    if (main) refresh(main);
  });
})();
