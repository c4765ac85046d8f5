// Chart requests go through one small priority queue: charts on screen are asked for
// before the ones prefetched just below it (the browser's own queue of six connections
// per host is first come, first served, so a prefetch could otherwise delay what the user
// is looking at), and a request whose chart went away is dropped before it is sent.

export function createQueue(limit = 6) {
  let active = 0;
  let order = 0;
  let scheduled = false;
  const waiting = [];

  // Dispatch after the current task: the charts that come into view together (one
  // IntersectionObserver callback, one batch of effects) are sorted before any is sent.
  const schedule = () => {
    if (scheduled) return;
    scheduled = true;
    queueMicrotask(() => {
      scheduled = false;
      pump();
    });
  };

  const pump = () => {
    while (active < limit && waiting.length) {
      waiting.sort((a, b) => a.priority - b.priority || a.order - b.order);
      const job = waiting.shift();
      if (job.signal?.aborted) {
        job.reject(new DOMException("aborted", "AbortError"));
        continue;
      }
      active++;
      Promise.resolve()
        .then(job.fn)
        .then(job.resolve, job.reject)
        .finally(() => {
          active--;
          schedule();
        });
    }
  };

  /** Runs `fn` when a slot is free; lower `priority` first, then first come. */
  function run(priority, fn, signal) {
    return new Promise((resolve, reject) => {
      const job = { priority, order: order++, fn, resolve, reject, signal };
      signal?.addEventListener("abort", () => {
        const i = waiting.indexOf(job);
        if (i >= 0) {
          waiting.splice(i, 1);
          reject(new DOMException("aborted", "AbortError"));
        }
      });
      waiting.push(job);
      schedule();
    });
  }

  return { run, get active() { return active; }, get waiting() { return waiting.length; } };
}

/** The dashboard's queue for chart data. */
export const charts = createQueue(6);

/** 0 for an element on screen now, 1 for one near it (prefetched). */
export function priorityOf(el) {
  if (!el) return 1;
  const r = el.getBoundingClientRect();
  return r.bottom > 0 && r.top < window.innerHeight ? 0 : 1;
}
