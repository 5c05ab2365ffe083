import { Injectable } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { STUDIO_MARKUP } from './markup';
import { STUDIO_SCRIPT } from './script';
import { STUDIO_STYLE } from './style';

/**
 * GET /studio's answer, built once at startup. The page is TypeScript modules rather than an
 * .html file beside them because the server runs from dist/ (and the container image holds
 * dist/ alone), where tsc copies no other file: a module cannot go missing.
 */
@Injectable()
export class StudioPage {
  readonly html: string;
  readonly headers: Record<string, string>;

  constructor() {
    this.html = studioHtml();
    this.headers = studioHeaders(STUDIO_SCRIPT, STUDIO_STYLE);
  }
}

export function studioHtml(): string {
  return [
    '<!doctype html>',
    '<html lang="en">',
    '<head>',
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    '<title>svc studio</title>',
    // No favicon request (it would be a 404, or a 401 on a keyed server, in the log).
    '<link rel="icon" href="data:,">',
    `<style>${STUDIO_STYLE}</style>`,
    '</head>',
    '<body>',
    STUDIO_MARKUP,
    `<script>${STUDIO_SCRIPT}</script>`,
    '</body>',
    '</html>',
    '',
  ].join('\n');
}

/** CSP source for an inline element: the hash of its exact text. */
export function cspHash(text: string): string {
  return `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;
}

/**
 * The page's response headers. The policy allows the page's own script and style (by hash: no
 * 'unsafe-inline', so an injected script or handler would not run), fetches to this origin only,
 * no plugins, frames, forms or base-URL changes, and no framing by any other page
 * (frame-ancestors, and X-Frame-Options for older browsers). no-store: nothing of it is cached.
 */
export function studioHeaders(script: string, style: string): Record<string, string> {
  const csp = [
    "default-src 'none'",
    `script-src ${cspHash(script)}`,
    `style-src ${cspHash(style)}`,
    "connect-src 'self'",
    'img-src data:',
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
  return {
    'content-type': 'text/html; charset=utf-8',
    'content-security-policy': csp,
    'x-frame-options': 'DENY',
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'cross-origin-opener-policy': 'same-origin',
    'cross-origin-resource-policy': 'same-origin',
  };
}
