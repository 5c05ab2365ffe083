// Every temporary folder the tests make (stores, callers files, spill folders, the servers'
// own TMPDIR) goes under one folder per run, removed at the end: runs no longer pile up in /tmp.
const { mkdtempSync, rmSync } = require('node:fs');
const { tmpdir } = require('node:os');
const { join } = require('node:path');

const KEY = 'SVC_TEST_TMP_ROOT';

async function setup() {
  if (process.env[KEY]) return;
  const root = mkdtempSync(join(tmpdir(), 'svc-test-run-'));
  process.env[KEY] = root;
  // os.tmpdir() reads TMPDIR on each call; workers and spawned servers inherit it.
  process.env.TMPDIR = root;
}

async function teardown() {
  const root = process.env[KEY];
  if (!root || process.env.SVC_KEEP_TEST_TMP === '1') return;
  rmSync(root, { recursive: true, force: true, maxRetries: 3 });
}

module.exports = setup;
module.exports.teardown = teardown;
