import { describe, expect, it } from "vitest";
import { checkoutCommand, codeDiff, commandLine } from "../src/lib/code.js";

describe("what ran", () => {
  it("quotes a command line for the shell", () => {
    expect(commandLine(["train.py", "--lr", "0.1", "--name", "a b", "it's"])).toBe(
      "train.py --lr 0.1 --name 'a b' 'it'\\''s'",
    );
    expect(commandLine(undefined)).toBe("");
  });

  it("names the checkout command", () => {
    expect(checkoutCommand({ commit: "abc123" })).toBe("git checkout abc123");
  });

  it("lists only what differs between runs' config, git and packages", () => {
    const a = { config: { lr: 0.1, bs: 32 }, code: { git: { commit: "a1", branch: "main", dirty: false }, packages: { torch: "2.1", numpy: "1.26" } } };
    const b = { config: { lr: 0.2, bs: 32 }, code: { git: { commit: "b2", branch: "main", dirty: true }, packages: { torch: "2.1", numpy: "2.0", extra: "1" } } };
    const c = { config: { lr: 0.1 } };
    const rows = codeDiff([a, b]);
    expect(rows.map(([s, k]) => `${s}/${k}`)).toEqual(["config/lr", "git/commit", "git/dirty", "packages/extra", "packages/numpy"]);
    expect(rows[0][2]).toEqual([0.1, 0.2]);
    expect(rows[3][2]).toEqual([undefined, "1"]);
    expect(codeDiff([a, a])).toEqual([]);
    const missing = codeDiff([a, c]).map(([s, k]) => `${s}/${k}`);
    expect(missing).toContain("config/bs");
    expect(missing).toContain("git/commit");
  });
});
