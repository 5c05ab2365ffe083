#!/usr/bin/env node
// `npm start`: serves the demo model, stories260K, found in the fixtures folder
// (SVC_MODELS_DIR, default ../shared/models) or downloaded once from its public home and
// checked by sha256 (test/fixtures/models.mjs). Any arguments go to svc after `-m`:
//   npm start -- -addr 127.0.0.1:8080
import { realModel } from '../test/fixtures/models.mjs';

let model;
try {
  model = await realModel('stories260K.gguf');
} catch (err) {
  console.error(`svc: the demo model is not here: ${err.message}`);
  console.error('svc: serve your own instead: npx svc -m /path/to/model.gguf');
  process.exit(2);
}
// The server reads its flags from process.argv; it then runs in this process (signals included).
process.argv.splice(2, 0, '-m', model);
await import('../bin/svc.js');
