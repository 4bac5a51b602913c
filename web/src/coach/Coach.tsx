// The member's coach (seed 003's AI personal trainer): a chat whose answers build workouts. One
// stream per message; the session id is remembered per user and studio so the page picks up
// where the member left off.
import { useCallback, useEffect, useId, useLayoutEffect, useReducer, useRef, useState, type KeyboardEvent, type RefObject } from "react";
import { ApiError, openStream, request } from "../api";
import { useI18n, type MessageKey, type Translate } from "../i18n";
import { useOrgPath, useSession } from "../session";
import { PageHeader } from "../pages/common";
import { Markdown } from "../agent/Markdown";
import { SendIcon } from "../agent/icons";
import { coachReducer, currentWorkout, initialState } from "./reducer";
import { WorkoutCard } from "./WorkoutCard";
import type { CoachSession, CoachState, Frame, Item, SessionDetail } from "./types";
import "./coach.css";

/** The coach's own wording for an error code, then Spotter's, then the server's message. */
export function errorText(t: Translate, code: string | null, message: string): string {
  if (code) {
    for (const prefix of ["coach.errors.", "agent.errors."]) {
      const key = `${prefix}${code}` as MessageKey;
      const text = t(key);
      if (text !== key) return text;
    }
  }
  return message || t("agent.errors.unknown");
}

function asApiError(e: unknown): ApiError {
  return e instanceof ApiError ? e : new ApiError(0, "internal", String(e), null);
}

function useSessionKey(): string {
  const { me, membership } = useSession();
  return `spotter.coach.session.${me?.user.id ?? "anon"}.${membership?.organizationId ?? "none"}`;
}

export function Coach() {
  const { t } = useI18n();
  const org = useOrgPath();
  const storageKey = useSessionKey();
  const [state, dispatch] = useReducer(coachReducer, initialState);
  const [loadError, setLoadError] = useState<ApiError | null>(null);
  const [target, setTarget] = useState<{ id: string | null }>(() => ({ id: localStorage.getItem(storageKey) }));
  const [creating, setCreating] = useState(false);
  const stateRef = useRef<CoachState>(state);
  stateRef.current = state;
  const stream = useRef<AbortController | null>(null);
  const pinned = useRef(true);

  // Open the remembered (or picked) session; a session the server no longer has is forgotten.
  useEffect(() => {
    setLoadError(null);
    if (!target.id) {
      dispatch({ type: "reset", sessionId: null });
      return;
    }
    const id = target.id;
    const ctrl = new AbortController();
    dispatch({ type: "loading", sessionId: id });
    request<SessionDetail>(`${org}/coach/sessions/${encodeURIComponent(id)}`, { signal: ctrl.signal })
      .then((detail) => {
        if (!ctrl.signal.aborted) dispatch({ type: "loaded", detail: { ...detail, session: detail.session ?? { id } } });
      })
      .catch((e) => {
        if (ctrl.signal.aborted || (e as Error).name === "AbortError") return;
        const error = asApiError(e);
        if (error.status === 404) {
          localStorage.removeItem(storageKey);
          dispatch({ type: "reset", sessionId: null });
        } else {
          setLoadError(error);
          dispatch({ type: "load_failed" });
        }
      });
    return () => ctrl.abort();
  }, [org, storageKey, target]);

  useEffect(() => {
    if (state.sessionId) localStorage.setItem(storageKey, state.sessionId);
  }, [state.sessionId, storageKey]);

  // Leaving the page drops the stream; the coach finishes server-side and the transcript has it.
  useEffect(() => () => stream.current?.abort(), []);

  const send = useCallback(async (raw: string) => {
    const text = raw.trim();
    const now = stateRef.current;
    if (!text || now.running || now.loading || stream.current) return;
    const workout = currentWorkout(now);
    const body: Record<string, unknown> = { message: text };
    if (now.sessionId) body.sessionId = now.sessionId;
    if (workout) body.currentWorkout = workout.payload;
    pinned.current = true;
    dispatch({ type: "send", text });
    const ctrl = new AbortController();
    stream.current = ctrl;
    try {
      for await (const message of openStream(`${org}/coach/stream`, { method: "POST", body, signal: ctrl.signal })) {
        let frame: Frame;
        try {
          frame = JSON.parse(message.data) as Frame;
        } catch {
          continue; // not a frame this page knows
        }
        if (!frame || typeof frame.type !== "string") continue;
        dispatch({ type: "frame", frame });
        if (frame.type === "done") break; // the answer is complete; the next message may go at once
      }
    } catch (e) {
      if (ctrl.signal.aborted || (e as Error).name === "AbortError") return;
      const error = asApiError(e);
      dispatch({ type: "local_error", code: error.code, message: error.message, traceId: error.traceId });
    } finally {
      if (stream.current === ctrl) stream.current = null;
      if (!ctrl.signal.aborted) dispatch({ type: "turn_end" });
    }
  }, [org]);

  const newSession = async () => {
    if (creating || state.running) return;
    setCreating(true);
    try {
      const { session } = await request<{ session: CoachSession }>(`${org}/coach/sessions`, { method: "POST", body: {} });
      setLoadError(null);
      localStorage.setItem(storageKey, session.id);
      dispatch({ type: "reset", sessionId: session.id });
    } catch (e) {
      const error = asApiError(e);
      dispatch({ type: "local_error", code: error.code, message: error.message, traceId: error.traceId });
    } finally {
      setCreating(false);
    }
  };

  const openSession = (id: string) => {
    if (state.running) return;
    localStorage.setItem(storageKey, id);
    pinned.current = true;
    setTarget({ id });
  };

  const busy = state.running || state.loading;
  return (
    <div className="page coach-page" data-testid="coach-page">
      <PageHeader
        title={t("coach.title")}
        subtitle={t("coach.subtitle")}
        actions={
          <>
            <SessionHistory current={state.sessionId} disabled={busy} onOpen={openSession} />
            <button type="button" onClick={newSession} disabled={busy || creating}>{t("coach.newSession")}</button>
          </>
        }
      />
      {loadError && (
        <div className="coach-error" role="alert" data-testid="coach-load-error">
          <div>{t("coach.loadFailed")} {errorText(t, loadError.code, loadError.message)}</div>
          {loadError.traceId && <div className="coach-trace">{t("coach.trace", { id: loadError.traceId })}</div>}
          <button type="button" className="coach-small" onClick={() => setTarget((x) => ({ ...x }))}>{t("coach.retry")}</button>
        </div>
      )}
      <MessageList state={state} pinned={pinned} onSend={send} />
      <Composer busy={busy} onSend={send} />
    </div>
  );
}

