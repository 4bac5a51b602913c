// Tasks: the studio's to-dos, open / done / all, with due dates (overdue stands out) and assignees.
import { useI18n, type MessageKey } from "../i18n";
import { navigate, useSearchParams } from "../router";
import { useOrgPath } from "../session";
import { Avatar, EmptyState, ErrorState, LoadingState, PageHeader, Refreshing, todayIn, useDay, useFreshIds, useResource } from "./common";

type Task = {
  id: string;
  title: string;
  description: string | null;
  status: string;
  dueDate: string | null;
  assignee: { userId: string; fullName: string } | null;
  createdAt: string;
};
const FILTERS = ["open", "done", "all"] as const;
type Filter = (typeof FILTERS)[number];
const EMPTY: Record<Filter, MessageKey> = { open: "pages.tasks.emptyOpen", done: "pages.tasks.emptyDone", all: "pages.tasks.emptyAll" };

function StatusIcon({ done }: { done: boolean }) {
  return done ? (
    <svg width="18" height="18" viewBox="0 0 24 24" aria-hidden="true" className="task-check done">
      <circle cx="12" cy="12" r="10" fill="currentColor" />
      <path d="m7.5 12.2 3 3 6-6.2" fill="none" stroke="#fff" strokeWidth="2.2" strokeLinecap="round" strokeLinejoin="round" />
    </svg>
  ) : (
    <svg width="18" height="18" viewBox="0 0 24 24" aria-hidden="true" className="task-check">
      <circle cx="12" cy="12" r="9.5" fill="none" stroke="currentColor" strokeWidth="1.8" />
    </svg>
  );
}

export function Tasks() {
  const { t } = useI18n();
  const org = useOrgPath();
  const day = useDay();
  const params = useSearchParams();
  const raw = params.get("status");
  const filter: Filter = (FILTERS as readonly string[]).includes(raw ?? "") ? (raw as Filter) : "open";
  const { data, error, loading, reload } = useResource<{ tasks: Task[] }>(`${org}/studio/tasks?status=${filter}`, { keep: true });
  const fresh = useFreshIds(data ? data.tasks.map((x) => x.id) : null);
  const today = todayIn();

  const segmented = (
    <div className="segmented" role="group" aria-label={t("pages.tasks.filter")}>
      {FILTERS.map((f) => (
        <button key={f} type="button" aria-pressed={filter === f} onClick={() => navigate(f === "open" ? "/tasks" : `/tasks?status=${f}`)}>
          {t(`pages.tasks.${f}` as MessageKey)}
        </button>
      ))}
    </div>
  );

  return (
    <div className="page">
      <PageHeader title={t("pages.tasks.title")} actions={<Refreshing active={loading && data !== null} />} />
      <div className="toolbar">{segmented}</div>
      {error && <ErrorState error={error} onRetry={reload} />}
      {!data && !error && <div className="card pad"><LoadingState rows={5} /></div>}
      {data && data.tasks.length === 0 && <EmptyState>{t(EMPTY[filter])}</EmptyState>}
      {data && data.tasks.length > 0 && (
        <ul className={`card task-list${loading ? " is-stale" : ""}`} data-testid="task-list">
          {data.tasks.map((task) => {
            const done = task.status === "done";
            const overdue = !done && task.status !== "cancelled" && task.dueDate !== null && task.dueDate.slice(0, 10) < today;
            const statusKey = (["open", "done", "cancelled"].includes(task.status) ? `pages.tasks.status.${task.status}` : "pages.tasks.status.open") as MessageKey;
            return (
              <li key={task.id} className={`task${done ? " done" : ""}${fresh.has(task.id) ? " fresh" : ""}`} data-testid="task-item" data-status={task.status}>
                <StatusIcon done={done} />
                <span className="visually-hidden">{t(statusKey)}: </span>
                <div className="task-main">
                  <span className="task-title">{task.title}</span>
                  {task.description && <span className="task-desc">{task.description}</span>}
                </div>
                <div className="task-meta">
                  <span className={`task-due${overdue ? " overdue" : ""}`} data-overdue={overdue || undefined}>
                    {task.dueDate
                      ? overdue
                        ? t("pages.tasks.overdue", { date: day(task.dueDate, { day: "numeric", month: "short" }) })
                        : t("pages.tasks.due", { date: day(task.dueDate, { day: "numeric", month: "short" }) })
                      : <span className="muted">{t("pages.tasks.noDue")}</span>}
                  </span>
                  <span className="task-assignee">
                    {task.assignee ? (
                      <>
                        <Avatar name={task.assignee.fullName} size={22} />
                        <span>{task.assignee.fullName}</span>
                      </>
                    ) : (
                      <span className="muted">{t("pages.tasks.unassigned")}</span>
                    )}
                  </span>
                </div>
              </li>
            );
          })}
        </ul>
      )}
    </div>
  );
}
