// The conversation list, the usage footer, the budget modal and the undo toasts.
import { useEffect, useRef, useState, type KeyboardEvent } from "react";
import { ApiError, request } from "../api";
import { useI18n } from "../i18n";
import { useOrgPath } from "../session";
import { useAgent } from "./AgentProvider";
import { errorMessage } from "./Cards";
import { ArchiveIcon, PauseIcon, PinIcon, PlusIcon } from "./icons";
import type { ConversationSummary } from "./types";

function sortPinnedFirst(list: ConversationSummary[]): ConversationSummary[] {
  return [...list].sort((a, b) => Number(b.pinned) - Number(a.pinned) || String(b.lastMessageAt ?? b.createdAt ?? "").localeCompare(String(a.lastMessageAt ?? a.createdAt ?? "")));
}

export function ConversationList() {
  const { t, formatDate } = useI18n();
  const base = `${useOrgPath()}/agent`;
  const { state, openConversation, newConversation, listVersion } = useAgent();
  const [list, setList] = useState<ConversationSummary[] | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [reload, setReload] = useState(0);
  useEffect(() => {
    let live = true;
    request<{ conversations: ConversationSummary[] }>(`${base}/conversations`)
      .then((r) => live && (setList(sortPinnedFirst(r.conversations)), setError(null)))
      .catch((e) => live && setError(e instanceof ApiError ? e : new ApiError(0, "internal", String(e), null)));
    return () => {
      live = false;
    };
  }, [base, listVersion, reload]);

  const patch = async (c: ConversationSummary, body: { pinned?: boolean; archived?: boolean }) => {
    // Optimistic: the list changes at once and is re-read afterwards.
    setList((all) => all && sortPinnedFirst(body.archived ? all.filter((x) => x.id !== c.id) : all.map((x) => (x.id === c.id ? { ...x, pinned: body.pinned ?? x.pinned } : x))));
    try {
      await request(`${base}/conversations/${c.id}`, { method: "PATCH", body });
      if (body.archived && state.conversationId === c.id) newConversation();
    } catch (e) {
      setError(e instanceof ApiError ? e : new ApiError(0, "internal", String(e), null));
    }
    setReload((n) => n + 1);
  };

  return (
    <div className="agent-list">
      <button type="button" className="primary agent-new" onClick={newConversation}><PlusIcon /> {t("agent.newConversation")}</button>
      {error && (
        <div className="agent-error" data-testid="error-banner" role="alert">
          <div>{errorMessage(t, error.code)}</div>
          {error.traceId && <div className="agent-trace">{t("agent.traceId", { id: error.traceId })}</div>}
        </div>
      )}
      {list === null && !error && <p className="muted agent-note">{t("agent.loading")}</p>}
      {list?.length === 0 && <p className="muted agent-note">{t("agent.noConversations")}</p>}
      <ul className="agent-conversations">
        {list?.map((c) => (
          <li key={c.id} data-testid="conversation-item" data-pinned={c.pinned} className={c.id === state.conversationId ? "current" : undefined}>
            <button type="button" className="agent-conversation-open" onClick={() => openConversation(c.id)} aria-current={c.id === state.conversationId ? "true" : undefined}>
              <span className="agent-conversation-title">
                {c.pinned && <span className="agent-pin-mark" title={t("agent.pinned")}><PinIcon filled /><span className="visually-hidden">{t("agent.pinned")}: </span></span>}
                <span dir="auto">{c.title || t("agent.untitled")}</span>
              </span>
              {(c.lastMessageAt ?? c.createdAt) && (
                <span className="agent-conversation-date">{formatDate(c.lastMessageAt ?? c.createdAt!, { dateStyle: "medium", timeStyle: "short" })}</span>
              )}
            </button>
            <div className="agent-conversation-actions">
              <button type="button" className="ghost" onClick={() => patch(c, { pinned: !c.pinned })} >
                <PinIcon filled={c.pinned} /> {c.pinned ? t("agent.unpin") : t("agent.pin")}
              </button>
              <button type="button" className="ghost" onClick={() => patch(c, { archived: true })}><ArchiveIcon /> {t("agent.archive")}</button>
            </div>
          </li>
        ))}
      </ul>
    </div>
  );
}

function dollars(micros: number): string {
  return (Math.max(0, micros) / 1_000_000).toFixed(2);
}