function MessageList({ state, pinned, onSend }: { state: CoachState; pinned: RefObject<boolean>; onSend: (text: string) => void }) {
  const { t } = useI18n();
  const lastKey = useRef<string | null>(null);

  useEffect(() => {
    const onScroll = () => {
      const doc = document.documentElement;
      pinned.current = window.innerHeight + window.scrollY >= doc.scrollHeight - 96;
    };
    window.addEventListener("scroll", onScroll, { passive: true });
    return () => window.removeEventListener("scroll", onScroll);
  }, [pinned]);

  // Follow the answer while the member is at the bottom. A new workout card is brought into view by
  // its top, so its title shows rather than its last exercise.
  useLayoutEffect(() => {
    const last = state.items[state.items.length - 1];
    const fresh = last && last.key !== lastKey.current;
    lastKey.current = last?.key ?? null;
    if (!pinned.current) return;
    if (fresh && last.kind === "coach" && last.artifactId) {
      document.getElementById(`coach-item-${last.key}`)?.scrollIntoView({ block: "start" });
    } else {
      window.scrollTo({ top: document.documentElement.scrollHeight });
    }
  }, [state.items, state.running, state.status, pinned]);

  // Each workout's card sits under the latest message that delivered it.
  const cardAt = new Map<string, string>();
  for (const item of state.items) if (item.kind === "coach" && item.artifactId) cardAt.set(item.artifactId, item.key);

  return (
    <div className="coach-messages" role="log" aria-live="polite" aria-busy={state.running || state.loading} aria-label={t("coach.messages")}>
      {state.loading && <p className="coach-note" role="status">{t("coach.loading")}</p>}
      {!state.loading && state.items.length === 0 && !state.running && <Suggestions onSend={onSend} />}
      {state.items.map((item) => (
        <ItemView key={item.key} item={item} state={state} showCard={item.kind === "coach" && !!item.artifactId && cardAt.get(item.artifactId) === item.key} onSend={onSend} />
      ))}
      {state.running && (
        <p className="coach-note coach-progress" role="status" data-testid="coach-progress">
          <span className="coach-dots" aria-hidden="true"><i /><i /><i /></span>
          <span dir="auto">{state.status ?? t("coach.thinking")}</span>
        </p>
      )}
    </div>
  );
}

