import { PeerCertificate, TLSSocket } from 'node:tls';

/**
 * The caller named by a verified client certificate: the subject CN, else the
 * first subjectAltName of type DNS or email. Undefined when the connection is
 * not TLS, carries no certificate, or the certificate was not verified.
 */
export function certificateName(socket: unknown): string | undefined {
  const s = socket as TLSSocket | undefined;
  if (!s || typeof s.getPeerCertificate !== 'function' || !s.authorized) return undefined;
  return nameFromCertificate(s.getPeerCertificate());
}

export function nameFromCertificate(cert: PeerCertificate | undefined): string | undefined {
  if (!cert || Object.keys(cert).length === 0) return undefined;
  const cn = cert.subject?.CN;
  const first = Array.isArray(cn) ? cn[0] : cn;
  if (typeof first === 'string' && first.trim() !== '') return first.trim();
  for (const part of (cert.subjectaltname ?? '').split(/,\s*/)) {
    const m = /^(DNS|email):(.+)$/.exec(part.trim());
    if (m) return m[2];
  }
  return undefined;
}
