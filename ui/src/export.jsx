// The entry of an exported report (`rankwise report export`, the dashboard's Export
// button): one HTML file with its data inline (api.js exportData) and this bundle inline,
// drawn by the dashboard's own report components. It makes no network request.

import { render } from "preact";
import { exportData } from "./api.js";
import { fmtTime } from "./lib/format.js";
import { ReportView } from "./components/ReportBlocks.jsx";
import "./styles.css";

function Exported() {
  const data = exportData();
  if (!data?.report) return <main class="main"><p class="callout bad">This file holds no report.</p></main>;
  const { report } = data;
  document.title = `${report.title || report.name} · rankwise report`;
  return (
    <main class="main report-page exported">
      <header class="page-head">
        <div>
          <p class="kicker">{report.project} · report {report.name}</p>
          <p class="muted small" data-report-version>
            version {report.version} · saved {fmtTime(report.created)} · exported {fmtTime(data.exported)}
          </p>
        </div>
      </header>
      <ReportView report={report} ctx={{ project: report.project, record: null, live: false }} />
    </main>
  );
}

document.documentElement.dataset.exported = "1";
render(<Exported />, document.getElementById("app"));
