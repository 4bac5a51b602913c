// A workout the coach built: its exercises in order (groups boxed), each with its prescription,
// main muscles, Swap and Adjust; Log workout at the foot. Every button talks to the coach by
// sending a message, so the chat shows what the member asked for.
import { useEffect, useId, useRef, useState, type KeyboardEvent } from "react";
import { useI18n, type MessageKey } from "../i18n";
import { GROUP_TYPES, mainMuscles, muscleName, plural, prescription, SEP } from "./format";
import type { Artifact, Exercise } from "./types";

type Props = {
  artifact: Artifact;
  /** The workout Swap/Adjust/Log act on; an earlier one is shown read-only. */
  current: boolean;
  logged: boolean;
  busy: boolean;
  onSend: (text: string) => void;
};

type Segment = { key: string; group: Exercise["group"]; exercises: Exercise[] };

/** Consecutive exercises of one group make one box; the rest stand alone. */
function segments(exercises: Exercise[]): Segment[] {
  const out: Segment[] = [];
  for (const ex of [...exercises].sort((a, b) => a.order - b.order)) {
    const last = out[out.length - 1];
    if (ex.group?.id && last?.group?.id === ex.group.id) last.exercises.push(ex);
    else out.push({ key: ex.group?.id ? `g:${ex.group.id}:${ex.id}` : ex.id, group: ex.group?.id ? ex.group : null, exercises: [ex] });
  }
  return out;
}

export function WorkoutCard({ artifact, current, logged, busy, onSend }: Props) {
  const { t, locale, formatNumber } = useI18n();
  const headingId = useId();
  const payload = artifact.payload;
  const title = payload.title || artifact.title;
  const exercises = payload.exercises ?? [];
  const duration = payload.estimated_duration_min ?? artifact.summary?.estimated_duration_min ?? null;
  const num = (n: number) => formatNumber(n, { maximumFractionDigits: 2 });
  const meta = [
    typeof duration === "number" ? t("coach.rx.minutes", { n: num(duration) }) : null,
    plural(t, locale, "coach.workout.exercises", exercises.length, num),
  ].filter(Boolean).join(SEP);
  const locked = !current || logged || busy;

  return (
    <article className={`coach-workout${logged ? " logged" : ""}${current ? "" : " earlier"}`} data-testid="workout-card"
      data-artifact-id={artifact.artifact_id} data-logged={logged ? "true" : "false"} aria-labelledby={headingId}>
      <header className="coach-workout-head">
        <div className="coach-workout-heading">
          <h3 id={headingId}><bdi>{title}</bdi></h3>
          <p className="coach-workout-meta">{meta}</p>
        </div>
        {logged ? (
          <span className="badge ok coach-logged" role="status">{t("coach.workout.logged")}</span>
        ) : !current ? (
          <span className="badge">{t("coach.workout.earlier")}</span>
        ) : null}
      </header>
      {payload.description && <p className="coach-workout-desc"><bdi>{payload.description}</bdi></p>}
      <ol className="coach-exercises">
        {segments(exercises).map((seg) =>
          seg.group ? (
            <li key={seg.key} className="coach-group-item">
              <GroupBox segment={seg} locked={locked} onSend={onSend} />
            </li>
          ) : (
            <ExerciseRow key={seg.key} ex={seg.exercises[0]} locked={locked} onSend={onSend} />
          ),
        )}
      </ol>
      <footer className="coach-workout-foot">
        <button type="button" className="primary" disabled={locked} onClick={() => onSend(t("coach.send.log"))}>
          {t("coach.workout.log")}
        </button>
      </footer>
    </article>
  );
}

