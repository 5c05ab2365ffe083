/**
 * A request line may name a full URL ("POST http://localhost/studio/exec HTTP/1.1", RFC 9112
 * absolute-form). The router drops the scheme and authority, so every check that reads the path
 * must see the same path, or a rule keyed on it (studio's this-machine-only answer, MCP's Host
 * check, the dialect of an error body) is skipped while the route still runs. Fastify's
 * rewriteUrl turns the target into the path form before anything reads it; the Host header then
 * decides, as for every other request.
 */
const ABSOLUTE_FORM = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i;

export function originForm(req: { url?: string }): string {
  const url = req.url ?? '/';
  if (url.startsWith('/') || !ABSOLUTE_FORM.test(url)) return url;
  const rest = url.replace(ABSOLUTE_FORM, '');
  return rest.startsWith('/') ? rest : `/${rest}`;
}
