// What every page shares: a fetch hook that reloads quietly when Spotter changes studio data, the
// loading / empty / error states, money and date helpers, and the payment badge.
import { useCallback, useEffect, useRef, useState, type ReactNode } from "react";
import { ApiError, request } from "../api";
import { useI18n, type MessageKey } from "../i18n";
import { useStudioEvents } from "../studio-events";

export type Resource<T> = { data: T | null; error: ApiError | null; loading: boolean; reload: () => void };

/** GET `path` (null: nothing yet), again whenever `version` changes. While reloading the old data
 * stays on screen; with `keep` it stays even when the path changes (a new search, another week). */
export function useResource<T>(path: string | null, { keep = false }: { keep?: boolean } = {}): Resource<T> {
  const { version } = useStudioEvents();
  const [state, setState] = useState<{ path: string | null; data: T | null; error: ApiError | null }>({ path: null, data: null, error: null });
  const [loading, setLoading] = useState(path !== null);
  const [nonce, setNonce] = useState(0);
  useEffect(() => {
    if (path === null) return;
    const ctrl = new AbortController();
    setLoading(true);
    request<T>(path, { signal: ctrl.signal })
      .then((data) => {
        if (!ctrl.signal.aborted) setState({ path, data, error: null });
      })
      .catch((e) => {
        if (ctrl.signal.aborted || (e as Error).name === "AbortError") return;
        const error = e instanceof ApiError ? e : new ApiError(0, "internal", String(e), null);
        setState((s) => ({ path, data: s.path === path || keep ? s.data : null, error }));
      })
      .finally(() => {
        if (!ctrl.signal.aborted) setLoading(false);
      });
    return () => ctrl.abort();
  }, [path, version, nonce, keep]);
  const reload = useCallback(() => setNonce((n) => n + 1), []);
  const same = state.path === path;
  return { data: same || keep ? state.data : null, error: same ? state.error : null, loading: loading || !same, reload };
}

/** Ids that appeared since the previous load (not on the first one): a change Spotter just made. */
export function useFreshIds(ids: string[] | null): ReadonlySet<string> {
  const seen = useRef<Set<string> | null>(null);
  const [fresh, setFresh] = useState<ReadonlySet<string>>(new Set());
  const key = ids ? ids.join(",") : null;
  useEffect(() => {
    if (!ids) return;
    if (seen.current) {
      const added = ids.filter((id) => !seen.current!.has(id));
      if (added.length) setFresh(new Set(added));
    }
    seen.current = new Set(ids);
  }, [key]);
  return fresh;
}

const ERROR_CODES = ["network_error", "forbidden", "not_found", "unauthorized", "invalid_request", "rate_limited"];

export function errorKey(error: ApiError): MessageKey {
  return (ERROR_CODES.includes(error.code) ? `pages.error.${error.code}` : "pages.error.generic") as MessageKey;
}

export function ErrorState({ error, onRetry }: { error: ApiError; onRetry?: () => void }) {
  const { t } = useI18n();
  return (
    <div className="state state-error" role="alert" data-testid="page-error">
      <svg width="20" height="20" viewBox="0 0 24 24" fill="none" stroke="currentColor" strokeWidth="2" aria-hidden="true">
        <circle cx="12" cy="12" r="9" /><path d="M12 7.5v5.5M12 16.5v.01" strokeLinecap="round" />
      </svg>
      <div className="state-body">
        <p className="state-title">{t(errorKey(error))}</p>
        {error.traceId && <p className="trace">{t("pages.trace", { id: error.traceId })}</p>}
      </div>
      {onRetry && error.status !== 403 && error.status !== 404 && (
        <button type="button" onClick={onRetry}>{t("pages.retry")}</button>
      )}
    </div>
  );
}

export function LoadingState({ rows = 4 }: { rows?: number }) {
  const { t } = useI18n();
  return (
    <div className="state-loading" role="status" aria-live="polite">
      <span className="visually-hidden">{t("pages.loading")}</span>
      {Array.from({ length: rows }, (_, i) => (
        <div key={i} className="skeleton" style={{ inlineSize: `${92 - (i % 3) * 14}%` }} aria-hidden="true" />
      ))}
    </div>
  );
}

export function EmptyState({ children, icon }: { children: ReactNode; icon?: ReactNode }) {
  return (
    <div className="state state-empty">
      {icon}
      <p>{children}</p>
    </div>
  );
}

