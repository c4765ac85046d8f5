// The dashboard's entry: the top bar, the router outlet and the global shortcuts.

import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { api, UNAUTHORIZED } from "./api.js";
import { href, useRoute } from "./router.js";
import { LoginPage } from "./pages/Login.jsx";
import { ProjectsPage } from "./pages/Projects.jsx";
import { RunsPage } from "./pages/Runs.jsx";
import { RunPage } from "./pages/Run.jsx";
import { ComparePage, GroupPage } from "./pages/Overlay.jsx";
import { ArtifactsPage } from "./pages/Artifacts.jsx";
import { AlertsPage } from "./pages/Alerts.jsx";
import { ReportPage, ReportsPage } from "./pages/Reports.jsx";
import "./styles.css";

function App() {
  const route = useRoute();
  const [who, setWho] = useSession();
  useShortcuts();
  useEffect(() => {
    const where = route.run ?? route.group ?? route.project;
    const what = route.page === "artifacts" ? " artifacts" : route.page === "reports" ? " reports" : route.report ? ` · ${route.report}` : "";
    document.title = where ? `${where}${what} · rankwise` : route.page === "compare" ? "Compare · rankwise" : "rankwise";
  }, [route]);
  let page;
  if (who === undefined) page = <main class="page muted">Loading…</main>;
  else if (who === null) page = <LoginPage onLogin={setWho} />;
  else switch (route.page) {
    case "runs":
      page = <RunsPage key={route.project} project={route.project} params={route.params} who={who} />;
      break;
    case "run":
      page = <RunPage key={`${route.project}/${route.run}`} project={route.project} runId={route.run} params={route.params} who={who} />;
      break;
    case "group":
      page = <GroupPage key={`${route.project}/${route.group}`} project={route.project} group={route.group} />;
      break;
    case "artifacts":
      page = <ArtifactsPage key={route.project} project={route.project} params={route.params} />;
      break;
    case "reports":
      page = <ReportsPage key={route.project} project={route.project} params={route.params} who={who} />;
      break;
    case "report":
      page = <ReportPage key={`${route.project}/${route.report}`} project={route.project} name={route.report} params={route.params} who={who} />;
      break;
    case "compare":
      page = <ComparePage params={route.params} />;
      break;
    case "alerts":
      page = <AlertsPage />;
      break;
    default:
      page = <ProjectsPage who={who} />;
  }
  return (
    <>
      <header class="topbar">
        <a class="brand" href={href.projects()} aria-label="rankwise home">
          <svg viewBox="0 0 24 24" width="20" height="20" aria-hidden="true">
            <path d="M3 17l5-6 4 4 8-10" fill="none" stroke="currentColor" stroke-width="2.4" stroke-linecap="round" stroke-linejoin="round" />
            <path d="M3 21h18" stroke="currentColor" stroke-width="2" stroke-linecap="round" opacity=".45" />
          </svg>
          rankwise
        </a>
        {route.project ? (
          <a class="topnav" href={href.runs(route.project)}>{route.project}</a>
        ) : null}
        <span class="spacer" />
        {who?.role === "admin" ? <a class="topnav" href={href.alerts()} title="Who is told of failed, hung or diverging runs">Alerts</a> : null}
        <span class="muted small kbd-hint"><kbd>/</kbd> search</span>
        {who?.via === "session" ? (
          <button type="button" class="logout" title={`${who.role} token ${who.name || ""}`} onClick={() => logout(setWho)}>
            Log out
          </button>
        ) : null}
      </header>
      {page}
    </>
  );
}

/** Who the page acts as: undefined while asking, null when a login is needed. */
function useSession() {
  const [who, setWho] = useState(undefined);
  useEffect(() => {
    api.whoami().then(setWho, () => setWho(null));
    const lost = () => setWho(null);
    window.addEventListener(UNAUTHORIZED, lost);
    return () => window.removeEventListener(UNAUTHORIZED, lost);
  }, []);
  return [who, setWho];
}

async function logout(setWho) {
  try {
    await api.logout();
  } finally {
    setWho(null);
  }
}

/** "/" focuses the page's search box (unless typing somewhere); Escape leaves it. */
function useShortcuts() {
  useEffect(() => {
    const onKey = (e) => {
      const t = e.target;
      const typing = t instanceof HTMLElement && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName));
      if (e.key === "/" && !typing && !e.ctrlKey && !e.metaKey && !e.altKey) {
        const box = document.querySelector("input[data-search]");
        if (box) {
          e.preventDefault();
          box.focus();
          box.select();
        }
      } else if (e.key === "Escape" && typing && t.matches("input[data-search]")) {
        t.blur();
      }
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, []);
}

render(<App />, document.getElementById("app"));
