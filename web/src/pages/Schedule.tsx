// Schedule: a week (Mon–Sun) of class sessions in the studio's timezone; 7 columns on a desktop,
// a list of days on a phone.
import { useEffect, useMemo } from "react";
import { useI18n } from "../i18n";
import { navigate, useSearchParams } from "../router";
import { useOrgPath } from "../session";
import { useStudioEvents } from "../studio-events";
import { addDays, dayIn, EmptyState, ErrorState, LoadingState, PageHeader, Refreshing, todayIn, useDay, useFreshIds, useResource } from "./common";

type Session = {
  id: string;
  classType: { id: string; name: string };
  startsAt: string;
  endsAt: string;
  capacity: number;
  booked: number;
  coach: { userId: string; fullName: string } | null;
  status: string;
};
type Week = { timezone: string; weekStart: string; weekEnd: string; sessions: Session[] };

/** Points back (prev) or forward (next) in the reading direction; pages.css mirrors it in RTL. */
function Chevron({ next }: { next?: boolean }) {
  return (
    <svg className="chev" width="16" height="16" viewBox="0 0 24 24" fill="none" stroke="currentColor" strokeWidth="2"
      strokeLinecap="round" strokeLinejoin="round" aria-hidden="true">
      <path d={next ? "m9 18 6-6-6-6" : "m15 18-6-6 6-6"} />
    </svg>
  );
}

export function Schedule() {
  const { t, locale, formatDate } = useI18n();
  const org = useOrgPath();
  const day = useDay();
  const params = useSearchParams();
  const week = params.get("week");
  const { selection, setSelection } = useStudioEvents();
  const path = `${org}/studio/schedule${week ? `?week=${encodeURIComponent(week)}` : ""}`;
  const { data, error, loading, reload } = useResource<Week>(path, { keep: true });
  const fresh = useFreshIds(data ? data.sessions.map((s) => s.id) : null);

  useEffect(() => () => setSelection(null), [setSelection]);

  const tz = data?.timezone;
  const today = todayIn(tz);
  const days = useMemo(() => {
    if (!data) return [];
    const out: { day: string; sessions: Session[] }[] = [];
    for (let i = 0; i < 7; i++) out.push({ day: addDays(data.weekStart, i), sessions: [] });
    const byDay = new Map(out.map((d) => [d.day, d]));
    for (const s of [...data.sessions].sort((a, b) => a.startsAt.localeCompare(b.startsAt))) {
      byDay.get(dayIn(s.startsAt, data.timezone))?.sessions.push(s);
    }
    return out;
  }, [data]);

  const go = (target: string | null) => navigate(target ? `/schedule?week=${target}` : "/schedule");
  const time = (iso: string) => formatDate(iso, { timeZone: tz, hour: "numeric", minute: "2-digit" });
  const timeFormat = useMemo(() => new Intl.DateTimeFormat(locale, { timeZone: tz, hour: "numeric", minute: "2-digit" }), [locale, tz]);
  const range = (s: Session) => timeFormat.formatRange(new Date(s.startsAt), new Date(s.endsAt));
  const isThisWeek = data ? today >= data.weekStart && today <= data.weekEnd : true;

  const nav = (
    <div className="week-nav" role="group" aria-label={t("pages.schedule.title")}>
      <button type="button" className="icon-button" aria-label={t("pages.schedule.prev")} title={t("pages.schedule.prev")}
        disabled={!data} onClick={() => data && go(addDays(data.weekStart, -7))}>
        <Chevron />
      </button>
      <button type="button" onClick={() => go(null)} disabled={isThisWeek && !week} aria-label={t("pages.schedule.today")}>
        {t("pages.schedule.today")}
      </button>
      <button type="button" className="icon-button" aria-label={t("pages.schedule.next")} title={t("pages.schedule.next")}
        disabled={!data} onClick={() => data && go(addDays(data.weekStart, 7))}>
        <Chevron next />
      </button>
    </div>
  );

  return (
    <div className="page page-wide">
      <PageHeader
        title={t("pages.schedule.title")}
        subtitle={
          data ? (
            <>
              <span className="week-range">{t("pages.schedule.range", { start: day(data.weekStart, { day: "numeric", month: "short" }), end: day(data.weekEnd, { day: "numeric", month: "short", year: "numeric" }) })}</span>
              <span className="muted tz"><span className="tz-sep" aria-hidden="true">· </span>{t("pages.schedule.timezone", { tz: data.timezone })}</span>
            </>
          ) : undefined
        }
        actions={<><Refreshing active={loading && data !== null} />{nav}</>}
      />
      {error && <ErrorState error={error} onRetry={reload} />}
      {!data && !error && <div className="card pad"><LoadingState rows={5} /></div>}
      {data && (
        <>
          {data.sessions.length === 0 && <EmptyState>{t("pages.schedule.empty")}</EmptyState>}
          <div className={`week${loading ? " is-stale" : ""}`} data-testid="schedule-week" data-week-start={data.weekStart}>
            {days.map(({ day: d, sessions }) => {
              const isToday = d === today;
              return (
                <section key={d} className={`day${isToday ? " today" : ""}${sessions.length === 0 ? " empty" : ""}`} aria-labelledby={`day-${d}`}>
                  <h2 id={`day-${d}`} className="day-head">
                    <span className="day-name">{day(d, { weekday: "short" })}</span>
                    <span className="day-date">{day(d, { day: "numeric", month: "short" })}</span>
                    {isToday && <span className="badge accent today-badge">{t("pages.schedule.todayBadge")}</span>}
                  </h2>
                  {sessions.length === 0 ? (
                    <p className="day-none">{t("pages.schedule.noClasses")}</p>
                  ) : (
                    <ul className="day-sessions">
                      {sessions.map((s) => {
                        const selected = selection?.kind === "class_session" && selection.id === s.id;
                        const full = s.booked >= s.capacity;
                        const cancelled = s.status === "cancelled";
                        const fill = s.capacity > 0 ? Math.min(1, s.booked / s.capacity) : 0;
                        return (
                          <li key={s.id}>
                            <button type="button" data-testid="class-session" data-session-id={s.id}
                              className={`session${selected ? " selected" : ""}${cancelled ? " cancelled" : ""}${fresh.has(s.id) ? " fresh" : ""}`}
                              aria-pressed={selected}
                              onClick={() =>
                                setSelection(selected ? null : {
                                  kind: "class_session",
                                  id: s.id,
                                  label: `${s.classType.name}, ${day(d, { weekday: "short", day: "numeric", month: "short" })} ${time(s.startsAt)}`,
                                })
                              }>
                              <span className="session-time">{range(s)}</span>
                              <span className="session-name">{s.classType.name}</span>
                              <span className="session-coach">{s.coach?.fullName ?? t("pages.schedule.noCoach")}</span>
                              <span className="session-cap">
                                <span className="cap-bar" aria-hidden="true"><span style={{ inlineSize: `${fill * 100}%` }} className={full ? "full" : ""} /></span>
                                <span>{t("pages.schedule.booked", { booked: s.booked, capacity: s.capacity })}</span>
                                {cancelled ? <span className="badge">{t("pages.schedule.cancelled")}</span> : s.status === "draft" ? <span className="badge">{t("pages.schedule.draft")}</span> : full ? <span className="badge warn">{t("pages.schedule.full")}</span> : null}
                              </span>
                            </button>
                          </li>
                        );
                      })}
                    </ul>
                  )}
                </section>
              );
            })}
          </div>
        </>
      )}
    </div>
  );
}
