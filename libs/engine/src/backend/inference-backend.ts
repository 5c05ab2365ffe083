import { NativeLoadOptions, NativeModel } from './native-addon';

export type BackendName = 'cpu' | 'cuda' | 'metal';

/**
 * The DI token every feature module depends on (directly or through the engine
 * service): one compute backend. Implementations wrap a native addon; tests may
 * provide a fake.
 */
export abstract class InferenceBackend {
  abstract readonly name: BackendName;
  /** GPUs the backend drives (0 on cpu). */
  abstract readonly gpuCount: number;
  abstract systemInfo(): string;
  abstract loadModel(path: string, opts?: NativeLoadOptions): Promise<NativeModel>;

  /**
   * Ends the process at once (a forced stop): a native backend skips exit handlers and static
   * destructors, which would free the engine under a decode still running on a worker thread.
   */
  exitNow(code: number): never {
    process.exit(code);
  }
}
