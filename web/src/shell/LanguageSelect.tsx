// The language selector, on the sign-in card and in the shell's header.
import { useId } from "react";
import { LOCALES, LOCALE_NAMES, useI18n, type Locale } from "../i18n";
import { GlobeIcon } from "./icons";

export function LanguageSelect() {
  const { t, locale, setLocale } = useI18n();
  const id = useId();
  return (
    <div className="lang-select">
      <label htmlFor={id} className="lang-label">
        <GlobeIcon />
        <span className="visually-hidden">{t("shell.language")}</span>
      </label>
      <select id={id} aria-label={t("shell.language")} value={locale} onChange={(e) => setLocale(e.target.value as Locale)}>
        {LOCALES.map((l) => (
          <option key={l} value={l} lang={l}>{LOCALE_NAMES[l]}</option>
        ))}
      </select>
    </div>
  );
}
