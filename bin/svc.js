#!/usr/bin/env node
// The `svc` command: the compiled server entry (npm run build:ts writes dist/).

// V8 optimizes a function once the bytecode it ran has used up its interrupt budget a few
// times. With V8's default (66 KiB) svc's request path stayed partly unoptimized for over a
// thousand requests; with 8 KiB it is optimized after ~250 (README, session 8).
// SVC_V8_INTERRUPT_BUDGET overrides it (0 keeps V8's). Set before the server's code loads.
const budget = Number(process.env.SVC_V8_INTERRUPT_BUDGET ?? 8192);
if (Number.isInteger(budget) && budget > 0) require('node:v8').setFlagsFromString(`--interrupt-budget=${budget}`);

require('../dist/apps/server/src/main.js');
