// One card per tool call, the two cards that wait for a person (confirm, pick), and error banners.
import { useMemo, useState } from "react";
import { useI18n, type MessageKey, type Translate } from "../i18n";
import { useAgent } from "./AgentProvider";
import { keyInputs, namesById, outputSummary, toolTitle } from "./tools";
import type { Item } from "./types";

type ToolItem = Extract<Item, { kind: "tool" }>;
type ConfirmItem = Extract<Item, { kind: "confirm" }>;
type PickerItem = Extract<Item, { kind: "picker" }>;
type ErrorItem = Extract<Item, { kind: "error" }>;

function StatusIcon({ status }: { status: ToolItem["status"] | "undone" }) {
  if (status === "running") return <span className="agent-spinner" aria-hidden="true" />;
  const glyph = { ok: "✓", error: "!", rejected: "✕", waiting: "…", undone: "↶" }[status];
  return <span className={`agent-status-icon ${status}`} aria-hidden="true">{glyph}</span>;
}

export function ToolCard({ item }: { item: ToolItem }) {
  const { t } = useI18n();
  const { undo, undoing } = useAgent();
  const status = item.undone ? "undone" : item.status;
  const summary = item.status === "ok" ? outputSummary(t, item.output) : null;
  const busy = undoing.has(item.toolUseId);
  return (
    <div className={`agent-card agent-tool ${status}`} data-testid="tool-card" data-status={status} data-tool={`${item.router}.${item.action}`}>
      <div className="agent-card-row">
        <StatusIcon status={status} />
        <span className="agent-card-title">{toolTitle(t, item.router, item.action)}</span>
        <span className="agent-card-state">{t(`agent.status.${status}` as MessageKey)}</span>
      </div>
      {summary && <div className="agent-card-detail"><bdi>{summary}</bdi></div>}
      {item.error && item.status !== "rejected" && <div className="agent-card-detail error"><bdi>{item.error.message || item.error.code}</bdi></div>}
      {item.status === "ok" && item.inverseAvailable && !item.undone && (
        <div className="agent-card-actions">
          <button type="button" className="ghost agent-undo" onClick={() => undo(item.toolUseId)} disabled={busy}>
            {busy ? t("agent.undoing") : t("agent.undo")}
          </button>
        </div>
      )}
    </div>
  );
}

export function ConfirmCard({ item }: { item: ConfirmItem }) {
  const { t } = useI18n();
  const { confirm, state } = useAgent();
  const names = useMemo(() => namesById(state.items.map((i) => (i.kind === "tool" ? i.output : i.kind === "picker" ? i.candidates : null))), [state.items]);
  // Disabled from the first click on, before the server has said anything.
  const [clicked, setClicked] = useState(false);
  const done = clicked || item.answer !== null;
  const answer = (approved: boolean) => {
    if (done) return;
    setClicked(true);
    confirm(item.toolUseId, approved);
  };
  const inputs = keyInputs(item.input, names);
  return (
    <div className={`agent-card agent-confirm ${item.confirm}`} data-testid="confirm-card" role="group" aria-label={t("agent.confirm.heading")}>
      <div className="agent-card-row">
        <span className="agent-status-icon warn" aria-hidden="true">?</span>
        <span className="agent-card-title">{toolTitle(t, item.router, item.action)}</span>
      </div>
      <p className="agent-confirm-heading">{t("agent.confirm.heading")}</p>
      {inputs.length > 0 && (
        <dl className="agent-inputs">
          {inputs.map(([k, v]) => (
            <div key={`${k}:${v}`}>
              {k && <dt>{k}</dt>}
              <dd><bdi>{v}</bdi></dd>
            </div>
          ))}
        </dl>
      )}
      <p className="agent-card-detail">{item.reason ? <bdi data-testid="confirm-reason">{item.reason}</bdi> : t(item.confirm === "always" ? "agent.confirm.always" : "agent.confirm.destructive")}</p>
      <div className="agent-card-actions">
        <button type="button" className="primary" onClick={() => answer(true)} disabled={done}>{t("agent.approve")}</button>
        <button type="button" className="danger" onClick={() => answer(false)} disabled={done}>{t("agent.reject")}</button>
        {item.answer === "skipped" && <span className="badge">{t("agent.skipped")}</span>}
        {item.answer && item.answer !== "skipped" && <span className={`badge ${item.answer === "approved" ? "ok" : "danger"}`}>{t(item.answer === "approved" ? "agent.approved" : "agent.rejected")}</span>}
      </div>
    </div>
  );
}

export function PickerCard({ item }: { item: PickerItem }) {
  const { t } = useI18n();
  const { pick } = useAgent();
  const [clicked, setClicked] = useState<string | null>(null);
  const chosen = clicked ?? item.picked;
  const done = chosen !== null;
  return (
    <div className="agent-card agent-picker" data-testid="picker-card" role="group" aria-label={item.prompt}>
      <p className="agent-picker-prompt" dir="auto">{item.prompt}</p>
      <div className="agent-candidates">
        {item.candidates.map((c) => (
          <button
            key={c.id}
            type="button"
            className={`agent-candidate${chosen === c.id ? " chosen" : ""}`}
            disabled={done}
            aria-pressed={chosen === c.id}
            onClick={() => {
              if (done) return;
              setClicked(c.id);
              pick(item.toolUseId, c.id);
            }}
          >
            <span className="agent-candidate-label">{c.label}</span>
            {c.sublabel && <span className="agent-candidate-sub">{c.sublabel}</span>}
          </button>
        ))}
      </div>
      {done && chosen && <span className="badge ok">{t("agent.picker.picked")}</span>}
      {done && chosen === "" && <span className="badge">{t("agent.skipped")}</span>}
    </div>
  );
}

export function errorMessage(t: Translate, code: string): string {
  const key = `agent.errors.${code}` as MessageKey;
  const text = t(key);
  return text === key ? t("agent.errors.unknown") : text;
}

export function ErrorBanner({ item }: { item: ErrorItem }) {
  const { t } = useI18n();
  const stopped = item.code === "aborted";
  return (
    <div className={`agent-error${stopped ? " stopped" : ""}`} data-testid="error-banner" data-code={item.code} role={stopped ? "status" : "alert"}>
      <div>{errorMessage(t, item.code)}</div>
      {item.traceId && <div className="agent-trace">{t("agent.traceId", { id: item.traceId })}</div>}
    </div>
  );
}
