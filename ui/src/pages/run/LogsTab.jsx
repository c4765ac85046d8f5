// The Logs tab: what every rank printed, in time order, for logs of any length.
//
// * Filters: one rank or one node (kept in the URL, so the health strip can link to a
//   rank's logs), stdout/stderr, and a text search (case-insensitive substring, asked of
//   the server).
// * A virtual list (lib/logs.js): only the rows in view exist; pages of PAGE lines are
//   fetched by offset as they scroll into view and kept in a bounded cache, so scrolling
//   through a million lines costs a few requests, not a million rows.
// * Live tail: while the run runs, the newest lines are re-read every second; "Follow"
//   keeps the view on them, and scrolling up leaves it.
// * Jump to a time: the first line at or after it, and where it is among all.
//
// Lines are text nodes: ANSI colours become styled spans (lib/escape.js ansiSegments),
// nothing a process printed is ever parsed as HTML.

import { useEffect, useLayoutEffect, useMemo, useRef, useState } from "preact/hooks";
import { api } from "../../api.js";
import { LIVE_MS, useLoad } from "../../hooks.js";
import { href, navigate } from "../../router.js";
import { ansiSegments } from "../../lib/escape.js";
import { fmtInt, fmtTime } from "../../lib/format.js";
import { rankColor } from "../../lib/colors.js";
import {
  LineCache, PAGE, ROW_PX, consoleParams, contentHeight, fmtClock, indexAt, missingPages,
  parseJumpTime, rowRange, rowsInView, scrollTopFor,
} from "../../lib/logs.js";
import { Empty, ErrorBox, Segmented } from "../../components/common.jsx";
import { latestStreams } from "../../lib/streams.js";
import "../../components/health.css";

const STREAMS = [
  { value: "all", label: "All" },
  { value: "stdout", label: "stdout" },
  { value: "stderr", label: "stderr" },
];

function useDebounced(value, ms) {
  const [v, setV] = useState(value);
  useEffect(() => {
    const id = setTimeout(() => setV(value), ms);
    return () => clearTimeout(id);
  }, [value, ms]);
  return v;
}

export function LogsTab({ run, params }) {
  const label = params.get("label") || "";
  const node = params.get("node") ?? "";
  const [stream, setStream] = useState("all");
  const [text, setText] = useState("");
  const q = useDebounced(text, 250);
  const live = run.state === "running";
  const filters = useMemo(() => consoleParams({ label, node, stream, q }), [label, node, stream, q]);
  const setWho = (value) => {
    const [kind, v] = value ? value.split(":") : ["", ""];
    navigate(
      href.run(run.project, run.id, { tab: "logs", label: kind === "label" ? v : "", node: kind === "node" ? v : "" }),
      { replace: true },
    );
  };
  const streams = latestStreams(run.streams ?? []);
  const nodes = [...new Set(streams.map((s) => s.node))].filter((n) => n >= 0).sort((a, b) => a - b);
  const colors = useMemo(
    () => new Map(latestStreams(run.streams ?? []).map((s) => [s.label, rankColor(s.rank >= 0 ? s.rank : 0)])),
    [run.streams],
  );
  const log = useLog(run, filters, live);
  const [jump, setJump] = useState("");
  // An example from this run (its start), not a fixed time that means nothing here.
  const example = fmtClock(run.created).slice(0, 8) || "hh:mm:ss";
  const [jumpError, setJumpError] = useState("");
  const onJump = (e) => {
    e.preventDefault();
    const t = parseJumpTime(jump, run.created);
    if (t === null) {
      setJumpError(`Not a time: type ${example} or ${run.created ? fmtTime(run.created) : "yyyy-mm-dd hh:mm:ss"}`);
      return;
    }
    setJumpError("");
    log.jumpTo(t);
  };

  return (
    <div class="logs-tab">
      <div class="toolbar">
        <label>
          <span class="sr-only">Rank or node</span>
          <select value={label ? `label:${label}` : node !== "" ? `node:${node}` : ""} onChange={(e) => setWho(e.currentTarget.value)}>
            <option value="">All ranks</option>
            <optgroup label="Rank">
              {streams.map((s) => (
                <option key={s.label} value={`label:${s.label}`}>{s.label}{nodes.length > 1 ? ` (node ${s.node})` : ""}</option>
              ))}
            </optgroup>
            {nodes.length > 1 ? (
              <optgroup label="Node">
                {nodes.map((n) => <option key={n} value={`node:${n}`}>node {n}</option>)}
              </optgroup>
            ) : null}
          </select>
        </label>
        <Segmented label="Output stream" options={STREAMS} value={stream} onChange={setStream} />
        <label class="search">
          <span class="sr-only">Search the logs</span>
          <input type="search" placeholder="Search the logs" value={text} onInput={(e) => setText(e.currentTarget.value)} />
        </label>
        <form class="jump" onSubmit={onJump}>
          <label>
            <span class="sr-only">Jump to a time</span>
            <input placeholder={`Jump to ${example}`} value={jump} onInput={(e) => setJump(e.currentTarget.value)} />
          </label>
          <button type="submit" class="btn small">Go</button>
        </form>
        <label class="check" title="Keep the newest lines in view">
          <input type="checkbox" checked={log.follow} onChange={(e) => log.setFollow(e.currentTarget.checked)} />
          Follow
        </label>
        <span class="spacer" />
        <span class="muted small">
          <span data-log-total>{log.total === null ? "…" : fmtInt(log.total)}</span> {log.total === 1 ? "line" : "lines"}
          {log.total ? <> · showing from {fmtInt(Math.floor(log.at) + 1)}</> : null}
        </span>
      </div>
      {jumpError ? <p class="error-text small">{jumpError}</p> : null}
      {log.error ? <ErrorBox error={log.error} onRetry={log.reload} /> : null}
      {log.total === 0 ? (
        <Empty title={q ? "No line matches" : "No console lines"} icon="≡">
          {q || label || node !== "" || stream !== "all" ? (
            <p>Nothing printed matches these filters.</p>
          ) : (
            <p>
              Every recording process's stdout and stderr are captured by default
              (<code>console="wrap"</code>; <code>"redirect"</code> also catches C and NCCL
              output, <code>"off"</code> turns it off).
            </p>
          )}
        </Empty>
      ) : (
        <LogView log={log} colors={colors} />
      )}
    </div>
  );
}

