// Spotter's conversation state, owned by AgentRoot (mounted beside the routes) so a running stream
// survives navigation. One turn streams at a time; text deltas are buffered and applied once per
// animation frame; a dropped stream resumes from the last applied event id through the events
// endpoint; the open conversation is remembered and re-attached on the next app load.
import { createContext, useCallback, useContext, useEffect, useMemo, useReducer, useRef, useState, type ReactNode } from "react";
import { ApiError, openStream, request, type SseMessage } from "../api";
import { useI18n } from "../i18n";
import { useOrgPath, useSession } from "../session";
import { useStudioEvents } from "../studio-events";
import { agentReducer, initialState } from "./reducer";
import { changeText } from "./tools";
import type { AgentEvent, AgentState, ConversationDetail, Sequenced, Usage } from "./types";

export type Toast = { id: number; text: string; toolUseId: string; conversationId: string };
export type View = "chat" | "list";

type Agent = {
  state: AgentState;
  open: boolean;
  setOpen: (open: boolean) => void;
  view: View;
  setView: (view: View) => void;
  stopping: boolean;
  undoing: ReadonlySet<string>;
  usage: Usage | null;
  toasts: Toast[];
  /** Bumped after every finished turn, so the conversation list reloads. */
  listVersion: number;
  send: (text: string) => void;
  confirm: (toolUseId: string, approved: boolean) => void;
  pick: (toolUseId: string, id: string) => void;
  undo: (toolUseId: string) => void;
  cancel: () => void;
  newConversation: () => void;
  openConversation: (id: string) => void;
  dismissBudget: () => void;
  dismissToast: (id: number) => void;
  refreshUsage: () => void;
};

const Ctx = createContext<Agent | null>(null);

const RETRY_WINDOW_MS = 30_000;
const TOAST_MS = 15_000;
const TAIL_WINDOW = 500;

type Opener = (signal: AbortSignal) => AsyncGenerator<SseMessage>;
type RunOptions = { fromEvents?: boolean; controller?: AbortController; retryOpener?: boolean };

function newKey(): string {
  if (typeof crypto !== "undefined" && "randomUUID" in crypto) {
    try {
      return crypto.randomUUID();
    } catch {
      /* not a secure context */
    }
  }
  return `${Date.now().toString(16)}-${Math.random().toString(16).slice(2)}-${Math.random().toString(16).slice(2)}`;
}

function parse(msg: SseMessage): Sequenced | null {
  try {
    const data = JSON.parse(msg.data) as AgentEvent;
    const event = (data.type ? data : { ...(data as object), type: msg.event }) as AgentEvent;
    const id = msg.id !== null && msg.id !== "" ? Number(msg.id) : null;
    return { id: Number.isFinite(id) ? id : null, event };
  } catch {
    return null;
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
  });
}

function asApiError(err: unknown): ApiError {
  return err instanceof ApiError ? err : new ApiError(0, "internal", String(err), null);
}

