// Three languages for every string. Each area of the app (shell, pages, agent) keeps its own
// dictionaries next to its code; English is the type, so a key missing in Hebrew or Russian is a
// type error at build time, not a blank button at run time.
import { createContext, useCallback, useContext, useEffect, useMemo, useState, type ReactNode } from "react";
import { configureApi } from "./api";
import { shellMessages } from "./shell/messages";
import { pageMessages } from "./pages/messages";
import { agentMessages } from "./agent/messages";
import { activityMessages } from "./activity/messages";
import { coachMessages } from "./coach/messages";

export const LOCALES = ["en", "he", "ru"] as const;
export type Locale = (typeof LOCALES)[number];
export const LOCALE_NAMES: Record<Locale, string> = { en: "English", he: "עברית", ru: "Русский" };
export const RTL: ReadonlySet<Locale> = new Set<Locale>(["he"]);

/** One area's strings: English defines the keys; the others must have every one of them. */
export type Dictionaries<K extends string> = { en: Record<K, string>; he: Record<K, string>; ru: Record<K, string> };

const ALL = [shellMessages, pageMessages, agentMessages, activityMessages, coachMessages];
const merged: Record<Locale, Record<string, string>> = {
  en: Object.assign({}, ...ALL.map((d) => d.en)),
  he: Object.assign({}, ...ALL.map((d) => d.he)),
  ru: Object.assign({}, ...ALL.map((d) => d.ru)),
};
export type MessageKey = keyof typeof shellMessages.en | keyof typeof pageMessages.en | keyof typeof agentMessages.en
  | keyof typeof activityMessages.en | keyof typeof coachMessages.en;

export type Translate = (key: MessageKey, params?: Record<string, string | number>) => string;

type I18n = { locale: Locale; dir: "ltr" | "rtl"; setLocale: (l: Locale) => void; t: Translate; formatNumber: (n: number, o?: Intl.NumberFormatOptions) => string; formatDate: (d: Date | string, o?: Intl.DateTimeFormatOptions) => string };
const I18nContext = createContext<I18n | null>(null);
const STORAGE_KEY = "spotter.locale";

export function initialLocale(): Locale {
  const stored = localStorage.getItem(STORAGE_KEY);
  if (stored && (LOCALES as readonly string[]).includes(stored)) return stored as Locale;
  const nav = (navigator.language || "en").slice(0, 2).toLowerCase();
  return (LOCALES as readonly string[]).includes(nav) ? (nav as Locale) : "en";
}

export function I18nProvider({ children }: { children: ReactNode }) {
  const [locale, setLocaleState] = useState<Locale>(initialLocale);
  const dir = RTL.has(locale) ? "rtl" : "ltr";
  // The document, the API's x-locale header and the stored choice follow the selector together.
  configureApi({ locale });
  useEffect(() => {
    document.documentElement.lang = locale;
    document.documentElement.dir = dir;
  }, [locale, dir]);
  const setLocale = useCallback((next: Locale) => {
    localStorage.setItem(STORAGE_KEY, next);
    setLocaleState(next);
  }, []);
  const value = useMemo<I18n>(() => {
    const t: Translate = (key, params) => {
      let text = merged[locale][key] ?? merged.en[key] ?? key;
      if (params) for (const [k, v] of Object.entries(params)) text = text.replaceAll(`{${k}}`, String(v));
      return text;
    };
    const formatNumber = (n: number, o?: Intl.NumberFormatOptions) => new Intl.NumberFormat(locale, o).format(n);
    const formatDate = (d: Date | string, o?: Intl.DateTimeFormatOptions) => new Intl.DateTimeFormat(locale, o).format(typeof d === "string" ? new Date(d) : d);
    return { locale, dir, setLocale, t, formatNumber, formatDate };
  }, [locale, dir, setLocale]);
  return <I18nContext.Provider value={value}>{children}</I18nContext.Provider>;
}

export function useI18n(): I18n {
  const value = useContext(I18nContext);
  if (!value) throw new Error("useI18n outside I18nProvider");
  return value;
}
