import { describe, expect, it } from "vitest";
import { canEdit } from "../src/lib/access.js";

// The session (GET /session) decides which edit controls the dashboard shows.
describe("canEdit", () => {
  it("shows edit controls to write and admin sessions of the project only", () => {
    expect(canEdit({ role: "write", projects: ["p"] }, "p")).toBe(true);
    expect(canEdit({ role: "write", projects: ["p"] }, "q")).toBe(false);
    expect(canEdit({ role: "write", projects: null }, "q")).toBe(true);
    expect(canEdit({ role: "admin", projects: null }, "p")).toBe(true);
    expect(canEdit({ role: "read", projects: ["p"] }, "p")).toBe(false);
    expect(canEdit({ role: "read", projects: null }, "p")).toBe(false);
    expect(canEdit({ role: "ingest", projects: ["p"] }, "p")).toBe(false);
    expect(canEdit(null, "p")).toBe(false);
    expect(canEdit(undefined, "p")).toBe(false);
  });
});
