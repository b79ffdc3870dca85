// Credentials that do not change: header values, an API key in the query, a bearer token, basic
// auth. Put on every request, never renewed: a 401 is final (`rejected` says no retry helps).
import { encodeStrict } from "../../core/rest/request.ts";
import type { AuthSettings } from "../../core/upstream/auth-config.ts";
import type { Credential } from "../../core/upstream/credential.ts";

type StaticSettings = Exclude<AuthSettings, { type: "oauth2_client_credentials" | "oauth2_refresh_token" }>;

/** A static credential from its settings and its opened secrets (by field name). */
export function staticCredential(settings: StaticSettings, secrets: Record<string, string>): Credential {
  const put = staticWriter(settings, secrets);
  return {
    apply: async (url, headers) => {
      put(url, headers);
      return { generation: 0 };
    },
    rejected: () => false,
    state: () => ({ state: "ok" }),
  };
}

function staticWriter(settings: StaticSettings, secrets: Record<string, string>): (url: URL, headers: Headers) => void {
  const need = (field: string) => {
    const v = secrets[field];
    if (v === undefined) throw new Error(`the credential has no ${field}`);
    return v;
  };
  switch (settings.type) {
    case "header": {
      const values = settings.header_names.map((name) => [name, need(`header:${name.toLowerCase()}`)] as const);
      return (_url, headers) => {
        for (const [name, value] of values) headers.set(name, value);
      };
    }
    case "query": {
      const value = need("query_value");
      return (url) => setQueryKey(url, settings.name, value);
    }
    case "bearer": {
      const value = `Bearer ${need("token")}`;
      return (_url, headers) => headers.set("authorization", value);
    }
    case "basic": {
      const value = `Basic ${Buffer.from(`${need("username")}:${need("password")}`, "utf8").toString("base64")}`;
      return (_url, headers) => headers.set("authorization", value);
    }
  }
}

/**
 * Puts `name=value` in the URL's query in place of any pair of that name (an agent's argument of
 * the same name never stands beside or instead of the key), leaving every other pair byte for
 * byte as it was built.
 */
export function setQueryKey(url: URL, name: string, value: string): void {
  const pairs = url.search === "" ? [] : url.search.slice(1).split("&");
  const kept = pairs.filter((pair) => {
    const raw = pair.split("=")[0]!;
    let decoded: string;
    try {
      decoded = decodeURIComponent(raw.replaceAll("+", " "));
    } catch {
      return true;
    }
    return decoded !== name;
  });
  kept.push(`${encodeStrict(name)}=${encodeStrict(value)}`);
  url.search = `?${kept.join("&")}`;
}
