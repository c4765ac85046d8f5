// The Projects page: every project with its run count and last update, polled; with a
// single project it opens that project's runs at once.

import { useEffect } from "preact/hooks";
import { api } from "../api.js";
import { useLoad } from "../hooks.js";
import { href, navigate, parseHash } from "../router.js";
import { fmtTime } from "../lib/format.js";
import { Code, Empty, ErrorBox, Spinner } from "../components/common.jsx";

const POLL_MS = 2000; // the empty page promises a look every two seconds

export function ProjectsPage({ who }) {
  const projects = useLoad((signal) => api.projects({ signal }), [], POLL_MS);
  const list = projects.data?.projects ?? [];
  const only = list.length === 1 ? list[0].name : "";
  useEffect(() => {
    // One project: open it, unless the address moved on meanwhile (a link, a back button).
    if (only && parseHash(location.hash).page === "projects") {
      navigate(href.runs(only), { replace: true });
    }
  }, [only]);
  if (projects.error) return <main class="main"><ErrorBox error={projects.error} onRetry={projects.reload} /></main>;
  if (!projects.data) return <main class="main"><Spinner /></main>;
  if (!list.length) {
    return <main class="main">{who?.local === false ? <RemoteStart /> : <LocalStart />}</main>;
  }
  return (
    <main class="main">
      <h1>Projects</h1>
      <table class="runs projects">
        <thead><tr><th>Project</th><th class="num">Runs</th><th>Last update</th></tr></thead>
        <tbody>
          {list.map((p) => (
            <tr key={p.name}>
              <td><a href={href.runs(p.name)}>{p.name}</a></td>
              <td class="num">{p.runs}</td>
              <td>{fmtTime(p.updated)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </main>
  );
}

/** `rankwise ui`: the runs are files under a data directory this process reads. */
function LocalStart() {
  return (
    <Empty title="No runs yet" icon="◇">
      <p>Log a run and it appears here, live. On every rank of your training script:</p>
      <Code>{`import rankwise

run = rankwise.init(project="my-project", config={"lr": 0.1})
for step, batch in enumerate(loader):
    loss = train_step(batch)
    run.log({"train/loss": loss}, step=step)`}</Code>
      <p>then start it as usual, e.g. <code>torchrun --nproc-per-node=4 train.py</code>. Runs are
        written under <code>./rankwise-runs</code> (or <code>RANKWISE_DIR</code>); <code>rankwise ui --dir DIR</code> serves
        that directory. This page checks for new runs every two seconds.</p>
    </Empty>
  );
}

/** `rankwise server`: the ranks upload to this address with an ingest token. */
function RemoteStart() {
  const here = `${location.origin}${location.pathname}`.replace(/\/$/, "");
  return (
    <Empty title="No runs yet" icon="◇">
      <p>Ranks upload to this server as they train. Make an ingest token for them, on a machine that
        can open this server's database (the same <code>--db</code> it was started with):</p>
      <Code>{`rankwise token create --db DB_URL --role ingest \\
  --project my-project --name ranks`}</Code>
      <p>then give every rank the server's address and that token, in its environment:</p>
      <Code>{`RANKWISE_SERVER=${here} RANKWISE_TOKEN=rk_i_... \\
  torchrun --nproc-per-node=4 train.py`}</Code>
      <p>or in the script: <code>{`rankwise.init(project="my-project", server="${here}")`}</code> (the token
        still from <code>RANKWISE_TOKEN</code>, or <code>token=</code>). A rank keeps its records on disk
        while the server is away and uploads them when it answers. This page checks for new runs every two
        seconds.</p>
    </Empty>
  );
}
