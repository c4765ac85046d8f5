// The run page's Media tab: one card per media key (images, galleries, audio, video,
// html and text panels), each at one step picked with a slider and, in a shared run, one
// rank picked from the ranks that logged the key. A click on an image opens it full size.

import { useState } from "preact/hooks";
import { api } from "../../api.js";
import { useLoad } from "../../hooks.js";
import { orderItems, pickLabel, pickStep } from "../../lib/media.js";
import { Empty, ErrorBox, Spinner } from "../../components/common.jsx";
import { FullSize, MediaItemView, RankPicker, StepSlider } from "../../components/MediaPanels.jsx";

/** `keys`: the media keys of this run (splitKeys(...).media); `primary`: rank 0's label. */
export function MediaTab({ run, keys, primary, live }) {
  const [open, setOpen] = useState(null);
  if (!keys.length) {
    return (
      <Empty title="No media logged" icon="▦">
        Log images, audio, video or html with{" "}
        <code>run.log({"{"}"samples": [rankwise.Image(x, caption="…")]{"}"})</code>.
      </Empty>
    );
  }
  return (
    <div class="media-tab">
      {keys.map((k) => (
        <MediaCard key={k.key} run={run} mkey={k} primary={primary} live={live} onOpen={setOpen} />
      ))}
      <FullSize project={run.project} item={open} onClose={() => setOpen(null)} />
    </div>
  );
}

/** One media key: slider, rank picker, and the items logged at that step by that rank. */
export function MediaCard({ run, mkey, primary, live, onOpen }) {
  const [picked, setPicked] = useState(null); // null: the latest step (follows a live run)
  const [rank, setRank] = useState("");
  const label = pickLabel(mkey.labels, rank, primary);
  // The reply's own steps are this rank's (the key's are every rank's): the slider uses them.
  const [rankSteps, setRankSteps] = useState(null);
  const steps = rankSteps ?? mkey.steps;
  const step = pickStep(steps, picked);
  const items = useLoad(
    async (signal) => {
      const reply = await api.media(run.project, run.id, { key: mkey.key, label, step }, { signal });
      setRankSteps(reply.steps?.length ? reply.steps : null);
      return reply;
    },
    [run.project, run.id, mkey.key, label, step],
    { interval: live && picked === null ? 5000 : 0, keepOnError: true },
  );
  const shown = orderItems(items.data?.items);
  return (
    <section class="media-card card" data-media-key={mkey.key} aria-label={mkey.key}>
      <header class="media-card-head">
        <h3 class="media-key">{mkey.key}</h3>
        <span class="muted small">{mkey.kind}</span>
        <span class="spacer" />
        <RankPicker labels={mkey.labels} value={label} onChange={(l) => { setRank(l); setRankSteps(null); }} />
        <StepSlider steps={steps} step={step} onChange={setPicked} />
      </header>
      {items.error ? <ErrorBox error={items.error} onRetry={items.reload} /> : null}
      {!items.data && !items.error ? <Spinner /> : null}
      {items.data && !shown.length ? <p class="muted small">Nothing logged at step {step} by rank {label}.</p> : null}
      <div class={`media-grid media-grid-${mkey.kind}`}>
        {shown.map((it) => (
          <MediaItemView key={`${it.step}/${it.index}/${it.digest}`} project={run.project} item={it} onOpen={onOpen} />
        ))}
      </div>
    </section>
  );
}
