// The run page's Artifacts tab: the versions this run logged and those it used (name,
// type, version, aliases, size, file count, created); a row opens that version's files
// with their digests and download links, its metadata and its lineage.

import { useState } from "preact/hooks";
import { href } from "../../router.js";
import { fmtTime } from "../../lib/format.js";
import { fmtBytes, versionView } from "../../lib/artifacts.js";
import { Code, Empty, ErrorBox, Spinner } from "../../components/common.jsx";
import { Aliases, RunLink, VersionPanel } from "../../components/ArtifactParts.jsx";

/** Rows opened at first when a run has this few artifacts in all. */
const OPEN_UP_TO = 3;

/** `artifacts`: the run page's read of GET /runs/{project}/{run}/artifacts (useLoad). */
export function ArtifactsTab({ run, artifacts }) {
  const { data, error, reload } = artifacts;
  if (error && !data) return <ErrorBox error={error} onRetry={reload} />;
  if (!data) return <Spinner />;
  const logged = data.logged.map(versionView);
  const used = data.used.map(versionView);
  if (!logged.length && !used.length) {
    return (
      <Empty title="No artifacts logged or used by this run" icon="▣">
        <p>Log a file or a directory as a versioned artifact at the end of training:</p>
        <Code>{`art = rankwise.Artifact("mnist-cnn", type="model")
art.add_file("model.pt")
run.log_artifact(art, aliases=["best"])`}</Code>
        <p>and use it in another run with <code>run.use_artifact("mnist-cnn:best")</code>.
          See <a href={href.artifacts(run.project)}>all artifacts of {run.project}</a>.</p>
      </Empty>
    );
  }
  const open = logged.length + used.length <= OPEN_UP_TO;
  return (
    <div class="artifacts-tab">
      {error ? <ErrorBox error={error} onRetry={reload} /> : null}
      <ArtifactSection title="Logged by this run" kind="logged" project={run.project} list={logged} open={open} />
      <ArtifactSection title="Used by this run" kind="used" project={run.project} list={used} open={open} />
      <p class="muted small">
        <a href={href.artifacts(run.project)}>All artifacts of {run.project} →</a>
      </p>
    </div>
  );
}

function ArtifactSection({ title, kind, project, list, open }) {
  return (
    <section class="artifact-section" data-artifacts={kind} aria-label={title}>
      <h3>{title} <span class="count">{list.length}</span></h3>
      {list.length ? (
        <div class="table-wrap">
          <table class="runs artifact-list">
            <thead>
              <tr>
                <th>Name</th><th>Type</th><th>Version</th><th>Aliases</th>
                <th class="num">Size</th><th class="num">Files</th><th>Created</th>
                {kind === "used" ? <th>Logged by</th> : null}
                <th />
              </tr>
            </thead>
            {list.map((v) => (
              <ArtifactRow key={`${v.name}:${v.version}`} project={project} v={v} kind={kind} open={open} />
            ))}
          </table>
        </div>
      ) : (
        <p class="muted small">{kind === "logged" ? "This run logged no artifact." : "This run used no artifact."}</p>
      )}
    </section>
  );
}

/** One version (a <tbody>: its row, and its details below it once opened). */
function ArtifactRow({ project, v, kind, open }) {
  const [shown, setShown] = useState(open);
  const cols = kind === "used" ? 9 : 8;
  return (
    <tbody class="artifact-row" data-artifact={`${v.name}:${v.version}`}>
      <tr>
        <td class="artifact-name">
          <a href={href.artifacts(project, { name: v.name, version: v.version })}>{v.name}</a>
        </td>
        <td>{v.type}</td>
        <td class="artifact-version">{v.version}</td>
        <td><Aliases aliases={v.aliases} tags={v.tags} /></td>
        <td class="num" title={`${v.size.toLocaleString("en-US")} bytes`}>{fmtBytes(v.size)}</td>
        <td class="num">{v.file_count}</td>
        <td>{fmtTime(v.created_at || null)}</td>
        {kind === "used" ? <td><RunLink project={project} runId={v.run_id} label={v.label} /></td> : null}
        <td>
          <button type="button" class="btn small" aria-expanded={shown} onClick={() => setShown(!shown)}>
            {shown ? "Hide files" : "Files"}
          </button>
        </td>
      </tr>
      {shown ? (
        <tr class="artifact-open">
          <td colSpan={cols}>
            <VersionPanel project={project} name={v.name} version={v.version} />
          </td>
        </tr>
      ) : null}
    </tbody>
  );
}