function ItemView({ item, state, showCard, onSend }: { item: Item; state: CoachState; showCard: boolean; onSend: (text: string) => void }) {
  const { t } = useI18n();
  const id = `coach-item-${item.key}`;
  switch (item.kind) {
    case "user":
      return (
        <div id={id} className="coach-item coach-bubble user" data-testid="coach-user-message">
          <span className="visually-hidden">{t("coach.you")}: </span>
          <div dir="auto">{item.text}</div>
        </div>
      );
    case "coach": {
      const artifact = showCard && item.artifactId ? state.workouts[item.artifactId] : null;
      if (!item.text.trim() && !artifact) return null;
      return (
        <div id={id} className="coach-item coach-turn">
          {item.text.trim() && (
            <div className="coach-bubble coach" data-testid="coach-message">
              <span className="visually-hidden">{t("coach.coach")}: </span>
              <div dir="auto"><Markdown text={item.text} /></div>
            </div>
          )}
          {artifact && (
            <WorkoutCard artifact={artifact} current={state.currentId === artifact.artifact_id} logged={state.logged.includes(artifact.artifact_id)}
              busy={state.running || state.loading} onSend={onSend} />
          )}
        </div>
      );
    }
    case "question":
      return <Question id={id} item={item} busy={state.running || state.loading} onSend={onSend} />;
    case "knowledge":
      return (
        <ul id={id} className="coach-item coach-knowledge" aria-label={t("coach.knowledgeLabel")} data-testid="coach-knowledge">
          {item.sources.map((s) => (
            <li key={s.source || s.displayName} className="coach-chip">
              <span aria-hidden="true" className="coach-chip-mark">✓</span>
              <bdi>{t("coach.knowledge", { name: s.displayName })}</bdi>
            </li>
          ))}
        </ul>
      );
    case "error":
      return (
        <div id={id} className="coach-item coach-error" role="alert" data-testid="coach-error" data-code={item.code ?? undefined}>
          <div>{errorText(t, item.code, item.message)}</div>
          {item.traceId && <div className="coach-trace">{t("coach.trace", { id: item.traceId })}</div>}
        </div>
      );
  }
}

function Question({ id, item, busy, onSend }: { id: string; item: Extract<Item, { kind: "question" }>; busy: boolean; onSend: (text: string) => void }) {
  const { t } = useI18n();
  const labelId = useId();
  return (
    <div id={id} className="coach-item coach-turn" role="group" aria-labelledby={labelId} data-testid="coach-question">
      <div className="coach-bubble coach" id={labelId}>
        <span className="visually-hidden">{t("coach.coach")}: </span>
        <div dir="auto"><Markdown text={item.text} /></div>
      </div>
      {item.options.length > 0 && (
        <div className="coach-options">
          {item.options.map((option) => (
            <button key={option} type="button" className="coach-option" dir="auto" disabled={item.answered || busy} onClick={() => onSend(option)}>
              {option}
            </button>
          ))}
        </div>
      )}
    </div>
  );
}

function Suggestions({ onSend }: { onSend: (text: string) => void }) {
  const { t } = useI18n();
  return (
    <div className="coach-empty">
      <h2>{t("coach.emptyTitle")}</h2>
      <p className="muted">{t("coach.emptyBody")}</p>
      <h3 className="coach-section-label">{t("coach.suggestions")}</h3>
      <ul className="coach-suggestions">
        {[1, 2, 3].map((n) => {
          const text = t(`coach.prompts.${n}` as MessageKey);
          return (
            <li key={n}>
              <button type="button" className="coach-suggestion" dir="auto" onClick={() => onSend(text)}>{text}</button>
            </li>
          );
        })}
      </ul>
    </div>
  );
}

