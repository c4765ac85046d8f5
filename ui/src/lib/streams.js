// A run's streams as the run page lists them (docs/http-api.md: one per process
// incarnation; a restarted rank has several).

/** The latest incarnation of each stream label (earlier ones are restarts). */
export function latestStreams(streams) {
  const byLabel = new Map();
  for (const s of streams) {
    const prev = byLabel.get(s.label);
    if (!prev || s.incarnation > prev.incarnation) byLabel.set(s.label, s);
  }
  return [...byLabel.values()].sort((a, b) => a.rank - b.rank || (a.label < b.label ? -1 : 1));
}
