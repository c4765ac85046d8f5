// The Compare page's media view: one media key, side by side across the compared runs at
// one chosen step (each run shows what it had logged by then), for one rank.

import { useMemo, useState } from "preact/hooks";
import { api } from "../api.js";
import { useLoad } from "../hooks.js";
import { mergeMediaKeys, orderItems, pickLabel, pickStep } from "../lib/media.js";
import { runTitle } from "../lib/format.js";
import { ErrorBox, Spinner } from "./common.jsx";
import { FullSize, MediaItemView, RankPicker, StepSlider } from "./MediaPanels.jsx";

/** `runs`: the compared runs (with `color`); `keys`: each run's media keys, in order. */
export function CompareMedia({ runs, keys }) {
  const merged = useMemo(() => mergeMediaKeys(keys), [keys]);
  const [chosen, setChosen] = useState("");
  const [picked, setPicked] = useState(null);
  const [rank, setRank] = useState("");
  const [open, setOpen] = useState(null);
  const mkey = merged.find((m) => m.key === chosen) ?? merged[0];
  if (!mkey) return <p class="muted">None of these runs logged images, audio, video or html.</p>;
  const step = pickStep(mkey.steps, picked);
  const label = pickLabel(mkey.labels, rank, "rank-0");
  return (
    <div class="compare-media">
      <div class="toolbar">
        <label>
          <span class="muted small">Media key</span>{" "}
          <select value={mkey.key} aria-label="Media key" onChange={(e) => { setChosen(e.currentTarget.value); setPicked(null); }}>
            {merged.map((m) => <option key={m.key} value={m.key}>{m.key}</option>)}
          </select>
        </label>
        <span class="spacer" />
        <RankPicker labels={mkey.labels} value={label} onChange={setRank} />
        <StepSlider steps={mkey.steps} step={step} onChange={setPicked} />
      </div>
      <div class="compare-media-cols">
        {runs.map((r, i) => (
          <section key={`${r.project}/${r.id}`} class="card compare-media-col" style={{ "--c": r.color }} data-run={r.id} aria-label={r.name || r.id}>
            <h3 class="media-key"><span class="swatch" aria-hidden="true" /> {runTitle(r)}</h3>
            {mkey.runs.has(i) ? (
              <RunMedia run={r} mkey={mkey.key} steps={keys[i]?.find((k) => k.key === mkey.key)?.steps ?? []} step={step} label={label} onOpen={setOpen} />
            ) : (
              <p class="muted small">This run did not log {mkey.key}.</p>
            )}
          </section>
        ))}
      </div>
      <FullSize project={open?.project} item={open} onClose={() => setOpen(null)} />
    </div>
  );
}

function RunMedia({ run, mkey, steps, step, label, onOpen }) {
  const own = pickStep(steps, step);
  const items = useLoad(
    (signal) => api.media(run.project, run.id, { key: mkey, label, step: own }, { signal }),
    [run.project, run.id, mkey, label, own],
  );
  const shown = orderItems(items.data?.items);
  return (
    <>
      <p class="muted small">step {own}{own !== step ? ` (its last at or before ${step})` : ""}</p>
      {items.error ? <ErrorBox error={items.error} onRetry={items.reload} /> : null}
      {!items.data && !items.error ? <Spinner /> : null}
      {items.data && !shown.length ? <p class="muted small">Nothing from rank {label} at this step.</p> : null}
      <div class="media-grid">
        {shown.map((it) => (
          <MediaItemView key={`${it.index}/${it.digest}`} project={run.project} item={it} onOpen={(x) => onOpen({ ...x, project: run.project })} />
        ))}
      </div>
    </>
  );
}