function Composer({ busy, onSend }: { busy: boolean; onSend: (text: string) => void }) {
  const { t } = useI18n();
  const [text, setText] = useState("");
  const box = useRef<HTMLTextAreaElement>(null);
  const hintId = useId();

  useEffect(() => {
    const el = box.current;
    if (!el) return;
    el.style.height = "auto";
    el.style.height = `${Math.min(el.scrollHeight, 180)}px`;
  }, [text]);

  // The box was disabled while the coach answered; give it focus back unless the member moved on.
  const wasBusy = useRef(busy);
  useEffect(() => {
    const active = document.activeElement;
    if (wasBusy.current && !busy && (!active || active === document.body)) box.current?.focus({ preventScroll: true });
    wasBusy.current = busy;
  }, [busy]);

  const submit = () => {
    if (busy || !text.trim()) return;
    onSend(text);
    setText("");
  };
  const onKeyDown = (e: KeyboardEvent<HTMLTextAreaElement>) => {
    if (e.key === "Enter" && !e.shiftKey && !e.nativeEvent.isComposing) {
      e.preventDefault();
      submit();
    }
  };
  return (
    <form className="coach-composer" onSubmit={(e) => (e.preventDefault(), submit())}>
      <textarea ref={box} rows={1} value={text} dir="auto" disabled={busy}
        aria-label={t("coach.composer")} aria-describedby={hintId} placeholder={t("coach.composerPlaceholder")}
        onChange={(e) => setText(e.target.value)} onKeyDown={onKeyDown} />
      <button type="submit" className="primary coach-send" disabled={busy || !text.trim()} aria-label={t("coach.send")} title={t("coach.send")}>
        <SendIcon />
      </button>
      <span id={hintId} className="coach-hint">{t("coach.composerHint")}</span>
    </form>
  );
}

function SessionHistory({ current, disabled, onOpen }: { current: string | null; disabled: boolean; onOpen: (id: string) => void }) {
  const { t, formatDate } = useI18n();
  const org = useOrgPath();
  const [open, setOpen] = useState(false);
  const [sessions, setSessions] = useState<CoachSession[] | null>(null);
  const [failed, setFailed] = useState(false);
  const panelId = useId();
  const toggle = useRef<HTMLButtonElement>(null);

  useEffect(() => {
    if (!open) return;
    const ctrl = new AbortController();
    setFailed(false);
    request<{ sessions: CoachSession[] }>(`${org}/coach/sessions?limit=10`, { signal: ctrl.signal })
      .then((r) => !ctrl.signal.aborted && setSessions(r.sessions ?? []))
      .catch((e) => {
        if (!ctrl.signal.aborted && (e as Error).name !== "AbortError") setFailed(true);
      });
    return () => ctrl.abort();
  }, [open, org]);

  const root = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (!open) return;
    const onDown = (e: PointerEvent) => {
      if (root.current && !root.current.contains(e.target as Node)) setOpen(false);
    };
    document.addEventListener("pointerdown", onDown);
    return () => document.removeEventListener("pointerdown", onDown);
  }, [open]);

  const close = () => {
    setOpen(false);
    toggle.current?.focus();
  };
  return (
    <div className="coach-history" ref={root} onKeyDown={(e) => e.key === "Escape" && open && (e.preventDefault(), close())}>
      <button type="button" ref={toggle} aria-expanded={open} aria-controls={panelId} onClick={() => setOpen((o) => !o)}>
        {t("coach.history")}
      </button>
      {open && (
        <div id={panelId} className="coach-history-panel">
          {failed ? (
            <p className="coach-note">{t("coach.historyFailed")}</p>
          ) : sessions === null ? (
            <p className="coach-note">{t("coach.loading")}</p>
          ) : sessions.length === 0 ? (
            <p className="coach-note">{t("coach.historyEmpty")}</p>
          ) : (
            <ul className="coach-history-list">
              {sessions.map((s) => {
                const when = s.updatedAt ?? s.createdAt;
                const isCurrent = s.id === current;
                return (
                  <li key={s.id}>
                    <button type="button" className="coach-history-item" disabled={disabled} aria-current={isCurrent ? "true" : undefined}
                      onClick={() => {
                        setOpen(false);
                        if (!isCurrent) onOpen(s.id);
                      }}>
                      <span className="coach-history-title" dir="auto">{s.title?.trim() || t("coach.untitled")}</span>
                      <span className="coach-history-date">
                        {when ? formatDate(when, { day: "numeric", month: "short", hour: "2-digit", minute: "2-digit" }) : ""}
                        {isCurrent && <span className="badge accent">{t("coach.current")}</span>}
                      </span>
                    </button>
                  </li>
                );
              })}
            </ul>
          )}
        </div>
      )}
    </div>
  );
}
