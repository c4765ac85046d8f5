// What ran (rankwise.wire.code), as the Overview tab and the compare page show it.

/** A shell-quoted command line from an argv list. */
export function commandLine(argv) {
  return (argv ?? []).map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${String(a).replaceAll("'", "'\\''")}'`)).join(" ");
}

/** The command that checks the run's commit out. */
export function checkoutCommand(git) {
  return `git checkout ${git.commit}`;
}

/**
 * What differs between runs' config, git and packages: rows of [section, key, values
 * (one per run, undefined where a run has none)], only where the runs do not all agree.
 */
export function codeDiff(runs) {
  const rows = [];
  const add = (section, get) => {
    const maps = runs.map(get);
    const keys = [...new Set(maps.flatMap((m) => Object.keys(m ?? {})))].sort();
    for (const k of keys) {
      const values = maps.map((m) => (m && k in m ? m[k] : undefined));
      const shown = values.map((v) => (v === undefined ? "\u0000" : JSON.stringify(v)));
      if (new Set(shown).size > 1) rows.push([section, k, values]);
    }
  };
  add("config", (r) => r.config);
  add("git", (r) => {
    const g = r.code?.git;
    return g ? { commit: g.commit, branch: g.branch, remote: g.remote, dirty: g.dirty } : {};
  });
  add("packages", (r) => r.code?.packages ?? {});
  return rows;
}
