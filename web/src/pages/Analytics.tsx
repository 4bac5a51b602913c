// Analytics: the studio's figures at a glance and eight weeks of bookings vs attendance, drawn as
// inline SVG (no chart library) with a text summary and a table of the numbers for screen readers.
import { useEffect, useRef, useState, type ReactNode } from "react";
import { useI18n } from "../i18n";
import { useOrgPath } from "../session";
import { ErrorState, LoadingState, PageHeader, Refreshing, useDay, useMoney, useResource } from "./common";

type AnalyticsData = {
  figures: {
    activeMembers: number;
    overdueMembers: number;
    overdueAmountCents: number;
    bookingsThisWeek: number;
    attendanceRate30d: number;
    revenue30dCents: number;
    currency: string;
  };
  attendanceByWeek: { weekStart: string; booked: number; attended: number }[];
};

function Tile({ label, value, sub, tone, id }: { label: string; value: ReactNode; sub?: ReactNode; tone?: string; id: string }) {
  return (
    <section className={`card figure-tile${tone ? ` tone-${tone}` : ""}`} data-testid="figure-tile" data-figure={id} aria-label={label}>
      <h2 className="stat-label">{label}</h2>
      <p className="figure-value">{value}</p>
      {sub && <p className="stat-sub">{sub}</p>}
    </section>
  );
}

function useWidth<T extends HTMLElement>(): [React.RefObject<T | null>, number] {
  const ref = useRef<T>(null);
  const [width, setWidth] = useState(0);
  useEffect(() => {
    const el = ref.current;
    if (!el) return;
    const ro = new ResizeObserver(([entry]) => setWidth(Math.floor(entry.contentRect.width)));
    ro.observe(el);
    setWidth(Math.floor(el.getBoundingClientRect().width));
    return () => ro.disconnect();
  }, []);
  return [ref, width];
}

function niceMax(n: number): number {
  if (n <= 5) return 5;
  const pow = 10 ** Math.floor(Math.log10(n));
  for (const step of [1, 2, 2.5, 5, 10]) if (step * pow >= n) return step * pow;
  return 10 * pow;
}

