#!/usr/bin/env node
// The `svc` command: the compiled server entry (npm run build:ts writes dist/).
require('../dist/apps/server/src/main.js');
