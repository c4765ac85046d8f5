// @vitest-environment happy-dom
// One logged item drawn by its kind, through a real Preact render: every player points at
// the blob route, captions are text, and an html panel is only a sandboxed frame.

import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { h, render } from "preact";
import { act } from "preact/test-utils";
import { MediaItemView } from "../src/components/MediaPanels.jsx";

const D = "ab".repeat(32);
let root;
beforeEach(() => {
  root = document.createElement("div");
  document.body.appendChild(root);
});
afterEach(() => {
  render(null, root);
  root.remove();
});

function draw(item) {
  act(() => render(h(MediaItemView, { project: "p q", item: { step: 3, label: "rank-0", index: 0, digest: D, ...item } }), root));
  return root;
}

describe("MediaItemView", () => {
  it("draws an image from the blob route, with its caption as text", () => {
    const el = draw({ kind: "image", format: "png", caption: '<img src=x onerror="window.__xss=1">', width: 8, height: 8 });
    const imgs = el.querySelectorAll("img");
    expect(imgs.length).toBe(1);
    expect(imgs[0].getAttribute("src")).toBe(`api/v1/blobs/p%20q/${D}`);
    expect(imgs[0].getAttribute("loading")).toBe("lazy");
    expect(el.querySelector("figcaption").textContent).toBe('<img src=x onerror="window.__xss=1">');
  });

  it("plays a GIF as an image, an MP4 in a video element, audio with controls", () => {
    expect(draw({ kind: "video", format: "gif" }).querySelector("img")).not.toBeNull();
    const video = draw({ kind: "video", format: "mp4" }).querySelector("video");
    expect(video.hasAttribute("controls")).toBe(true);
    expect(video.getAttribute("src")).toBe(`api/v1/blobs/p%20q/${D}`);
    const audio = draw({ kind: "audio", format: "wav", sample_rate: 16000 }).querySelector("audio");
    expect(audio.hasAttribute("controls")).toBe(true);
  });

  it("shows html only in a frame with an empty sandbox whose src is the blob route", () => {
    const frame = draw({ kind: "html", format: "html", caption: "report" }).querySelector("iframe");
    expect(frame.getAttribute("sandbox")).toBe("");
    expect(frame.getAttribute("src")).toBe(`api/v1/blobs/p%20q/${D}?inline=1`);
    expect(frame.hasAttribute("srcdoc")).toBe(false);
  });
});
