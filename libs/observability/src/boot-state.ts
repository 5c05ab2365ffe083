import { ServedWeights } from '../../engine/src/models/default-model';

/** Whether the default model is up: what /healthz reports and readiness waits for. */
export class BootState {
  state: 'loading' | 'ready' | 'no-model' | 'failed' = 'loading';
  model?: ServedWeights;
  error?: string;
  /** Why there is no model (the no-model state): what /healthz warns. */
  noModel?: string;
}
