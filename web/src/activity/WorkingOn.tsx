// "What are you working on?": the sidebar's control over the human session. Idle, one button that
// opens a picker of the studio's open tasks (filterable, or a new task from the filter's text).
// Working, "Working on: <task> · <elapsed>" (opens the same picker to switch) and a stop button.
import { useCallback, useEffect, useId, useMemo, useRef, useState, type KeyboardEvent } from "react";
import { ApiError, request } from "../api";
import { useI18n } from "../i18n";
import { useOrgPath } from "../session";
import { StopIcon, TargetIcon } from "../shell/icons";
import { useActivity } from "./ActivityProvider";

type OpenTask = { id: string; title: string; dueDate: string | null };

function useElapsed(startedAt: string | null): string {
  const { t } = useI18n();
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (!startedAt) return;
    const timer = window.setInterval(() => setNow(Date.now()), 30_000);
    setNow(Date.now());
    return () => window.clearInterval(timer);
  }, [startedAt]);
  if (!startedAt) return "";
  const minutes = Math.max(0, Math.floor((now - Date.parse(startedAt)) / 60_000));
  if (minutes < 1) return t("activity.elapsed.justNow");
  if (minutes < 60) return t("activity.elapsed.minutes", { m: minutes });
  return t("activity.elapsed.hours", { h: Math.floor(minutes / 60), m: String(minutes % 60).padStart(2, "0") });
}

export function WorkingOn() {
  const activity = useActivity();
  const { t } = useI18n();
  const [open, setOpen] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const trigger = useRef<HTMLButtonElement>(null);
  const elapsed = useElapsed(activity?.session?.startedAt ?? null);

  const close = useCallback((refocus: boolean) => {
    setOpen(false);
    if (refocus) trigger.current?.focus();
  }, []);

  if (!activity || !activity.ready) return null;
  const { session, task } = activity;

  const run = async (action: () => Promise<void>) => {
    setBusy(true);
    setError(null);
    try {
      await action();
      close(true);
    } catch (err) {
      setError(err instanceof ApiError ? err.message : String(err));
    } finally {
      setBusy(false);
    }
  };

  const title = task?.title ?? session?.title ?? "";
  return (
    <div className="working-on" data-testid="working-on">
      {session ? (
        <div className="working-on-active">
          <button ref={trigger} type="button" className="working-on-trigger" aria-expanded={open} aria-haspopup="dialog"
            onClick={() => setOpen((o) => !o)} title={title}>
            <span className="working-on-text">
              <span className="working-on-label">{t("activity.workingOn")}</span>{" "}
              <span className="working-on-task" dir="auto">{title}</span>
              <span className="working-on-elapsed"> · {elapsed}</span>
            </span>
          </button>
          <button type="button" className="ghost working-on-stop" aria-label={t("activity.stop")} title={t("activity.stop")}
            disabled={busy} onClick={() => void run(activity.stop)}>
            <StopIcon />
          </button>
        </div>
      ) : (
        <button ref={trigger} type="button" className="ghost working-on-idle" aria-expanded={open} aria-haspopup="dialog"
          onClick={() => setOpen((o) => !o)}>
          <TargetIcon />
          <span>{t("activity.prompt")}</span>
        </button>
      )}
      {open && (
        <TaskPicker current={task?.id ?? null} busy={busy} error={error} onClose={close}
          onPick={(id) => void run(() => activity.start(id))}
          onCreate={(text) => void run(() => activity.createAndStart(text))}
          onStop={session ? () => void run(activity.stop) : null} />
      )}
    </div>
  );
}