export function AgentProvider({ children }: { children: ReactNode }) {
  const base = `${useOrgPath()}/agent`;
  const { me, membership } = useSession();
  const { t } = useI18n();
  const studio = useStudioEvents();
  const [state, dispatch] = useReducer(agentReducer, initialState);
  const [open, setOpen] = useState(false);
  const [view, setView] = useState<View>("chat");
  const [stopping, setStopping] = useState(false);
  const [undoing, setUndoing] = useState<ReadonlySet<string>>(new Set());
  const [usage, setUsage] = useState<Usage | null>(null);
  const [toasts, setToasts] = useState<Toast[]>([]);
  const [listVersion, setListVersion] = useState(0);

  const storageKey = `spotter.agent.conversation:${me?.user.id ?? ""}:${membership?.organizationId ?? ""}`;
  // What the stream loop needs now, not as of the last render.
  const cidRef = useRef<string | null>(null);
  const seqRef = useRef(0);
  const bufferRef = useRef<Sequenced[]>([]);
  const frameRef = useRef<number | null>(null);
  const controllerRef = useRef<AbortController | null>(null);
  const runRef = useRef<Promise<unknown>>(Promise.resolve());
  const busyRef = useRef(false);
  const latest = useRef({ studio, t });
  latest.current = { studio, t };

  const remember = useCallback((id: string | null) => {
    cidRef.current = id;
    if (id) localStorage.setItem(storageKey, id);
    else localStorage.removeItem(storageKey);
  }, [storageKey]);

  const flush = useCallback(() => {
    if (frameRef.current !== null) {
      cancelAnimationFrame(frameRef.current);
      frameRef.current = null;
    }
    if (bufferRef.current.length) {
      const events = bufferRef.current;
      bufferRef.current = [];
      dispatch({ type: "events", events });
    }
  }, []);

  const refreshUsage = useCallback(() => {
    request<Usage>(`${base}/usage`).then(setUsage, () => {});
  }, [base]);

  const dismissToast = useCallback((id: number) => setToasts((all) => all.filter((x) => x.id !== id)), []);

  /** One event from a live stream: deduplicated by id, buffered (deltas) or applied now (the rest,
   * after the deltas before it), with its effects on the page behind. */
  const receive = useCallback((msg: SseMessage): AgentEvent | null => {
    const sequenced = parse(msg);
    if (!sequenced) return null;
    const { id, event } = sequenced;
    if (id !== null) {
      if (id <= seqRef.current) return null;
      seqRef.current = id;
    }
    bufferRef.current.push(sequenced);
    if (event.type === "text_delta") {
      if (frameRef.current === null) frameRef.current = requestAnimationFrame(() => {
        frameRef.current = null;
        flush();
      });
      return event;
    }
    flush();
    if (event.type === "conversation_started" || (event.type === "done" && event.conversationId)) {
      remember(event.conversationId);
    } else if (event.type === "tool_completed" && event.ok) {
      latest.current.studio.announceChange({ router: event.router, action: event.action });
      if (event.inverseAvailable && cidRef.current) {
        const toast: Toast = { id: Date.now() + Math.random(), text: changeText(latest.current.t, event.router, event.action), toolUseId: event.toolUseId, conversationId: cidRef.current };
        setToasts((all) => [...all.slice(-2), toast]);
        setTimeout(() => dismissToast(toast.id), TOAST_MS);
      }
    }
    return event;
  }, [flush, remember, dismissToast]);

  /** Stream one turn to its `done`. A drop (network_error) re-attaches to the events endpoint after
   * the last applied id, backing off 0.5 s, 1 s, 2 s … for up to 30 s. Resolves whether the turn
   * reported an error. */
  const stream = useCallback(async (opener: Opener, options: RunOptions = {}): Promise<{ error: boolean }> => {
    const controller = options.controller ?? new AbortController();
    controllerRef.current = controller;
    busyRef.current = true;
    dispatch({ type: "turn_start" });
    let source = opener(controller.signal);
    let fromEvents = Boolean(options.fromEvents);
    let sawError = false;
    let dropSince: number | null = null;
    let attempt = 0;
    try {
      for (;;) {
        try {
          let sawDone = false;
          for await (const msg of source) {
            if (dropSince !== null) {
              dropSince = null;
              attempt = 0;
              dispatch({ type: "reconnecting", on: false });
            }
            const event = receive(msg);
            if (event?.type === "error") sawError = true;
            if (event?.type === "done") {
              sawDone = true;
              break;
            }
          }
          if (sawDone || controller.signal.aborted) break;
          // The events endpoint ends when nothing runs any more; a turn's POST ends with its done.
          if (fromEvents) break;
          throw new ApiError(0, "network_error", "The stream ended before the turn did.", null);
        } catch (err) {
          if (controller.signal.aborted || (err as Error).name === "AbortError") break;
          const error = asApiError(err);
          // Resumable: after the events the log has, or (before the conversation is known) the
          // same POST again — its Idempotency-Key makes the gateway replay that turn, not start one.
          if (error.code === "network_error" && (cidRef.current || options.retryOpener)) {
            dropSince ??= Date.now();
            if (Date.now() - dropSince > RETRY_WINDOW_MS) {
              flush();
              dispatch({ type: "local_error", code: error.code, message: error.message, traceId: error.traceId });
              sawError = true;
              break;
            }
            flush();
            dispatch({ type: "reconnecting", on: true });
            await sleep(Math.min(500 * 2 ** attempt, 8000), controller.signal);
            attempt += 1;
            if (controller.signal.aborted) break;
            const after = seqRef.current;
            if (cidRef.current) {
              source = openStream(`${base}/conversations/${cidRef.current}/events?after=${after}`, { signal: controller.signal, lastEventId: String(after) });
              fromEvents = true;
            } else {
              source = opener(controller.signal);
            }
            continue;
          }
          flush();
          dispatch({ type: "local_error", code: error.code, message: error.message, traceId: error.traceId });
          sawError = true;
          break;
        }
      }
    } finally {
      flush();
      controller.abort(); // release the connection (the events endpoint may outlive the turn)
      if (controllerRef.current === controller) {
        controllerRef.current = null;
        busyRef.current = false;
        dispatch({ type: "turn_end" });
        setStopping(false);
      }
      refreshUsage();
      setListVersion((v) => v + 1);
    }
    return { error: sawError };
  }, [base, flush, receive, refreshUsage]);

  /** Run after whatever is streaming now (an Undo clicked while the turn that offered it still
   * talks waits for it instead of being refused as busy). */
  const enqueue = useCallback((job: () => Promise<unknown>): Promise<unknown> => {
    const next = runRef.current.then(job, job);
    runRef.current = next.catch(() => {});
    return next;
  }, []);

  const detach = useCallback(() => {
    controllerRef.current?.abort();
    controllerRef.current = null;
    busyRef.current = false;
    bufferRef.current = [];
    if (frameRef.current !== null) cancelAnimationFrame(frameRef.current);
    frameRef.current = null;
    runRef.current = Promise.resolve();
    setToasts([]);
  }, []);

  const send = useCallback((text: string) => {
    const message = text.trim();
    if (!message || busyRef.current) return;
    const idempotencyKey = newKey();
    dispatch({ type: "user_message", key: `u${idempotencyKey}`, text: message });
    const pageContext = { pathname: location.pathname, selection: latest.current.studio.selection };
    busyRef.current = true;
    void enqueue(() => stream((signal) => openStream(`${base}/messages`, {
      method: "POST", body: { conversationId: cidRef.current, message, pageContext }, signal, idempotencyKey,
    }), { retryOpener: true }));
  }, [base, enqueue, stream]);

  const resolve = useCallback((path: string, body?: unknown) => enqueue(() => {
    const cid = cidRef.current;
    if (!cid) return Promise.resolve({ error: true });
    return stream((signal) => openStream(`${base}/conversations/${cid}/${path}`, { method: "POST", body, signal }));
  }), [base, enqueue, stream]);

  const confirm = useCallback((toolUseId: string, approved: boolean) => {
    dispatch({ type: "answer", toolUseId, approved });
    void resolve(`confirm/${encodeURIComponent(toolUseId)}`, { approved });
  }, [resolve]);

  const pick = useCallback((toolUseId: string, id: string) => {
    dispatch({ type: "pick", toolUseId, id });
    void resolve(`pick/${encodeURIComponent(toolUseId)}`, { id });
  }, [resolve]);

  const undo = useCallback((toolUseId: string) => {
    setToasts((all) => all.filter((x) => x.toolUseId !== toolUseId));
    setUndoing((s) => new Set(s).add(toolUseId));
    void resolve(`undo/${encodeURIComponent(toolUseId)}`).then((result) => {
      setUndoing((s) => {
        const next = new Set(s);
        next.delete(toolUseId);
        return next;
      });
      if (result && !(result as { error: boolean }).error) dispatch({ type: "undone", toolUseId });
    });
  }, [resolve]);

  const cancel = useCallback(() => {
    const cid = cidRef.current;
    const controller = controllerRef.current;
    if (!cid) {
      controller?.abort();
      return;
    }
    setStopping(true);
    request<{ status: string }>(`${base}/conversations/${cid}/cancel`, { method: "POST" })
      .then((answer) => {
        // Nothing was running on the server: this stream has nothing more to say.
        if (answer.status === "idle") controller?.abort();
        else setTimeout(() => controllerRef.current === controller && controller?.abort(), 15_000);
      })
      .catch((err) => {
        setStopping(false);
        const error = asApiError(err);
        dispatch({ type: "local_error", code: error.code, message: error.message, traceId: error.traceId });
      });
  }, [base]);

  const newConversation = useCallback(() => {
    detach();
    remember(null);
    seqRef.current = 0;
    dispatch({ type: "reset" });
    setView("chat");
  }, [detach, remember]);

  /** Show a stored conversation where it stands: its messages and tool calls from the detail, the
   * text a running model call has streamed since its last stored message (from the event log), and
   * the live events after the detail's last event id while a turn runs. */
  const openConversation = useCallback(async (id: string) => {
    detach();
    remember(id);
    seqRef.current = 0;
    setView("chat");
    dispatch({ type: "loading", conversationId: id });
    const controller = new AbortController();
    controllerRef.current = controller;
    busyRef.current = true;
    try {
      const detail = await request<ConversationDetail>(`${base}/conversations/${id}`, { signal: controller.signal });
      const scan = async (start: number) => {
        const it = openStream(`${base}/conversations/${id}/events?after=${start}`, { signal: controller.signal })[Symbol.asyncIterator]();
        let tail = "";
        let boundary = start === 0;
        let last: string | null = null;
        let first: SseMessage | null = null;
        for (;;) {
          const step = await it.next();
          if (step.done) break;
          const parsed = parse(step.value);
          if (!parsed) continue;
          if (parsed.id === null || parsed.id > detail.lastEventSeq) {
            first = step.value;
            break;
          }
          const { event } = parsed;
          if (event.type === "text_delta") tail += event.delta;
          else if (event.type === "message_done" || event.type === "done") {
            tail = "";
            boundary = true;
          }
          last = event.type;
        }
        return { it, tail, boundary, last, first };
      };
      const windowStart = Math.max(0, detail.lastEventSeq - TAIL_WINDOW);
      let seen = await scan(windowStart);
      if (!seen.boundary && seen.last !== "done") {
        await seen.it.return?.(undefined);
        seen = await scan(0);
      }
      const running = seen.first !== null || (seen.last !== null && seen.last !== "done");
      seqRef.current = detail.lastEventSeq;
      dispatch({ type: "loaded", detail, tail: seen.tail, running });
      if (!running) {
        await seen.it.return?.(undefined);
        controller.abort();
        controllerRef.current = null;
        busyRef.current = false;
        return;
      }
      const { it, first } = seen;
      const rest = async function* (): AsyncGenerator<SseMessage> {
        if (first) yield first;
        for (;;) {
          const step = await it.next();
          if (step.done) return;
          yield step.value;
        }
      };
      void enqueue(() => stream(rest, { fromEvents: true, controller }));
    } catch (err) {
      if (controller.signal.aborted) return;
      controllerRef.current = null;
      busyRef.current = false;
      const error = asApiError(err);
      if (error.code === "not_found") {
        remember(null);
        dispatch({ type: "reset" });
        return;
      }
      dispatch({ type: "turn_end" });
      dispatch({ type: "local_error", code: error.code, message: error.message, traceId: error.traceId });
    }
  }, [base, detach, enqueue, remember, stream]);

  // Re-open the conversation this browser had open; let go of its stream when unmounted.
  useEffect(() => {
    const stored = localStorage.getItem(storageKey);
    if (stored) void openConversation(stored);
    return () => detach();
  }, [storageKey, openConversation, detach]);

  useEffect(() => {
    if (open) refreshUsage();
  }, [open, refreshUsage]);

  const value = useMemo<Agent>(() => ({
    state, open, setOpen, view, setView, stopping, undoing, usage, toasts, listVersion,
    send, confirm, pick, undo, cancel, newConversation,
    openConversation: (id: string) => void openConversation(id),
    dismissBudget: () => dispatch({ type: "dismiss_budget" }),
    dismissToast, refreshUsage,
  }), [state, open, view, stopping, undoing, usage, toasts, listVersion, send, confirm, pick, undo, cancel, newConversation, openConversation, dismissToast, refreshUsage]);
  return <Ctx.Provider value={value}>{children}</Ctx.Provider>;
}

export function useAgent(): Agent {
  const value = useContext(Ctx);
  if (!value) throw new Error("useAgent outside AgentProvider");
  return value;
}
