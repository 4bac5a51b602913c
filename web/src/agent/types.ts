// Wire shapes of the gateway's agent API (camelCase JSON, shared/spotter_shared/contracts/events.py)
// and the conversation the sheet shows.

export type PickCandidate = { id: string; label: string; sublabel?: string | null; detail?: string | null };
export type ToolErrorBody = { code: string; message: string; hint?: string | null };

export type AgentEvent =
  | { type: "conversation_started"; conversationId: string }
  | { type: "text_delta"; delta: string }
  | { type: "tool_started"; toolUseId: string; router: string; action: string; input: Record<string, unknown> }
  | { type: "tool_completed"; toolUseId: string; router: string; action: string; ok: boolean; output?: unknown; inverseAvailable?: boolean }
  | { type: "confirmation_pending"; toolUseId: string; router: string; action: string; input: Record<string, unknown>; confirm: "destructive" | "always"; reason?: string | null }
  | { type: "disambiguation_pending"; toolUseId: string; kind: string; prompt: string; candidates: PickCandidate[] }
  | { type: "message_done"; messageId: string; stopReason: string | null }
  | { type: "done"; conversationId: string; usage?: Record<string, number> }
  | { type: "error"; code: string; message: string; traceId: string };

/** An event as read from the stream: its sequence number (null for transient errors) and payload. */
export type Sequenced = { id: number | null; event: AgentEvent };

export type ToolStatus = "running" | "ok" | "error" | "rejected" | "waiting";

export type Item =
  | { kind: "user"; key: string; text: string }
  | { kind: "assistant"; key: string; text: string; streaming: boolean }
  | {
      kind: "tool"; key: string; toolUseId: string; router: string; action: string; input: Record<string, unknown>;
      status: ToolStatus; output?: unknown; error?: ToolErrorBody | null; inverseAvailable: boolean; undone?: boolean;
    }
  | {
      kind: "confirm"; key: string; toolUseId: string; router: string; action: string; input: Record<string, unknown>;
      confirm: string; reason?: string | null; answer: "approved" | "rejected" | "skipped" | null;
    }
  | { kind: "picker"; key: string; toolUseId: string; entity: string; prompt: string; candidates: PickCandidate[]; picked: string | null }
  | { kind: "error"; key: string; code: string; message: string; traceId: string | null };

export type AgentState = {
  conversationId: string | null;
  title: string | null;
  items: Item[];
  /** The highest event sequence number applied: a replay never applies one twice. */
  lastSeq: number;
  running: boolean;
  reconnecting: boolean;
  loading: boolean;
  /** Set when a budget error arrives; the blocking modal shows while it is set. */
  budget: { message: string; traceId: string | null } | null;
};

export type ToolCallDetail = {
  toolUseId: string; router: string; action: string; input: Record<string, unknown> | null;
  status: "pending" | "running" | "succeeded" | "failed" | "rejected_by_user"; output?: unknown;
  error?: { code: string | null; message: string | null } | null;
  /** From the event log: whether the call's undo was offered, and why it waited for approval. */
  inverseAvailable?: boolean; undone?: boolean; confirm?: "destructive" | "always" | null;
  /** A constraint rule's message when a rule (not the tool itself) asked for the approval. */
  reason?: string | null;
};

export type MessageDetail = {
  id: string; role: "user" | "assistant" | "tool_result"; text: string; toolCalls?: ToolCallDetail[];
};

export type ConversationSummary = {
  id: string; title: string | null; pinned: boolean; archivedAt: string | null; lastMessageAt: string | null;
  createdAt: string | null; lastEventSeq: number;
};

export type ConversationDetail = ConversationSummary & { messages: MessageDetail[] };

export type Usage = {
  tier: string; capUsdMicros: number; spentUsdMicros: number; reservedUsdMicros: number; remainingUsdMicros: number | null;
  percentUsed: number; resetsAt: string; showUpgradeHint: boolean;
};
