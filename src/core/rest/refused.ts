// A refused OpenAPI document, on its own so that whatever reports a refusal (the admin API, the
// document fetch) need not load the OpenAPI parser: the desk loads that only to register or
// refresh a REST upstream.

/**
 * The document is refused as a whole; `problems` says every reason found (at most 50).
 * `unreachable`: openapi_url gave no answer at all (no connection, or none within the time).
 */
export class DocumentRefused extends Error {
  override name = "DocumentRefused";
  constructor(
    readonly problems: string[],
    readonly unreachable = false,
  ) {
    super(`the OpenAPI document is refused: ${problems.join("; ")}`);
  }
}
