// Signed out: the development sign-in card (one button per demo user), or in production a note that
// sign-in goes through the studio's identity provider (which redirects to `/#access_token=<JWT>`).
import { useEffect, useId, useState } from "react";
import { ApiError, request } from "../api";
import { useI18n, type MessageKey } from "../i18n";
import { useSession } from "../session";
import { LanguageSelect } from "./LanguageSelect";
import { Logo } from "./icons";
import "./shell.css";

type DevUser = { userId: string; email: string; fullName: string; organizationName: string; role: string };

export function initials(name: string): string {
  const parts = name.trim().split(/\s+/).filter(Boolean);
  return ((parts[0]?.[0] ?? "") + (parts.length > 1 ? parts[parts.length - 1][0] : "")).toUpperCase() || "?";
}

export function ShellError({ error }: { error: ApiError }) {
  const { t } = useI18n();
  const known = ["network_error", "unauthorized", "forbidden", "not_found"];
  const key = (known.includes(error.code) ? `shell.error.${error.code}` : "shell.error.generic") as MessageKey;
  return (
    <div className="signin-alert" role="alert">
      <p>{t(key)}</p>
      {error.traceId && <p className="trace">{t("shell.trace", { id: error.traceId })}</p>}
    </div>
  );
}

function roleKey(role: string): MessageKey {
  return (["owner", "admin", "coach", "member"].includes(role) ? `shell.role.${role}` : "shell.role.member") as MessageKey;
}

function DevUsers() {
  const { t } = useI18n();
  const { signIn } = useSession();
  const [users, setUsers] = useState<DevUser[] | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [busy, setBusy] = useState<string | null>(null);
  const [filter, setFilter] = useState("");
  const filterId = useId();

  // A demo studio has hundreds of members: the filter asks the server (debounced), which searches
  // everyone, not just the first page it sent.
  useEffect(() => {
    const ctrl = new AbortController();
    const q = filter.trim();
    const timer = window.setTimeout(() => {
      request<{ users: DevUser[] }>(q ? `/dev/users?q=${encodeURIComponent(q)}` : "/dev/users", { signal: ctrl.signal })
        .then((r) => setUsers(r.users))
        .catch((e) => {
          if ((e as Error).name !== "AbortError") setError(e instanceof ApiError ? e : new ApiError(0, "network_error", String(e), null));
        });
    }, q ? 250 : 0);
    return () => {
      window.clearTimeout(timer);
      ctrl.abort();
    };
  }, [filter]);

  const choose = async (user: DevUser) => {
    setBusy(user.email);
    setError(null);
    try {
      const r = await request<{ token: string }>("/dev/sign-in", { method: "POST", body: { email: user.email } });
      signIn(r.token);
    } catch (e) {
      setError(e instanceof ApiError ? e : new ApiError(0, "network_error", String(e), null));
      setBusy(null);
    }
  };

  if (error?.status === 403) {
    return (
      <div className="signin-idp" data-testid="signin-production">
        <p className="signin-idp-title">{t("shell.signIn.production")}</p>
        <p className="muted">{t("shell.signIn.productionHint")}</p>
      </div>
    );
  }
  return (
    <>
      <p className="muted signin-subtitle">{t("shell.signIn.subtitle")}</p>
      {error && <ShellError error={error} />}
      {!users && !error && <p className="signin-loading" role="status"><span className="spinner" aria-hidden="true" />{t("shell.signIn.loadingUsers")}</p>}
      {users && users.length === 0 && <p className="muted">{t("shell.signIn.noUsers")}</p>}
      {users && (users.length > 8 || filter !== "") && (
        <div className="signin-filter">
          <label htmlFor={filterId} className="visually-hidden">{t("shell.signIn.filter")}</label>
          <input id={filterId} type="search" value={filter} onChange={(e) => setFilter(e.target.value)}
            placeholder={t("shell.signIn.filter")} autoComplete="off" spellCheck={false} />
        </div>
      )}
      {users && users.length > 0 && (() => {
        const q = filter.trim().toLowerCase();
        const shown = users.filter((u) => !q || `${u.fullName} ${u.email} ${u.organizationName}`.toLowerCase().includes(q));
        const groups: [MessageKey, DevUser[]][] = [
          ["shell.signIn.staff", shown.filter((u) => u.role !== "member")],
          ["shell.signIn.members", shown.filter((u) => u.role === "member")],
        ];
        if (shown.length === 0) return <p className="muted">{t("shell.signIn.noMatch")}</p>;
        return groups.filter(([, list]) => list.length > 0).map(([label, list]) => (
          <section key={label} className="signin-group" aria-label={t(label)}>
            <h2 className="signin-group-title">{t(label)}</h2>
            <ul className="signin-users">
              {list.map((u) => (
                <li key={`${u.userId}-${u.organizationName}`}>
                  <button type="button" className="signin-user" onClick={() => choose(u)} disabled={busy !== null}
                    aria-busy={busy === u.email} data-testid="dev-user">
                    <span className="avatar" aria-hidden="true">{initials(u.fullName)}</span>
                    <span className="signin-user-text">
                      <span className="signin-user-name">{u.fullName}</span>
                      <span className="signin-user-email">{u.email}</span>
                    </span>
                    <span className="signin-user-meta">
                      <span className="signin-user-org">{u.organizationName}</span>
                      <span className={`badge role-${u.role}`}>{t(roleKey(u.role))}</span>
                    </span>
                  </button>
                </li>
              ))}
            </ul>
          </section>
        ));
      })()}
      {busy && <p className="visually-hidden" role="status">{t("shell.signIn.signingIn")}</p>}
    </>
  );
}

export function SignIn() {
  const { t } = useI18n();
  const { token, me, loading, error, signOut } = useSession();

  if (token && loading) {
    return (
      <div className="signin-page">
        <main id="main" className="signin-wait" role="status" aria-live="polite">
          <Logo size={36} />
          <span className="spinner" aria-hidden="true" />
          <span className="muted">{t("shell.signIn.loading")}</span>
        </main>
      </div>
    );
  }

  const noMembership = Boolean(token && me && !me.memberships.some((m) => m.status === "active"));
  return (
    <div className="signin-page">
      <div className="signin-top"><LanguageSelect /></div>
      <main id="main" className="signin-main">
        <section className="card signin-card" aria-labelledby="signin-title">
          <div className="signin-brand"><Logo size={36} /><span className="muted">{t("shell.tagline")}</span></div>
          <h1 id="signin-title">{t("shell.signIn.title")}</h1>
          {error && <ShellError error={error} />}
          {noMembership && (
            <div className="signin-alert" role="alert"><p>{t("shell.signIn.noMembership")}</p></div>
          )}
          {token && (error || noMembership) ? (
            <button type="button" className="primary signin-retry" onClick={signOut}>{t("shell.signIn.tryAgain")}</button>
          ) : (
            <DevUsers />
          )}
        </section>
      </main>
    </div>
  );
}
