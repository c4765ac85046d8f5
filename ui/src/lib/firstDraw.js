// Marks the moment a page's first visible charts have all been drawn, for the browser
// test's time-to-first-charts figure (and anyone curious, in the Performance panel):
//
//   performance.mark("rankwise:first-charts")        (startTime: ms since navigation)
//   performance.measure("rankwise:open-to-first-charts", "rankwise:page-open", ...)
//
// A chart is *expected* when it is in the viewport the first time it is laid out; the
// set closes when the first of them is drawn (all initially visible charts have been
// observed by then: observation is synchronous with layout, fetching is not).

export const FIRST_CHARTS = "rankwise:first-charts";
export const PAGE_OPEN = "rankwise:page-open";
export const OPEN_TO_FIRST = "rankwise:open-to-first-charts";

export function createFirstDraw(perf = globalThis.performance) {
  const pending = new Set();
  let open = true;
  let done = false;
  perf?.mark?.(PAGE_OPEN);
  return {
    expect(id) {
      if (open && !done) pending.add(id);
    },
    drawn(id) {
      if (done) return false;
      open = false;
      pending.delete(id);
      if (pending.size) return false;
      done = true;
      perf?.mark?.(FIRST_CHARTS);
      try {
        perf?.measure?.(OPEN_TO_FIRST, PAGE_OPEN, FIRST_CHARTS);
      } catch {
        // a mark cleared by someone else: the mark alone still stands
      }
      return true;
    },
    get done() {
      return done;
    },
  };
}
