// The Alerts page (admin tokens): who is told of which run events. Lists the destinations
// (a webhook shows as scheme://host/…: the server never sends a URL's path, a signing
// secret or a password back), adds one, sends a test alert, removes one. The server
// checks what is added exactly as `rankwise alert add` does (docs/alerts.md).

import { useState } from "preact/hooks";
import { api } from "../api.js";
import { useLoad } from "../hooks.js";
import { fmtTime } from "../lib/format.js";
import { ErrorBox, Spinner } from "../components/common.jsx";

const EVENTS = ["failed", "hang", "nonfinite", "heartbeat", "straggler", "rule", "alert"];
const DEFAULT_ON = ["failed", "hang", "nonfinite", "alert"];

export function AlertsPage() {
  const dests = useLoad((signal) => api.destinations({ signal }), []);
  const [tested, setTested] = useState({});
  const [problem, setProblem] = useState(null);
  const test = async (id) => {
    setTested((t) => ({ ...t, [id]: { ok: null, error: "sending…" } }));
    try {
      const r = await api.testDestination(id);
      setTested((t) => ({ ...t, [id]: r }));
    } catch (e) {
      setTested((t) => ({ ...t, [id]: { ok: false, error: e.message } }));
    }
  };
  const remove = async (id) => {
    setProblem(null);
    try {
      await api.removeDestination(id);
      dests.reload();
    } catch (e) {
      setProblem(e);
    }
  };
  const list = dests.data?.destinations ?? [];
  return (
    <main class="main alerts-page">
      <h1>Alerts</h1>
      <p class="muted">Where each project's run events go: failed and crashed ranks, hangs, the first NaN of a
        metric, silent ranks, stragglers, metric rules and <code>run.alert()</code>.</p>
      <ErrorBox error={dests.error || problem} onRetry={dests.reload} />
      {dests.data === undefined && !dests.error ? <Spinner /> : null}
      {dests.data ? (
        <table class="runs destinations" data-destinations>
          <thead>
            <tr><th>Project</th><th>Kind</th><th>Target</th><th>On</th><th>Rules</th><th>Added</th><th /></tr>
          </thead>
          <tbody>
            {list.map((d) => (
              <tr key={d.id} data-destination={d.id}>
                <td>{d.project}</td>
                <td>{d.kind}</td>
                <td><code>{d.target}</code>{d.smtp_host ? <span class="muted small"> via {d.smtp_host}</span> : null}</td>
                <td>{d.events.join(", ")}</td>
                <td>{d.rules.length ? d.rules.join("; ") : <span class="muted">–</span>}</td>
                <td>{fmtTime(d.created)}</td>
                <td class="actions">
                  <button type="button" class="btn" onClick={() => test(d.id)}>Test</button>{" "}
                  <button type="button" class="btn" onClick={() => remove(d.id)}>Remove</button>
                  {tested[d.id] ? (
                    <div class={`small ${tested[d.id].ok ? "ok" : "bad"}`} data-test-result={tested[d.id].ok ? "ok" : "failed"}>
                      {tested[d.id].ok ? "delivered" : tested[d.id].error}
                    </div>
                  ) : null}
                </td>
              </tr>
            ))}
            {list.length ? null : (
              <tr><td colSpan={7} class="muted">No destination yet: add one below, or with <code>rankwise alert add</code>.</td></tr>
            )}
          </tbody>
        </table>
      ) : null}
      <AddDestination onAdded={dests.reload} />
    </main>
  );
}

function AddDestination({ onAdded }) {
  const [form, setForm] = useState({ project: "", kind: "slack", target: "", on: DEFAULT_ON, rules: "" });
  const [error, setError] = useState(null);
  const [secret, setSecret] = useState("");
  const set = (patch) => setForm((f) => ({ ...f, ...patch }));
  const submit = async (ev) => {
    ev.preventDefault();
    setError(null);
    const rules = form.rules.split("\n").map((r) => r.trim()).filter(Boolean);
    try {
      await api.addDestination({
        project: form.project.trim() || "*",
        kind: form.kind,
        target: form.target.trim(),
        events: rules.length && !form.on.includes("rule") ? [...form.on, "rule"] : form.on,
        rules,
        secret,
      });
      setForm((f) => ({ ...f, target: "", rules: "" }));
      setSecret("");
      onAdded();
    } catch (e) {
      setError(e);
    }
  };
  const toggle = (name) => set({ on: form.on.includes(name) ? form.on.filter((n) => n !== name) : [...form.on, name] });
  return (
    <form class="add-destination" onSubmit={submit} data-add-destination>
      <h2>Add a destination</h2>
      <ErrorBox error={error} />
      <label>Project <input name="project" value={form.project} placeholder="* (every project)" onInput={(e) => set({ project: e.currentTarget.value })} /></label>
      <label>Kind{" "}
        <select name="kind" value={form.kind} onChange={(e) => set({ kind: e.currentTarget.value })}>
          <option value="slack">Slack incoming webhook</option>
          <option value="webhook">webhook (signed JSON)</option>
          <option value="email">e-mail</option>
        </select>
      </label>
      <label>{form.kind === "email" ? "Address" : "URL"}{" "}
        <input name="target" required value={form.target} onInput={(e) => set({ target: e.currentTarget.value })} />
      </label>
      {form.kind === "webhook" ? (
        <label>Signing secret <input name="secret" type="password" value={secret} placeholder="made by the server when empty" onInput={(e) => setSecret(e.currentTarget.value)} /></label>
      ) : null}
      <fieldset>
        <legend>On</legend>
        {EVENTS.map((name) => (
          <label key={name} class="check"><input type="checkbox" name={`on-${name}`} checked={form.on.includes(name)} onChange={() => toggle(name)} /> {name}</label>
        ))}
      </fieldset>
      <label>Rules, one per line <textarea name="rules" rows={2} placeholder="loss > 10" value={form.rules} onInput={(e) => set({ rules: e.currentTarget.value })} /></label>
      {form.kind === "email" ? (
        <p class="muted small">E-mail needs SMTP settings: add it with <code>rankwise alert add --email … --smtp-host …</code>.</p>
      ) : null}
      <button type="submit" class="btn primary" disabled={form.kind === "email"}>Add</button>
    </form>
  );
}
