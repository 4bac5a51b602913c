// What a tool call looks like to a person: a title per router/action, a one-line summary of its
// output, and the toast after a change that can be undone.
import type { MessageKey, Translate } from "../i18n";

const TITLED = new Set([
  "read.get_current_context", "read.programs_list", "read.members_search", "read.members_get", "read.ask_user_to_pick",
  "read.exercises_search", "read.exercises_resolve_batch", "read.search_anything", "read.lookup_by_id",
  "read.workout_comments_in_program", "read.workout_comments_for_assignment",
  "tasks.list", "tasks.create", "tasks.update", "tasks.complete", "tasks.delete",
  "workouts.create", "workouts.update", "workouts.set_sections", "workouts.delete",
  "programs.create", "programs.update", "programs.delete", "programs.enroll_member",
  "class_sessions.list_for_date", "class_sessions.create", "class_sessions.update", "class_sessions.publish",
  "class_sessions.unpublish", "class_sessions.cancel", "class_sessions.bulk_preview", "class_sessions.bulk_delete",
  "class_sessions.bulk_publish", "class_types.list_for_program",
  "assignments.assign_personal", "assignments.update", "assignments.set_published", "assignments.delete",
  "assignments.bulk_preview", "assignments.bulk_delete", "assignments.bulk_publish",
  "bookings.attendance_summary", "bookings.attendance_trend", "bookings.list_mine",
  "analytics.revenue_summary", "analytics.at_risk_members", "analytics.members_summary", "analytics.popular_classes",
  "analytics.class_utilization", "analytics.org_insights",
  "forms.list_pending_for_org", "program_templates.list", "program_templates.apply",
]);

/** "Create workout", "Schedule a class", …; `router.action` for a tool without a title. */
export function toolTitle(t: Translate, router: string, action: string): string {
  const name = `${router}.${action}`;
  return TITLED.has(name) ? t(`agent.tool.${name}` as MessageKey) : name;
}

const TOASTS = new Set(["workouts.create", "tasks.create", "programs.create", "class_sessions.create", "class_sessions.publish"]);

/** "Workout created", or "Change saved" for a change without its own words. */
export function changeText(t: Translate, router: string, action: string): string {
  const name = `${router}.${action}`;
  return TOASTS.has(name) ? t(`agent.toast.${name}` as MessageKey) : t("agent.toast.generic");
}

const NAME_KEYS = ["title", "name", "fullName", "label", "pickedLabel", "className", "email"];

function nameOf(value: unknown): string | null {
  if (!value || typeof value !== "object") return null;
  const o = value as Record<string, unknown>;
  for (const key of NAME_KEYS) if (typeof o[key] === "string" && o[key]) return o[key] as string;
  for (const nested of ["item", "task", "workout", "program", "session", "classSession", "member"]) {
    const inner = o[nested];
    if (inner && typeof inner === "object") {
      const found = nameOf(inner);
      if (found) return found;
    }
  }
  return null;
}

/** A compact line about what a tool returned: the thing's name, or how many things it found. */
export function outputSummary(t: Translate, output: unknown): string | null {
  if (output == null) return null;
  if (Array.isArray(output)) return t("agent.results", { n: output.length });
  if (typeof output !== "object") return clip(String(output));
  const named = nameOf(output);
  const o = output as Record<string, unknown>;
  const list = Object.values(o).find(Array.isArray) as unknown[] | undefined;
  if (list && !named) {
    const total = typeof o.total === "number" ? o.total : list.length;
    const names = list.map(nameOf).filter(Boolean).slice(0, 3) as string[];
    const count = t("agent.results", { n: total });
    return names.length ? `${count}: ${names.join(", ")}${total > names.length ? "…" : ""}` : count;
  }
  if (named) return clip(named);
  if (typeof o.summary === "string") return clip(o.summary);
  if (typeof o.message === "string") return clip(o.message);
  return null;
}

/** Names of the things earlier tool calls returned, by id, so a card can say "call the plumber"
 * where the tool's input only has the task's id. */
export function namesById(outputs: unknown[]): Map<string, string> {
  const names = new Map<string, string>();
  const walk = (value: unknown, depth: number) => {
    if (!value || typeof value !== "object" || depth > 4) return;
    if (Array.isArray(value)) {
      for (const v of value.slice(0, 200)) walk(v, depth + 1);
      return;
    }
    const o = value as Record<string, unknown>;
    const name = NAME_KEYS.map((k) => o[k]).find((v) => typeof v === "string" && v);
    for (const idKey of ["id", "membershipId", "pickedId"]) {
      if (typeof o[idKey] === "string" && typeof name === "string") names.set(o[idKey] as string, name);
    }
    for (const v of Object.values(o)) if (v && typeof v === "object") walk(v, depth + 1);
  };
  outputs.forEach((o) => walk(o, 0));
  return names;
}

/** The inputs worth showing on a confirmation card: short scalar values, ids last (named when an
 * earlier tool call told us what they are). */
export function keyInputs(input: Record<string, unknown>, names: Map<string, string> = new Map()): [string, string][] {
  // Machine-only fields (a bulk operation's selection token, a hash) mean nothing to a person.
  const entries = Object.entries(input).filter(([k, v]) => v !== null && v !== undefined && (typeof v !== "object" || Array.isArray(v)) && !/(token|hash)$/i.test(k));
  const show = (v: unknown) => (typeof v === "string" && names.has(v) ? names.get(v)! : String(v));
  const scalar = entries.map(([k, v]) => [k, Array.isArray(v) ? v.map((x) => (typeof x === "object" ? nameOf(x) ?? "…" : show(x))).join(", ") : show(v)] as [string, string]);
  const isId = (k: string) => /id$/i.test(k);
  // A resolved id shows as its name, labelled by what it is ("taskId" → "Task"; a bare "id" → no label).
  const label = (k: string) => (isId(k) && typeof input[k] === "string" && names.has(input[k] as string) ? humanize(k.replace(/_?id$/i, "")) : humanize(k));
  return [...scalar.filter(([k]) => !isId(k)), ...scalar.filter(([k]) => isId(k))].slice(0, 6).map(([k, v]) => [label(k), clip(v, 80)]);
}

function humanize(key: string): string {
  const words = key.replace(/([a-z0-9])([A-Z])/g, "$1 $2").replace(/_/g, " ").toLowerCase();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

function clip(text: string, limit = 140): string {
  return text.length > limit ? `${text.slice(0, limit - 1)}…` : text;
}
