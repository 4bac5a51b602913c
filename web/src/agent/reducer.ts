// The conversation as a pure fold over the gateway's SSE events (seed 000's agent-provider reducer),
// plus the few things the user does locally (typing a message, clicking Approve, …).
import type { AgentEvent, AgentState, ConversationDetail, Item, Sequenced, ToolCallDetail } from "./types";

export const initialState: AgentState = {
  conversationId: null,
  title: null,
  items: [],
  lastSeq: 0,
  running: false,
  reconnecting: false,
  loading: false,
  budget: null,
};

export type Action =
  | { type: "events"; events: Sequenced[] }
  | { type: "user_message"; key: string; text: string }
  | { type: "turn_start" }
  | { type: "turn_end" }
  | { type: "reconnecting"; on: boolean }
  | { type: "reset" }
  | { type: "loading"; conversationId: string }
  | { type: "loaded"; detail: ConversationDetail; tail: string; running: boolean }
  | { type: "answer"; toolUseId: string; approved: boolean }
  | { type: "pick"; toolUseId: string; id: string }
  | { type: "undone"; toolUseId: string }
  | { type: "local_error"; code: string; message: string; traceId: string | null }
  | { type: "dismiss_budget" };

const BUDGET = "agent_budget_exceeded";

function replaceWhere(items: Item[], match: (item: Item) => boolean, update: (item: Item) => Item): Item[] {
  return items.map((item) => (match(item) ? update(item) : item));
}

function endStreaming(items: Item[]): Item[] {
  return items.some((i) => i.kind === "assistant" && i.streaming)
    ? items.map((i) => (i.kind === "assistant" && i.streaming ? { ...i, streaming: false } : i))
    : items;
}

function errorText(output: unknown): { code: string; message: string; hint?: string | null } | null {
  if (output && typeof output === "object" && "message" in output) {
    const o = output as { code?: unknown; message?: unknown; hint?: unknown };
    return { code: String(o.code ?? "tool_failed"), message: String(o.message ?? ""), hint: typeof o.hint === "string" ? o.hint : null };
  }
  return null;
}

/** Apply one SSE event. Events with a sequence number at or below the last applied are ignored, so
 * a resumed or replayed stream never shows anything twice. */
export function reduce(state: AgentState, sequenced: Sequenced): AgentState {
  const { id, event } = sequenced;
  if (id !== null && id <= state.lastSeq) return state;
  const next = applyEvent(state, event, id);
  return id !== null ? { ...next, lastSeq: id } : next;
}

