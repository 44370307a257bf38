// Light or dark: the reader's choice ("light", "dark") kept in localStorage,
// else the system's setting, followed live. Loaded as a plain script in the
// <head>, before the page paints, so a dark page never flashes white. The
// stylesheet reads <html data-theme>; the code-highlighting theme follows.
(function () {
  const KEY = "chatforge.theme";
  const system = window.matchMedia("(prefers-color-scheme: dark)");

  function chosen() {
    try { return localStorage.getItem(KEY) || "auto"; } catch { return "auto"; }
  }

  function apply() {
    const choice = chosen();
    const theme = choice === "auto" ? (system.matches ? "dark" : "light") : choice;
    document.documentElement.dataset.theme = theme;
    document.documentElement.dataset.themeChoice = choice;
    document.querySelectorAll("link[data-code-theme]").forEach((link) => {
      link.media = link.dataset.codeTheme === theme ? "all" : "not all";
    });
    const toggle = document.getElementById("theme-toggle");
    if (toggle) {
      toggle.textContent = { auto: "Theme: auto", dark: "Theme: dark", light: "Theme: light" }[choice];
      toggle.setAttribute("aria-label", `Colour theme: ${choice} (click to change)`);
    }
  }

  const NEXT = { auto: "dark", dark: "light", light: "auto" };
  function cycle() {
    try { localStorage.setItem(KEY, NEXT[chosen()]); } catch { /* private mode: this page only */ }
    apply();
  }

  system.addEventListener("change", apply);
  apply();
  document.addEventListener("DOMContentLoaded", () => {
    apply();
    document.getElementById("theme-toggle")?.addEventListener("click", cycle);
  });
})();
