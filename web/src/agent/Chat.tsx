// The conversation: messages and cards, page-aware suggestions when empty, and the composer.
import { forwardRef, useCallback, useEffect, useLayoutEffect, useRef, useState, type KeyboardEvent } from "react";
import { useI18n, type MessageKey } from "../i18n";
import { usePathname } from "../router";
import { useAgent } from "./AgentProvider";
import { ConfirmCard, ErrorBanner, PickerCard, ToolCard } from "./Cards";
import { Markdown } from "./Markdown";
import { SendIcon, SparkIcon } from "./icons";
import { useSmoothText } from "./smooth";
import type { Item } from "./types";

const PAGES = ["members", "schedule", "programs", "tasks", "analytics"] as const;

function pageOf(pathname: string): (typeof PAGES)[number] | "default" {
  const first = pathname.split("/").filter(Boolean)[0] ?? "";
  return (PAGES as readonly string[]).includes(first) ? (first as (typeof PAGES)[number]) : "default";
}

function Suggestions() {
  const { t } = useI18n();
  const { send } = useAgent();
  const page = pageOf(usePathname());
  return (
    <div className="agent-empty">
      <div className="agent-empty-mark" aria-hidden="true"><SparkIcon size={28} /></div>
      <h3>{t("agent.emptyTitle")}</h3>
      <p className="muted">{t("agent.emptyBody")}</p>
      <h4 className="agent-section-label">{t("agent.suggestions")}</h4>
      <ul className="agent-suggestions">
        {[1, 2, 3].map((n) => {
          const text = t(`agent.prompts.${page}.${n}` as MessageKey);
          return (
            <li key={n}>
              <button type="button" className="agent-suggestion" onClick={() => send(text)} dir="auto">{text}</button>
            </li>
          );
        })}
      </ul>
    </div>
  );
}

function AssistantMessage({ item, onGrow }: { item: Extract<Item, { kind: "assistant" }>; onGrow: () => void }) {
  const text = useSmoothText(item.text, item.streaming);
  // The text grows between deltas too: the list follows each frame's growth, not only each delta.
  useLayoutEffect(onGrow, [text, onGrow]);
  return (
    <div className={`agent-msg assistant${item.streaming ? " streaming" : ""}`} dir="auto">
      <Markdown text={text} />
    </div>
  );
}

export function MessageList() {
  const { t } = useI18n();
  const { state } = useAgent();
  const scroller = useRef<HTMLDivElement>(null);
  const pinned = useRef(true);
  // Follow the stream while the reader is at the bottom; leave them be when they scrolled up.
  const follow = useCallback(() => {
    const el = scroller.current;
    if (el && pinned.current) el.scrollTop = el.scrollHeight;
  }, []);
  useLayoutEffect(follow, [state.items, state.running, state.reconnecting, follow]);
  const onScroll = () => {
    const el = scroller.current;
    if (el) pinned.current = el.scrollHeight - el.scrollTop - el.clientHeight < 48;
  };
  const last = state.items[state.items.length - 1];
  const waiting = state.running && !(last?.kind === "assistant" && last.streaming);
  return (
    <div className="agent-messages" ref={scroller} onScroll={onScroll} role="log" aria-busy={state.running} aria-label={t("agent.title")}>
      {state.loading && <p className="muted agent-note">{t("agent.loading")}</p>}
      {!state.loading && state.items.length === 0 && !state.running && <Suggestions />}
      {state.items.map((item) => {
        switch (item.kind) {
          case "user":
            return <div key={item.key} className="agent-msg user"><span className="visually-hidden">{t("agent.you")}: </span><div dir="auto">{item.text}</div></div>;
          case "assistant":
            return <AssistantMessage key={item.key} item={item} onGrow={follow} />;
          case "tool":
            return <ToolCard key={item.key} item={item} />;
          case "confirm":
            return <ConfirmCard key={item.key} item={item} />;
          case "picker":
            return <PickerCard key={item.key} item={item} />;
          case "error":
            return <ErrorBanner key={item.key} item={item} />;
        }
      })}
      {state.reconnecting && <p className="agent-note agent-reconnecting" role="status">{t("agent.reconnecting")}</p>}
      {waiting && !state.reconnecting && (
        <p className="agent-note agent-working" role="status">
          <span className="agent-dots" aria-hidden="true"><i /><i /><i /></span>
          {t("agent.working")}
        </p>
      )}
    </div>
  );
}

export const Composer = forwardRef<HTMLTextAreaElement>(function Composer(_props, ref) {
  const { t } = useI18n();
  const { state, send, cancel, stopping } = useAgent();
  const [text, setText] = useState("");
  const inner = useRef<HTMLTextAreaElement | null>(null);
  const busy = state.running || state.loading;
  useEffect(() => {
    const el = inner.current;
    if (!el) return;
    el.style.height = "auto";
    el.style.height = `${Math.min(el.scrollHeight, 160)}px`;
  }, [text]);
  // Focus comes back to the box when a turn ends, so the next question can be typed at once.
  const wasBusy = useRef(busy);
  useEffect(() => {
    if (wasBusy.current && !busy && inner.current && inner.current.closest("[data-open='true']")) {
      const active = document.activeElement;
      if (!active || active === document.body || inner.current.closest("[data-testid='agent-sheet']")?.contains(active)) inner.current.focus();
    }
    wasBusy.current = busy;
  }, [busy]);
  const submit = () => {
    if (busy || !text.trim()) return;
    send(text);
    setText("");
  };
  const onKeyDown = (e: KeyboardEvent<HTMLTextAreaElement>) => {
    if (e.key === "Enter" && !e.shiftKey && !e.nativeEvent.isComposing) {
      e.preventDefault();
      submit();
    }
  };
  return (
    <form className="agent-composer" onSubmit={(e) => (e.preventDefault(), submit())}>
      <textarea
        ref={(el) => {
          inner.current = el;
          if (typeof ref === "function") ref(el);
          else if (ref) ref.current = el;
        }}
        aria-label={t("agent.composer")}
        aria-describedby="agent-composer-hint"
        placeholder={t("agent.composerPlaceholder")}
        rows={1}
        value={text}
        disabled={busy}
        onChange={(e) => setText(e.target.value)}
        onKeyDown={onKeyDown}
      />
      {state.running ? (
        <button type="button" className="agent-stop" onClick={cancel} disabled={stopping} aria-label={t("agent.stop")} title={stopping ? t("agent.stopping") : t("agent.stop")}>
          <span className="agent-stop-square" aria-hidden="true" />
        </button>
      ) : (
        <button type="submit" className="primary agent-send" disabled={busy || !text.trim()} aria-label={t("agent.send")} title={t("agent.send")}>
          <SendIcon />
        </button>
      )}
      <span id="agent-composer-hint" className="agent-hint">{t("agent.composerHint")}</span>
    </form>
  );
});
