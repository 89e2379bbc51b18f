// Live refresh of the tasks and run pages: every few seconds, fetch this same page and
// swap in its #live part. The pages work without it; nothing here comes from elsewhere.
// A refresh that fails says so (the page would otherwise look current while it is not).
(function () {
  "use strict";
  var main = document.querySelector("main[data-live]");
  var live = document.getElementById("live");
  if (!main || !live || !window.fetch || !window.DOMParser) { return; }
  var seconds = Number(main.getAttribute("data-live")) || 5;
  var shownAt = clock(new Date());
  var notice = document.createElement("div");
  notice.id = "live-status";
  notice.className = "alert";
  notice.setAttribute("role", "status");
  notice.setAttribute("aria-live", "polite");
  notice.hidden = true;
  live.parentNode.insertBefore(notice, live);

  function clock(date) {
    function two(n) { return (n < 10 ? "0" : "") + n; }
    // In UTC, as the pages show every time beside the task's zone (never the browser's).
    return two(date.getUTCHours()) + ":" + two(date.getUTCMinutes()) + ":" +
      two(date.getUTCSeconds()) + " UTC";
  }
  function say(words, link) {
    notice.textContent = words;
    if (link) {
      var a = document.createElement("a");
      a.href = link.href;
      a.textContent = link.text;
      notice.appendChild(document.createTextNode(" "));
      notice.appendChild(a);
    }
    notice.hidden = false;
  }
  function stale(why) {
    say("Could not refresh: " + why + " — the page shows data from " + shownAt + ".");
  }
  function loggedOut() {
    say("Your session has ended, so this page is no longer refreshed.", {
      href: "/ui/login?next=" + encodeURIComponent(window.location.pathname + window.location.search),
      text: "Log in again"
    });
  }
  function refresh() {
    // Never move what someone is reading with the keyboard.
    if (document.hidden || live.contains(document.activeElement)) { return; }
    fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (response) {
        // An ended session is sent to the login page (a redirect fetch follows).
        if (response.redirected && new URL(response.url).pathname === "/ui/login") {
          loggedOut();
          return null;
        }
        if (!response.ok) {
          stale("the server answered " + response.status);
          return null;
        }
        return response.text();
      }, function () {
        stale("the server did not answer");
        return null;
      })
      .then(function (html) {
        if (html === null) { return; }
        var page = new DOMParser().parseFromString(html, "text/html");
        var fresh = page.getElementById("live");
        if (!fresh) { stale("the answer was not this page"); return; }
        live.replaceChildren.apply(live, Array.prototype.slice.call(fresh.childNodes));
        // The heading and the title say the status too (a run that just ended).
        var heading = document.querySelector("main h1");
        var freshHeading = page.querySelector("main h1");
        if (heading && freshHeading) {
          heading.replaceChildren.apply(heading, Array.prototype.slice.call(freshHeading.childNodes));
        }
        document.title = page.title;
        var done = document.querySelector("main > .notice");
        if (done && !page.querySelector("main > .notice")) { done.remove(); }
        shownAt = clock(new Date());
        notice.hidden = true;
        // A page that is no longer live (the run ended) is not fetched again.
        if (!page.querySelector("main[data-live]")) { window.clearInterval(timer); }
      })
      .catch(function () { stale("the answer could not be read"); });
  }
  var timer = window.setInterval(refresh, seconds * 1000);
}());
