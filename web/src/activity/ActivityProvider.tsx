// Seed 004's human activity bridge, the app's side: what the signed-in staff member is working on
// (a running human session on one of the studio's tasks), the pages they visit while it runs, and
// the notes they leave (Cmd/Ctrl+M). Spotter reads it back as a <recent-activity> block, so a
// conversation starts with context instead of questions.
//
// Navigation is buffered and sent every 5 seconds, and at once when the page is hidden or left
// (keepalive, so the request outlives the page). Every event carries its own id: a flush retried
// after a lost answer is stored once. The server derives entity views from the paths.
import { createContext, useCallback, useContext, useEffect, useMemo, useRef, useState, type ReactNode } from "react";
import { ApiError, request } from "../api";
import { usePathname } from "../router";
import { useOrgPath, useSession } from "../session";
import { useStudioEvents } from "../studio-events";

export type ActiveSession = { id: string; status: string; title: string | null; startedAt: string | null; taskId: string | null };
export type ActiveTask = { id: string; title: string; status: string; dueDate: string | null };
type Active = { session: ActiveSession | null; task: ActiveTask | null };

type HumanEvent = { id: string; type: "human.navigate" | "human.marker"; content?: string; metadata: Record<string, string> };

export const FLUSH_MS = 5_000;
const MAX_BATCH = 50;
const MAX_BUFFER = 500; // a long offline spell keeps the newest pages, not all of them

type Activity = {
  /** False until the first answer: the control shows nothing rather than flicker. */
  ready: boolean;
  session: ActiveSession | null;
  task: ActiveTask | null;
  start: (taskId: string) => Promise<void>;
  createAndStart: (title: string) => Promise<void>;
  stop: () => Promise<void>;
  /** Save a marker right away; rejects when it was not stored. */
  mark: (text: string) => Promise<void>;
  markerOpen: boolean;
  setMarkerOpen: (open: boolean) => void;
};

const Ctx = createContext<Activity | null>(null);

function eventId(): string {
  return crypto.randomUUID();
}

export function ActivityProvider({ children }: { children: ReactNode }) {
  const { isStaff } = useSession();
  return isStaff ? <StaffActivity>{children}</StaffActivity> : <>{children}</>;
}

function StaffActivity({ children }: { children: ReactNode }) {
  const org = useOrgPath();
  const base = `${org}/sessions`;
  const pathname = usePathname();
  const { announceChange } = useStudioEvents();
  const [active, setActive] = useState<Active>({ session: null, task: null });
  const [ready, setReady] = useState(false);
  const [markerOpen, setMarkerOpen] = useState(false);
  const buffer = useRef<HumanEvent[]>([]);
  const sessionId = active.session?.id ?? null;
  const sessionRef = useRef<string | null>(null);
  sessionRef.current = sessionId;

  const refresh = useCallback(async () => {
    try {
      const next = await request<Active>(`${base}/human/active`);
      setActive(next);
    } catch {
      /* keep what is shown; the next action tries again */
    } finally {
      setReady(true);
    }
  }, [base]);

  useEffect(() => {
    void refresh();
  }, [refresh]);

  const send = useCallback(
    async (events: HumanEvent[], keepalive = false) => {
      const id = sessionRef.current;
      if (!id || !events.length) return;
      try {
        for (let i = 0; i < events.length; i += MAX_BATCH) {
          await request(`${base}/${id}/events`, { method: "POST", body: { events: events.slice(i, i + MAX_BATCH) }, keepalive });
        }
      } catch (err) {
        if (err instanceof ApiError && (err.status === 409 || err.status === 404)) {
          // Stopped elsewhere (another tab, the 12-hour sweep): nothing more goes to it.
          void refresh();
          return;
        }
        if (err instanceof ApiError && err.status >= 400 && err.status < 500) return; // refused: do not resend
        throw err;
      }
    },
    [base, refresh],
  );

  const flush = useCallback(
    async (keepalive = false) => {
      const pending = buffer.current;
      if (!pending.length) return;
      buffer.current = [];
      try {
        await send(pending, keepalive);
      } catch {
        // Offline or the server is away: keep them (their ids make a resend harmless).
        buffer.current = [...pending, ...buffer.current].slice(-MAX_BUFFER);
      }
    },
    [send],
  );

  // Every page the person arrives on while a session runs, the query string included.
  useEffect(() => {
    if (!sessionId) return;
    const path = location.pathname + location.search;
    buffer.current.push({ id: eventId(), type: "human.navigate", metadata: { pathname: path, at: new Date().toISOString() } });
  }, [sessionId, pathname]);

  useEffect(() => {
    if (!sessionId) return;
    const timer = window.setInterval(() => void flush(), FLUSH_MS);
    const onHide = () => {
      if (document.visibilityState === "hidden") void flush(true);
    };
    const onPageHide = () => void flush(true);
    document.addEventListener("visibilitychange", onHide);
    window.addEventListener("pagehide", onPageHide);
    return () => {
      window.clearInterval(timer);
      document.removeEventListener("visibilitychange", onHide);
      window.removeEventListener("pagehide", onPageHide);
      void flush();
    };
  }, [sessionId, flush]);

  const start = useCallback(
    async (taskId: string) => {
      await flush();
      const next = await request<Active>(`${base}/human/start`, { method: "POST", body: { taskId } });
      setActive(next);
    },
    [base, flush],
  );

  const createAndStart = useCallback(
    async (title: string) => {
      const task = await request<{ id: string }>(`${org}/studio/tasks`, { method: "POST", body: { title } });
      announceChange({ router: "tasks", action: "create" }); // the Tasks page shows it without a reload
      await start(task.id);
    },
    [org, start, announceChange],
  );

  const stop = useCallback(async () => {
    const id = sessionRef.current;
    if (!id) return;
    await flush();
    await request(`${base}/human/stop`, { method: "POST", body: { sessionId: id } });
    setActive({ session: null, task: null });
  }, [base, flush]);

  const mark = useCallback(
    async (text: string) => {
      // Pages first, so the note lands after the visit it is about.
      await flush();
      const id = sessionRef.current;
      if (!id) throw new ApiError(409, "session_not_running", "No task is running.", null);
      await request(`${base}/${id}/events`, {
        method: "POST",
        body: { events: [{ id: eventId(), type: "human.marker", content: text, metadata: { at: new Date().toISOString() } }] },
      });
    },
    [base, flush],
  );

  const value = useMemo<Activity>(
    () => ({ ready, session: active.session, task: active.task, start, createAndStart, stop, mark, markerOpen, setMarkerOpen }),
    [ready, active, start, createAndStart, stop, mark, markerOpen],
  );
  return <Ctx.Provider value={value}>{children}</Ctx.Provider>;
}

/** Null for members (no bridge) and outside the provider. */
export function useActivity(): Activity | null {
  return useContext(Ctx);
}