function GroupBox({ segment, locked, onSend }: { segment: Segment; locked: boolean; onSend: (text: string) => void }) {
  const { t, locale, formatNumber } = useI18n();
  const labelId = useId();
  const group = segment.group!;
  const num = (n: number) => formatNumber(n);
  // The name, rounds and rest are written on the group's first exercise.
  const lead = segment.exercises.find((e) => e.group?.name || e.group?.rounds || e.group?.rest_between_rounds_sec)?.group ?? group;
  const kind = (GROUP_TYPES as readonly string[]).includes(group.type) ? t(`coach.group.${group.type}` as MessageKey) : group.type;
  const details = [
    typeof lead.rounds === "number" && lead.rounds > 0 ? plural(t, locale, "coach.rx.rounds", lead.rounds, num) : null,
    typeof lead.rest_between_rounds_sec === "number" && lead.rest_between_rounds_sec > 0 ? t("coach.group.rest", { n: num(lead.rest_between_rounds_sec) }) : null,
  ].filter(Boolean).join(SEP);
  return (
    <div role="group" className={`coach-group ${group.type}`} aria-labelledby={labelId} data-group-type={group.type}>
      <p className="coach-group-label" id={labelId}>
        <span className="coach-group-kind">{kind}</span>
        {lead.name && lead.name.toLowerCase() !== kind.toLowerCase() && <bdi className="coach-group-name">{lead.name}</bdi>}
        {details && <span className="coach-group-details">{details}</span>}
      </p>
      <ol className="coach-exercises">
        {segment.exercises.map((ex) => <ExerciseRow key={ex.id} ex={ex} locked={locked} onSend={onSend} />)}
      </ol>
    </div>
  );
}

function ExerciseRow({ ex, locked, onSend }: { ex: Exercise; locked: boolean; onSend: (text: string) => void }) {
  const { t, locale, formatNumber } = useI18n();
  const [adjusting, setAdjusting] = useState(false);
  const [text, setText] = useState("");
  const input = useRef<HTMLInputElement>(null);
  const adjustButton = useRef<HTMLButtonElement>(null);
  const fieldId = useId();
  const name = ex.exercise_name;
  const rx = prescription(ex, t, locale, (n) => formatNumber(n, { maximumFractionDigits: 2 }));
  const muscles = mainMuscles(ex);

  useEffect(() => {
    if (adjusting) input.current?.focus();
  }, [adjusting]);
  useEffect(() => {
    if (locked) setAdjusting(false);
  }, [locked]);

  const close = () => {
    setAdjusting(false);
    setText("");
    adjustButton.current?.focus();
  };
  const submit = () => {
    const change = text.trim();
    if (!change || locked) return;
    setAdjusting(false);
    setText("");
    onSend(t("coach.send.adjust", { order: ex.order, name, text: change }));
  };
  const onKeyDown = (e: KeyboardEvent<HTMLFormElement>) => {
    if (e.key === "Escape") {
      e.preventDefault();
      close();
    }
  };

  return (
    <li className="coach-exercise" data-exercise-id={ex.id}>
      <div className="coach-exercise-row">
        <span className="coach-exercise-order" aria-hidden="true">{formatNumber(ex.order)}</span>
        <div className="coach-exercise-body">
          <h4 className="coach-exercise-name"><bdi>{name}</bdi></h4>
          {rx && <p className="coach-exercise-rx">{rx}</p>}
          {muscles.length > 0 && (
            <ul className="coach-muscles" aria-label={t("coach.workout.muscles")}>
              {muscles.map((m) => <li key={m} className="coach-muscle">{muscleName(t, m)}</li>)}
            </ul>
          )}
          {ex.reasoning && (
            <details className="coach-why">
              <summary>{t("coach.workout.why")}</summary>
              <p><bdi>{ex.reasoning}</bdi></p>
            </details>
          )}
        </div>
        <div className="coach-exercise-actions">
          <button type="button" className="coach-small" disabled={locked} aria-label={t("coach.workout.swapLabel", { name })}
            onClick={() => onSend(t("coach.send.swap", { order: ex.order, name }))}>
            {t("coach.workout.swap")}
          </button>
          <button type="button" className="coach-small" ref={adjustButton} disabled={locked} aria-expanded={adjusting}
            aria-label={t("coach.workout.adjustLabel", { name })} onClick={() => (adjusting ? close() : setAdjusting(true))}>
            {t("coach.workout.adjust")}
          </button>
        </div>
      </div>
      {adjusting && !locked && (
        <form className="coach-adjust" onSubmit={(e) => (e.preventDefault(), submit())} onKeyDown={onKeyDown}>
          <label htmlFor={fieldId} className="visually-hidden">{t("coach.workout.adjustField", { name })}</label>
          <input id={fieldId} ref={input} type="text" value={text} dir="auto" autoComplete="off"
            placeholder={t("coach.workout.adjustPlaceholder")} onChange={(e) => setText(e.target.value)} />
          <button type="submit" className="primary coach-small" disabled={!text.trim()}>{t("coach.workout.adjustSend")}</button>
          <button type="button" className="ghost coach-small" onClick={close}>{t("coach.workout.adjustCancel")}</button>
        </form>
      )}
    </li>
  );
}
