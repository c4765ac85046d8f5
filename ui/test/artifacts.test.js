// @vitest-environment happy-dom
// The artifact views against golden replies (tests/data/golden/artifacts/*.json, shaped
// like the server's VersionInfo / ArtifactSummary / RunArtifacts structs, which
// tests/server/test_artifacts_golden.py checks against rankwise/artifacts/model.py and the real
// server): the calls and their URLs, defaults filled in, and a real Preact render where
// names, paths, descriptions, metadata and references carrying markup stay text.

import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { h, render } from "preact";
import { act } from "preact/test-utils";
import { api, artifactFileUrl } from "../src/api.js";
import { byline, fmtBytes, groupByType, manifestRows, metadataText, shortDigest, versionView } from "../src/lib/artifacts.js";
import { href, parseHash } from "../src/router.js";
import { Aliases, VersionDetails } from "../src/components/ArtifactParts.jsx";
import { ArtifactsTab } from "../src/pages/run/ArtifactsTab.jsx";
import { ArtifactsPage } from "../src/pages/Artifacts.jsx";

// Read from the repository's tests/data (shared with the Python tests), not bundled.
const GOLDEN = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "tests", "data", "golden", "artifacts");
const golden = (name) => JSON.parse(readFileSync(join(GOLDEN, `${name}.json`), "utf8"));
const VERSION = golden("version");
const MARKUP = golden("version_accuracies"); // markup in its description, metadata, a path
const VERSIONS = golden("versions");
const LIST = golden("artifacts");
const RUN = golden("run_artifacts");
const RUN_EMPTY = golden("run_artifacts_empty");

function answer(routes) {
  return vi.fn(async (url) => {
    const body = routes[url];
    const status = body === undefined ? 404 : 200;
    return {
      status,
      ok: status < 400,
      json: async () => body ?? { error: { status: 404, message: `no route ${url}` } },
    };
  });
}

let root;
beforeEach(() => {
  root = document.createElement("div");
  document.body.appendChild(root);
});
afterEach(() => {
  render(null, root);
  root.remove();
  vi.unstubAllGlobals();
});

const flush = async () => {
  for (let i = 0; i < 5; i++) await act(async () => await new Promise((r) => setTimeout(r, 0)));
};

describe("artifact calls", () => {
  it("asks the documented routes, every user name encoded", async () => {
    const fetch = answer({});
    vi.stubGlobal("fetch", fetch);
    await api.artifacts("p q", { type: "model" }).catch(() => null);
    await api.artifacts("p", {}).catch(() => null);
    await api.artifactVersions("p", "mnist-cnn").catch(() => null);
    await api.artifactVersion("p", "mnist-cnn", "best").catch(() => null);
    await api.runArtifacts("p", "run/1").catch(() => null);
    expect(fetch.mock.calls.map(([url]) => url)).toEqual([
      "api/v1/artifacts/p%20q?type=model",
      "api/v1/artifacts/p",
      "api/v1/artifacts/p/mnist-cnn",
      "api/v1/artifacts/p/mnist-cnn/best",
      "api/v1/runs/p/run%2F1/artifacts",
    ]);
  });

  it("hands the golden replies over as they are", async () => {
    vi.stubGlobal("fetch", answer({
      "api/v1/artifacts/mnist": LIST,
      "api/v1/artifacts/mnist/mnist-cnn": VERSIONS,
      "api/v1/artifacts/mnist/mnist-cnn/v1": VERSION,
      "api/v1/runs/mnist/train-1/artifacts": RUN,
    }));
    expect((await api.artifacts("mnist")).artifacts.map((a) => a.name)).toEqual(["accuracies", "mnist-cnn", "mnist-train"]);
    expect((await api.artifactVersions("mnist", "mnist-cnn")).versions.map((v) => v.version)).toEqual(["v1", "v0"]);
    expect((await api.artifactVersion("mnist", "mnist-cnn", "v1")).used_by).toHaveLength(2);
    expect((await api.runArtifacts("mnist", "train-1")).used[0].name).toBe("mnist-train");
    await expect(api.artifactVersion("mnist", "nope", "v0")).rejects.toMatchObject({ status: 404 });
  });

  it("a file's download URL encodes each path segment and keeps the slashes", () => {
    expect(artifactFileUrl("mnist", "mnist-cnn", "v1", "eval/acc per epoch?.json"))
      .toBe("api/v1/artifacts/mnist/mnist-cnn/v1/files/eval/acc%20per%20epoch%3F.json");
    expect(artifactFileUrl("p", "n", "v0", "<img src=x>&.txt"))
      .toBe("api/v1/artifacts/p/n/v0/files/%3Cimg%20src%3Dx%3E%26.txt");
  });

  it("the project's artifacts page has its own route", () => {
    const r = parseHash(href.artifacts("my proj", { type: "model", name: "mnist-cnn", version: "v1" }));
    expect(r).toMatchObject({ page: "artifacts", project: "my proj" });
    expect([r.params.get("type"), r.params.get("name"), r.params.get("version")]).toEqual(["model", "mnist-cnn", "v1"]);
    expect(parseHash("#/p/artifacts").page).toBe("runs"); // a project named "artifacts"
  });
});

