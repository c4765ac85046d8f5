// Small hooks: data that loads, reloads on a timer while the tab is visible, and keeps
// showing the previous answer while the next one is on its way (no flicker when live).

import { useCallback, useEffect, useRef, useState } from "preact/hooks";

/** Live polling period of the dashboard (ms): pages are at most this far behind. */
export const LIVE_MS = 1000;

/**
 * `load(signal)` on mount and whenever `deps` change; again every `interval` ms while
 * `interval` is truthy and the page is visible. Returns `{data, error, loading, reload}`.
 */
export function useLoad(load, deps, interval = 0) {
  const [state, setState] = useState({ data: undefined, error: null, loading: true });
  const loadRef = useRef(load);
  loadRef.current = load;
  const seq = useRef(0);
  const inflight = useRef(null);

  const run = useCallback((quiet) => {
    if (quiet && inflight.current) return; // a poll never piles up behind a slow reply
    const ctl = new AbortController();
    inflight.current?.abort();
    inflight.current = ctl;
    const mine = ++seq.current;
    if (!quiet) setState((s) => ({ ...s, loading: true }));
    Promise.resolve()
      .then(() => loadRef.current(ctl.signal))
      .then(
        (data) => {
          if (mine !== seq.current) return;
          setState({ data, error: null, loading: false });
        },
        (error) => {
          if (error?.name === "AbortError" || mine !== seq.current) return;
          setState((s) => ({ data: quiet ? s.data : undefined, error, loading: false }));
        },
      )
      .finally(() => {
        if (inflight.current === ctl) inflight.current = null;
      });
  }, []);

  useEffect(() => {
    run(false);
    return () => inflight.current?.abort();
  }, deps); // eslint-disable-line react-hooks/exhaustive-deps

  useInterval(() => run(true), interval);
  return { ...state, reload: () => run(false) };
}

/** `fn` every `ms` while the document is visible; nothing when `ms` is falsy. */
export function useInterval(fn, ms) {
  const ref = useRef(fn);
  ref.current = fn;
  useEffect(() => {
    if (!ms) return undefined;
    const id = setInterval(() => {
      if (document.visibilityState !== "hidden") ref.current();
    }, ms);
    return () => clearInterval(id);
  }, [ms]);
}

/** The current time in seconds, ticking every `ms` (for live durations). */
export function useNow(ms = 1000, active = true) {
  const [now, setNow] = useState(Date.now() / 1000);
  useInterval(() => setNow(Date.now() / 1000), active ? ms : 0);
  return now;
}

/** True once the element has come near the viewport; `visible` tracks it afterwards. */
export function useInView(rootMargin = "300px") {
  const ref = useRef(null);
  const [seen, setSeen] = useState(false);
  const [visible, setVisible] = useState(false);
  useEffect(() => {
    const el = ref.current;
    if (!el) return undefined;
    const io = new IntersectionObserver(
      (entries) => {
        for (const e of entries) {
          setVisible(e.isIntersecting);
          if (e.isIntersecting) setSeen(true);
        }
      },
      { rootMargin },
    );
    io.observe(el);
    return () => io.disconnect();
  }, [rootMargin]);
  return [ref, seen, visible];
}

/** A value persisted in localStorage (UI preferences only, never data). */
export function useStored(key, initial) {
  const [value, setValue] = useState(() => {
    try {
      const raw = localStorage.getItem(`rankwise:${key}`);
      return raw === null ? initial : JSON.parse(raw);
    } catch {
      return initial;
    }
  });
  const set = useCallback(
    (v) => {
      setValue(v);
      try {
        localStorage.setItem(`rankwise:${key}`, JSON.stringify(v));
      } catch {
        // private mode or full: the preference just does not persist
      }
    },
    [key],
  );
  return [value, set];
}
