// What the pages and Spotter tell each other, without knowing each other:
// - Spotter announces that a tool changed studio data; pages showing that data reload it.
// - Pages say what is selected; the composer sends it as the page context.
import { createContext, useContext, useMemo, useState, type ReactNode } from "react";

/** What a page has selected, sent to Spotter as `pageContext.selection`. */
export type Selection = { kind: string; id: string; label: string } | null;

/** A studio change Spotter made: the tool's router (e.g. "schedule", "tasks") and action. */
export type StudioChange = { router: string; action: string };

type StudioEvents = {
  /** Bumped on every change; pages list it in their effects' dependencies to reload. */
  version: number;
  lastChange: StudioChange | null;
  announceChange: (change: StudioChange) => void;
  selection: Selection;
  setSelection: (s: Selection) => void;
};

const Ctx = createContext<StudioEvents | null>(null);

export function StudioEventsProvider({ children }: { children: ReactNode }) {
  const [version, setVersion] = useState(0);
  const [lastChange, setLastChange] = useState<StudioChange | null>(null);
  const [selection, setSelection] = useState<Selection>(null);
  const value = useMemo<StudioEvents>(
    () => ({
      version, lastChange, selection, setSelection,
      announceChange: (change) => {
        setLastChange(change);
        setVersion((v) => v + 1);
      },
    }),
    [version, lastChange, selection],
  );
  return <Ctx.Provider value={value}>{children}</Ctx.Provider>;
}

export function useStudioEvents(): StudioEvents {
  const value = useContext(Ctx);
  if (!value) throw new Error("useStudioEvents outside StudioEventsProvider");
  return value;
}
