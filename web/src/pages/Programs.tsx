// Programs: the studio's training programs with how many workouts and members each has.
import { useI18n } from "../i18n";
import { Link } from "../router";
import { useOrgPath } from "../session";
import { EmptyState, ErrorState, LoadingState, PageHeader, Refreshing, useFreshIds, useResource } from "./common";

export type ProgramSummary = { id: string; name: string; description: string | null; workoutCount: number; memberCount: number };

export function Programs() {
  const { t, formatNumber } = useI18n();
  const org = useOrgPath();
  const { data, error, loading, reload } = useResource<{ programs: ProgramSummary[] }>(`${org}/studio/programs`);
  const fresh = useFreshIds(data ? data.programs.map((p) => p.id) : null);
  return (
    <div className="page">
      <PageHeader title={t("pages.programs.title")} actions={<Refreshing active={loading && data !== null} />} />
      {error && <ErrorState error={error} onRetry={reload} />}
      {!data && !error && <div className="card pad"><LoadingState rows={4} /></div>}
      {data && data.programs.length === 0 && <EmptyState>{t("pages.programs.empty")}</EmptyState>}
      {data && data.programs.length > 0 && (
        <ul className="program-grid" data-testid="programs-list">
          {data.programs.map((p) => (
            <li key={p.id}>
              <Link to={`/programs/${p.id}`} className={`card program-card${fresh.has(p.id) ? " fresh" : ""}`} data-testid="program-item">
                <span className="program-name">{p.name}</span>
                {p.description && <span className="program-desc">{p.description}</span>}
                <span className="program-meta">
                  <span>{t("pages.programs.workouts", { n: formatNumber(p.workoutCount) })}</span>
                  <span aria-hidden="true">·</span>
                  <span>{t("pages.programs.members", { n: formatNumber(p.memberCount) })}</span>
                </span>
              </Link>
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}
