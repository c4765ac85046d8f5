// The compare page's Differences view: what differs between the runs' config, git state
// and packages (lib/code.js codeDiff), one column per run; nothing when they all agree.

import { useMemo } from "preact/hooks";
import { displayText } from "../lib/escape.js";
import { codeDiff } from "../lib/code.js";
import { Empty } from "./common.jsx";

export function CompareDiff({ runs }) {
  const rows = useMemo(() => codeDiff(runs), [runs]);
  if (!rows.length) {
    return <Empty title="No differences" icon="=">These runs have the same config, git state and packages.</Empty>;
  }
  const cell = (v) => (v === undefined ? <span class="muted">–</span> : displayText(v));
  return (
    <div class="table-scroll" data-compare-diff>
      <table class="kv-table">
        <thead>
          <tr>
            <th scope="col">section</th>
            <th scope="col">key</th>
            {runs.map((r) => <th scope="col" key={`${r.project}/${r.id}`} style={{ color: r.color }}>{r.name || r.id}</th>)}
          </tr>
        </thead>
        <tbody>
          {rows.map(([section, key, values]) => (
            <tr key={`${section}/${key}`} data-diff-row={`${section}/${key}`}>
              <td class="muted">{section}</td>
              <th scope="row">{key}</th>
              {values.map((v, i) => <td key={i}>{cell(v)}</td>)}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