function AttendanceChart({ weeks }: { weeks: AnalyticsData["attendanceByWeek"] }) {
  const { t, dir, formatNumber } = useI18n();
  const day = useDay();
  const [ref, width] = useWidth<HTMLDivElement>();
  const height = 240;
  const max = niceMax(Math.max(1, ...weeks.map((w) => Math.max(w.booked, w.attended))));
  const pad = { top: 12, bottom: 28, start: 20 + formatNumber(max).length * 8, end: 8 };
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => Math.round(max * f));
  const plotW = Math.max(0, width - pad.start - pad.end);
  const plotH = height - pad.top - pad.bottom;
  const band = weeks.length ? plotW / weeks.length : 0;
  const barW = Math.max(4, Math.min(22, band * 0.32));
  const y = (v: number) => pad.top + plotH - (v / max) * plotH;
  // Mirror the x axis in RTL so time reads in the page's direction.
  const x = (px: number) => (dir === "rtl" ? width - px : px);
  const totalBooked = weeks.reduce((s, w) => s + w.booked, 0);
  const totalAttended = weeks.reduce((s, w) => s + w.attended, 0);
  const last = weeks[weeks.length - 1];
  const summary = t("pages.analytics.chartSummary", {
    n: weeks.length,
    booked: formatNumber(totalBooked),
    attended: formatNumber(totalAttended),
    lastBooked: formatNumber(last?.booked ?? 0),
    lastAttended: formatNumber(last?.attended ?? 0),
  });
  const weekLabel = (d: string) => day(d, { day: "numeric", month: "short" });
  const everyOther = band < 54;

  return (
    <section className="card section chart-card" aria-labelledby="chart-h">
      <div className="chart-head">
        <h2 id="chart-h">{t("pages.analytics.attendanceByWeek")}</h2>
        <ul className="legend" aria-hidden="true">
          <li><span className="swatch booked" />{t("pages.analytics.booked")}</li>
          <li><span className="swatch attended" />{t("pages.analytics.attended")}</li>
        </ul>
      </div>
      <div ref={ref} className="chart-box">
        {width > 0 && (
          <svg data-testid="attendance-chart" role="img" aria-label={summary} width={width} height={height} viewBox={`0 0 ${width} ${height}`}>
            <g className="grid">
              {ticks.map((v) => (
                <g key={v}>
                  <line x1={x(pad.start)} x2={x(width - pad.end)} y1={y(v)} y2={y(v)} />
                  <text x={x(pad.start - 8)} y={y(v)} dy="0.32em" textAnchor={dir === "rtl" ? "start" : "end"}>{formatNumber(v)}</text>
                </g>
              ))}
            </g>
            {weeks.map((w, i) => {
              const cx = pad.start + band * (i + 0.5);
              const b = y(w.booked);
              const a = y(w.attended);
              const rectX = (left: number) => (dir === "rtl" ? width - left - barW : left);
              return (
                <g key={w.weekStart}>
                  <rect className="bar booked" x={rectX(cx - barW - 1)} y={b} width={barW} height={pad.top + plotH - b} rx={3} />
                  <rect className="bar attended" x={rectX(cx + 1)} y={a} width={barW} height={pad.top + plotH - a} rx={3} />
                  {(!everyOther || i % 2 === weeks.length % 2 || i === weeks.length - 1) && (
                    <text className="x-label" x={x(cx)} y={height - 8} textAnchor="middle">{weekLabel(w.weekStart)}</text>
                  )}
                </g>
              );
            })}
          </svg>
        )}
      </div>
      <table className="visually-hidden">
        <caption>{t("pages.analytics.attendanceByWeek")}</caption>
        <thead>
          <tr>
            <th scope="col">{t("pages.analytics.week")}</th>
            <th scope="col">{t("pages.analytics.booked")}</th>
            <th scope="col">{t("pages.analytics.attended")}</th>
          </tr>
        </thead>
        <tbody>
          {weeks.map((w) => (
            <tr key={w.weekStart}>
              <th scope="row">{weekLabel(w.weekStart)}</th>
              <td>{formatNumber(w.booked)}</td>
              <td>{formatNumber(w.attended)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {totalBooked === 0 && <p className="muted chart-empty">{t("pages.analytics.noData")}</p>}
    </section>
  );
}

export function Analytics() {
  const { t, formatNumber } = useI18n();
  const org = useOrgPath();
  const money = useMoney();
  const { data, error, loading, reload } = useResource<AnalyticsData>(`${org}/studio/analytics`);
  const f = data?.figures;
  return (
    <div className="page page-wide">
      <PageHeader title={t("pages.analytics.title")} actions={<Refreshing active={loading && data !== null} />} />
      {error && <ErrorState error={error} onRetry={reload} />}
      {!data && !error && <div className="card pad"><LoadingState rows={4} /></div>}
      {data && f && (
        <>
          <div className="figure-grid">
            <Tile id="activeMembers" label={t("pages.analytics.activeMembers")} value={formatNumber(f.activeMembers)} />
            <Tile id="overdueMembers" label={t("pages.analytics.overdueMembers")} value={formatNumber(f.overdueMembers)}
              tone={f.overdueMembers > 0 ? "danger" : undefined}
              sub={t("pages.analytics.overdueAmount", { amount: money(f.overdueAmountCents, f.currency) })} />
            <Tile id="bookingsThisWeek" label={t("pages.analytics.bookingsThisWeek")} value={formatNumber(f.bookingsThisWeek)} />
            <Tile id="attendanceRate30d" label={t("pages.analytics.attendanceRate")}
              value={formatNumber(f.attendanceRate30d, { style: "percent", maximumFractionDigits: 0 })} sub={t("pages.analytics.last30")} />
            <Tile id="revenue30d" label={t("pages.analytics.revenue")} value={money(f.revenue30dCents, f.currency)} sub={t("pages.analytics.last30")} />
          </div>
          <AttendanceChart weeks={data.attendanceByWeek} />
        </>
      )}
    </div>
  );
}
