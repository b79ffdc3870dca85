// What the desk keeps for each REST tool to build its request later: plain JSON, stored with the
// tool at registration and read back at start-up, so no document is parsed on the call path.

export const HTTP_METHODS = ["get", "put", "post", "delete", "options", "head", "patch"] as const;
export type HttpMethod = (typeof HTTP_METHODS)[number];

export type ParameterLocation = "path" | "query" | "header";

/** How a value is written: OpenAPI's `style` and `explode` (defaults resolved at registration). */
export type ParameterStyle = "simple" | "form" | "spaceDelimited" | "pipeDelimited" | "deepObject";

export type RestParameter = {
  /** The parameter's name in the request (path template name, query name, header name). */
  name: string;
  in: ParameterLocation;
  /** The property of the tool's arguments that carries it (8.7 says how names are chosen). */
  arg: string;
  required: boolean;
  style: ParameterStyle;
  explode: boolean;
};

export type RestOperation = {
  method: HttpMethod;
  /** The path template as the document writes it, e.g. `/pets/{petId}`; appended to base_url's path. */
  path: string;
  parameters: RestParameter[];
  /** The JSON request body, carried by the argument `body`, sent with `mediaType`. */
  body?: { arg: string; mediaType: string; required: boolean };
  /** The Accept header: the success answer's media type the desk asks for. */
  accept: string;
};
