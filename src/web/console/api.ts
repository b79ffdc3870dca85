// The operator API from the browser. The admin token lives in sessionStorage only (gone when the
// tab closes; never a cookie, so no other site can make the browser send it; never localStorage
// or the URL, so it is not left on disk or in history and referrers) and goes out as a bearer
// header on same-origin requests.

const TOKEN_KEY = "ask-only.admin-token";

export const token = {
  get: (): string | null => sessionStorage.getItem(TOKEN_KEY),
  set: (value: string) => sessionStorage.setItem(TOKEN_KEY, value),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

/** A refusal from the desk: its error code, the field or tool it names (if any), and status. */
export class ApiError extends Error {
  constructor(
    readonly code: string,
    readonly status: number,
    readonly pointsAt?: string,
  ) {
    super(code);
  }
}

/** Called when the desk refuses the token, so the app can return to sign-in. */
let onSignedOut: () => void = () => {};
export function whenSignedOut(fn: () => void): void {
  onSignedOut = fn;
}

async function send(method: string, path: string, body?: unknown): Promise<Response> {
  const headers: Record<string, string> = {};
  const t = token.get();
  if (t !== null) headers.authorization = `Bearer ${t}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(path, { method, headers, body: body === undefined ? null : JSON.stringify(body), credentials: "omit", cache: "no-store" });
  if (!res.ok) {
    let code = `HTTP_${res.status}`;
    let pointsAt: string | undefined;
    try {
      const data = (await res.json()) as { error?: unknown; field?: unknown; tool?: unknown };
      if (typeof data.error === "string") code = data.error;
      const named = data.field ?? data.tool;
      if (typeof named === "string") pointsAt = named;
    } catch {
      // not JSON: keep the status
    }
    if (code === "ADMIN_TOKEN_INVALID") onSignedOut();
    throw new ApiError(code, res.status, pointsAt);
  }
  return res;
}

/** A JSON call to the desk; throws ApiError with the desk's code on any non-2xx answer. */
export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  return (await (await send(method, path, body)).json()) as T;
}

/** A text answer (the JSONL receipts export). */
export async function apiText(path: string): Promise<string> {
  return (await send("GET", path)).text();
}

/** `?a=1&b=2` from the non-empty entries. */
export function query(params: Record<string, string | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== "") q.set(k, v);
  const text = q.toString();
  return text === "" ? "" : `?${text}`;
}
