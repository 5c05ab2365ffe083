#!/usr/bin/env node
// The `svc` command: the compiled server entry (npm run build:ts writes dist/).

// V8 optimizes a function once the bytecode it ran has used up its interrupt budget a few
// times. With V8's default (66 KiB) svc's request path stayed partly unoptimized for over a
// thousand requests; 8 KiB (session 8) still left ~30 functions to optimize after request
// 1500, 2 KiB about 6 (README, session 12). SVC_V8_INTERRUPT_BUDGET overrides it (0 keeps
// V8's). Set before the server's code loads.
const budget = Number(process.env.SVC_V8_INTERRUPT_BUDGET ?? 2048);
if (Number.isInteger(budget) && budget > 0) require('node:v8').setFlagsFromString(`--interrupt-budget=${budget}`);

// Loading the server's code takes most of a second: a SIGTERM then (a pod scaled down at once)
// killed the process with 143. Noted here, handled once main.ts has its own handlers.
const early = (signal) => (globalThis.__svcEarlySignal ??= signal);
process.on('SIGTERM', early);
process.on('SIGINT', early);
globalThis.__svcEarlyHandler = early;

require('../dist/apps/server/src/main.js');
