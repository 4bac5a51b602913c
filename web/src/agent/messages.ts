import type { Dictionaries } from "../i18n";
const en = { "agent.placeholder": "…" };
export const agentMessages: Dictionaries<keyof typeof en> = { en, he: { "agent.placeholder": "…" }, ru: { "agent.placeholder": "…" } };
