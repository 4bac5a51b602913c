// Members: search the studio's clients; each row shows the plan and where payment stands.
import { useEffect, useId, useState } from "react";
import { useI18n } from "../i18n";
import { Link, navigate, useSearchParams } from "../router";
import { useOrgPath } from "../session";
import { Avatar, EmptyState, ErrorState, LoadingState, MemberStatusBadge, PageHeader, PaymentBadge, Refreshing, useMoney, useResource, type PaymentStatus } from "./common";

export type MemberRow = {
  membershipId: string;
  userId: string;
  fullName: string;
  email: string;
  status: string;
  plan: { name: string; sessionsPerWeek: number | null } | null;
  payment: { status: PaymentStatus; amountDueCents: number; currency: string; lastPaidAt: string | null };
};

/** The endpoint's page size ceiling; past it, the search narrows the list. */
const MAX_ROWS = 200;

export function Members() {
  const { t, formatNumber } = useI18n();
  const org = useOrgPath();
  const money = useMoney();
  const params = useSearchParams();
  const urlQ = params.get("q") ?? "";
  const [q, setQ] = useState(urlQ);
  const [debounced, setDebounced] = useState(urlQ.trim());
  const searchId = useId();
  const [limit, setLimit] = useState(50);

  useEffect(() => {
    const timer = setTimeout(() => {
      setDebounced(q.trim());
      const next = q.trim() ? `/members?q=${encodeURIComponent(q.trim())}` : "/members";
      navigate(next, { replace: true });
    }, 250);
    return () => clearTimeout(timer);
  }, [q]);

  useEffect(() => setLimit(50), [debounced]);

  const path = `${org}/studio/members?${new URLSearchParams({ q: debounced, limit: String(limit), offset: "0" })}`;
  const { data, error, loading, reload } = useResource<{ members: MemberRow[]; total: number }>(path, { keep: true });

  return (
    <div className="page">
      <PageHeader
        title={t("pages.members.title")}
        subtitle={data ? t("pages.members.subtitle", { n: formatNumber(data.total) }) : undefined}
        actions={<Refreshing active={loading && data !== null} />}
      />
      <div className="toolbar">
        <div className="search-field">
          <label htmlFor={searchId} className="visually-hidden">{t("pages.members.search")}</label>
          <svg className="search-icon" width="16" height="16" viewBox="0 0 24 24" fill="none" stroke="currentColor" strokeWidth="2" aria-hidden="true">
            <circle cx="11" cy="11" r="6.5" /><path d="m20 20-4.2-4.2" strokeLinecap="round" />
          </svg>
          <input id={searchId} type="search" value={q} onChange={(e) => setQ(e.target.value)}
            placeholder={t("pages.members.searchPlaceholder")} autoComplete="off" spellCheck={false} />
        </div>
      </div>
      {error && <ErrorState error={error} onRetry={reload} />}
      {!data && !error && <div className="card"><LoadingState rows={6} /></div>}
      {data && data.members.length === 0 && (
        <EmptyState>{debounced ? t("pages.members.noResults", { q: debounced }) : t("pages.members.empty")}</EmptyState>
      )}
      {data && data.members.length > 0 && (
        <div className={`card table-card${loading ? " is-stale" : ""}`}>
          <table className="data-table members-table" data-testid="members-table">
            <thead>
              <tr>
                <th scope="col">{t("pages.members.name")}</th>
                <th scope="col" className="col-plan">{t("pages.members.plan")}</th>
                <th scope="col">{t("pages.members.payment")}</th>
                <th scope="col" className="col-num col-due">{t("pages.members.due")}</th>
              </tr>
            </thead>
            <tbody>
              {data.members.map((m) => (
                <tr key={m.membershipId} className="row-link" data-testid="member-row"
                  onClick={(e) => {
                    if ((e.target as HTMLElement).closest("a")) return;
                    navigate(`/members/${m.membershipId}`);
                  }}>
                  <td>
                    <div className="person">
                      <Avatar name={m.fullName} />
                      <div className="person-text">
                        <span className="person-line"><Link to={`/members/${m.membershipId}`} className="person-name" dir="auto">{m.fullName}</Link> <MemberStatusBadge status={m.status} /></span>
                        <span className="person-sub">{m.email}</span>
                      </div>
                    </div>
                  </td>
                  <td className="col-plan">
                    {m.plan ? (
                      <>
                        <span>{m.plan.name}</span>
                        {m.plan.sessionsPerWeek ? <span className="person-sub"> · {t("pages.members.perWeek", { n: m.plan.sessionsPerWeek })}</span> : null}
                      </>
                    ) : (
                      <span className="muted">{t("pages.members.noPlan")}</span>
                    )}
                  </td>
                  <td><PaymentBadge status={m.payment.status} /></td>
                  <td className={`col-num col-due${m.payment.amountDueCents > 0 ? "" : " none"}`}>
                    {m.payment.amountDueCents > 0 ? money(m.payment.amountDueCents, m.payment.currency) : <span className="muted">—</span>}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          {data.total > data.members.length && (
            <div className="table-foot">
              <span className="muted">{t("pages.members.showing", { shown: formatNumber(data.members.length), total: formatNumber(data.total) })}</span>
              {limit < MAX_ROWS && (
                <button type="button" className="ghost more-button" disabled={loading} onClick={() => setLimit((n) => Math.min(MAX_ROWS, n + 50))}>
                  {t("pages.members.more")}
                </button>
              )}
            </div>
          )}
        </div>
      )}
    </div>
  );
}
