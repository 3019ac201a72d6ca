// The page's language (see studio/i18n): Gradio's frontend translates the studio's words from the catalogs the
// server sent, in the language it picked from navigator.language. This script makes that the visitor's choice:
// the one picked in the header (kept in localStorage, so it survives a reload), else the first of the browser's
// languages the studio speaks, else English (so a French browser does not show Gradio's own words in French
// beside the studio's in English). It tells the server which language the page shows in the ts_lang cookie,
// which every request carries: the text the server composes (messages, the Monitor's progress line and charts)
// follows it.
(() => {
  const settings = window.tsLanguageSettings || { module: "", languages: ["en"], cookie: "ts_lang" };
  const STORAGE_KEY = "ts-language";
  const YEAR_SECONDS = 365 * 24 * 3600;

  // The studio's language for a tag such as zh-CN, zh-Hans-SG, ja-JP or en-GB, or null.
  function supported(tag) {
    if (!tag) return null;
    const parts = String(tag).toLowerCase().replace(/_/g, "-").split("-");
    if (parts[0] === "zh") {
      const traditional = parts.slice(1).some((part) => ["tw", "hk", "mo", "hant"].includes(part));
      return traditional ? null : settings.languages.find((lang) => lang === "zh-CN") || null;
    }
    return settings.languages.find((lang) => lang.toLowerCase() === parts[0]) || null;
  }

  function stored() {
    try {
      return supported(localStorage.getItem(STORAGE_KEY));
    } catch (error) {
      return null; // storage switched off: the browser's language then
    }
  }

  function fromBrowser() {
    const tags = navigator.languages && navigator.languages.length ? navigator.languages : [navigator.language];
    for (const tag of tags) {
      const lang = supported(tag);
      if (lang) return lang;
    }
    return "en";
  }

  function tellServer(lang) {
    document.cookie = `${settings.cookie}=${encodeURIComponent(lang)}; path=/; max-age=${YEAR_SECONDS}; samesite=lax`;
  }

  // Switch Gradio's frontend, through the same function its settings panel uses.
  async function switchGradio(lang) {
    if (document.documentElement.lang === lang || !settings.module) return;
    try {
      const core = await import(new URL(settings.module, document.baseURI).href);
      core.changeLocale(lang);
    } catch (error) {
      console.warn("could not switch the page's language", error);
    }
  }

  // Gradio's frontend names a tab in the new language only once that tab is shown again (the tab bar keeps the
  // names the tabs registered with), so after a switch the bar would mix two languages: name the studio's tabs
  // here, once the frontend has drawn the switch, and after each click on the bar (a tab shown anew registers its
  // name again).
  function nameTabs() {
    const lang = supported(document.documentElement.lang) || "en";
    for (const [id, names] of Object.entries(settings.tabs || {})) {
      const button = document.querySelector(`[role=tab][data-tab-id="${id}"]`);
      const name = names[lang] || names.en;
      if (button && name && button.textContent !== name) button.textContent = name;
    }
  }

  function nameTabsSoon() {
    for (const delay of [0, 100, 500, 1500]) setTimeout(nameTabs, delay);
  }

  function current() {
    return stored() || fromBrowser();
  }

  // A pick in the header: remember it, tell the server, switch the page; returns it for the server's redraw.
  function choose(lang) {
    const chosen = supported(lang) || "en";
    try {
      localStorage.setItem(STORAGE_KEY, chosen);
    } catch (error) {
      // storage switched off: the choice lasts as long as the page
    }
    tellServer(chosen);
    switchGradio(chosen);
    return chosen;
  }

  window.tsLanguage = { current, choose, supported };
  const lang = current();
  tellServer(lang); // before the page's first events, which the server answers in this language
  switchGradio(lang);
  // Whatever switches the page later (the header, Gradio's settings panel), the server hears of it.
  new MutationObserver(() => {
    tellServer(supported(document.documentElement.lang) || "en");
    nameTabsSoon();
  }).observe(document.documentElement, { attributes: true, attributeFilter: ["lang"] });
  document.addEventListener("click", (event) => {
    if (event.target instanceof Element && event.target.closest("[role=tab]")) nameTabsSoon();
  });
})();
