// Spotter's small inline icons (24×24 strokes), decorative: a visible or accessible name goes with each.
import type { ReactNode } from "react";

function Icon({ children, size = 18, className }: { children: ReactNode; size?: number; className?: string }) {
  return (
    <svg className={`agent-svg${className ? ` ${className}` : ""}`} width={size} height={size} viewBox="0 0 24 24" fill="none" stroke="currentColor"
      strokeWidth={1.9} strokeLinecap="round" strokeLinejoin="round" aria-hidden="true" focusable="false">
      {children}
    </svg>
  );
}

export const SparkIcon = ({ size = 18 }: { size?: number }) => (
  <Icon size={size}><path d="M12 3.5c.6 3.9 2.6 5.9 6.5 6.5-3.9.6-5.9 2.6-6.5 6.5-.6-3.9-2.6-5.9-6.5-6.5 3.9-.6 5.9-2.6 6.5-6.5Z" fill="currentColor" /><path d="M19 15.5c.3 1.6 1 2.3 2.5 2.5-1.5.2-2.2.9-2.5 2.5-.3-1.6-1-2.3-2.5-2.5 1.5-.2 2.2-.9 2.5-2.5Z" fill="currentColor" /></Icon>
);
export const PlusIcon = () => <Icon><path d="M12 5v14M5 12h14" /></Icon>;
export const HistoryIcon = () => <Icon><path d="M4 6h16M4 12h16M4 18h10" /></Icon>;
export const CloseIcon = () => <Icon><path d="M6 6l12 12M18 6 6 18" /></Icon>;
export const BackIcon = () => <Icon className="agent-flip"><path d="M15 5l-7 7 7 7" /></Icon>;
export const SendIcon = () => <Icon size={20}><path d="M12 19V5M6 11l6-6 6 6" /></Icon>;
export const PinIcon = ({ filled = false }: { filled?: boolean }) => (
  <Icon size={15}><path d="M9 4h6l-1 5 3 3v2H7v-2l3-3-1-5Z" fill={filled ? "currentColor" : "none"} /><path d="M12 14v6" /></Icon>
);
export const ArchiveIcon = () => <Icon size={15}><rect x="3.5" y="4.5" width="17" height="4" rx="1" /><path d="M5.5 8.5v10a1 1 0 0 0 1 1h11a1 1 0 0 0 1-1v-10M10 12.5h4" /></Icon>;
export const PauseIcon = () => <Icon size={28}><circle cx="12" cy="12" r="9" /><path d="M10 9v6M14 9v6" /></Icon>;