/** Quiet "updating" hint while a reload runs with data on screen. */
export function Refreshing({ active }: { active: boolean }) {
  const { t } = useI18n();
  return (
    <span className={`refreshing${active ? " on" : ""}`} role="status" aria-live="polite">
      {active ? t("pages.refreshing") : ""}
    </span>
  );
}

export function PageHeader({ title, subtitle, actions }: { title: ReactNode; subtitle?: ReactNode; actions?: ReactNode }) {
  return (
    <div className="page-header">
      <div className="page-heading">
        <h1>{title}</h1>
        {subtitle && <p className="page-subtitle">{subtitle}</p>}
      </div>
      {actions && <div className="page-actions">{actions}</div>}
    </div>
  );
}

export function useMoney(): (cents: number, currency: string) => string {
  const { formatNumber } = useI18n();
  return (cents, currency) => {
    try {
      return formatNumber(cents / 100, { style: "currency", currency: currency || "USD" });
    } catch {
      return `${formatNumber(cents / 100, { minimumFractionDigits: 2 })} ${currency}`;
    }
  };
}

/** A calendar date ("2025-03-14") formatted without shifting it through the browser's timezone. */
export function useDay(): (day: string, o?: Intl.DateTimeFormatOptions) => string {
  const { formatDate } = useI18n();
  return (day, o = { day: "numeric", month: "short", year: "numeric" }) =>
    formatDate(new Date(`${day.slice(0, 10)}T12:00:00Z`), { ...o, timeZone: "UTC" });
}

/** Today's calendar date (YYYY-MM-DD) in a timezone (the browser's when none). */
export function todayIn(timeZone?: string): string {
  return dayIn(new Date(), timeZone);
}

export function dayIn(at: Date | string, timeZone?: string): string {
  const d = typeof at === "string" ? new Date(at) : at;
  const parts = new Intl.DateTimeFormat("en-CA", { timeZone, year: "numeric", month: "2-digit", day: "2-digit" }).formatToParts(d);
  const get = (type: string) => parts.find((p) => p.type === type)?.value ?? "";
  return `${get("year")}-${get("month")}-${get("day")}`;
}

export function addDays(day: string, n: number): string {
  const d = new Date(`${day.slice(0, 10)}T12:00:00Z`);
  d.setUTCDate(d.getUTCDate() + n);
  return d.toISOString().slice(0, 10);
}

export type PaymentStatus = "paid" | "due" | "overdue" | "none";
const PAY_TONE: Record<string, string> = { paid: "ok", due: "warn", overdue: "danger", none: "" };

export function PaymentBadge({ status }: { status: string }) {
  const { t } = useI18n();
  const known = ["paid", "due", "overdue", "none", "pending", "failed", "refunded"];
  const key = (known.includes(status) ? `pages.pay.${status}` : "pages.pay.none") as MessageKey;
  const tone = PAY_TONE[status] ?? (status === "failed" ? "danger" : status === "pending" ? "warn" : "");
  return (
    <span className={`badge pay-badge ${tone}`} data-status={status}>
      <span className="badge-dot" aria-hidden="true" />
      {t(key)}
    </span>
  );
}

export function Avatar({ name, size = 32 }: { name: string; size?: number }) {
  const parts = name.trim().split(/\s+/).filter(Boolean);
  const text = ((parts[0]?.[0] ?? "") + (parts.length > 1 ? parts[parts.length - 1][0] : "")).toUpperCase() || "?";
  let hue = 0;
  for (const ch of name) hue = (hue * 31 + ch.charCodeAt(0)) % 360;
  return (
    <span className="p-avatar" aria-hidden="true"
      style={{ inlineSize: size, blockSize: size, fontSize: size * 0.38, background: `hsl(${hue} 70% 94%)`, color: `hsl(${hue} 45% 32%)` }}>
      {text}
    </span>
  );
}

/** A membership that is not active (paused, left, pending) says so next to the name. */
export function MemberStatusBadge({ status }: { status: string }) {
  const { t } = useI18n();
  if (status === "active" || !["paused", "cancelled", "pending"].includes(status)) return null;
  return <span className={`badge member-status ${status === "cancelled" ? "" : "warn"}`}>{t(`pages.memberStatus.${status}` as MessageKey)}</span>;
}
