// First uses that cost the page's main thread once, made by the first script while the
// app's chunk downloads instead of inside its evaluation. uPlot makes an Intl.NumberFormat
// and an Intl.DateTimeFormat when its module is evaluated: a page's first Intl object loads
// ICU's data (a new headless Chromium page: 30-140 ms for the number format and 3-26 ms for
// the time zone at load 9; a second one 0.1 ms). A page's first read of localStorage opens
// the storage (10 ms and more), which the charts' settings read.

/** Make the page's first Intl formats (uPlot's locale and time zone) and open its storage. */
export function warmFirstUses(): void {
  new Intl.NumberFormat(navigator.language).format(0);
  void new Intl.DateTimeFormat().resolvedOptions().timeZone;
  try {
    void localStorage.length;
  } catch {
    // storage turned off in this browser: the run page does without it
  }
}