describe("artifact helpers", () => {
  it("fills in the defaults a reply leaves out", () => {
    const v0 = versionView(VERSIONS.versions[1]);
    expect(VERSIONS.versions[1].aliases).toBeUndefined();
    expect(v0).toMatchObject({ aliases: [], tags: [], description: null, used_by: [], manifest: null, label: "rank-0" });
    expect(versionView({ ...VERSIONS.versions[1], tags: ["best"] }).tags).toEqual(["best"]);
    expect(versionView(VERSION).used_by[1]).toEqual({ run_id: "eval-2", label: null, time: 1795000400.0 });
  });

  it("lists files and references from the manifest", () => {
    const rows = manifestRows(VERSION.manifest);
    expect(rows.map((r) => r.path)).toEqual(VERSION.manifest.entries.map((e) => e.path));
    const ref = rows.find((r) => r.ref !== null);
    expect(ref).toEqual({ path: "source", ref: "https://ossci-datasets.s3.amazonaws.com/mnist/train-images-idx3-ubyte.gz", digest: "", size: 0, chunks: 0 });
    expect(rows.find((r) => r.path === "model.pt")).toMatchObject({ size: 2500000, chunks: 1 });
    expect(manifestRows(null)).toEqual([]);
  });

  it("groups names by type, sizes in binary units, short digests", () => {
    expect(groupByType(LIST.artifacts).map((g) => [g.type, g.names.map((a) => a.name)])).toEqual([
      ["dataset", ["mnist-train"]],
      ["model", ["mnist-cnn"]],
      ["result", ["accuracies"]],
    ]);
    expect(fmtBytes(2500060)).toBe("2.38 MiB");
    expect(fmtBytes(0)).toBe("0 B");
    expect(shortDigest(VERSION.digest)).toBe(`${VERSION.digest.slice(0, 12)}…`);
    expect(byline("train-1", "rank-0")).toBe("train-1 (rank-0)");
    expect(metadataText({})).toBe("");
    expect(JSON.parse(metadataText(VERSION.metadata))).toEqual(VERSION.metadata);
  });
});

describe("Aliases", () => {
  it("shows a version's tags after its aliases, as text", () => {
    act(() => render(h(Aliases, { aliases: ["best", "latest"], tags: ["fp16", "<b>x</b>"] }), root));
    expect([...root.querySelectorAll(".alias")].map((e) => e.textContent)).toEqual(["latest", "best"]);
    expect([...root.querySelectorAll(".artifact-tag")].map((e) => e.textContent)).toEqual(["#fp16", "#<b>x</b>"]);
    expect(root.querySelectorAll("b").length).toBe(0);
    act(() => render(h(Aliases, { aliases: [], tags: ["only"] }), root));
    expect(root.querySelector(".artifact-tag").textContent).toBe("#only");
  });
});

