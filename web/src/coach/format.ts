// An exercise's prescription in words, by its type (seed 003 §6.4): "3 × 10, 10, 8 · 20 kg · rest 60 s",
// "3 × 30 s hold · rest 30 s", "20 min · 5 km · 5:30/km", "8 rounds · 20 s on / 10 s off".
import type { Locale, MessageKey, Translate } from "../i18n";
import type { Exercise, GroupType } from "./types";

type Num = (n: number) => string;

const SEP = " · ";

/** `{base}.one|few|many|other` for `n` in the locale; a form the dictionary lacks falls back to other. */
export function plural(t: Translate, locale: Locale, base: string, n: number, num: Num): string {
  const form = new Intl.PluralRules(locale).select(n);
  const key = `${base}.${form}` as MessageKey;
  const text = t(key, { n: num(n) });
  return text === key ? t(`${base}.other` as MessageKey, { n: num(n) }) : text;
}

/** A list of numbers, once when they are all the same ("10"), in full when not ("10, 10, 8"). */
function series(values: number[] | null | undefined, num: Num): string | null {
  const list = (values ?? []).filter((v) => typeof v === "number" && Number.isFinite(v));
  if (!list.length) return null;
  return list.every((v) => v === list[0]) ? num(list[0]) : list.map(num).join(", ");
}

function unit(t: Translate, name: string | null | undefined): string {
  if (!name) return "";
  const key = `coach.unit.${name.toLowerCase()}` as MessageKey;
  const text = t(key);
  return text === key ? name : text;
}

function rest(t: Translate, sec: number | null | undefined, num: Num): string | null {
  return typeof sec === "number" && sec > 0 ? t("coach.rx.rest", { n: num(sec) }) : null;
}

function sets(ex: Exercise, fallback: number): number {
  return typeof ex.sets === "number" && ex.sets > 0 ? ex.sets : fallback;
}

export function prescription(ex: Exercise, t: Translate, locale: Locale, num: Num): string {
  const parts: (string | null)[] = [];
  switch (ex.exercise_type) {
    case "reps": {
      const reps = series(ex.reps, num);
      if (reps) parts.push(t("coach.rx.sets", { sets: num(sets(ex, ex.reps?.length ?? 1)), reps }));
      if (ex.load_unit === "bodyweight") parts.push(t("coach.rx.bodyweight"));
      else {
        const load = series((ex.load_each ?? []).filter((v) => v > 0), num);
        if (load) parts.push(t("coach.rx.load", { load, unit: unit(t, ex.load_unit ?? "kg") }).trim());
      }
      parts.push(rest(t, ex.rest_sec, num));
      break;
    }
    case "hold": {
      const sec = series(ex.hold_sec, num);
      if (sec) parts.push(t("coach.rx.hold", { sets: num(sets(ex, ex.hold_sec?.length ?? 1)), sec }));
      parts.push(rest(t, ex.rest_sec, num));
      break;
    }
    case "duration": {
      if (typeof ex.duration_min === "number") parts.push(t("coach.rx.minutes", { n: num(ex.duration_min) }));
      if (typeof ex.distance === "number" && ex.distance > 0) {
        parts.push(t("coach.rx.distance", { n: num(ex.distance), unit: unit(t, ex.distance_unit) }).trim());
      }
      if (ex.target_pace) {
        const pace = ex.target_pace.trim();
        parts.push(pace.includes("/") || !ex.distance_unit ? pace : t("coach.rx.pace", { pace, unit: unit(t, ex.distance_unit) }));
      }
      break;
    }
    case "intervals": {
      if (typeof ex.rounds === "number") parts.push(plural(t, locale, "coach.rx.rounds", ex.rounds, num));
      if (typeof ex.work_sec === "number") {
        parts.push(t("coach.rx.onOff", { work: num(ex.work_sec), rest: num(ex.rest_sec ?? 0) }));
      }
      break;
    }
  }
  return parts.filter(Boolean).join(SEP);
}

/** The muscles that carry the exercise: the biggest shares, at most three. */
export function mainMuscles(ex: Exercise): string[] {
  const list = [...(ex.muscles_utilized ?? [])].filter((m) => m && m.muscle).sort((a, b) => (b.share ?? 0) - (a.share ?? 0));
  const main = list.filter((m, i) => i === 0 || (m.share ?? 0) >= 0.15);
  return main.slice(0, 3).map((m) => m.muscle);
}

export function muscleName(t: Translate, muscle: string): string {
  const key = `coach.muscle.${muscle.trim().toLowerCase().replace(/\s+/g, "_")}` as MessageKey;
  const text = t(key);
  return text === key ? muscle : text;
}

export const GROUP_TYPES: readonly GroupType[] = ["circuit", "superset", "giant_set", "warmup", "cooldown", "sequence"];

export { SEP };
