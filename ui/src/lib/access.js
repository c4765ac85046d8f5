// What the dashboard's session may do, from GET /session (docs/security.md, "Roles and
// projects"). Only for showing or hiding controls: the server decides, and refuses
// anyone else with 403 anyway.

/** Whether `who` may edit what people make in `project` (reports, run names, tags and
 * notes): a write or admin token whose projects include it, or the local `rankwise ui`
 * (which answers as admin of every project). */
export function canEdit(who, project) {
  return (who?.role === "write" || who?.role === "admin") && (!who.projects || who.projects.includes(project));
}