function applyEvent(state: AgentState, event: AgentEvent, id: number | null): AgentState {
  const items = state.items;
  switch (event.type) {
    case "conversation_started":
      return { ...state, conversationId: event.conversationId };
    case "text_delta": {
      const last = items[items.length - 1];
      if (last && last.kind === "assistant" && last.streaming) {
        return { ...state, items: [...items.slice(0, -1), { ...last, text: last.text + event.delta }] };
      }
      return { ...state, items: [...items, { kind: "assistant", key: `a${id ?? items.length}`, text: event.delta, streaming: true }] };
    }
    case "message_done":
      return { ...state, items: endStreaming(items) };
    case "tool_started": {
      const base = endStreaming(items);
      if (base.some((i) => i.kind === "tool" && i.toolUseId === event.toolUseId)) {
        return { ...state, items: replaceWhere(base, (i) => i.kind === "tool" && i.toolUseId === event.toolUseId, (i) => ({ ...i, status: "running" }) as Item) };
      }
      if (base.some((i) => i.kind === "picker" && i.toolUseId === event.toolUseId)) return { ...state, items: base };
      return {
        ...state,
        items: [...base, { kind: "tool", key: `t${event.toolUseId}`, toolUseId: event.toolUseId, router: event.router, action: event.action, input: event.input ?? {}, status: "running", inverseAvailable: false }],
      };
    }
    case "tool_completed": {
      const base = endStreaming(items);
      const picker = base.find((i) => i.kind === "picker" && i.toolUseId === event.toolUseId);
      if (picker) {
        const picked = event.ok && event.output && typeof event.output === "object" ? String((event.output as { pickedId?: unknown }).pickedId ?? "") || null : null;
        return { ...state, items: replaceWhere(base, (i) => i === picker, (i) => ({ ...i, picked: picked ?? (i as { picked: string | null }).picked ?? "" }) as Item) };
      }
      const error = event.ok ? null : errorText(event.output);
      const status = event.ok ? "ok" : error?.code === "rejected_by_user" ? "rejected" : "error";
      const answered = replaceWhere(
        base,
        (i) => i.kind === "confirm" && i.toolUseId === event.toolUseId && i.answer === null,
        (i) => ({ ...i, answer: status === "rejected" ? "rejected" : "approved" }) as Item,
      );
      const update = { status, output: event.ok ? event.output : undefined, error, inverseAvailable: Boolean(event.inverseAvailable) } as const;
      if (answered.some((i) => i.kind === "tool" && i.toolUseId === event.toolUseId)) {
        return { ...state, items: replaceWhere(answered, (i) => i.kind === "tool" && i.toolUseId === event.toolUseId, (i) => ({ ...i, ...update }) as Item) };
      }
      return {
        ...state,
        items: [...answered, { kind: "tool", key: `t${event.toolUseId}`, toolUseId: event.toolUseId, router: event.router, action: event.action, input: {}, ...update }],
      };
    }
    case "confirmation_pending": {
      // A call a rule holds was already started: its running card becomes the question.
      const base = endStreaming(items).filter((i) => !(i.kind === "tool" && i.toolUseId === event.toolUseId && (i.status === "waiting" || i.status === "running")));
      if (base.some((i) => i.kind === "confirm" && i.toolUseId === event.toolUseId)) return { ...state, items: base };
      return {
        ...state,
        items: [...base, { kind: "confirm", key: `c${event.toolUseId}`, toolUseId: event.toolUseId, router: event.router, action: event.action, input: event.input ?? {}, confirm: event.confirm, reason: event.reason ?? null, answer: null }],
      };
    }
    case "disambiguation_pending": {
      const base = endStreaming(items).filter((i) => !(i.kind === "tool" && i.toolUseId === event.toolUseId));
      if (base.some((i) => i.kind === "picker" && i.toolUseId === event.toolUseId)) return { ...state, items: base };
      return {
        ...state,
        items: [...base, { kind: "picker", key: `p${event.toolUseId}`, toolUseId: event.toolUseId, entity: event.kind, prompt: event.prompt, candidates: event.candidates ?? [], picked: null }],
      };
    }
    case "done":
      return { ...state, conversationId: event.conversationId || state.conversationId, running: false, reconnecting: false, items: endStreaming(items) };
    case "error": {
      const budget = event.code === BUDGET ? { message: event.message, traceId: event.traceId ?? null } : state.budget;
      return {
        ...state,
        budget,
        items: [...endStreaming(items), { kind: "error", key: `e${id ?? ""}-${items.length}`, code: event.code, message: event.message, traceId: event.traceId ?? null }],
      };
    }
  }
}

