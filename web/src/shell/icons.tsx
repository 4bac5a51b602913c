// Small inline icons (24×24 stroke paths), decorative: the text next to them names the thing.
import type { ReactNode } from "react";

function Icon({ children, size = 18 }: { children: ReactNode; size?: number }) {
  return (
    <svg className="icon" width={size} height={size} viewBox="0 0 24 24" fill="none" stroke="currentColor"
      strokeWidth={1.8} strokeLinecap="round" strokeLinejoin="round" aria-hidden="true" focusable="false">
      {children}
    </svg>
  );
}

export const MembersIcon = () => (
  <Icon><circle cx="9" cy="8" r="3.5" /><path d="M2.5 20c0-3.6 2.9-6 6.5-6s6.5 2.4 6.5 6" /><path d="M16 4.6a3.5 3.5 0 0 1 0 6.8M18 14.3c2.1.7 3.5 2.8 3.5 5.7" /></Icon>
);
export const ScheduleIcon = () => (
  <Icon><rect x="3" y="4.5" width="18" height="16" rx="2.5" /><path d="M3 9.5h18M8 2.5v4M16 2.5v4" /><path d="M7.5 13.5h3M13.5 13.5h3M7.5 17h3" /></Icon>
);
export const ProgramsIcon = () => (
  <Icon><path d="M6.5 8v8M17.5 8v8M3.5 10v4M20.5 10v4M6.5 12h11" /></Icon>
);
export const TasksIcon = () => (
  <Icon><rect x="3.5" y="3.5" width="17" height="17" rx="3" /><path d="m8 12 2.8 2.8L16.5 9" /></Icon>
);
export const AnalyticsIcon = () => (
  <Icon><path d="M4 20V10M10 20V4M16 20v-7M21 20H3" /></Icon>
);
export const CoachIcon = () => (
  <Icon><path d="M5.5 4h13A2.5 2.5 0 0 1 21 6.5v8a2.5 2.5 0 0 1-2.5 2.5H11l-4.5 3.5V17h-1A2.5 2.5 0 0 1 3 14.5v-8A2.5 2.5 0 0 1 5.5 4Z" /><path d="M8.5 10.5h7M7 9v3M17 9v3" /></Icon>
);
export const SignOutIcon = () => (
  <Icon size={16}><path d="M14 4h3.5A2.5 2.5 0 0 1 20 6.5v11a2.5 2.5 0 0 1-2.5 2.5H14" /><path d="M10 16.5 5.5 12 10 7.5M5.5 12H15" /></Icon>
);
export const GlobeIcon = () => (
  <Icon size={16}><circle cx="12" cy="12" r="9" /><path d="M3 12h18M12 3c2.5 2.6 3.7 5.6 3.7 9s-1.2 6.4-3.7 9c-2.5-2.6-3.7-5.6-3.7-9S9.5 5.6 12 3Z" /></Icon>
);
export function Logo({ size = 28 }: { size?: number }) {
  return (
    <svg className="logo" width={size} height={size} viewBox="0 0 32 32" aria-hidden="true" focusable="false">
      <rect width="32" height="32" rx="8" fill="var(--accent)" />
      <path d="M21 11.2c-.9-1.6-2.7-2.5-4.9-2.5-3 0-5.1 1.6-5.1 3.9 0 5 9.6 2.8 9.6 7.6 0 2.2-2.1 3.9-5.1 3.9-2.4 0-4.3-1-5.2-2.8"
        fill="none" stroke="#fff" strokeWidth="2.6" strokeLinecap="round" />
    </svg>
  );
}
export const TargetIcon = () => (
  <Icon size={16}><circle cx="12" cy="12" r="8.5" /><circle cx="12" cy="12" r="4.5" /><circle cx="12" cy="12" r="0.8" /></Icon>
);
export const StopIcon = () => (
  <Icon size={14}><rect x="6" y="6" width="12" height="12" rx="2" /></Icon>
);
