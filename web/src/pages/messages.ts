import type { Dictionaries } from "../i18n";
const en = { "pages.placeholder": "…" };
export const pageMessages: Dictionaries<keyof typeof en> = { en, he: { "pages.placeholder": "…" }, ru: { "pages.placeholder": "…" } };
