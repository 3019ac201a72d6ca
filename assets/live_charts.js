// The Monitor's live charts (see studio/monitor/live.py for why they live outside Gradio's events).
//
// While the Monitor is on screen, ask the studio for the charts whose data changed and hand each to
// Plotly.react, which updates the chart in place and keeps the user's zoom; the progress bar and the stats
// cards come with every answer, and the end of train.log once a second while its section is open. Once the page is up to date the question waits on the server until the
// trainer writes or the run's status changes (a long poll), so a new point shows within tens of milliseconds. The run comes from the token in the Monitor's header (data-live); smoothing and log scale
// from the Monitor's own controls.
(() => {
  const IDLE_MS = 250; // with no run, how often to ask again for the empty charts
  const GLANCE_MS = 50; // how often an idle page looks whether the Monitor came on screen or the run changed
  const RETRY_MS = 1000; // after a failed request: the studio restarting, the network blinking
  const WATCH_MS = 100; // how often a held request checks that its question still stands
  const HOLD_SECONDS = 8; // the longest the server holds a question
  const SMALL_CHART_MS = 1000; // the small charts, which a person glances at, redraw once a second
  const LOG_MS = 1000; // so does the log, and only while its section is open
  const PRELOAD_MS = 500; // after the page has loaded, so the page itself comes first
  const CHARTS_PATH = "/studio/live/charts";
  const PLOTLY_PATH = "/studio/live/plotly.js";
  const REFRESH_ID = "ts-monitor-refresh"; // the hidden button of the Monitor's Gradio refresh (studio/monitor/tab.py)
  const REFRESH_AGAIN_MS = 3000; // a refresh that did not bring the key (lost, or overtaken by an older answer)
  let plotly = null; // our own plotly.js (the basic bundle), whether or not Gradio has loaded its copy
  let plotlyLoading = null;
  let refused = null; // a token the studio does not know (it restarted): wait for the header to change
  let last = null; // the previous answer: its question, the metrics size and the run version it saw
  let small = { drawnAt: 0, size: -1 }; // when the small charts were last brought up to date, at what size
  let logAt = 0; // when the log was last asked for
  let logVersion = null; // the run version it was read at
  let refreshed = { key: null, at: 0 }; // the Monitor key a Gradio refresh was last asked for, and when

  const root = () => ((window.gradio_config && window.gradio_config.root) || "").replace(/\/+$/, "");
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  // Sleep up to ``ms``, waking early once ``ready()`` says so (a glance at the page every GLANCE_MS).
  async function sleepUntil(ready, ms) {
    for (let waited = 0; waited < ms && !ready(); waited += GLANCE_MS) await sleep(GLANCE_MS);
  }

  function loadPlotly() {
    if (plotly) return Promise.resolve(plotly);
    plotlyLoading =
      plotlyLoading ||
      new Promise((resolve, reject) => {
        const script = document.createElement("script");
        script.src = root() + PLOTLY_PATH;
        script.onload = () => resolve((plotly = window.Plotly)); // set as the script ran: ours
        script.onerror = () => {
          plotlyLoading = null;
          reject(new Error("plotly.js did not load"));
        };
        document.head.appendChild(script);
      });
    return plotlyLoading;
  }

  function chartDivs() {
    const divs = {};
    for (const div of document.querySelectorAll("[data-live-chart]")) divs[div.dataset.liveChart] = div;
    return divs;
  }

  const onScreen = (divs) => !document.hidden && divs.loss && divs.loss.offsetParent !== null;

  const logBox = () => document.querySelector("[data-live-log]");

  // What the page asks about now: the run, the loss chart's controls, and whether the log is open.
  function question() {
    const head = document.querySelector(".ts-run-head[data-live]");
    const range = document.querySelector("#ts-smoothing input[type=range]");
    const box = document.querySelector("#ts-log-y input[type=checkbox]");
    const log = logBox();
    return {
      token: head ? head.dataset.live : "",
      smoothing: range ? Number(range.value) || 0 : 0,
      logY: !!(box && box.checked),
      logOpen: !!(log && log.offsetParent !== null),
      // The page's language (assets/language.js): the server answers in it, by the ts_lang cookie; a switch
      // drops a held question so the charts and panels come again in the new language at once.
      lang: document.documentElement.lang || "",
    };
  }

  const same = (a, b) =>
    !!a && !!b && ["token", "smoothing", "logY", "logOpen", "lang"].every((field) => a[field] === b[field]);

  // How long the server may hold this question: long when the page shows everything there is; until the small
  // charts or the open log fall due when only they are behind; not at all when the question or a chart is new.
  function holdSeconds(ask, divs, wanted, now) {
    if (!last || !same(ask, last.ask) || !wanted.every((name) => divs[name] && divs[name].dataset.key)) return 0;
    let hold = HOLD_SECONDS;
    if (small.size < last.size) hold = Math.min(hold, (SMALL_CHART_MS - (now - small.drawnAt)) / 1000);
    if (ask.logOpen && logVersion !== last.version) hold = Math.min(hold, (LOG_MS - (now - logAt)) / 1000);
    return Math.max(0, hold);
  }

  // The progress bar and the stats cards, rewritten only when their HTML changed.
  function showPanels(panels) {
    for (const [name, html] of Object.entries(panels || {})) {
      const box = document.querySelector(`[data-live-panel="${name}"]`);
      if (box && box.liveHtml !== html) {
        box.innerHTML = html;
        box.liveHtml = html;
      }
    }
  }

  // The Monitor's header, state and buttons come by a Gradio event (studio/monitor/tab.py), and the header carries
  // the key of what it shows (data-monitor). Every answer brings the run's key: when the two differ, the run started,
  // paused, stopped or ended, and the page asks for that event by clicking its hidden button, once per key unless
  // it did not arrive. (A timer that sent the event every second held the main thread 65 ms or more each time, and
  // chart points waited behind it.)
  function followMonitor(token, key) {
    const head = document.querySelector(".ts-run-head[data-live]");
    if (!key || !head || head.dataset.live !== token || head.dataset.monitor === key) return;
    const now = Date.now();
    const button = document.getElementById(REFRESH_ID);
    if (!button || (refreshed.key === key && now - refreshed.at < REFRESH_AGAIN_MS)) return;
    refreshed = { key, at: now };
    button.click();
  }

  // The end of train.log, as text; it follows new lines unless the reader has scrolled up.
  function showLog(text) {
    const box = logBox();
    if (!box || box.textContent === text) return;
    const following = box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
    box.textContent = text;
    if (following) box.scrollTop = box.scrollHeight;
  }

  // The header's run changes in a Gradio update (a run picked, or Start); a mutation observer runs before the browser
  // paints that update, so the old run's curves, progress bar, stats and log are gone in the very frame the new
  // header first shows, not when the new run's first answer arrives (which can take seconds while it starts).
  let shownToken = null; // the run whose curves, panels or log the page shows
  new MutationObserver(() => {
    if (shownToken === null || question().token === shownToken) return;
    clearRun(chartDivs());
    shownToken = null;
  }).observe(document.documentElement, { subtree: true, childList: true, attributes: true, attributeFilter: ["data-live"] });

  // Empty every chart, both panels and the log at once, and forget what they showed, so the next answer draws each
  // chart whole.
  function clearRun(divs) {
    for (const div of Object.values(divs)) {
      if (plotly && div.data) plotly.purge(div);
      delete div.dataset.key;
    }
    showPanels({ progress: "", stats: "" });
    showLog("");
  }

  async function ask(divs) {
    const now = Date.now();
    const q = question();
    if (q.token && q.token === refused) return sleep(IDLE_MS);
    if (!last || last.ask.token !== q.token) {
      // Another run: every chart and the log at once, not when their once-a-second turn comes.
      small = { drawnAt: 0, size: -1 };
      logAt = 0;
    }
    // Every chart on the page (the Monitor draws the run's method's own charts beside the common ones).
    const wanted = now - small.drawnAt >= SMALL_CHART_MS ? Object.keys(divs) : ["loss"];
    const hold = holdSeconds(q, divs, wanted, now);
    const wantLog = q.logOpen && now - logAt >= LOG_MS;
    const have = {};
    for (const name of wanted) if (divs[name].dataset.key) have[name] = divs[name].dataset.key;
    const params = new URLSearchParams({
      run: q.token,
      smoothing: String(q.smoothing),
      log_y: q.logY ? "1" : "0",
      have: JSON.stringify(have),
      charts: wanted.join(","),
      since: hold > 0 ? last.version : "",
      wait: String(hold),
      log: wantLog ? "1" : "0",
    });
    const controller = new AbortController();
    // A held question that no longer stands (another run, new smoothing, the tab left) is dropped at once.
    const watcher = setInterval(() => {
      if (!same(question(), q) || !onScreen(chartDivs())) controller.abort();
    }, WATCH_MS);
    let response;
    try {
      response = await fetch(root() + CHARTS_PATH + "?" + params, { cache: "no-store", signal: controller.signal });
    } finally {
      clearInterval(watcher);
    }
    if (response.status === 404) refused = q.token;
    if (!response.ok) return sleep(RETRY_MS);
    const body = await response.json();
    // An answer about a run the header no longer shows (it changed while the answer was on its way) is dropped:
    // it would put the old run back under the new header.
    if (question().token !== q.token) return;
    shownToken = q.token;
    // The panels and the log need no plotly.js: they show even while it is still loading.
    showPanels(body.panels);
    followMonitor(q.token, body.monitor);
    if (typeof body.log === "string") {
      showLog(body.log);
      logAt = now;
      logVersion = body.version;
    }
    // The charts a training method adds show for runs of that method only (hidden until the answer says so).
    for (const [name, div] of Object.entries(divs)) {
      const box = div.closest(".ts-method-chart");
      if (box) box.classList.toggle("ts-shown", name in body.keys);
    }
    const Plotly = await loadPlotly();
    if (question().token !== q.token) return; // the run changed while plotly.js loaded
    for (const [name, figure] of Object.entries(body.figures)) {
      await Plotly.react(divs[name], figure.data, figure.layout, { ...figure.config, responsive: true });
      divs[name].dataset.key = body.keys[name];
    }
    last = { ask: q, size: body.size, version: body.version };
    if (wanted.length > 1) small = { drawnAt: now, size: body.size };
    // No run: nothing changes by itself, but a run picked or started must show at once.
    if (!q.token) return sleepUntil(() => !same(question(), q), IDLE_MS);
  }

  async function run() {
    for (;;) {
      const divs = chartDivs();
      if (!onScreen(divs)) {
        await sleep(GLANCE_MS);
        continue;
      }
      try {
        await ask(divs);
      } catch (error) {
        if (error.name !== "AbortError") await sleep(RETRY_MS);
      }
    }
  }

  run();
  // Fetch and parse plotly.js while the person is still on the form, not after they click Start.
  // (Gradio adds this script to the page once its app has started, often after the load event.)
  const preload = () => setTimeout(() => loadPlotly().catch(() => {}), PRELOAD_MS);
  if (document.readyState === "complete") preload();
  else window.addEventListener("load", preload);
})();
