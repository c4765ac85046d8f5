import { afterEach, describe, expect, it, vi } from "vitest";

// api.js reads document.cookie and dispatches window events: give node the two it uses.
const events = [];
globalThis.document = { cookie: "other=1; rk_csrf=abc123" };
globalThis.window = { dispatchEvent: (e) => events.push(e.type) };

const { api, askAhead, runPath, UNAUTHORIZED } = await import("../src/api.js");

function answer(status, body) {
  return vi.fn(async () => ({
    status,
    ok: status < 400,
    json: async () => body,
  }));
}

afterEach(() => {
  events.length = 0;
  vi.unstubAllGlobals();
});

describe("api requests and authentication", () => {
  it("echoes the rk_csrf cookie on mutations, never on reads", async () => {
    const fetch = answer(200, {});
    vi.stubGlobal("fetch", fetch);
    await api.saveView("p", { name: "v" });
    await api.projects();
    const [, post] = fetch.mock.calls[0];
    const [, get] = fetch.mock.calls[1];
    expect(post.headers["X-Rankwise-CSRF"]).toBe("abc123");
    expect(post.credentials).toBe("same-origin");
    expect(get.headers["X-Rankwise-CSRF"]).toBeUndefined();
  });

  it("sends the login token in the body, never the URL", async () => {
    const fetch = answer(200, { role: "read" });
    vi.stubGlobal("fetch", fetch);
    await api.login("rk_r_0123456789ab_secret");
    const [url, init] = fetch.mock.calls[0];
    expect(url).not.toContain("rk_r_");
    expect(JSON.parse(init.body)).toEqual({ token: "rk_r_0123456789ab_secret" });
  });

  it("a 401 from any call sends the page to login; a refused login does not", async () => {
    vi.stubGlobal("fetch", answer(401, { error: { message: "authentication required" } }));
    await expect(api.projects()).rejects.toMatchObject({ status: 401 });
    expect(events).toEqual([UNAUTHORIZED]);
    events.length = 0;
    await expect(api.login("bad")).rejects.toMatchObject({ status: 401 });
    expect(events).toEqual([]);
  });

  it("run paths encode user names", () => {
    expect(runPath("a/b", "r?x", "/health")).toBe("/projects/a%2Fb/runs/r%3Fx/health");
  });

  it("health, stalls, console and system have their own calls and paths", async () => {
    const fetch = answer(200, {});
    vi.stubGlobal("fetch", fetch);
    await api.health("p", "r", { stacks: true });
    await api.stalls("p", "r", { limit: 1000 });
    await api.console("p", "r", { label: ["rank-0", "rank-1"], limit: 200, count: false });
    await api.system("p", "r");
    await api.systemSeries("p", "r", { key: "gpu/util_percent", max_points: 400 });
    expect(fetch.mock.calls.map(([url]) => url)).toEqual([
      "api/v1/projects/p/runs/r/health?stacks=true",
      "api/v1/projects/p/runs/r/stalls?limit=1000",
      "api/v1/projects/p/runs/r/console?label=rank-0&label=rank-1&limit=200&count=false",
      "api/v1/projects/p/runs/r/system",
      "api/v1/projects/p/runs/r/system/series?key=gpu%2Futil_percent&max_points=400",
    ]);
  });
});

describe("askAhead", () => {
  it("hands the early reply over once, then null (a later read asks afresh)", async () => {
    const early = askAhead(async () => ({ keys: ["a"] }));
    await expect(early.take()).resolves.toEqual({ keys: ["a"] });
    expect(early.take()).toBeNull();
  });

  it("a failed early request reads as null, never as an unhandled rejection", async () => {
    const early = askAhead(async () => {
      throw new Error("down");
    });
    await expect(early.take()).resolves.toBeNull();
  });
});
