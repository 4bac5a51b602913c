// Spotter for staff: a floating launcher (and Cmd/Ctrl-K) toggling a non-modal sheet that slides in
// from the inline-end side. Mounted beside the routes, so its conversation outlives navigation.
import { useCallback, useEffect, useLayoutEffect, useRef, type KeyboardEvent } from "react";
import { useI18n } from "../i18n";
import { useSession } from "../session";
import { AgentProvider, useAgent } from "./AgentProvider";
import { Composer, MessageList } from "./Chat";
import { BudgetModal, ConversationList, Toasts, UsageFooter } from "./Panels";
import { BackIcon, CloseIcon, HistoryIcon, PlusIcon, SparkIcon } from "./icons";
import "./agent.css";

export function AgentRoot() {
  const { isStaff } = useSession();
  if (!isStaff) return null;
  return (
    <AgentProvider>
      <AgentUi />
    </AgentProvider>
  );
}

function AgentUi() {
  const { t } = useI18n();
  const { state, open, setOpen, view, setView, newConversation } = useAgent();
  const launcher = useRef<HTMLButtonElement>(null);
  const composer = useRef<HTMLTextAreaElement>(null);
  const sheet = useRef<HTMLElement>(null);

  const close = useCallback(() => {
    setOpen(false);
    // Back where the user came from: the launcher.
    requestAnimationFrame(() => launcher.current?.focus());
  }, [setOpen]);

  const show = useCallback(() => {
    setOpen(true);
    setView("chat");
  }, [setOpen, setView]);

  // On a wide screen the page makes room for the open sheet instead of hiding behind it, so what
  // Spotter changes stays in view (base.css: html[data-spotter-open]).
  useEffect(() => {
    document.documentElement.toggleAttribute("data-spotter-open", open);
    return () => document.documentElement.removeAttribute("data-spotter-open");
  }, [open]);

  // Opening moves focus into the composer (once the sheet is visible).
  useEffect(() => {
    if (!open) return;
    const id = requestAnimationFrame(() => {
      if (view === "chat") composer.current?.focus({ preventScroll: true });
    });
    return () => cancelAnimationFrame(id);
  }, [open, view]);

  // Cmd-K / Ctrl-K anywhere toggles the sheet. A layout effect: the shortcut works from the moment
  // the launcher is painted, not one frame later.
  useLayoutEffect(() => {
    const onKey = (e: globalThis.KeyboardEvent) => {
      if ((e.metaKey || e.ctrlKey) && !e.altKey && !e.shiftKey && e.key.toLowerCase() === "k") {
        e.preventDefault();
        if (open) close();
        else show();
      }
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [open, close, show]);

  const onSheetKey = (e: KeyboardEvent<HTMLElement>) => {
    if (e.key === "Escape" && !state.budget) {
      e.preventDefault();
      close();
    }
  };

  const status = state.running ? "running" : "idle";
  return (
    <>
      <button
        ref={launcher}
        type="button"
        className={`agent-launcher${open ? " open" : ""}`}
        aria-label={t("agent.launcher")}
        aria-expanded={open}
        aria-controls="agent-sheet"
        aria-keyshortcuts="Control+K Meta+K"
        title={`${t("agent.launcher")} (Ctrl K)`}
        onClick={() => (open ? close() : show())}
        data-state={status}
      >
        <span className="agent-launcher-icon" aria-hidden="true"><SparkIcon size={26} /></span>
        {state.running && !open && <span className="agent-launcher-busy" aria-hidden="true" />}
      </button>
      <aside
        ref={sheet}
        id="agent-sheet"
        className="agent-sheet"
        role="dialog"
        aria-label={t("agent.sheet")}
        data-testid="agent-sheet"
        data-state={status}
        data-open={open}
        aria-hidden={!open}
        onKeyDown={onSheetKey}
      >
        <header className="agent-header">
          <div className="agent-brand">
            <span className="agent-brand-icon" aria-hidden="true"><SparkIcon size={18} /></span>
            <div className="agent-brand-text">
              <span className="agent-brand-name">{t("agent.title")}</span>
              {state.title && view === "chat" && <span className="agent-brand-sub" dir="auto">{state.title}</span>}
            </div>
          </div>
          <div className="agent-header-actions">
            <button type="button" className="ghost agent-icon-button" onClick={() => setView(view === "list" ? "chat" : "list")} aria-pressed={view === "list"} title={view === "list" ? t("agent.backToChat") : t("agent.conversations")}>
              {view === "list" ? <BackIcon /> : <HistoryIcon />}
              <span className="agent-header-label">{view === "list" ? t("agent.backToChat") : t("agent.conversations")}</span>
            </button>
            {view === "chat" && (
              <button type="button" className="ghost agent-icon-button" onClick={newConversation} title={t("agent.newConversation")} aria-label={t("agent.newConversation")} disabled={state.items.length === 0 && !state.conversationId}>
                <PlusIcon />
              </button>
            )}
            <button type="button" className="ghost agent-icon-button" onClick={close} aria-label={t("agent.close")} title={t("agent.close")}>
              <CloseIcon />
            </button>
          </div>
        </header>
        {view === "list" ? <ConversationList /> : <MessageList />}
        {view === "chat" && <Composer ref={composer} />}
        <UsageFooter />
      </aside>
      <Toasts />
      <BudgetModal />
    </>
  );
}
