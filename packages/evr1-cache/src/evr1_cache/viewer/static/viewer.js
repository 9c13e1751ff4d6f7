/* evr1 viewer: filter, search and page through pre-rendered cards, from the file system (no server, no network).
 *
 * Data arrive as scripts: data/<page>/index.js calls EVR1.index({...}) with one row of filter columns per sample;
 * data/<page>/chunk-NNNNN.js calls EVR1.chunk(n, [cards, texts]) with HTML cards rendered (and escaped) by Jinja2.
 * Chunks load on demand: the cards of the current page, or all of them once a search needs their text.
 * State lives in the URL hash (#verdict=wrong&q=cat&p=2), so a view can be bookmarked and shared.
 */
"use strict";
var EVR1 = (function () {
  var idx = null;
  var chunks = {};
  var pending = {};
  var state = { filters: {}, q: "", p: 1 };
  var renderToken = 0;

  function $(id) { return document.getElementById(id); }
  function pad(n) { var s = String(n); while (s.length < 5) s = "0" + s; return s; }

  function load(c) {
    if (chunks[c]) return Promise.resolve();
    return new Promise(function (resolve, reject) {
      if (!pending[c]) {
        pending[c] = [];
        var s = document.createElement("script");
        s.src = idx.base + "/chunk-" + pad(c) + ".js";
        s.onerror = function () {
          var waiting = pending[c] || [];
          delete pending[c];
          waiting.forEach(function (w) { w[1](new Error("cannot load " + s.src)); });
        };
        document.head.appendChild(s);
      }
      pending[c].push([resolve, reject]);
    });
  }

  function chunk(c, payload) {
    chunks[c] = { cards: payload[0], texts: payload[1] };
    (pending[c] || []).forEach(function (w) { w[0](); });
    delete pending[c];
  }

  function loadAll() {
    var all = [];
    for (var c = 0; c < idx.chunks; c++) all.push(load(c));
    return Promise.all(all);
  }

  function readHash() {
    var params = new URLSearchParams(location.hash.replace(/^#/, ""));
    state = { filters: {}, q: params.get("q") || "", p: Math.max(1, parseInt(params.get("p") || "1", 10) || 1) };
    idx.filters.forEach(function (f) {
      var v = params.get(f.name);
      if (v !== null) state.filters[f.name] = v;
    });
  }

  function writeHash() {
    var params = new URLSearchParams();
    Object.keys(state.filters).forEach(function (k) { if (state.filters[k] !== "") params.set(k, state.filters[k]); });
    if (state.q) params.set("q", state.q);
    if (state.p > 1) params.set("p", String(state.p));
    var h = params.toString();
    if (("#" + h) !== location.hash && !(h === "" && location.hash === "")) {
      history.replaceState(null, "", h ? "#" + h : location.pathname + location.search);
    }
  }

  function syncControls() {
    $("q").value = state.q;
    var selects = document.querySelectorAll("#filters select");
    for (var i = 0; i < selects.length; i++) {
      var sel = selects[i];
      sel.value = state.filters[sel.dataset.name] || "";
      sel.classList.toggle("active", sel.value !== "");
    }
  }

  function matches() {
    var active = idx.filters.filter(function (f) { return (state.filters[f.name] || "") !== ""; });
    var q = state.q.trim().toLowerCase();
    var out = [];
    for (var i = 0; i < idx.rows.length; i++) {
      var row = idx.rows[i];
      var ok = true;
      for (var j = 0; j < active.length && ok; j++) {
        var f = active[j], want = state.filters[f.name];
        ok = f.multi ? (" " + row[f.col] + " ").indexOf(" " + want + " ") >= 0 : row[f.col] === want;
      }
      if (ok && q) {
        var c = chunks[Math.floor(i / idx.chunk_size)];
        ok = !!c && c.texts[i % idx.chunk_size].indexOf(q) >= 0;
      }
      if (ok) out.push(i);
    }
    return out;
  }

  function render() {
    var token = ++renderToken;
    var ready = state.q.trim() ? loadAll() : Promise.resolve();
    if (state.q.trim() && Object.keys(chunks).length < idx.chunks) $("count").textContent = "loading search text…";
    return ready.then(function () {
      if (token !== renderToken) return null;
      var hits = matches();
      var pages = Math.max(1, Math.ceil(hits.length / idx.page_size));
      if (state.p > pages) state.p = pages;
      var start = (state.p - 1) * idx.page_size;
      var shown = hits.slice(start, start + idx.page_size);
      var need = {};
      shown.forEach(function (i) { need[Math.floor(i / idx.chunk_size)] = true; });
      return Promise.all(Object.keys(need).map(function (c) { return load(Number(c)); })).then(function () {
        if (token !== renderToken) return;
        var html = shown.map(function (i) { return chunks[Math.floor(i / idx.chunk_size)].cards[i % idx.chunk_size]; });
        var box = $("cards");
        box.innerHTML = html.join("");  /* trusted: rendered and escaped by Jinja2 at build time */
        if (!shown.length) {
          var empty = document.createElement("p");
          empty.className = "empty-state";
          empty.textContent = "No sample matches these filters.";
          box.appendChild(empty);
        }
        var noun = idx.noun[idx.total === 1 ? 0 : 1];
        $("count").textContent = hits.length
          ? "Showing " + (start + 1) + "–" + (start + shown.length) + " of " + hits.length.toLocaleString("en") +
            (hits.length !== idx.total ? " matching (" + idx.total.toLocaleString("en") + " " + noun + ")" : " " + noun)
          : "0 of " + idx.total.toLocaleString("en") + " " + noun + " match";
        /* with a source filter, the responses of the other source are dimmed inside hybrid groups */
        document.body.dataset.source = state.filters.source || "";
        $("count").dataset.matches = String(hits.length);
        $("pageinfo").textContent = "page " + state.p + " / " + pages;
        ["prev", "prev2"].forEach(function (id) { $(id).disabled = state.p <= 1; });
        ["next", "next2"].forEach(function (id) { $(id).disabled = state.p >= pages; });
        document.body.dataset.ready = "1";
        writeHash();
      });
    }).catch(function (err) {
      $("count").textContent = "error: " + err.message;
      document.body.dataset.ready = "error";
    });
  }

  function go(delta) {
    state.p += delta;
    render().then(function () { window.scrollTo(0, 0); });
  }

  function bind() {
    var selects = document.querySelectorAll("#filters select");
    for (var i = 0; i < selects.length; i++) {
      selects[i].addEventListener("change", function (ev) {
        state.filters[ev.target.dataset.name] = ev.target.value;
        ev.target.classList.toggle("active", ev.target.value !== "");
        state.p = 1;
        render();
      });
    }
    var timer = null;
    $("q").addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(function () { state.q = $("q").value; state.p = 1; render(); }, 150);
    });
    $("filters").addEventListener("submit", function (ev) { ev.preventDefault(); });
    $("reset").addEventListener("click", function () { state = { filters: {}, q: "", p: 1 }; syncControls(); render(); });
    $("prev").addEventListener("click", function () { go(-1); });
    $("next").addEventListener("click", function () { go(1); });
    $("prev2").addEventListener("click", function () { go(-1); });
    $("next2").addEventListener("click", function () { go(1); });
    document.addEventListener("keydown", function (ev) {
      var typing = ev.target && (ev.target.tagName === "INPUT" || ev.target.tagName === "SELECT");
      if (ev.key === "/" && !typing) { ev.preventDefault(); $("q").focus(); }
      else if (!typing && ev.key === "ArrowRight" && !$("next").disabled) go(1);
      else if (!typing && ev.key === "ArrowLeft" && !$("prev").disabled) go(-1);
    });
    window.addEventListener("hashchange", function () { readHash(); syncControls(); render(); });
  }

  function index(data) {
    idx = data;
    readHash();
    bind();
    syncControls();
    render();
  }

  return { index: index, chunk: chunk, state: function () { return state; } };
})();
