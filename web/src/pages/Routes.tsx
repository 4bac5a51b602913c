// The studio's pages by pathname; `/` goes to the first page the signed-in role can use.
import { useEffect } from "react";
import { useI18n } from "../i18n";
import { Link, matchPath, navigate, usePathname } from "../router";
import { useSession } from "../session";
import { Members } from "./Members";
import { MemberDetail } from "./MemberDetail";
import { Schedule } from "./Schedule";
import { Programs } from "./Programs";
import { ProgramDetail } from "./ProgramDetail";
import { Tasks } from "./Tasks";
import { Analytics } from "./Analytics";
import { Coach } from "../coach/Coach";
import "./pages.css";

const STAFF_ONLY = ["/members", "/tasks", "/analytics"];
const MEMBER_ONLY = ["/coach"];

export function home(isStaff: boolean): string {
  return isStaff ? "/members" : "/schedule";
}

export function Routes() {
  const pathname = usePathname();
  const { isStaff } = useSession();
  const path = pathname.length > 1 ? pathname.replace(/\/+$/, "") : pathname;
  const redirect =
    path === "/" || path === "/sign-in" || (!isStaff && STAFF_ONLY.some((p) => path === p || path.startsWith(p + "/")))
      || (isStaff && MEMBER_ONLY.includes(path))
      ? home(isStaff)
      : null;

  useEffect(() => {
    if (redirect) navigate(redirect, { replace: true });
  }, [redirect]);
  if (redirect) return null;

  let params: Record<string, string> | null;
  if (path === "/members") return <Members />;
  if ((params = matchPath("/members/:id", path))) return <MemberDetail key={params.id} id={params.id} />;
  if (path === "/schedule") return <Schedule />;
  if (path === "/programs") return <Programs />;
  if ((params = matchPath("/programs/:id", path))) return <ProgramDetail key={params.id} id={params.id} />;
  if (path === "/tasks") return <Tasks />;
  if (path === "/analytics") return <Analytics />;
  if (path === "/coach") return <Coach />;
  return <NotFound />;
}

function NotFound() {
  const { t } = useI18n();
  const { isStaff } = useSession();
  return (
    <div className="not-found" data-testid="not-found">
      <p className="not-found-code" aria-hidden="true">404</p>
      <h1>{t("pages.notFound.title")}</h1>
      <p className="muted">{t("pages.notFound.body")}</p>
      <Link to={home(isStaff)} className="button-link primary">{t("pages.notFound.back")}</Link>
    </div>
  );
}