/** The UI's reducer: SSE events (in batches, one per animation frame) and local actions. */
export function agentReducer(state: AgentState, action: Action): AgentState {
  switch (action.type) {
    case "events":
      return action.events.reduce(reduce, state);
    case "user_message": {
      // Typing instead of answering closes the open question on the server (the replay guard);
      // its buttons would only earn a tool_already_resolved, so they go quiet here too.
      const closed = state.items.map((i): Item =>
        i.kind === "confirm" && i.answer === null ? { ...i, answer: "skipped" }
          : i.kind === "picker" && i.picked === null ? { ...i, picked: "" } : i);
      return { ...state, items: [...closed, { kind: "user", key: action.key, text: action.text }] };
    }
    case "turn_start":
      return { ...state, running: true };
    case "turn_end":
      return { ...state, running: false, reconnecting: false, items: endStreaming(state.items) };
    case "reconnecting":
      return { ...state, reconnecting: action.on };
    case "reset":
      return { ...initialState };
    case "loading":
      return { ...initialState, conversationId: action.conversationId, loading: true };
    case "loaded": {
      const items = fromDetail(action.detail);
      if (action.tail) items.push({ kind: "assistant", key: "a-tail", text: action.tail, streaming: action.running });
      return {
        ...state, conversationId: action.detail.id, title: action.detail.title, items, lastSeq: action.detail.lastEventSeq,
        running: action.running, loading: false,
      };
    }
    case "answer":
      return { ...state, items: replaceWhere(state.items, (i) => i.kind === "confirm" && i.toolUseId === action.toolUseId, (i) => ({ ...i, answer: action.approved ? "approved" : "rejected" }) as Item) };
    case "pick":
      return { ...state, items: replaceWhere(state.items, (i) => i.kind === "picker" && i.toolUseId === action.toolUseId, (i) => ({ ...i, picked: action.id }) as Item) };
    case "undone":
      return { ...state, items: replaceWhere(state.items, (i) => i.kind === "tool" && i.toolUseId === action.toolUseId, (i) => ({ ...i, undone: true }) as Item) };
    case "local_error":
      return {
        ...state,
        budget: action.code === BUDGET ? { message: action.message, traceId: action.traceId } : state.budget,
        items: [...state.items, { kind: "error", key: `le${state.items.length}`, code: action.code, message: action.message, traceId: action.traceId }],
      };
    case "dismiss_budget":
      return { ...state, budget: null };
  }
}

/** A stored conversation as cards: the user's words, the assistant's text and one card per tool
 * call with the status the tool-runner recorded. The first call still waiting for a person gets its
 * confirmation or picker card (the later ones of its batch wait behind it). */
export function fromDetail(detail: ConversationDetail): Item[] {
  const items: Item[] = [];
  let announced = false;
  for (const m of detail.messages) {
    if (m.role === "user") {
      const appEvent = (m as { pageContext?: { appEvent?: unknown } }).pageContext?.appEvent;
      if (appEvent) continue; // e.g. the note an Undo leaves for the model
      if (m.text.trim()) items.push({ kind: "user", key: `u${m.id}`, text: m.text });
      continue;
    }
    if (m.role !== "assistant") continue;
    if (m.text.trim()) items.push({ kind: "assistant", key: `a${m.id}`, text: m.text, streaming: false });
    for (const call of m.toolCalls ?? []) {
      const card = callItem(call, !announced);
      if (call.status === "pending" && (card.kind === "confirm" || card.kind === "picker")) announced = true;
      items.push(card);
    }
  }
  return items;
}

function callItem(call: ToolCallDetail, mayAsk: boolean): Item {
  const input = (call.input ?? {}) as Record<string, unknown>;
  const candidates = Array.isArray(input.candidates) ? (input.candidates as { id: string; label: string; sublabel?: string }[]) : null;
  if (candidates && typeof input.prompt === "string") {
    const output = call.output as { pickedId?: unknown } | null | undefined;
    const picked = call.status === "pending" ? null : output?.pickedId != null ? String(output.pickedId) : "";
    if (call.status === "pending" && !mayAsk) {
      return { kind: "tool", key: `t${call.toolUseId}`, toolUseId: call.toolUseId, router: call.router, action: call.action, input, status: "waiting", inverseAvailable: false };
    }
    return { kind: "picker", key: `p${call.toolUseId}`, toolUseId: call.toolUseId, entity: String(input.kind ?? "item"), prompt: input.prompt, candidates, picked };
  }
  if (call.status === "pending" && mayAsk) {
    return { kind: "confirm", key: `c${call.toolUseId}`, toolUseId: call.toolUseId, router: call.router, action: call.action, input, confirm: call.confirm ?? "destructive", reason: call.reason ?? null, answer: null };
  }
  const status = ({ pending: "waiting", running: "running", succeeded: "ok", failed: "error", rejected_by_user: "rejected" } as const)[call.status] ?? "ok";
  const error = call.error?.code ? { code: call.error.code, message: call.error.message ?? "" } : null;
  return {
    kind: "tool", key: `t${call.toolUseId}`, toolUseId: call.toolUseId, router: call.router, action: call.action, input,
    status: error?.code === "rejected_by_user" ? "rejected" : status, output: call.output, error,
    inverseAvailable: status === "ok" && Boolean(call.inverseAvailable), undone: Boolean(call.undone),
  };
}