/**
 * The list's data: total, cached lines, position, follow mode, and their fetching. The
 * tail (the newest page, which says the total) is read through useLoad: again on every
 * filter change, every LIVE_MS while live (never two at once) and once more when the run
 * ends; the pages scrolled to and a jump to a time are asked for on demand.
 */
function useLog(run, filters, live) {
  const key = JSON.stringify(filters);
  const { project, id } = run;
  // A new cache for each filter: the lines of one search are not the lines of another.
  const cache = useMemo(() => new LineCache(), [key]); // eslint-disable-line react-hooks/exhaustive-deps -- key stands for the filters the cache holds lines of
  const [total, setTotal] = useState(null);
  const [at, setAt] = useState(0);
  const [follow, setFollowState] = useState(true);
  const [pageError, setPageError] = useState(null);
  const [mark, setMark] = useState(null);
  const [, setTick] = useState(0);
  const gen = useRef(0);
  const inflight = useRef(new Set());
  const scroller = useRef(null); // set by LogView: ({toIndex, toEnd}) of the element
  const state = useRef({});
  state.current = { total, at, follow };

  useEffect(() => {
    gen.current += 1;
    inflight.current = new Set();
    setTotal(null);
    setAt(0);
    setMark(null);
  }, [key, project, id]);

  // A search is counted by scanning the lines: while live, only every tenth poll.
  const polls = useRef(0);
  const tail = useLoad(
    async (signal, { first }) => {
      const params = JSON.parse(key);
      const count = first || !params.q || ++polls.current % 10 === 0;
      const page = await api.console(project, id, { ...params, limit: PAGE, count }, { signal });
      return { page, first, key };
    },
    [key, project, id],
    { interval: live ? LIVE_MS : 0, keepOnError: true, finalRead: true },
  );
  useEffect(() => {
    // The last tail stays in tail.data while the next filter's loads: not for this cache.
    if (!tail.data || tail.data.key !== key) return;
    const { page, first } = tail.data;
    const n = page.total ?? state.current.total ?? page.lines.length;
    const offset = page.offset ?? Math.max(0, n - page.lines.length);
    cache.put(offset, page.lines, offset);
    setTotal(n);
    setPageError(null);
    setTick((t) => t + 1);
    if (first || state.current.follow) scroller.current?.toEnd(n);
  }, [tail.data, cache, key]);

  const fetchPage = (p) => {
    const mine = gen.current;
    if (inflight.current.has(p)) return;
    inflight.current.add(p);
    api.console(project, id, { ...filters, offset: p * PAGE, limit: PAGE, count: false }).then(
      (page) => {
        inflight.current.delete(p);
        if (mine !== gen.current) return;
        cache.put(p * PAGE, page.lines, state.current.at);
        setTick((t) => t + 1);
      },
      (err) => {
        inflight.current.delete(p);
        if (mine === gen.current && err?.name !== "AbortError") setPageError(err);
      },
    );
  };

  const jumpTo = (t) => {
    const mine = gen.current;
    setFollowState(false);
    api.console(project, id, { ...filters, at: t, limit: PAGE }).then(
      (page) => {
        if (mine !== gen.current) return;
        cache.put(page.offset, page.lines, page.offset);
        setTotal(page.total);
        setMark(page.lines.length ? page.offset : null);
        setTick((x) => x + 1);
        scroller.current?.toIndex(Math.max(0, page.offset - 2), page.total);
      },
      (err) => setPageError(err),
    );
  };

  const setFollow = (on) => {
    setFollowState(on);
    if (on) scroller.current?.toEnd(state.current.total ?? 0);
  };

  return {
    cache, total, at, setAt, follow, setFollow, leaveFollow: () => setFollowState(false),
    error: pageError ?? tail.error, reload: tail.reload, fetchPage, jumpTo, mark, scroller,
  };
}

