/** POST /v1/redact. text and types are checked by the controller, which words each refusal. */
export class RedactRequestDto {
  text?: unknown;
  types?: unknown;
}
