// A fresh element to render into for each test of the file, unmounted and removed after
// it; with fakeTimers, the test runs on vitest's fake clock.

import { afterEach, beforeEach, vi } from "vitest";
import { render } from "preact";

export function freshRoot({ fakeTimers = false } = {}) {
  const dom = { root: null };
  beforeEach(() => {
    if (fakeTimers) vi.useFakeTimers();
    dom.root = document.createElement("div");
    document.body.appendChild(dom.root);
  });
  afterEach(() => {
    render(null, dom.root);
    dom.root.remove();
    if (fakeTimers) vi.useRealTimers();
  });
  return dom;
}