describe("VersionDetails", () => {
  it("shows markup in paths, descriptions and metadata as text", () => {
    act(() => render(h(VersionDetails, { info: versionView(MARKUP) }), root));
    expect(root.querySelectorAll("img, script, b").length).toBe(0);
    expect(root.querySelector(".artifact-description").textContent).toBe(MARKUP.description);
    expect(MARKUP.description).toContain("<script>");
    expect(root.querySelector(".artifact-metadata").textContent).toBe(JSON.stringify(MARKUP.metadata, null, 2));
    expect(root.querySelector(".artifact-metadata").textContent).toContain('<img src=x onerror=\\"window.__xss=21\\">');
    const paths = [...root.querySelectorAll(".file-path")].map((e) => e.textContent);
    expect(paths).toEqual(["<img src=x onerror=window.__xss=23>.txt", "accuracies.json"]);
    expect(root.querySelector("a.download").getAttribute("href"))
      .toBe("api/v1/artifacts/mnist/accuracies/v0/files/%3Cimg%20src%3Dx%20onerror%3Dwindow.__xss%3D23%3E.txt");
    expect(root.querySelector(".lineage-used").textContent).toContain("no run yet");
  });

  it("links each file to its download, a reference to nothing", () => {
    act(() => render(h(VersionDetails, { info: versionView(VERSION) }), root));
    const links = [...root.querySelectorAll("a.download")];
    expect(links.map((a) => a.getAttribute("href"))).toEqual([
      "api/v1/artifacts/mnist/mnist-cnn/v1/files/eval/acc%20per%20epoch%3F.json",
      "api/v1/artifacts/mnist/mnist-cnn/v1/files/model.pt",
    ]);
    expect(links[0].getAttribute("download")).toBe("acc per epoch?.json");
    const ref = root.querySelector('tr[data-path="source"]');
    expect(ref.querySelectorAll("a").length).toBe(0);
    expect(ref.querySelector(".ref-uri").textContent).toBe("https://ossci-datasets.s3.amazonaws.com/mnist/train-images-idx3-ubyte.gz");
    // No element anywhere points at the reference.
    expect(root.innerHTML).not.toContain('href="https://ossci-datasets');
  });

  it("shows digests short with the whole value in the title, sizes readable", () => {
    act(() => render(h(VersionDetails, { info: versionView(VERSION) }), root));
    const model = root.querySelector('tr[data-path="model.pt"]');
    const entry = VERSION.manifest.entries.find((e) => e.path === "model.pt");
    expect(model.querySelector(".digest code").textContent).toBe(`${entry.digest.slice(0, 12)}…`);
    expect(model.querySelector(".digest code").getAttribute("title")).toBe(entry.digest);
    expect(model.querySelector(".digest").getAttribute("data-digest")).toBe(entry.digest);
    expect(model.querySelector(".num").textContent).toBe("2.38 MiB");
  });

  it("links the run that logged the version and the runs that used it", () => {
    act(() => render(h(VersionDetails, { info: versionView(VERSION) }), root));
    expect(root.querySelector(".lineage-logged a").getAttribute("href")).toBe("#/p/mnist/r/train-1");
    expect(root.querySelector(".lineage-logged a").textContent).toBe("train-1 (rank-0)");
    expect([...root.querySelectorAll(".lineage-used a")].map((a) => [a.getAttribute("href"), a.textContent])).toEqual([
      ["#/p/mnist/r/eval-1", "eval-1 (rank-0)"],
      ["#/p/mnist/r/eval-2", "eval-2"],
    ]);
    expect(root.querySelector(".facts").textContent).toContain("2.38 MiB");
  });
});