function LogView({ log, colors }) {
  const el = useRef(null);
  const [viewPx, setViewPx] = useState(480);
  const total = log.total ?? 0;
  const programmatic = useRef(false);

  useLayoutEffect(() => {
    const box = el.current;
    if (!box) return undefined;
    const ro = new ResizeObserver(() => setViewPx(box.clientHeight));
    ro.observe(box);
    setViewPx(box.clientHeight);
    return () => ro.disconnect();
  }, []);

  // Scrolling by code: wait for the content height of the new total, then move.
  const pending = useRef(null);
  log.scroller.current = {
    toEnd: (n) => {
      pending.current = { index: Infinity, total: n };
    },
    toIndex: (i, n) => {
      pending.current = { index: i, total: n };
    },
  };
  useLayoutEffect(() => {
    const box = el.current;
    const want = pending.current;
    if (!box || !want || want.total !== total) return;
    pending.current = null;
    const top = want.index === Infinity
      ? box.scrollHeight - box.clientHeight
      : scrollTopFor(want.index, total, box.clientHeight);
    // Only a real move fires a scroll event (which must not end "Follow").
    if (Math.abs(box.scrollTop - top) >= 1) programmatic.current = true;
    box.scrollTop = top;
    log.setAt(indexAt(box.scrollTop, total, box.clientHeight));
  });

  const onScroll = () => {
    const box = el.current;
    if (!box) return;
    log.setAt(indexAt(box.scrollTop, total, box.clientHeight));
    if (programmatic.current) {
      programmatic.current = false;
      return;
    }
    const atEnd = box.scrollTop >= box.scrollHeight - box.clientHeight - ROW_PX;
    if (!atEnd && log.follow) log.leaveFollow();
  };

  // Fetch the pages of the rows in view and a screen around them.
  const [first, end] = rowRange(log.at, total, viewPx, rowsInView(viewPx));
  useEffect(() => {
    for (const p of missingPages(first, end, (i) => log.cache.has(i))) log.fetchPage(p);
  });

  const height = contentHeight(total);
  const visible = [];
  const top = Math.floor(log.at);
  const bottom = Math.min(total, Math.ceil(log.at + viewPx / ROW_PX) + 1);
  for (let i = top; i < bottom; i++) visible.push(i);
  return (
    <div class="log-view" ref={el} onScroll={onScroll} role="log" aria-label="Console lines">
      <div class="log-content" style={{ height: `${Math.max(height, 1)}px` }}>
        <div class="log-window" style={{ height: `${Math.min(viewPx, height)}px` }}>
          {visible.map((i) => {
            const line = log.cache.get(i);
            const y = (i - log.at) * ROW_PX;
            if (!line) return <div key={i} class="log-line loading" style={{ top: `${y}px` }}>…</div>;
            return (
              <div
                key={i}
                class={`log-line ${line.stream}${log.mark === i ? " marked" : ""}`}
                style={{ top: `${y}px` }}
                data-log-line
                title={line.text}
              >
                <span class="log-time">{fmtClock(line.time)}</span>
                <span class="log-label" data-log-label style={{ "--c": colors.get(line.label) ?? "inherit" }}>{line.label}</span>
                <span class="log-text">
                  {ansiSegments(line.text).map((s, k) => (
                    <span key={k} class={segmentClass(s)}>{s.text}</span>
                  ))}
                </span>
              </div>
            );
          })}
        </div>
      </div>
    </div>
  );
}

function segmentClass(s) {
  const c = [];
  if (s.fg) c.push(`ansi-fg-${s.fg}`);
  if (s.bg) c.push(`ansi-bg-${s.bg}`);
  if (s.bold) c.push("ansi-bold");
  if (s.dim) c.push("ansi-dim");
  if (s.italic) c.push("ansi-italic");
  if (s.underline) c.push("ansi-underline");
  return c.join(" ") || undefined;
}
