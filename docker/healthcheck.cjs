#!/usr/bin/env node
// The images' HEALTHCHECK: GET /healthz on the port this container's server listens on.
// Exit 0 when it answers 200, 1 otherwise (503 while the model loads or after a failed load).
// The URL comes from $SVC_HEALTH_URL, else from $SVC_ADDR (host:port; 0.0.0.0/:: mean
// loopback), else http://127.0.0.1:11435/healthz. Set SVC_HEALTH_URL=https://127.0.0.1:11435/healthz
// when the server runs with -tls-cert (the certificate is not verified for this loopback call).
'use strict';
const http = require('node:http');
const https = require('node:https');

function urlFromAddr(addr) {
  let host = '127.0.0.1';
  let port = '11435';
  if (addr) {
    const m = /^(?:\[([^\]]*)\]|([^:]*)):(\d+)$/.exec(addr.trim()) || /^(\d+)$/.exec(addr.trim());
    if (m && m.length === 4) {
      const h = m[1] ?? m[2];
      port = m[3];
      if (h && h !== '0.0.0.0' && h !== '::' && h !== '*') host = h.includes(':') ? `[${h}]` : h;
    } else if (m) {
      port = m[1];
    }
  }
  return `http://${host}:${port}/healthz`;
}

const url = new URL(process.env.SVC_HEALTH_URL || urlFromAddr(process.env.SVC_ADDR));
const lib = url.protocol === 'https:' ? https : http;
const req = lib.get(url, { timeout: 4000, rejectUnauthorized: false }, (res) => {
  res.resume();
  process.exit(res.statusCode === 200 ? 0 : 1);
});
req.on('timeout', () => req.destroy(new Error('timeout')));
req.on('error', (err) => {
  console.error(`healthcheck ${url.href}: ${err.message}`);
  process.exit(1);
});
