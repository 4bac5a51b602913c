// Who is signed in, and in which studio. The bearer token comes from the development sign-in page,
// or in production from the identity provider's redirect to `/#access_token=<JWT>`.
import { createContext, useCallback, useContext, useEffect, useMemo, useState, type ReactNode } from "react";
import { ApiError, configureApi, request } from "./api";

export type Role = "owner" | "admin" | "coach" | "member";
export type Membership = { membershipId: string; organizationId: string; organizationName: string; tier: string; role: Role; status: string };
export type Me = { user: { id: string; email: string; fullName: string; locale: string }; memberships: Membership[] };

type Session = {
  token: string | null;
  me: Me | null;
  /** The studio being worked in (an active membership), or null before sign-in. */
  membership: Membership | null;
  isStaff: boolean;
  loading: boolean;
  error: ApiError | null;
  signIn: (token: string) => void;
  signOut: () => void;
  switchOrganization: (organizationId: string) => void;
};

const TOKEN_KEY = "spotter.token";
const ORG_KEY = "spotter.org";
const SessionContext = createContext<Session | null>(null);

function tokenFromRedirect(): string | null {
  const params = new URLSearchParams(location.hash.slice(1));
  const token = params.get("access_token");
  if (token) {
    localStorage.setItem(TOKEN_KEY, token);
    history.replaceState(null, "", location.pathname + location.search);
  }
  return token;
}

export function SessionProvider({ children }: { children: ReactNode }) {
  const [token, setToken] = useState<string | null>(() => tokenFromRedirect() ?? localStorage.getItem(TOKEN_KEY));
  const [me, setMe] = useState<Me | null>(null);
  const [orgId, setOrgId] = useState<string | null>(() => localStorage.getItem(ORG_KEY));
  const [loading, setLoading] = useState<boolean>(Boolean(token));
  const [error, setError] = useState<ApiError | null>(null);

  const signOut = useCallback(() => {
    localStorage.removeItem(TOKEN_KEY);
    setToken(null);
    setMe(null);
  }, []);
  configureApi({ token, onUnauthorized: signOut });

  useEffect(() => {
    if (!token) return;
    let live = true;
    setLoading(true);
    request<Me>("/me")
      .then((m) => live && (setMe(m), setError(null)))
      .catch((e) => live && setError(e instanceof ApiError ? e : new ApiError(0, "network_error", String(e), null)))
      .finally(() => live && setLoading(false));
    return () => {
      live = false;
    };
  }, [token]);

  const value = useMemo<Session>(() => {
    const active = me?.memberships.filter((m) => m.status === "active") ?? [];
    const membership = active.find((m) => m.organizationId === orgId) ?? active[0] ?? null;
    return {
      token, me, membership, loading, error,
      isStaff: membership !== null && membership.role !== "member",
      signIn: (next) => {
        localStorage.setItem(TOKEN_KEY, next);
        setToken(next);
      },
      signOut,
      switchOrganization: (id) => {
        localStorage.setItem(ORG_KEY, id);
        setOrgId(id);
      },
    };
  }, [token, me, orgId, loading, error, signOut]);
  return <SessionContext.Provider value={value}>{children}</SessionContext.Provider>;
}

export function useSession(): Session {
  const value = useContext(SessionContext);
  if (!value) throw new Error("useSession outside SessionProvider");
  return value;
}

/** The studio's API prefix, e.g. `/organizations/<id>`; only for signed-in screens. */
export function useOrgPath(): string {
  const { membership } = useSession();
  if (!membership) throw new Error("useOrgPath without a studio");
  return `/organizations/${membership.organizationId}`;
}
