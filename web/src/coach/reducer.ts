// The coach conversation as a pure fold over the stream's frames, plus what the member does locally
// (sending a message, opening another session).
import type { Artifact, CoachState, Frame, Item, SessionDetail, ToolFrame } from "./types";

export const initialState: CoachState = {
  sessionId: null,
  items: [],
  workouts: {},
  currentId: null,
  logged: [],
  running: false,
  status: null,
  loading: false,
  seq: 0,
};

export type Action =
  | { type: "frame"; frame: Frame }
  | { type: "send"; text: string }
  | { type: "turn_end" }
  | { type: "local_error"; code: string | null; message: string; traceId: string | null }
  | { type: "reset"; sessionId: string | null }
  | { type: "loading"; sessionId: string }
  | { type: "loaded"; detail: SessionDetail }
  | { type: "load_failed" };

/** The tools whose result changes the workout on screen (swap/adjust/remove carry the new one). */
const EDITS = new Set(["swap_exercise", "adjust_exercise", "remove_exercise"]);

function isArtifact(value: unknown): value is Artifact {
  if (!value || typeof value !== "object") return false;
  const a = value as Partial<Artifact>;
  return typeof a.artifact_id === "string" && Boolean(a.payload) && Array.isArray(a.payload?.exercises);
}

type Unkeyed = Item extends infer I ? (I extends Item ? Omit<I, "key"> : never) : never;

function push(state: CoachState, item: Unkeyed, prefix: string): CoachState {
  const key = `${prefix}${state.seq}`;
  return { ...state, seq: state.seq + 1, items: [...state.items, { ...item, key } as Item] };
}

function remember(state: CoachState, artifact: Artifact): CoachState {
  return { ...state, workouts: { ...state.workouts, [artifact.artifact_id]: artifact } };
}

/** An edited workout replaces the current card in place, even when the edit gave it a new id. */
function replaceCurrent(state: CoachState, artifact: Artifact): CoachState {
  const old = state.currentId;
  const next = remember(state, artifact);
  if (!old || old === artifact.artifact_id) return { ...next, currentId: artifact.artifact_id };
  return {
    ...next,
    currentId: artifact.artifact_id,
    items: next.items.map((i) => (i.kind === "coach" && i.artifactId === old ? { ...i, artifactId: artifact.artifact_id } : i)),
  };
}

function str(value: unknown): string {
  return typeof value === "string" ? value : "";
}

function toolResult(state: CoachState, frame: ToolFrame): CoachState {
  const data = frame.data ?? {};
  const ok = frame.status !== "failed" && data.success !== false;
  switch (frame.type) {
    case "message_notify_user": {
      const artifact = isArtifact(frame.artifact) ? frame.artifact : isArtifact(data.artifact) ? data.artifact : null;
      let next = state;
      let artifactId: string | null = null;
      if (artifact) {
        next = remember(next, artifact);
        artifactId = artifact.artifact_id;
      } else {
        const id = str(frame.artifact_id) || str(data.artifact_id);
        if (id && next.workouts[id]) artifactId = id;
      }
      // A logged workout delivered again (the coach's "well done" with the card) stays logged.
      if (artifactId) next = { ...next, currentId: artifactId };
      const text = str(data.message);
      if (!text && !artifactId) return next;
      return push(next, { kind: "coach", text, artifactId }, "c");
    }
    case "message_ask_user": {
      const question = str(data.question);
      if (!question) return state;
      const options = Array.isArray(data.options) ? data.options.filter((o): o is string => typeof o === "string" && o.trim() !== "") : [];
      return push(state, { kind: "question", text: question, options, answered: false }, "q");
    }
    case "log_workout": {
      if (!ok || !state.currentId) return state;
      const id = state.currentId;
      return state.logged.includes(id) ? state : { ...state, logged: [...state.logged, id] };
    }
    default: {
      // generate_workout's artifact waits in the map for the message that delivers it.
      const artifact = isArtifact(frame.artifact) ? frame.artifact : isArtifact(data.artifact) ? data.artifact : null;
      if (!ok || !artifact) return state;
      return EDITS.has(frame.type) ? replaceCurrent(state, artifact) : remember(state, artifact);
    }
  }
}

