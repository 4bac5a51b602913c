// Cmd/Ctrl+M while working on a task: a quick note ("called Dana, she takes Tuesday") saved into
// the running session. Never while typing (inputs, textareas, selects, editable text), never with
// Shift or Alt, and not at all when no task is running: then the browser keeps the shortcut.
import { useEffect, useId, useRef, useState, type FormEvent } from "react";
import { ApiError } from "../api";
import { useI18n } from "../i18n";
import { useActivity } from "./ActivityProvider";

function typing(target: EventTarget | null): boolean {
  const el = target instanceof HTMLElement ? target : null;
  if (!el) return false;
  return el.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(el.tagName) || Boolean(el.closest("[contenteditable=''], [contenteditable='true']"));
}

export function useMarkerShortcut(): void {
  const activity = useActivity();
  const running = Boolean(activity?.session);
  const open = activity?.setMarkerOpen;
  useEffect(() => {
    if (!running || !open) return;
    const onKey = (e: KeyboardEvent) => {
      if (e.key.toLowerCase() !== "m" || !(e.metaKey || e.ctrlKey) || e.shiftKey || e.altKey) return;
      if (typing(e.target) || typing(document.activeElement)) return;
      e.preventDefault();
      open(true);
    };
    document.addEventListener("keydown", onKey);
    return () => document.removeEventListener("keydown", onKey);
  }, [running, open]);
}

export function MarkerDialog() {
  const activity = useActivity();
  useMarkerShortcut();
  if (!activity?.markerOpen || !activity.session) return null;
  return <MarkerForm />;
}

function MarkerForm() {
  const activity = useActivity()!;
  const { t } = useI18n();
  const [text, setText] = useState("");
  const [saving, setSaving] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const titleId = useId();
  const returnTo = useRef<Element | null>(document.activeElement);

  const close = () => {
    activity.setMarkerOpen(false);
    if (returnTo.current instanceof HTMLElement) returnTo.current.focus();
  };

  const submit = async (e?: FormEvent) => {
    e?.preventDefault();
    const note = text.trim();
    if (!note || saving) return;
    setSaving(true);
    setError(null);
    try {
      await activity.mark(note);
      close();
    } catch (err) {
      setError(err instanceof ApiError ? err.message : String(err));
      setSaving(false);
    }
  };

  return (
    <div className="marker-backdrop" onMouseDown={(e) => e.target === e.currentTarget && close()}>
      <form className="marker-dialog" role="dialog" aria-modal="true" aria-labelledby={titleId} onSubmit={submit}
        onKeyDown={(e) => {
          if (e.key === "Escape") {
            e.preventDefault();
            close();
          } else if (e.key === "Enter" && !e.shiftKey) {
            e.preventDefault();
            void submit();
          }
        }}>
        <h2 id={titleId}>{t("activity.marker.title")}</h2>
        <p className="muted">{t("activity.marker.hint", { task: activity.task?.title ?? activity.session?.title ?? "" })}</p>
        <textarea autoFocus rows={3} maxLength={1000} value={text} aria-label={t("activity.marker.label")}
          placeholder={t("activity.marker.placeholder")} onChange={(e) => setText(e.target.value)} dir="auto" />
        {error && <p className="error-text" role="alert">{error}</p>}
        <div className="marker-actions">
          <button type="button" onClick={close}>{t("activity.marker.cancel")}</button>
          <button type="submit" className="primary" disabled={!text.trim() || saving}>{t("activity.marker.save")}</button>
        </div>
      </form>
    </div>
  );
}
