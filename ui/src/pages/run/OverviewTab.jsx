// The run page's Overview tab: what ran (rankwise.sdk.provenance). The command, the git
// state with a copyable checkout command and the diff of tracked files at init, the
// packages (searchable), each node's environment, the notes and tags. Every text is
// shown with Preact (escaped), never as HTML.

import { useEffect, useState } from "preact/hooks";
import { api } from "../../api.js";
import { Tag } from "../../components/common.jsx";
import { fmtBytes } from "../../lib/system.js";
import { checkoutCommand, commandLine } from "../../lib/code.js";

function Copyable({ text, label }) {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
      setCopied(true);
    } catch {
      setCopied(false);
    }
  };
  return (
    <div class="copyable">
      <code data-copy-text>{text}</code>
      <button type="button" class="btn small" onClick={copy} aria-label={label}>{copied ? "Copied" : "Copy"}</button>
    </div>
  );
}

function Diff({ project, git }) {
  const [open, setOpen] = useState(false);
  const [text, setText] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    if (!open || text !== null || !git.diff_digest) return undefined;
    const ctl = new AbortController();
    api.blobText(project, git.diff_digest, { signal: ctl.signal }).then(setText, (e) => {
      if (e.name !== "AbortError") setError(String(e.message || e));
    });
    return () => ctl.abort();
  }, [open, project, git.diff_digest, text]);
  if (!git.diff_digest) return null;
  return (
    <div class="diff">
      <button type="button" class="btn small" data-show-diff onClick={() => setOpen(!open)}>
        {open ? "Hide diff" : `Show diff (${fmtBytes(git.diff_size)}${git.diff_truncated ? ", cut" : ""})`}
      </button>
      {open && error ? <p class="error">{error}</p> : null}
      {open && text !== null ? (
        <pre class="diff-text" data-diff>
          {text.split("\n").map((line, i) => (
            <span key={i} class={line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : ""}>{line}{"\n"}</span>
          ))}
        </pre>
      ) : null}
    </div>
  );
}

function Packages({ packages }) {
  const [filter, setFilter] = useState("");
  const rows = Object.entries(packages ?? {});
  const f = filter.trim().toLowerCase();
  const shown = f ? rows.filter(([n, v]) => `${n}==${v}`.toLowerCase().includes(f)) : rows;
  return (
    <section class="kv" data-packages>
      <h2>Packages <span class="count">{rows.length}</span></h2>
      <input type="search" class="filter" placeholder="Filter packages" aria-label="Filter packages"
        value={filter} onInput={(e) => setFilter(e.currentTarget.value)} />
      <table class="kv-table">
        <tbody>
          {shown.map(([n, v]) => (
            <tr key={n} data-package={n}><th scope="row">{n}</th><td>{v}</td></tr>
          ))}
          {shown.length === 0 ? <tr><td colSpan={2} class="muted">Nothing matches.</td></tr> : null}
        </tbody>
      </table>
    </section>
  );
}

export function OverviewTab({ run }) {
  const code = run.code ?? null;
  const git = code?.git ?? null;
  const nodes = run.nodes ?? [];
  return (
    <div class="overview" data-overview>
      <section class="kv">
        <h2>Command</h2>
        {code?.argv?.length ? <Copyable text={commandLine(code.argv)} label="Copy the command" /> : <p class="muted">Not recorded.</p>}
        {code?.program ? <p class="muted small">Program: <code>{code.program}</code>{code.cwd ? <> in <code>{code.cwd}</code></> : null}</p> : null}
        {code?.note ? <p class="muted small" data-code-note>{code.note}</p> : null}
      </section>
      <section class="kv" data-git>
        <h2>Git</h2>
        {git ? (
          <>
            <table class="kv-table">
              <tbody>
                <tr><th scope="row">commit</th><td data-git-commit>{git.commit ?? "–"}</td></tr>
                <tr><th scope="row">branch</th><td data-git-branch>{git.branch ?? "detached"}</td></tr>
                {git.remote ? <tr><th scope="row">remote</th><td>{git.remote}</td></tr> : null}
                <tr><th scope="row">state</th><td data-git-dirty>{git.dirty ? "dirty (uncommitted changes)" : "clean"}</td></tr>
              </tbody>
            </table>
            {git.commit ? <Copyable text={checkoutCommand(git)} label="Copy the checkout command" /> : null}
            <Diff project={run.project} git={git} />
          </>
        ) : (
          <p class="muted">Not recorded (not a git repository, or turned off with RANKWISE_GIT=0).</p>
        )}
      </section>
      <section class="kv" data-nodes>
        <h2>Nodes <span class="count">{nodes.length}</span></h2>
        {nodes.length ? (
          <div class="table-scroll">
            <table class="kv-table">
              <thead>
                <tr><th scope="col">node</th><th scope="col">host</th><th scope="col">OS</th><th scope="col">Python</th>
                  <th scope="col">torch</th><th scope="col">CUDA</th><th scope="col">NCCL</th><th scope="col">driver</th><th scope="col">GPUs</th></tr>
              </thead>
              <tbody>
                {nodes.map((n) => (
                  <tr key={`${n.node ?? 0}-${n.host}`} data-node={n.node ?? 0}>
                    <td>{n.node ?? 0}</td><td>{n.host ?? "–"}</td><td>{n.os ?? "–"}</td><td>{n.python ?? "–"}</td><td>{n.torch ?? "–"}</td>
                    <td>{n.cuda ?? "–"}</td><td>{n.nccl ?? "–"}</td><td>{n.driver ?? "–"}</td><td>{(n.gpus ?? []).join(", ") || "–"}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        ) : <p class="muted">Not recorded.</p>}
      </section>
      <section class="kv">
        <h2>Notes</h2>
        {run.notes ? <p class="notes" data-overview-notes>{run.notes}</p> : <p class="muted">None.</p>}
        <h2>Tags</h2>
        {run.tags?.length ? <p class="tags">{run.tags.map((t) => <Tag key={t}>{t}</Tag>)}</p> : <p class="muted">None.</p>}
      </section>
      {code?.packages ? <Packages packages={code.packages} /> : (
        <section class="kv"><h2>Packages</h2><p class="muted">Not recorded.</p></section>
      )}
    </div>
  );
}
