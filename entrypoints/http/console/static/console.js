// Live refresh of the tasks and run pages: every few seconds, fetch this same page and
// swap in its #live part. The pages work without it; nothing here comes from elsewhere.
(function () {
  "use strict";
  var main = document.querySelector("main[data-live]");
  var live = document.getElementById("live");
  if (!main || !live || !window.fetch || !window.DOMParser) { return; }
  var seconds = Number(main.getAttribute("data-live")) || 5;
  function refresh() {
    // Never move what someone is reading with the keyboard.
    if (document.hidden || live.contains(document.activeElement)) { return; }
    fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (html) {
        if (html === null) { return; }
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("live");
        if (fresh) { live.replaceChildren.apply(live, Array.prototype.slice.call(fresh.childNodes)); }
      })
      .catch(function () { /* the next tick tries again */ });
  }
  window.setInterval(refresh, seconds * 1000);
}());
