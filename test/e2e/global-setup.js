// The e2e tier runs the real server (dist/) on the real engine: both must be built.
const { existsSync } = require('node:fs');
const { join } = require('node:path');

module.exports = async () => {
  const root = join(__dirname, '..', '..');
  const missing = [
    ['dist/apps/server/src/main.js', 'npm run build:ts'],
    ['build/native/cpu/svc_engine.node', 'npm run build:native'],
  ].filter(([p]) => !existsSync(join(root, p)));
  if (missing.length) {
    throw new Error(`e2e tests need a built server: ${missing.map(([p, cmd]) => `${p} (run ${cmd})`).join(', ')}`);
  }
};
