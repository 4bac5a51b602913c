// The gateway's public HTTP API, and nothing else: JSON requests with the bearer token and the
// chosen locale, typed errors, and an SSE reader for streamed POSTs and the events endpoint.

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly traceId: string | null,
  ) {
    super(message);
  }
}

type Auth = { token: string | null; locale: string; onUnauthorized: () => void };
const auth: Auth = { token: null, locale: "en", onUnauthorized: () => {} };

export function configureApi(next: Partial<Auth>): void {
  Object.assign(auth, next);
}

function headers(extra?: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = { "x-locale": auth.locale, ...extra };
  if (auth.token) out.authorization = `Bearer ${auth.token}`;
  return out;
}

async function failure(res: Response): Promise<ApiError> {
  let code = "internal";
  let message = res.statusText || "Request failed";
  let traceId: string | null = null;
  try {
    const body = await res.json();
    if (body?.error) ({ code, message, traceId } = { code: body.error.code, message: body.error.message, traceId: body.error.traceId ?? null });
  } catch {
    /* not JSON: keep the status text */
  }
  if (res.status === 401) auth.onUnauthorized();
  return new ApiError(res.status, code, message, traceId);
}

/** `keepalive` lets a request outlive the page (a flush on pagehide). */
export async function request<T>(path: string, init: { method?: string; body?: unknown; signal?: AbortSignal; keepalive?: boolean } = {}): Promise<T> {
  let res: Response;
  try {
    res = await fetch(path, {
      method: init.method ?? "GET",
      headers: headers(init.body !== undefined ? { "content-type": "application/json" } : undefined),
      body: init.body !== undefined ? JSON.stringify(init.body) : undefined,
      signal: init.signal,
      keepalive: init.keepalive,
    });
  } catch (err) {
    if ((err as Error).name === "AbortError") throw err;
    throw new ApiError(0, "network_error", String(err), null);
  }
  if (!res.ok) throw await failure(res);
  return (res.status === 204 ? undefined : await res.json()) as T;
}

export type SseMessage = { id: string | null; event: string; data: string };

/** Open an SSE response (a streamed POST or the events endpoint) and yield its messages as they
 * arrive. A 4xx/5xx before the stream starts throws ApiError; a dropped connection ends the
 * iteration with a `network_error` ApiError so the caller can resume from the last id. */
export async function* openStream(
  path: string,
  init: { method?: string; body?: unknown; signal?: AbortSignal; lastEventId?: string | null; idempotencyKey?: string } = {},
): AsyncGenerator<SseMessage> {
  const extra: Record<string, string> = { accept: "text/event-stream" };
  if (init.body !== undefined) extra["content-type"] = "application/json";
  if (init.lastEventId) extra["last-event-id"] = init.lastEventId;
  if (init.idempotencyKey) extra["idempotency-key"] = init.idempotencyKey;
  let res: Response;
  try {
    res = await fetch(path, {
      method: init.method ?? "GET",
      headers: headers(extra),
      body: init.body !== undefined ? JSON.stringify(init.body) : undefined,
      signal: init.signal,
    });
  } catch (err) {
    if ((err as Error).name === "AbortError") throw err;
    throw new ApiError(0, "network_error", String(err), null);
  }
  if (!res.ok || !res.body) throw await failure(res);
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    for (;;) {
      let chunk: ReadableStreamReadResult<string>;
      try {
        chunk = await reader.read();
      } catch (err) {
        if ((err as Error).name === "AbortError") throw err;
        throw new ApiError(0, "network_error", String(err), null);
      }
      if (chunk.done) return;
      buffer += chunk.value.replace(/\r\n?/g, "\n");
      let end: number;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const raw = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const message = parseSse(raw);
        if (message) yield message;
      }
    }
  } finally {
    reader.releaseLock();
  }
}

function parseSse(raw: string): SseMessage | null {
  let id: string | null = null;
  let event = "message";
  const data: string[] = [];
  for (const line of raw.split("\n")) {
    if (!line || line.startsWith(":")) continue; // comments are keep-alive pings
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "id") id = value;
    else if (field === "event") event = value;
    else if (field === "data") data.push(value);
  }
  return data.length ? { id, event, data: data.join("\n") } : null;
}
