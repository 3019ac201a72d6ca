// Gradio 6.31's StatusTracker (its statustracker-*.js chunk) counts an event's elapsed time in a
// requestAnimationFrame loop that starts while the event is pending and stops only when its status changes. The
// page's loading screen is such a tracker, removed while pending: its loop then runs as long as the page is open,
// 60 frames a second on an idle page, about half of what an idle studio tab costs the machine
// (python benchmarks/idle_tab_cpu.py). This script runs first in the page (studio/page_prelude.py), before Gradio's
// modules keep their own copy of requestAnimationFrame, and gives that chunk's frames at most 10 a second: enough for
// the tenths of a second the tracker shows. Every other caller's frames are untouched. (Gradio has no setting for
// it; a loop stopped on unmount would be the fix there.)
(() => {
  const TRACKER_CHUNK = /\/statustracker-[\w-]*\.js/;
  const TRACKER_FRAME_MS = 100;
  const frame = window.requestAnimationFrame.bind(window);
  const cancelFrame = window.cancelAnimationFrame.bind(window);
  const paced = new Map(); // the id handed out for a tracker frame -> its timer, then its frame
  let lastId = 0;
  window.requestAnimationFrame = (callback) => {
    if (!TRACKER_CHUNK.test(new Error().stack || "")) return frame(callback);
    const id = --lastId; // below zero: never one of the browser's own ids
    const entry = {};
    entry.timer = setTimeout(() => {
      entry.frame = frame((time) => {
        paced.delete(id);
        callback(time);
      });
    }, TRACKER_FRAME_MS);
    paced.set(id, entry);
    return id;
  };
  window.cancelAnimationFrame = (id) => {
    const entry = paced.get(id);
    if (!entry) return cancelFrame(id);
    clearTimeout(entry.timer);
    if (entry.frame !== undefined) cancelFrame(entry.frame);
    paced.delete(id);
  };
})();
//# sourceURL=studio-tracker-pacing.js