export function UsageFooter() {
  const { t } = useI18n();
  const { usage } = useAgent();
  if (!usage) return <div className="agent-usage" data-testid="usage-footer" aria-hidden="true" />;
  const unmetered = usage.capUsdMicros < 0 || usage.tier === "unmetered";
  // Billing decides when to hint (≥ 80 % of the cap); the figure counts calls still in flight, like the bar.
  const high = usage.showUpgradeHint;
  const used = usage.spentUsdMicros + (usage.reservedUsdMicros ?? 0);
  const percent = unmetered ? 0 : Math.min(100, Math.round(usage.percentUsed * 100));
  return (
    <div className={`agent-usage${high ? " high" : ""}`} data-testid="usage-footer">
      <span className="visually-hidden">{t("agent.usage.label")}: </span>
      {unmetered ? (
        <span>{t("agent.usage.unmetered", { spent: `$${dollars(usage.spentUsdMicros)}` })}</span>
      ) : (
        <>
          <span className="agent-usage-bar" aria-hidden="true"><span style={{ inlineSize: `${percent}%` }} /></span>
          <span className="agent-usage-figures" dir="ltr" title={t("agent.usage.label")}>{`${dollars(used)} / $${dollars(usage.capUsdMicros)}`}</span>
        </>
      )}
      {high && <span className="agent-upgrade">{t("agent.usage.upgrade")}</span>}
    </div>
  );
}

const FOCUSABLE = "button:not([disabled]), [href], input:not([disabled]), select, textarea:not([disabled]), [tabindex]:not([tabindex='-1'])";

export function BudgetModal() {
  const { t, formatDate } = useI18n();
  const { state, usage, dismissBudget, refreshUsage } = useAgent();
  const dialog = useRef<HTMLDivElement>(null);
  const returnTo = useRef<Element | null>(null);
  const budget = state.budget;
  useEffect(() => {
    if (!budget) return;
    returnTo.current = document.activeElement;
    refreshUsage();
    dialog.current?.querySelector<HTMLElement>("button")?.focus();
    return () => {
      const back = returnTo.current as HTMLElement | null;
      if (back && document.contains(back)) back.focus();
    };
  }, [budget, refreshUsage]);
  if (!budget) return null;
  const trap = (e: KeyboardEvent<HTMLDivElement>) => {
    if (e.key === "Escape") {
      e.preventDefault();
      e.stopPropagation();
      dismissBudget();
      return;
    }
    if (e.key !== "Tab" || !dialog.current) return;
    const items = [...dialog.current.querySelectorAll<HTMLElement>(FOCUSABLE)];
    if (!items.length) return;
    const first = items[0], last = items[items.length - 1];
    if (e.shiftKey && document.activeElement === first) {
      e.preventDefault();
      last.focus();
    } else if (!e.shiftKey && document.activeElement === last) {
      e.preventDefault();
      first.focus();
    }
  };
  const resetsAt = usage?.resetsAt;
  return (
    <div className="agent-modal-backdrop">
      <div
        ref={dialog}
        className="agent-modal card"
        role="alertdialog"
        aria-modal="true"
        aria-labelledby="agent-budget-title"
        aria-describedby="agent-budget-body"
        data-testid="budget-modal"
        onKeyDown={trap}
      >
        <div className="agent-modal-icon" aria-hidden="true"><PauseIcon /></div>
        <h2 id="agent-budget-title">{t("agent.budget.title")}</h2>
        <div id="agent-budget-body">
          <p>{t("agent.budget.body")}</p>
          {resetsAt && <p>{t("agent.budget.resets", { when: formatDate(resetsAt, { dateStyle: "medium", timeStyle: "short" }) })}</p>}
          <p className="agent-upgrade">{t("agent.budget.upgrade")}</p>
          {budget.traceId && <p className="agent-trace">{t("agent.traceId", { id: budget.traceId })}</p>}
        </div>
        <div className="agent-modal-actions">
          <button type="button" className="primary" onClick={dismissBudget}>{t("agent.budget.close")}</button>
        </div>
      </div>
    </div>
  );
}

export function Toasts() {
  const { t } = useI18n();
  const { toasts, undo, dismissToast, open } = useAgent();
  return (
    <div className={`agent-toasts${open ? " sheet-open" : ""}`}>
      {toasts.map((toast) => (
        <div key={toast.id} className="agent-toast" data-testid="toast" role="status">
          <span>{toast.text}</span>
          <span aria-hidden="true"> — </span>
          <button type="button" className="agent-toast-undo" onClick={() => undo(toast.toolUseId)}>{t("agent.undo")}</button>
          <button type="button" className="ghost agent-toast-close" onClick={() => dismissToast(toast.id)} aria-label={t("agent.dismiss")}>×</button>
        </div>
      ))}
    </div>
  );
}
