// Line colours. Runs in a comparison get a categorical palette picked for distinctness;
// ranks (up to thousands) get hues spread by the golden angle so neighbours differ.

const CATEGORICAL = [
  "#4e79a7", "#f28e2b", "#e15759", "#59a14f", "#b07aa1",
  "#76b7b2", "#edc948", "#ff9da7", "#9c755f", "#8cd17d",
];

/** The colour of the i-th run of a comparison. */
export function runColor(i) {
  if (i < CATEGORICAL.length) return CATEGORICAL[i];
  return rankColor(i);
}

/** The colour of rank `i`, stable across charts and pages. */
export function rankColor(i, dark = false) {
  // Starts at orange and steps by the golden angle; the accent blue of the mean line is
  // only ever approached, never hit, by rank 0 .. 7.
  const hue = (i * 137.508 + 20) % 360;
  return `hsl(${hue.toFixed(1)} 62% ${dark ? 62 : 46}%)`;
}

/** The theme's colours for chart chrome, read from the CSS variables. */
export function themeColors() {
  const css = getComputedStyle(document.documentElement);
  const v = (name) => css.getPropertyValue(name).trim();
  return {
    dark: window.matchMedia?.("(prefers-color-scheme: dark)").matches ?? false,
    text: v("--muted"),
    grid: v("--grid"),
    accent: v("--accent"),
    band: v("--band"),
    raw: v("--raw"),
    ink: v("--text"),
    bad: v("--bad"),
  };
}