describe("ArtifactsTab", () => {
  const run = { project: "mnist", id: "train-1" };

  it("lists what a run logged and used; a row opens its files", async () => {
    vi.stubGlobal("fetch", answer({
      "api/v1/artifacts/mnist/mnist-cnn/v1": VERSION,
      "api/v1/artifacts/mnist/accuracies/v0": MARKUP,
    }));
    act(() => render(h(ArtifactsTab, { run, artifacts: { data: RUN, error: null, reload: () => {} } }), root));
    const logged = root.querySelector('[data-artifacts="logged"]');
    const used = root.querySelector('[data-artifacts="used"]');
    expect([...logged.querySelectorAll("tbody")].map((t) => t.dataset.artifact)).toEqual(["mnist-cnn:v0", "mnist-cnn:v1", "accuracies:v0"]);
    expect(used.querySelector("tbody").dataset.artifact).toBe("mnist-train:v0");
    expect(used.querySelector("td a.run-link").getAttribute("href")).toBe("#/p/mnist/r/prep-1");
    const first = logged.querySelector('tbody[data-artifact="mnist-cnn:v1"]');
    expect([...first.querySelectorAll(".alias")].map((a) => a.textContent)).toEqual(["latest", "best"]);
    expect(first.querySelector("a").getAttribute("href")).toBe("#/p/mnist/artifacts?name=mnist-cnn&version=v1");
    // Four rows: closed until asked.
    expect(root.querySelectorAll("a.download").length).toBe(0);
    act(() => first.querySelector("button").click());
    await flush();
    expect(first.querySelectorAll("a.download").length).toBe(2);
    expect(first.querySelector("button").getAttribute("aria-expanded")).toBe("true");
    const acc = logged.querySelector('tbody[data-artifact="accuracies:v0"]');
    act(() => acc.querySelector("button").click());
    await flush();
    expect(acc.querySelector(".artifact-description").textContent).toBe(MARKUP.description);
    expect(root.querySelectorAll("img, script, b").length).toBe(0);
  });

  it("says plainly when a run has none, or when the read failed", () => {
    act(() => render(h(ArtifactsTab, { run, artifacts: { data: RUN_EMPTY, error: null, reload: () => {} } }), root));
    expect(root.querySelector(".empty h3").textContent).toBe("No artifacts logged or used by this run");
    const error = Object.assign(new Error("this server keeps no blobs"), { status: 503 });
    act(() => render(h(ArtifactsTab, { run, artifacts: { data: undefined, error, reload: () => {} } }), root));
    expect(root.querySelector(".error-box").textContent).toContain("Unavailable");
    expect(root.querySelector(".error-box").textContent).toContain("this server keeps no blobs");
  });
});

describe("ArtifactsPage", () => {
  const open = async (query, routes) => {
    vi.stubGlobal("fetch", answer(routes));
    act(() => render(h(ArtifactsPage, { project: "mnist", params: new URLSearchParams(query) }), root));
    await flush();
  };

  it("groups the names by type and opens the first name at its newest version", async () => {
    await open("", {
      "api/v1/artifacts/mnist": LIST,
      "api/v1/artifacts/mnist/accuracies": { versions: [RUN.logged[2]] },
      "api/v1/artifacts/mnist/accuracies/v0": MARKUP,
    });
    expect([...root.querySelectorAll(".artifact-names .side-block")].map((b) => b.dataset.type)).toEqual(["dataset", "model", "result"]);
    expect(root.querySelector('li[data-name="mnist-cnn"]').textContent).toBe("mnist-cnn2 versions · v1 · 2.38 MiB");
    expect(root.querySelector(".version-heading").textContent).toBe("accuracies:v0");
    expect(root.querySelector(".lineage-logged a").getAttribute("href")).toBe("#/p/mnist/r/train-1");
    expect(root.querySelectorAll("img, script, b").length).toBe(0);
  });

  it("shows a version named by an alias, and its lineage", async () => {
    await open("name=mnist-cnn&version=best", {
      "api/v1/artifacts/mnist": LIST,
      "api/v1/artifacts/mnist/mnist-cnn": VERSIONS,
      "api/v1/artifacts/mnist/mnist-cnn/v1": VERSION,
    });
    expect(root.querySelector("tr.selected").dataset.version).toBe("v1");
    expect([...root.querySelectorAll(".lineage-used a")].map((a) => a.textContent)).toEqual(["eval-1 (rank-0)", "eval-2"]);
  });

  it("says plainly when there is nothing, when a name is unknown, when the server cannot", async () => {
    await open("", { "api/v1/artifacts/mnist": { artifacts: [] } });
    expect(root.querySelector(".empty h3").textContent).toBe("This project has no artifacts yet");
    render(null, root);
    await open("name=nope", { "api/v1/artifacts/mnist": LIST });
    expect(root.querySelector(".error-box").textContent).toContain("Not found");
    expect(root.querySelector(".error-box").textContent).toContain("no route api/v1/artifacts/mnist/nope");
    render(null, root);
    vi.stubGlobal("fetch", vi.fn(async () => ({
      status: 503, ok: false, json: async () => ({ error: { status: 503, message: "the store is unavailable" } }),
    })));
    act(() => render(h(ArtifactsPage, { project: "mnist", params: new URLSearchParams() }), root));
    await flush();
    expect(root.querySelector(".error-box").textContent).toBe("Unavailablethe store is unavailableRetry");
  });
});
