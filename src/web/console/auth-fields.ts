// The credential part of an upstream form (`auth`, SPEC 8.7.2): a type, and the fields that type
// takes, shown only for it. Secret fields are password inputs that the desk seals on arrival;
// nothing here ever shows a secret back. `read()` builds the `auth` object the desk expects.
import { field, h, labelled } from "./dom.ts";

export const AUTH_TYPES: readonly [string, string][] = [
  ["", "None"],
  ["header", "Header"],
  ["query", "Query key"],
  ["bearer", "Bearer token"],
  ["basic", "Basic (user and password)"],
  ["oauth2_client_credentials", "OAuth 2 client credentials"],
  ["oauth2_refresh_token", "OAuth 2 refresh token"],
];

const OAUTH = ["oauth2_client_credentials", "oauth2_refresh_token"];

type Input = { name: string; label: string; types: readonly string[]; secret?: boolean; hint?: string };

/** One input per field name, shown for the types that take it (one label each, so a person, or a test, finds it by its name). */
const INPUTS: readonly Input[] = [
  { name: "header_name", label: "Credential header", types: ["header"], hint: "e.g. x-api-key" },
  { name: "header_value", label: "Header value", types: ["header"], secret: true },
  { name: "query_name", label: "Query key name", types: ["query"], hint: "e.g. api_key" },
  { name: "query_value", label: "Query key value", types: ["query"], secret: true },
  { name: "token", label: "Token", types: ["bearer"], secret: true },
  { name: "username", label: "Username", types: ["basic"] },
  { name: "password", label: "Password", types: ["basic"], secret: true },
  { name: "token_url", label: "Token URL", types: OAUTH, hint: "https:, or http: on loopback" },
  { name: "client_id", label: "Client ID", types: OAUTH },
  { name: "client_secret", label: "Client secret", types: OAUTH, secret: true, hint: "optional for a public client's refresh token" },
  { name: "scope", label: "Scope", types: ["oauth2_client_credentials"], hint: "optional" },
  { name: "refresh_token", label: "Refresh token", types: ["oauth2_refresh_token"], secret: true },
];

export type AuthFields = { element: HTMLElement; read(): Record<string, unknown> | null };

export function authFields(form: HTMLFormElement): AuthFields {
  const type = h("select", { name: "auth_type" }, ...AUTH_TYPES.map(([value, label]) => h("option", { value }, label)));
  const clientAuth = h(
    "select",
    { name: "client_auth" },
    h("option", { value: "basic" }, "HTTP Basic (client_secret_basic)"),
    h("option", { value: "post" }, "In the body (client_secret_post)"),
  );
  const clientAuthLabel = labelled("Client authentication", clientAuth);
  const labels = INPUTS.map((i) => {
    const input = h("input", {
      name: i.name,
      class: "mono",
      autocomplete: i.secret ? "new-password" : "off",
      ...(i.secret ? { type: "password" } : {}),
    });
    return { input: i, label: labelled(i.label, input, i.secret ? "sealed by the desk; never shown again" : i.hint) };
  });
  const show = () => {
    for (const { input, label } of labels) label.hidden = !input.types.includes(type.value);
    clientAuthLabel.hidden = !OAUTH.includes(type.value);
  };
  type.addEventListener("change", show);
  show();
  const element = h(
    "div",
    { class: "stack" },
    h("div", { class: "row" }, labelled("Credential", type)),
    h("div", { class: "row" }, ...labels.map((l) => l.label), clientAuthLabel),
  );
  const value = (name: string) => (form.elements.namedItem(name) as HTMLInputElement).value;
  const read = (): Record<string, unknown> | null => {
    switch (type.value) {
      case "":
        return null;
      case "header":
        return { type: "header", headers: { [field(form, "header_name")]: value("header_value") } };
      case "query":
        return { type: "query", name: field(form, "query_name"), value: value("query_value") };
      case "bearer":
        return { type: "bearer", token: value("token") };
      case "basic":
        return { type: "basic", username: value("username"), password: value("password") };
      case "oauth2_client_credentials": {
        const scope = field(form, "scope");
        return {
          type: type.value,
          token_url: field(form, "token_url"),
          client_id: field(form, "client_id"),
          client_secret: value("client_secret"),
          client_auth: clientAuth.value,
          ...(scope === "" ? {} : { scope }),
        };
      }
      default: {
        const secret = value("client_secret");
        return {
          type: "oauth2_refresh_token",
          token_url: field(form, "token_url"),
          client_id: field(form, "client_id"),
          refresh_token: value("refresh_token"),
          ...(secret === "" ? {} : { client_secret: secret, client_auth: clientAuth.value }),
        };
      }
    }
  };
  return { element, read };
}