export function applyFrame(state: CoachState, frame: Frame): CoachState {
  switch (frame.type) {
    case "status": {
      const f = frame as Extract<Frame, { type: "status" }>;
      return { ...state, status: f.data?.message || state.status };
    }
    case "knowledge": {
      const f = frame as Extract<Frame, { type: "knowledge" }>;
      const source = { source: f.data?.source ?? "", displayName: f.data?.displayName || f.data?.source || "" };
      if (!source.displayName) return state;
      const last = state.items[state.items.length - 1];
      if (last?.kind === "knowledge") {
        if (last.sources.some((s) => s.source === source.source)) return state;
        return { ...state, items: [...state.items.slice(0, -1), { ...last, sources: [...last.sources, source] }] };
      }
      return push(state, { kind: "knowledge", sources: [source] }, "k");
    }
    case "done": {
      const f = frame as Extract<Frame, { type: "done" }>;
      return { ...state, sessionId: f.sessionId || state.sessionId, running: false, status: null };
    }
    case "error": {
      const f = frame as Extract<Frame, { type: "error" }>;
      return push(state, { kind: "error", code: f.code ?? null, message: f.message ?? "", traceId: f.traceId ?? null }, "e");
    }
    default: {
      const f = frame as ToolFrame;
      // A tool starting says nothing the status line does not.
      if (f.status === undefined && f.data?.status === "running") return state;
      return toolResult(state, f);
    }
  }
}

/** A stored session as items: the words, the questions (answered when the member spoke after),
 * the workouts, and the session's current workout, if any, as the card to act on. */
export function fromDetail(detail: SessionDetail): Pick<CoachState, "items" | "workouts" | "currentId" | "logged" | "seq"> {
  const items: Item[] = [];
  const workouts: Record<string, Artifact> = {};
  let n = 0;
  for (const entry of detail.transcript ?? []) {
    const text = entry.text ?? "";
    if (entry.role === "user") {
      for (const i of items) if (i.kind === "question") i.answered = true;
      if (text.trim()) items.push({ kind: "user", key: `u${n++}`, text });
      continue;
    }
    const artifact = isArtifact(entry.artifact) ? entry.artifact : null;
    if (artifact) workouts[artifact.artifact_id] = artifact;
    const question = entry.question?.question ?? "";
    if (question) {
      if (text.trim() && text.trim() !== question.trim()) items.push({ kind: "coach", key: `c${n++}`, text, artifactId: null });
      items.push({ kind: "question", key: `q${n++}`, text: question, options: entry.question?.options ?? [], answered: false });
      if (artifact) items.push({ kind: "coach", key: `c${n++}`, text: "", artifactId: artifact.artifact_id });
    } else if (text.trim() || artifact) {
      items.push({ kind: "coach", key: `c${n++}`, text, artifactId: artifact?.artifact_id ?? null });
    }
  }
  let currentId: string | null = null;
  const logged: string[] = [];
  if (isArtifact(detail.workout)) {
    currentId = detail.workout.artifact_id;
    workouts[currentId] = detail.workout;
    if (!items.some((i) => i.kind === "coach" && i.artifactId === currentId)) {
      items.push({ kind: "coach", key: `c${n++}`, text: "", artifactId: currentId });
    }
  } else {
    // No live workout: the last one shown was logged (or the coach forgot it). Keep it as the card
    // to act on unless a log is on record, so the next message can hand it back as currentWorkout.
    const last = [...items].reverse().find((i) => i.kind === "coach" && i.artifactId);
    if (last && last.kind === "coach" && last.artifactId) {
      currentId = last.artifactId;
      if (loggedOnRecord(detail.recentActions)) logged.push(currentId);
    }
  }
  return { items, workouts, currentId, logged, seq: n };
}

function loggedOnRecord(actions: unknown[] | undefined): boolean {
  return (actions ?? []).some((a) => {
    if (!a || typeof a !== "object") return false;
    const o = a as Record<string, unknown>;
    return [o.tool, o.type, o.name, o.action, o.toolName].includes("log_workout") && o.status !== "failed" && o.success !== false;
  });
}

export function coachReducer(state: CoachState, action: Action): CoachState {
  switch (action.type) {
    case "frame":
      return applyFrame(state, action.frame);
    case "send": {
      const items = state.items.map((i): Item => (i.kind === "question" && !i.answered ? { ...i, answered: true } : i));
      return push({ ...state, items, running: true, status: null }, { kind: "user", text: action.text }, "u");
    }
    case "turn_end":
      return { ...state, running: false, status: null };
    case "local_error":
      return push(state, { kind: "error", code: action.code, message: action.message, traceId: action.traceId }, "e");
    case "reset":
      return { ...initialState, sessionId: action.sessionId };
    case "loading":
      return { ...initialState, sessionId: action.sessionId, loading: true };
    case "loaded":
      return { ...initialState, sessionId: action.detail.session?.id ?? state.sessionId, ...fromDetail(action.detail) };
    case "load_failed":
      return { ...state, loading: false };
  }
}

/** What the coach should know the member sees: the current workout, unless it is already logged. */
export function currentWorkout(state: CoachState): Artifact | null {
  const id = state.currentId;
  if (!id || state.logged.includes(id)) return null;
  return state.workouts[id] ?? null;
}