function TaskPicker({ current, busy, error, onClose, onPick, onCreate, onStop }: {
  current: string | null; busy: boolean; error: string | null; onClose: (refocus: boolean) => void;
  onPick: (id: string) => void; onCreate: (title: string) => void; onStop: (() => void) | null;
}) {
  const { t } = useI18n();
  const org = useOrgPath();
  const [tasks, setTasks] = useState<OpenTask[] | null>(null);
  const [failed, setFailed] = useState(false);
  const [filter, setFilter] = useState("");
  const [cursor, setCursor] = useState(0);
  const listId = useId();
  const panel = useRef<HTMLDivElement>(null);

  useEffect(() => {
    let live = true;
    request<{ tasks: OpenTask[] }>(`${org}/studio/tasks?status=open`)
      .then((r) => live && setTasks(r.tasks))
      .catch(() => live && setFailed(true));
    return () => {
      live = false;
    };
  }, [org]);

  // A click outside closes it, without taking focus away from what was clicked.
  useEffect(() => {
    const onDown = (e: MouseEvent) => {
      if (panel.current && !panel.current.parentElement?.contains(e.target as Node)) onClose(false);
    };
    document.addEventListener("mousedown", onDown);
    return () => document.removeEventListener("mousedown", onDown);
  }, [onClose]);

  const query = filter.trim();
  const shown = useMemo(() => {
    const q = query.toLocaleLowerCase();
    return (tasks ?? []).filter((task) => !q || task.title.toLocaleLowerCase().includes(q));
  }, [tasks, query]);
  const options: Array<{ key: string; label: string; act: () => void }> = [
    ...shown.map((task) => ({ key: task.id, label: task.title, act: () => onPick(task.id) })),
    ...(query ? [{ key: "new", label: t("activity.create", { title: query }), act: () => onCreate(query) }] : []),
  ];
  const at = Math.min(cursor, Math.max(0, options.length - 1));

  const onKey = (e: KeyboardEvent) => {
    if (e.key === "Escape") {
      e.preventDefault();
      onClose(true);
    } else if (e.key === "ArrowDown") {
      e.preventDefault();
      setCursor((c) => Math.min(c + 1, options.length - 1));
    } else if (e.key === "ArrowUp") {
      e.preventDefault();
      setCursor((c) => Math.max(c - 1, 0));
    } else if (e.key === "Enter" && options[at] && !busy) {
      e.preventDefault();
      options[at].act();
    }
  };

  return (
    <div ref={panel} className="working-on-panel" role="dialog" aria-label={t("activity.prompt")} onKeyDown={onKey}>
      <input autoFocus type="text" className="working-on-filter" value={filter} placeholder={t("activity.filter")}
        aria-label={t("activity.filter")} role="combobox" aria-expanded="true" aria-controls={listId}
        aria-activedescendant={options[at] ? `${listId}-${options[at].key}` : undefined}
        onChange={(e) => {
          setFilter(e.target.value);
          setCursor(0);
        }} />
      <ul id={listId} role="listbox" aria-label={t("activity.openTasks")} className="working-on-list">
        {tasks === null && !failed && <li className="muted working-on-note">{t("activity.loading")}</li>}
        {failed && <li className="working-on-note error-text">{t("activity.loadFailed")}</li>}
        {tasks !== null && !options.length && <li className="muted working-on-note">{t("activity.noTasks")}</li>}
        {options.map((option, i) => (
          <li key={option.key} id={`${listId}-${option.key}`} role="option" aria-selected={i === at}
            aria-current={option.key === current ? "true" : undefined}
            className={`working-on-option${i === at ? " is-active" : ""}${option.key === "new" ? " is-new" : ""}`}
            onMouseEnter={() => setCursor(i)} onMouseDown={(e) => e.preventDefault()}
            onClick={() => !busy && option.act()}>
            <span dir="auto">{option.label}</span>
          </li>
        ))}
      </ul>
      {onStop && (
        <button type="button" className="ghost working-on-stop-row" disabled={busy} onClick={onStop}>
          <StopIcon /> {t("activity.stop")}
        </button>
      )}
      {error && <p className="error-text working-on-note" role="alert">{error}</p>}
    </div>
  );
}
