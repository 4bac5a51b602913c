import type { Dictionaries } from "../i18n";
const en = { "shell.placeholder": "…" };
export const shellMessages: Dictionaries<keyof typeof en> = { en, he: { "shell.placeholder": "…" }, ru: { "shell.placeholder": "…" } };
