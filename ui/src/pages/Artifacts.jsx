// A project's Artifacts page (#/p/{project}/artifacts?type=&name=&version=): its artifact
// names grouped by type (a type picked filters on the server), the chosen name's versions
// with aliases, and the chosen version's metadata, files and lineage (the run that logged
// it, the runs that used it). Everything the address names is chosen by a link, so a
// version can be shared.

import { api } from "../api.js";
import { useLoad } from "../hooks.js";
import { href, navigate } from "../router.js";
import { fmtTime } from "../lib/format.js";
import { fmtBytes, groupByType, versionView } from "../lib/artifacts.js";
import { Code, Empty, ErrorBox, Segmented, Spinner } from "../components/common.jsx";
import { Aliases, RunLink, VersionPanel } from "../components/ArtifactParts.jsx";

/** How often the lists are read again (ms): artifacts arrive at the end of runs. */
const POLL_MS = 10000;

export function ArtifactsPage({ project, params }) {
  const type = params.get("type") || "";
  const chosen = params.get("name") || "";
  const version = params.get("version") || "";
  const all = useLoad((signal) => api.artifacts(project, {}, { signal }), [project], POLL_MS);
  const typed = useLoad(
    (signal) => api.artifacts(project, { type }, { signal }),
    [project, type],
    { interval: POLL_MS, enabled: Boolean(type) },
  );
  const listed = type ? typed : all;
  const names = listed.data?.artifacts ?? [];
  const types = groupByType(all.data?.artifacts ?? []).map((g) => g.type);
  // A name from the address is read even when the list does not show it (yet): a link to
  // a version just logged works before the next poll, and an unknown one says so (404).
  const name = chosen || names[0]?.name || "";
  let body;
  if (listed.error && !listed.data) body = <ErrorBox error={listed.error} onRetry={listed.reload} />;
  else if (!listed.data) body = <Spinner />;
  else if (!names.length) body = <NoArtifacts project={project} type={type} />;
  else {
    body = (
      <div class="artifacts-layout">
        <NameList project={project} names={names} type={type} current={name} />
        <section class="artifact-main" aria-label={`Artifact ${name}`}>
          <Versions key={name} project={project} type={type} name={name} version={version} />
        </section>
      </div>
    );
  }
  return (
    <main class="main artifacts-page">
      <header class="page-head">
        <div>
          <nav class="crumbs" aria-label="Breadcrumb">
            <a href={href.runs(project)}>{project}</a>
            <span aria-hidden="true">/</span>
            <span>artifacts</span>
          </nav>
          <h1>Artifacts</h1>
          <p class="muted">
            {all.data ? `${all.data.artifacts.length} artifact name${all.data.artifacts.length === 1 ? "" : "s"}` : "\u00a0"}
          </p>
        </div>
        {types.length > 1 || type ? (
          <Segmented
            label="Artifact type"
            value={type}
            onChange={(t) => navigate(href.artifacts(project, { type: t }), { replace: true })}
            options={[{ value: "", label: "All types" }, ...types.map((t) => ({ value: t, label: t }))]}
          />
        ) : null}
      </header>
      {body}
    </main>
  );
}

function NoArtifacts({ project, type }) {
  if (type) {
    return (
      <Empty title={`No artifact of type ${type}`} icon="▣">
        <a class="btn" href={href.artifacts(project)}>Show every type</a>
      </Empty>
    );
  }
  return (
    <Empty title="This project has no artifacts yet" icon="▣">
      <p>Files that matter (checkpoints, the final model, evaluation outputs) become
        versioned artifacts with:</p>
      <Code>{`art = rankwise.Artifact("mnist-cnn", type="model")
art.add_file("model.pt")
run.log_artifact(art, aliases=["best"])`}</Code>
      <p>or from a shell: <code>rankwise artifact put model.pt --name mnist-cnn --type model</code>.
        This page checks again every ten seconds.</p>
    </Empty>
  );
}

/** The names, under a heading per type; the current one highlighted. */
function NameList({ project, names, type, current }) {
  return (
    <nav class="artifact-names card" aria-label="Artifact names">
      {groupByType(names).map((g) => (
        <div class="side-block" key={g.type} data-type={g.type}>
          <h2 class="kicker">{g.type}</h2>
          <ul>
            {g.names.map((a) => (
              <li key={a.name} class={a.name === current ? "active" : ""} data-name={a.name}>
                <a href={href.artifacts(project, { type, name: a.name })} aria-current={a.name === current ? "page" : undefined}>
                  <span class="artifact-name">{a.name}</span>
                  <span class="artifact-meta muted small">
                    {a.versions} version{a.versions === 1 ? "" : "s"} · {a.latest} · {fmtBytes(a.size ?? 0)}
                  </span>
                </a>
              </li>
            ))}
          </ul>
        </div>
      ))}
    </nav>
  );
}

/** One name's versions (newest first) and the picked one's details below. */
function Versions({ project, type, name, version }) {
  const list = useLoad(
    (signal) => api.artifactVersions(project, name, { signal }),
    [project, name],
    { interval: POLL_MS, keepOnError: true },
  );
  if (list.error && !list.data) return <ErrorBox error={list.error} onRetry={list.reload} />;
  if (!list.data) return <Spinner />;
  const versions = list.data.versions.map(versionView);
  if (!versions.length) return <p class="muted">No version of {name} is stored.</p>;
  const picked = versions.find((v) => v.version === version || v.aliases.includes(version)) ?? versions[0];
  return (
    <>
      <h2 class="artifact-title">
        {name} <span class="muted small">{versions[0].type}</span>
      </h2>
      {list.error ? <ErrorBox error={list.error} onRetry={list.reload} /> : null}
      <div class="table-wrap">
        <table class="runs artifact-versions">
          <thead>
            <tr>
              <th>Version</th><th>Aliases</th><th class="num">Size</th><th class="num">Files</th>
              <th>Created</th><th>Logged by</th><th>Description</th>
            </tr>
          </thead>
          <tbody>
            {versions.map((v) => (
              <tr key={v.version} class={v === picked ? "selected" : ""} data-version={v.version}>
                <td>
                  <a href={href.artifacts(project, { type, name, version: v.version })} aria-current={v === picked ? "true" : undefined}>
                    {v.version}
                  </a>
                </td>
                <td><Aliases aliases={v.aliases} tags={v.tags} /></td>
                <td class="num" title={`${v.size.toLocaleString("en-US")} bytes`}>{fmtBytes(v.size)}</td>
                <td class="num">{v.file_count}</td>
                <td>{fmtTime(v.created_at || null)}</td>
                <td><RunLink project={project} runId={v.run_id} label={v.label} /></td>
                <td class="artifact-description-cell">{v.description ?? ""}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <h3 class="version-heading">{name}:{picked.version}</h3>
      <VersionPanel key={picked.version} project={project} name={name} version={picked.version} interval={POLL_MS} />
    </>
  );
}
