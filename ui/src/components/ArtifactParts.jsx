// The pieces both artifact views share (the run page's Artifacts tab and the project's
// Artifacts page): a digest shortened with the full value in its title and a copy button,
// aliases, a version's files with download links, its metadata as JSON text, and its
// lineage (the run that logged it, the runs that used it) as links to those runs.
//
// Every user-given string (names, paths, descriptions, metadata, reference URIs) is a
// text node; a reference is shown as text, never as a link the browser would follow.

import { useState } from "preact/hooks";
import { api, artifactFileUrl } from "../api.js";
import { useLoad } from "../hooks.js";
import { href } from "../router.js";
import { fmtTime } from "../lib/format.js";
import { byline, fmtBytes, manifestRows, metadataText, orderedAliases, shortDigest, versionView } from "../lib/artifacts.js";
import { ErrorBox, Spinner } from "./common.jsx";

/** A sha256 shortened; the whole value is its title, `data-digest` and the copy button's. */
export function Digest({ value }) {
  const [copied, setCopied] = useState(false);
  if (!value) return <span class="muted">–</span>;
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(value);
      setCopied(true);
      setTimeout(() => setCopied(false), 1500);
    } catch {
      // no clipboard (an insecure origin): the title still shows the whole digest
    }
  };
  return (
    <span class="digest" data-digest={value}>
      <code title={value}>{shortDigest(value)}</code>
      <button type="button" class="icon copy" title={`Copy ${value}`} aria-label="Copy digest" onClick={copy}>
        {copied ? "copied" : "copy"}
      </button>
    </span>
  );
}

/** A version's aliases (`latest` first), then its tags (log_artifact(tags=)). */
export function Aliases({ aliases, tags = [] }) {
  const list = orderedAliases(aliases);
  if (!list.length && !tags.length) return <span class="muted">–</span>;
  return (
    <span class="aliases">
      {list.map((a) => (
        <span key={a} class={a === "latest" ? "tag alias latest" : "tag alias"}>{a}</span>
      ))}
      {tags.map((t) => (
        <span key={`tag:${t}`} class="tag artifact-tag" title="tag">#{t}</span>
      ))}
    </span>
  );
}

/** A run of this project, as a link to its page ("train-1 (rank-0)"). */
export function RunLink({ project, runId, label }) {
  if (!runId) return <span class="muted">–</span>;
  return <a class="run-link" href={href.run(project, runId)}>{byline(runId, label)}</a>;
}

/** The files of one version (its manifest): path, size, digest, a download link. */
export function FileTable({ info }) {
  const rows = manifestRows(info.manifest);
  if (!rows.length) return <p class="muted small">This version holds no files.</p>;
  return (
    <div class="table-wrap">
      <table class="runs artifact-files">
        <thead>
          <tr><th>File</th><th class="num">Size</th><th>Digest (sha256)</th><th>Download</th></tr>
        </thead>
        <tbody>
          {rows.map((r) => (
            <tr key={r.path} data-path={r.path}>
              <td class="file-path">{r.path}</td>
              {r.ref !== null ? (
                <>
                  <td class="num muted">reference</td>
                  <td colSpan={2}>
                    <code class="ref-uri" title="A reference: recorded as text, never fetched">{r.ref}</code>
                  </td>
                </>
              ) : (
                <>
                  <td class="num" title={`${r.size.toLocaleString("en-US")} bytes`}>{fmtBytes(r.size)}</td>
                  <td><Digest value={r.digest} /></td>
                  <td>
                    <a
                      class="download"
                      href={artifactFileUrl(info.project, info.name, info.version, r.path)}
                      download={r.path.split("/").pop()}
                    >
                      Download
                    </a>
                  </td>
                </>
              )}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** A version's description, metadata (JSON text) and files; with `lineage`, its runs. */
export function VersionDetails({ info, lineage = true }) {
  const meta = metadataText(info.metadata);
  return (
    <div class="version-details" data-version={`${info.name}:${info.version}`}>
      <dl class="facts">
        <div><dt>Version</dt><dd>{info.version}</dd></div>
        <div><dt>Size</dt><dd>{fmtBytes(info.size)}</dd></div>
        <div><dt>Files</dt><dd>{info.file_count}</dd></div>
        <div><dt>Created</dt><dd>{fmtTime(info.created_at || null)}</dd></div>
        <div><dt>Digest</dt><dd><Digest value={info.digest} /></dd></div>
      </dl>
      {info.description ? <p class="notes artifact-description">{info.description}</p> : null}
      {lineage ? <Lineage info={info} /> : null}
      <h4>Metadata</h4>
      {meta ? <pre class="code artifact-metadata">{meta}</pre> : <p class="muted small">No metadata.</p>}
      <h4>Files</h4>
      <FileTable info={info} />
    </div>
  );
}

/** Which run logged the version, and which runs used it (each a link to the run). */
export function Lineage({ info }) {
  return (
    <div class="lineage">
      <div class="lineage-logged">
        <span class="kicker">Logged by</span>{" "}
        <RunLink project={info.project} runId={info.run_id} label={info.label} />
      </div>
      <div class="lineage-used">
        <span class="kicker">Used by</span>{" "}
        {info.used_by.length ? (
          <ul>
            {info.used_by.map((u) => (
              <li key={`${u.run_id}/${u.label ?? ""}/${u.time}`}>
                <RunLink project={info.project} runId={u.run_id} label={u.label} />
                {u.time ? <span class="muted small"> · {fmtTime(u.time)}</span> : null}
              </li>
            ))}
          </ul>
        ) : (
          <span class="muted">no run yet</span>
        )}
      </div>
    </div>
  );
}

/** A version read with its manifest and lineage (GET /artifacts/{project}/{name}/{version}). */
export function VersionPanel({ project, name, version, interval = 0 }) {
  const one = useLoad(
    (signal) => api.artifactVersion(project, name, version, { signal }),
    [project, name, version],
    { interval, keepOnError: true },
  );
  if (one.error && !one.data) return <ErrorBox error={one.error} onRetry={one.reload} />;
  if (!one.data) return <Spinner />;
  return <VersionDetails info={versionView(one.data)} />;
}
