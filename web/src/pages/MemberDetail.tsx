// One member: plan, payment status and history, programs, recent bookings, visits in 30 days.
import { useEffect } from "react";
import { useI18n, type MessageKey } from "../i18n";
import { Link } from "../router";
import { useOrgPath } from "../session";
import { useStudioEvents } from "../studio-events";
import { usePageTitle } from "../shell/Shell";
import { Avatar, EmptyState, ErrorState, LoadingState, MemberStatusBadge, PaymentBadge, Refreshing, useDay, useMoney, useResource } from "./common";
import type { MemberRow } from "./Members";

type MemberDetailData = MemberRow & {
  payments: { id: string; amountCents: number; currency: string; status: string; dueDate: string | null; paidAt: string | null }[];
  programs: { id: string; name: string }[];
  bookings: { classSessionId: string; className: string; startsAt: string; status: string; attended?: boolean }[];
  visitsLast30d: number;
};

const BOOKING_STATUS = ["booked", "attended", "cancelled", "no_show", "waitlisted"];
const BOOKING_TONE: Record<string, string> = { attended: "ok", no_show: "danger", cancelled: "", booked: "accent", waitlisted: "warn" };

export function MemberDetail({ id }: { id: string }) {
  const { t, formatDate, formatNumber } = useI18n();
  const org = useOrgPath();
  const money = useMoney();
  const day = useDay();
  const { setSelection } = useStudioEvents();
  const { data: m, error, loading, reload } = useResource<MemberDetailData>(`${org}/studio/members/${encodeURIComponent(id)}`);
  usePageTitle(m?.fullName ?? null);

  useEffect(() => {
    if (m) setSelection({ kind: "member", id: m.membershipId, label: m.fullName });
  }, [m?.membershipId, m?.fullName, setSelection]);
  useEffect(() => () => setSelection(null), [setSelection]);

  const back = <Link to="/members" className="back-link">← {t("pages.member.back")}</Link>;
  if (!m) {
    return (
      <div className="page">
        {back}
        {error ? <ErrorState error={error} onRetry={reload} /> : <div className="card pad"><LoadingState rows={5} /></div>}
      </div>
    );
  }
  const pay = m.payment;
  return (
    <div className="page member-detail" data-testid="member-detail">
      {back}
      <div className="page-header">
        <div className="person person-lg">
          <Avatar name={m.fullName} size={52} />
          <div className="person-text">
            <h1><span dir="auto">{m.fullName}</span> <MemberStatusBadge status={m.status} /></h1>
            <span className="person-sub">{m.email}</span>
          </div>
        </div>
        <div className="page-actions"><Refreshing active={loading} /></div>
      </div>
      {error && <ErrorState error={error} onRetry={reload} />}

      <div className="stat-grid">
        <section className="card stat" aria-labelledby="plan-h">
          <h2 id="plan-h" className="stat-label">{t("pages.member.planCard")}</h2>
          <p className="stat-value">{m.plan ? m.plan.name : <span className="muted">{t("pages.members.noPlan")}</span>}</p>
          {m.plan?.sessionsPerWeek ? <p className="stat-sub">{t("pages.members.perWeek", { n: m.plan.sessionsPerWeek })}</p> : null}
        </section>
        <section className={`card stat stat-pay-${pay.status}`} aria-labelledby="pay-h">
          <h2 id="pay-h" className="stat-label">{t("pages.member.paymentCard")}</h2>
          <p className="stat-value"><PaymentBadge status={pay.status} /></p>
          <p className="stat-sub">
            {pay.amountDueCents > 0 && <span className="due-amount">{t("pages.member.amountDue", { amount: money(pay.amountDueCents, pay.currency) })} · </span>}
            {pay.lastPaidAt ? t("pages.member.lastPaid", { date: day(pay.lastPaidAt) }) : t("pages.member.neverPaid")}
          </p>
        </section>
        <section className="card stat" aria-labelledby="visits-h">
          <h2 id="visits-h" className="stat-label">{t("pages.member.visits")}</h2>
          <p className="stat-value stat-number">{formatNumber(m.visitsLast30d)}</p>
        </section>
      </div>

      <div className="detail-grid">
        <section className="card section" aria-labelledby="payments-h">
          <h2 id="payments-h">{t("pages.member.payments")}</h2>
          {m.payments.length === 0 ? (
            <p className="muted">{t("pages.member.noPayments")}</p>
          ) : (
            <table className="data-table compact">
              <thead>
                <tr>
                  <th scope="col">{t("pages.member.dueDate")}</th>
                  <th scope="col" className="col-num">{t("pages.member.amount")}</th>
                  <th scope="col">{t("pages.members.payment")}</th>
                  <th scope="col" className="hide-phone">{t("pages.member.paidAt")}</th>
                </tr>
              </thead>
              <tbody>
                {m.payments.map((p) => (
                  <tr key={p.id}>
                    <td>{p.dueDate ? day(p.dueDate) : "—"}</td>
                    <td className="col-num">{money(p.amountCents, p.currency)}</td>
                    <td><PaymentBadge status={p.status} /></td>
                    <td className="hide-phone">{p.paidAt ? day(p.paidAt) : "—"}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </section>

        <div className="detail-side">
          <section className="card section" aria-labelledby="programs-h">
            <h2 id="programs-h">{t("pages.member.programs")}</h2>
            {m.programs.length === 0 ? (
              <p className="muted">{t("pages.member.noPrograms")}</p>
            ) : (
              <ul className="chip-list">
                {m.programs.map((p) => (
                  <li key={p.id}><Link to={`/programs/${p.id}`} className="chip">{p.name}</Link></li>
                ))}
              </ul>
            )}
          </section>

          <section className="card section" aria-labelledby="bookings-h">
            <h2 id="bookings-h">{t("pages.member.bookings")}</h2>
            {m.bookings.length === 0 ? (
              <EmptyState>{t("pages.member.noBookings")}</EmptyState>
            ) : (
              <ul className="plain-list">
                {m.bookings.map((b) => ({ ...b, status: b.attended ? "attended" : b.status })).map((b) => (
                  <li key={`${b.classSessionId}-${b.startsAt}`} className="booking">
                    <div>
                      <span className="booking-class">{b.className}</span>
                      <span className="person-sub">{formatDate(b.startsAt, { weekday: "short", day: "numeric", month: "short", hour: "numeric", minute: "2-digit" })}</span>
                    </div>
                    <span className={`badge ${BOOKING_TONE[b.status] ?? ""}`}>
                      {BOOKING_STATUS.includes(b.status) ? t(`pages.booking.${b.status}` as MessageKey) : b.status}
                    </span>
                  </li>
                ))}
              </ul>
            )}
          </section>
        </div>
      </div>
    </div>
  );
}
