// The studio app: sign-in, then the shell with its pages, and Spotter mounted beside the routes so
// a running stream survives navigation (seed 000's agent-sheet-mount).
import { I18nProvider } from "./i18n";
import { SessionProvider, useSession } from "./session";
import { StudioEventsProvider } from "./studio-events";
import { Shell } from "./shell/Shell";
import { SignIn } from "./shell/SignIn";
import { Routes } from "./pages/Routes";
import { AgentRoot } from "./agent/AgentRoot";
import { ActivityProvider } from "./activity/ActivityProvider";
import { MarkerDialog } from "./activity/MarkerDialog";

function Signed() {
  const { token, me, membership, loading } = useSession();
  if (!token || (!loading && !me)) return <SignIn />;
  if (!me || !membership) return <SignIn />;
  return (
    <StudioEventsProvider key={membership.organizationId}>
      <ActivityProvider>
        <Shell>
          <Routes />
        </Shell>
        <AgentRoot />
        <MarkerDialog />
      </ActivityProvider>
    </StudioEventsProvider>
  );
}

export function App() {
  return (
    <I18nProvider>
      <SessionProvider>
        <Signed />
      </SessionProvider>
    </I18nProvider>
  );
}
