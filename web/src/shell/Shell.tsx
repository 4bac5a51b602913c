// The studio shell: a sidebar (a top bar with a tab strip on phones) with the pages, the studio and
// the signed-in user; a header with where you are and the language; the page in <main id="main">.
import { createContext, useContext, useEffect, useId, useRef, useState, type ReactNode } from "react";
import { useI18n, type MessageKey } from "../i18n";
import { Link, matchPath, usePathname } from "../router";
import { useSession } from "../session";
import { LanguageSelect } from "./LanguageSelect";
import { WorkingOn } from "../activity/WorkingOn";
import "../activity/activity.css";
import { AnalyticsIcon, CoachIcon, Logo, MembersIcon, ProgramsIcon, ScheduleIcon, SignOutIcon, TasksIcon } from "./icons";
import { initials } from "./SignIn";
import "./shell.css";

type NavItem = { to: string; label: MessageKey; icon: () => ReactNode; staffOnly: boolean; memberOnly?: boolean };
export const NAV: NavItem[] = [
  { to: "/members", label: "shell.nav.members", icon: MembersIcon, staffOnly: true },
  { to: "/schedule", label: "shell.nav.schedule", icon: ScheduleIcon, staffOnly: false },
  { to: "/programs", label: "shell.nav.programs", icon: ProgramsIcon, staffOnly: false },
  { to: "/tasks", label: "shell.nav.tasks", icon: TasksIcon, staffOnly: true },
  { to: "/analytics", label: "shell.nav.analytics", icon: AnalyticsIcon, staffOnly: true },
  { to: "/coach", label: "coach.nav", icon: CoachIcon, staffOnly: false, memberOnly: true },
];

const TitleContext = createContext<(title: string | null) => void>(() => {});

/** A detail page names what it shows (a member's name, a program); the header's breadcrumb and the
 * document title use it. */
export function usePageTitle(title: string | null): void {
  const set = useContext(TitleContext);
  useEffect(() => {
    set(title);
    return () => set(null);
  }, [set, title]);
}

function sectionOf(pathname: string): NavItem | undefined {
  return NAV.find((n) => pathname === n.to || pathname.startsWith(n.to + "/"));
}

function StudioSwitcher() {
  const { t } = useI18n();
  const { me, membership, switchOrganization } = useSession();
  const id = useId();
  const active = me?.memberships.filter((m) => m.status === "active") ?? [];
  if (!membership) return null;
  if (active.length < 2) {
    return <span className="studio-name" dir="auto" title={membership.organizationName}>{membership.organizationName}</span>;
  }
  return (
    <div className="studio-switch">
      <label htmlFor={id} className="visually-hidden">{t("shell.switchStudio")}</label>
      <select id={id} value={membership.organizationId} onChange={(e) => switchOrganization(e.target.value)}>
        {active.map((m) => (
          <option key={m.organizationId} value={m.organizationId}>{m.organizationName}</option>
        ))}
      </select>
    </div>
  );
}

export function Shell({ children }: { children: ReactNode }) {
  const { t } = useI18n();
  const { me, membership, isStaff, signOut } = useSession();
  const [pageTitle, setPageTitle] = useState<string | null>(null);
  const pathname = usePathname();
  const mainRef = useRef<HTMLElement>(null);
  const first = useRef(true);
  const items = NAV.filter((n) => (isStaff ? !n.memberOnly : !n.staffOnly));
  const section = sectionOf(pathname);
  const detail = section && pathname !== section.to && matchPath(`${section.to}/:id`, pathname);

  // A new page: back to the top, and focus on the page (unless the user is typing to Spotter).
  useEffect(() => {
    if (first.current) {
      first.current = false;
      return;
    }
    window.scrollTo(0, 0);
    const active = document.activeElement;
    const inShell = !active || active === document.body || Boolean(active.closest(".app-shell"));
    if (inShell) mainRef.current?.focus({ preventScroll: true });
  }, [pathname]);

  const sectionTitle = section ? t(section.label) : null;
  useEffect(() => {
    document.title = [pageTitle, sectionTitle, "Spotter"].filter(Boolean).join(" · ");
  }, [pageTitle, sectionTitle]);

  const name = me?.user.fullName ?? "";
  return (
    <div className="app-shell">
      <a className="skip-link" href="#main">{t("shell.skipToContent")}</a>
      <aside className="sidebar">
        <div className="sidebar-brand">
          <Logo />
          <div className="sidebar-studio">
            <span className="sidebar-product">Spotter</span>
            <StudioSwitcher />
          </div>
        </div>
        <WorkingOn />
        <nav className="sidebar-nav" aria-label={t("shell.nav")}>
          <ul>
            {items.map((item) => {
              const current = section?.to === item.to;
              return (
                <li key={item.to}>
                  <Link to={item.to} className="nav-link" aria-current={current ? "page" : undefined}>
                    <item.icon />
                    <span>{t(item.label)}</span>
                  </Link>
                </li>
              );
            })}
          </ul>
        </nav>
        <div className="sidebar-user">
          <span className="avatar" aria-hidden="true">{initials(name)}</span>
          <span className="sidebar-user-text">
            <span className="sidebar-user-name" dir="auto" title={t("shell.signedInAs", { name })}>{name}</span>
            {membership && <span className="sidebar-user-role">{t(`shell.role.${membership.role}` as MessageKey)}</span>}
          </span>
          <button type="button" className="ghost signout" onClick={signOut} title={t("shell.signOut")}>
            <SignOutIcon />
            <span className="signout-text">{t("shell.signOut")}</span>
          </button>
        </div>
      </aside>
      <div className="shell-body">
        <header className="topbar">
          <div className="topbar-title">
            {section ? (
              detail ? (
                <>
                  <Link to={section.to} className="crumb-link">{t(section.label)}</Link>
                  <span className="crumb-sep" aria-hidden="true">/</span>
                  <span className="crumb-current">{pageTitle ?? "…"}</span>
                </>
              ) : (
                <span className="crumb-current">{t(section.label)}</span>
              )
            ) : (
              <span className="crumb-current">Spotter</span>
            )}
          </div>
          <LanguageSelect />
        </header>
        <main id="main" ref={mainRef} tabIndex={-1} className="page-main">
          <TitleContext.Provider value={setPageTitle}>{children}</TitleContext.Provider>
        </main>
      </div>
    </div>
  );
}
