import { LoadedModel } from '../../engine/src/models/loaded-model';

/** Whether the default model is up: what /healthz reports and readiness waits for. */
export class BootState {
  state: 'loading' | 'ready' | 'no-model' | 'failed' = 'loading';
  model?: LoadedModel;
  error?: string;
}
