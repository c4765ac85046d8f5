// Small hooks: data that loads, reloads on a timer while the tab is visible, and keeps
// showing the previous answer while the next one is on its way (no flicker when live).

import { useCallback, useEffect, useMemo, useRef, useState } from "preact/hooks";

/** Live polling period of the dashboard (ms): pages are at most this far behind. */
export const LIVE_MS = 1000;

/** A poll's request still out after this long (ms) is given up and asked again: a reply
 * lost with its connection (a proxy, a server restarted under load) must not stop a live
 * page from following its run, since polls wait for the request before them. */
export const STALE_MS = 20000;

/**
 * The dashboard's one data-loading hook: every server read that a page or a chart shows
 * goes through it, so each gets the same rules.
 *
 * * `load(signal, {first})` runs on mount and whenever `deps` change, aborting the
 *   previous request (a reply for old parameters never lands on screen); `first` is true
 *   for that read and for `reload()`, false for the polls below.
 * * Every `interval` ms while `interval` is truthy and the page is visible it runs again
 *   quietly, but never while a request is still on its way: a slow server is not flooded.
 *   A request out for `STALE_MS` is aborted and asked again (a lost reply never stops a
 *   live page).
 * * The data on screen stays while the next answer loads (no flicker when live).
 * * Unmounting aborts the request in flight.
 *
 * `opts` is the polling period in ms, or `{interval, enabled, keepOnError, finalRead}`:
 * `enabled: false` loads nothing (a chart not scrolled near yet); `keepOnError` keeps the
 * last data beside a failed read (charts) instead of dropping it; `finalRead` reads once
 * more when polling stops (the run ended: the chart ends where the run did).
 *
 * Returns `{data, error, loading, reload}`.
 */
export function useLoad(load, deps, opts = 0) {
  const { interval = 0, enabled = true, keepOnError = false, finalRead = false } =
    typeof opts === "number" ? { interval: opts } : opts;
  const [state, setState] = useState({ data: undefined, error: null, loading: enabled });
  const loadRef = useRef(load);
  loadRef.current = load;
  const seq = useRef(0);
  const inflight = useRef(null);
  const sentAt = useRef(0);

  // quiet: a poll (skipped while a request is out, unless it has been out STALE_MS; an
  // error keeps the data on screen).
  const run = useCallback(
    (quiet) => {
      if (quiet && inflight.current && Date.now() - sentAt.current < STALE_MS) return;
      const ctl = new AbortController();
      inflight.current?.abort();
      inflight.current = ctl;
      sentAt.current = Date.now();
      const mine = ++seq.current;
      if (!quiet) setState((s) => ({ ...s, loading: true }));
      Promise.resolve()
        .then(() => loadRef.current(ctl.signal, { first: !quiet }))
        .then(
          (data) => {
            if (mine !== seq.current) return;
            setState({ data, error: null, loading: false });
          },
          (error) => {
            if (error?.name === "AbortError" || mine !== seq.current) return;
            const keep = quiet || keepOnError;
            setState((s) => ({ data: keep ? s.data : undefined, error, loading: false }));
          },
        )
        .finally(() => {
          if (inflight.current === ctl) inflight.current = null;
        });
    },
    [keepOnError],
  );

  useEffect(() => {
    if (!enabled) return undefined;
    run(false);
    return () => {
      inflight.current?.abort();
      inflight.current = null;
    };
    // `deps` are the caller's: the parameters `load` reads (it is kept in a ref, so a new
    // closure each render does not reload). The caller's list is checked where it is
    // written (eslint.config.js names useLoad as an effect hook).
    // eslint-disable-next-line react-hooks/exhaustive-deps -- deps are the caller's, checked there
  }, [enabled, run, ...deps]);

  const polling = Boolean(enabled && interval);
  const wasPolling = useRef(polling);
  useEffect(() => {
    if (finalRead && wasPolling.current && !polling && enabled) {
      inflight.current?.abort(); // the last read must not be skipped behind a poll
      inflight.current = null;
      run(true);
    }
    wasPolling.current = polling;
  }, [polling, finalRead, enabled, run]);

  useInterval(() => run(true), enabled ? interval : 0);
  const reload = useCallback(() => run(false), [run]);
  return { ...state, reload };
}

/**
 * A text box's value that is committed `ms` after typing stops (`commit(value)`, e.g.
 * into the URL) and follows `external` (that URL's value) when it changes from elsewhere
 * (back, a saved view, Clear). The echo of a value this box committed never overwrites
 * what was typed since: under load the URL catches up after more keys were pressed, and
 * taking it then dropped them ("trial-a" became "triala").
 *
 * Returns `[value, setValue]`.
 */
export function useTypedValue(external, commit, ms = 250) {
  const [value, setValue] = useState(external);
  const sent = useRef(new Set());
  const commitRef = useRef(commit);
  commitRef.current = commit;
  useEffect(() => {
    if (sent.current.has(external)) {
      sent.current.delete(external); // our own value coming back: what was typed stays
      return;
    }
    sent.current.clear();
    setValue(external);
  }, [external]);
  useEffect(() => {
    if (value === external) return undefined;
    const id = setTimeout(() => {
      sent.current.add(value);
      commitRef.current(value);
    }, ms);
    return () => clearTimeout(id);
  }, [value]); // eslint-disable-line react-hooks/exhaustive-deps -- only typing restarts the debounce
  return [value, setValue];
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

/**
 * The chart settings a chart page shares across its cards: x axis, log scale and
 * smoothing (kept in localStorage, the same for every page) and the zoom (this page's).
 * `set(patch)` takes any of them; `settings` changes identity only when one does.
 */
export function useChartSettings() {
  const [prefs, setPrefs] = useStored("chart-prefs", { x: "step", log: false, smoothing: 0 });
  const [zoom, setZoom] = useState(null);
  const settings = useMemo(() => ({ ...prefs, zoom }), [prefs, zoom]);
  const set = (patch) => {
    if ("zoom" in patch) setZoom(patch.zoom);
    const { zoom: _z, ...rest } = patch;
    if (Object.keys(rest).length) setPrefs({ ...prefs, ...rest });
  };
  return { settings, set, setZoom };
}
