// The pieces every rich-data panel shares: the step slider, the rank picker, one logged
// item drawn by its kind, and the full-size overlay. Used by the run page's Media tab and
// the Compare page. Every caption, key and text panel reaches the page as a text node;
// an html panel is shown only from the blob route, in a sandboxed frame (its scripts never
// run, and it never shares the dashboard's origin: the route also sends `CSP: sandbox`).

import { useEffect, useRef } from "preact/hooks";
import { api, blobUrl } from "../api.js";
import { useLoad } from "../hooks.js";
import { describeItem, playerFor, sortLabels, stepIndex } from "../lib/media.js";

/** A slider over the logged `steps` (ascending) showing the step in use. */
export function StepSlider({ steps, step, onChange, label = "Step" }) {
  if (!steps?.length) return null;
  const i = stepIndex(steps, step);
  const shown = steps[i];
  return (
    <label class="step-slider">
      <span class="muted small">{label}</span>
      <input
        type="range"
        min={0}
        max={steps.length - 1}
        step={1}
        value={i}
        disabled={steps.length < 2}
        aria-label={`${label} (${steps.length} logged)`}
        aria-valuetext={`step ${shown}`}
        onInput={(e) => onChange(steps[Number(e.currentTarget.value)])}
      />
      <output class="step-value" data-step={shown}>{shown.toLocaleString("en-US")}</output>
    </label>
  );
}

/** Which rank's values are shown, in a shared run (nothing when only one rank logged). */
export function RankPicker({ labels, value, onChange }) {
  if (!labels || labels.length < 2) return null;
  return (
    <label class="rank-picker">
      <span class="muted small">Rank</span>
      <select value={value ?? ""} aria-label="Rank" onChange={(e) => onChange(e.currentTarget.value)}>
        {sortLabels(labels).map((l) => (
          <option key={l} value={l}>{l}</option>
        ))}
      </select>
    </label>
  );
}

/** One logged item, drawn by its kind. `onOpen(item)` opens an image full size. */
export function MediaItemView({ project, item, onOpen }) {
  const src = blobUrl(project, item.digest);
  const player = playerFor(item);
  const caption = item.caption ? <figcaption class="caption">{item.caption}</figcaption> : null;
  const meta = <span class="media-meta muted small">{describeItem(item)}</span>;
  if (player === "img") {
    return (
      <figure class={`media-item media-${item.kind}`} data-kind={item.kind} data-format={item.format}>
        <button type="button" class="media-open" title="Open full size" onClick={() => onOpen?.(item)}>
          <img
            src={src}
            alt={item.caption ?? `${item.kind} ${item.index}`}
            loading="lazy"
            width={item.width ?? undefined}
            height={item.height ?? undefined}
          />
        </button>
        {caption}
        {meta}
      </figure>
    );
  }
  if (player === "video") {
    return (
      <figure class="media-item media-video" data-kind="video" data-format={item.format}>
        <video controls preload="metadata" src={src} width={item.width ?? undefined} />
        {caption}
        {meta}
      </figure>
    );
  }
  if (player === "audio") {
    return (
      <figure class="media-item media-audio" data-kind="audio" data-format={item.format}>
        <audio controls preload="metadata" src={src} />
        {caption}
        {meta}
      </figure>
    );
  }
  if (player === "html") {
    return (
      <figure class="media-item media-html" data-kind="html">
        {/* No sandbox token is granted: no scripts, forms, popups or same-origin access. */}
        <iframe
          sandbox=""
          src={blobUrl(project, item.digest, { inline: true })}
          title={item.caption ?? "html panel"}
          referrerpolicy="no-referrer"
          loading="lazy"
        />
        {caption}
      </figure>
    );
  }
  return <TextItem project={project} item={item} caption={caption} />;
}

function TextItem({ project, item, caption }) {
  const text = useLoad((signal) => api.blobText(project, item.digest, { signal }), [project, item.digest]);
  return (
    <figure class="media-item media-text" data-kind="text">
      {text.error ? <span class="error-text small">{String(text.error.message)}</span> : null}
      <pre class="text-panel">{text.data ?? ""}</pre>
      {caption}
    </figure>
  );
}

/** An image at full size over the page; Escape, the close button or a click outside closes it. */
export function FullSize({ project, item, onClose }) {
  const closeRef = useRef(null);
  useEffect(() => {
    if (!item) return undefined;
    closeRef.current?.focus();
    const onKey = (e) => {
      if (e.key === "Escape") onClose();
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [item, onClose]);
  if (!item) return null;
  return (
    <div class="lightbox" role="dialog" aria-modal="true" aria-label="Full size" onClick={onClose}>
      <figure class="lightbox-body" onClick={(e) => e.stopPropagation()}>
        <button ref={closeRef} type="button" class="icon lightbox-close" aria-label="Close" onClick={onClose}>×</button>
        <img class="full-size" src={blobUrl(project, item.digest)} alt={item.caption ?? "full size"} />
        {item.caption ? <figcaption class="caption">{item.caption}</figcaption> : null}
        <span class="muted small">step {item.step} · rank {item.label} · {describeItem(item)}</span>
      </figure>
    </div>
  );
}
