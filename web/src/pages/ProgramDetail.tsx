// One program: its workouts by date, each with sections and movements.
import { useEffect, useState } from "react";
import { useI18n } from "../i18n";
import { Link } from "../router";
import { useOrgPath } from "../session";
import { useStudioEvents } from "../studio-events";
import { usePageTitle } from "../shell/Shell";
import { addDays, EmptyState, ErrorState, LoadingState, PageHeader, Refreshing, todayIn, useDay, useFreshIds, useResource } from "./common";

const PAGE = 20;
import type { ProgramSummary } from "./Programs";

type Workout = {
  id: string;
  title: string;
  date: string | null;
  description: string | null;
  sections: { title: string; movements: { name: string; prescription: string | null }[] }[];
};
type ProgramData = ProgramSummary & { workouts: Workout[] };

export function ProgramDetail({ id }: { id: string }) {
  const { t, formatNumber } = useI18n();
  const org = useOrgPath();
  const day = useDay();
  const { selection, setSelection } = useStudioEvents();
  const { data: p, error, loading, reload } = useResource<ProgramData>(`${org}/studio/programs/${encodeURIComponent(id)}`);
  const fresh = useFreshIds(p ? p.workouts.map((w) => w.id) : null);
  usePageTitle(p?.name ?? null);
  const [showEarlier, setShowEarlier] = useState(false);
  const [limit, setLimit] = useState(PAGE);

  // The program is selected until the user picks one of its workouts.
  useEffect(() => {
    if (p && selection?.kind !== "workout") setSelection({ kind: "program", id: p.id, label: p.name });
  }, [p?.id, p?.name, setSelection]); // selection read once per program load on purpose
  useEffect(() => () => setSelection(null), [setSelection]);

  const back = <Link to="/programs" className="back-link">← {t("pages.programs.back")}</Link>;
  if (!p) {
    return (
      <div className="page">
        {back}
        {error ? <ErrorState error={error} onRetry={reload} /> : <div className="card pad"><LoadingState rows={5} /></div>}
      </div>
    );
  }
  // From this week on by date (undated last); earlier ones on request, a page at a time.
  const sorted = [...p.workouts].sort((a, b) => (a.date ?? "9999").localeCompare(b.date ?? "9999"));
  const from = addDays(todayIn(), -6);
  let start = sorted.findIndex((w) => (w.date ?? "9999") >= from);
  if (start < 0) start = Math.max(0, sorted.length - PAGE);
  const earlier = showEarlier ? 0 : start;
  const workouts = sorted.slice(earlier, start + limit);
  const more = sorted.length - (start + limit);
  return (
    <div className="page program-detail" data-testid="program-detail">
      {back}
      <PageHeader
        title={p.name}
        subtitle={
          <span className="program-sub">
            {p.description && <span className="program-desc-lg">{p.description}</span>}
            <span className="program-meta">
              <span>{t("pages.programs.workouts", { n: formatNumber(p.workoutCount) })}</span>
              <span aria-hidden="true">·</span>
              <span>{t("pages.programs.members", { n: formatNumber(p.memberCount) })}</span>
            </span>
          </span>
        }
        actions={<Refreshing active={loading} />}
      />
      {error && <ErrorState error={error} onRetry={reload} />}
      <h2 className="section-title">{t("pages.program.workouts")}</h2>
      {earlier > 0 && (
        <button type="button" className="ghost more-button" onClick={() => setShowEarlier(true)}>
          {t("pages.program.earlier", { n: formatNumber(earlier) })}
        </button>
      )}
      {workouts.length === 0 ? (
        <EmptyState>{t("pages.program.noWorkouts")}</EmptyState>
      ) : (
        <ol className="workout-list">
          {workouts.map((w) => {
            const selected = selection?.kind === "workout" && selection.id === w.id;
            return (
              <li key={w.id} className={`card workout${selected ? " selected" : ""}${fresh.has(w.id) ? " fresh" : ""}`} data-testid="workout-item">
                <div className="workout-head">
                  {w.date && (
                    <span className="workout-date" aria-hidden="true">
                      <span className="wd-day">{day(w.date, { day: "numeric" })}</span>
                      <span className="wd-month">{day(w.date, { month: "short" })}</span>
                    </span>
                  )}
                  <div className="workout-title">
                    <h3>
                      <button type="button" className="linklike" aria-pressed={selected} aria-label={t("pages.program.select", { title: w.title })}
                        onClick={() => setSelection(selected ? { kind: "program", id: p.id, label: p.name } : { kind: "workout", id: w.id, label: w.title })}>
                        {w.title}
                      </button>
                    </h3>
                    {w.date && <span className="person-sub">{day(w.date, { weekday: "long", day: "numeric", month: "long", year: "numeric" })}</span>}
                  </div>
                  {selected && <span className="badge accent">{t("pages.program.selected")}</span>}
                </div>
                {w.description && <p className="workout-desc">{w.description}</p>}
                {w.sections.length > 0 && (
                  <div className="workout-sections">
                    {w.sections.map((s, i) => (
                      <div key={i} className="workout-section">
                        <h4>{s.title}</h4>
                        <ul>
                          {s.movements.map((mv, j) => (
                            <li key={j}>
                              <span className="mv-name">{mv.name}</span>
                              {mv.prescription && <span className="mv-rx">{mv.prescription}</span>}
                            </li>
                          ))}
                        </ul>
                      </div>
                    ))}
                  </div>
                )}
              </li>
            );
          })}
        </ol>
      )}
      {more > 0 && (
        <button type="button" className="ghost more-button" onClick={() => setLimit((n) => n + PAGE)}>
          {t("pages.program.more", { n: formatNumber(Math.min(PAGE, more)) })}
        </button>
      )}
    </div>
  );
}
