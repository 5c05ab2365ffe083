import { Logger } from '@nestjs/common';
import { InferenceBackend, BackendName } from './inference-backend';
import { NativeAddon, NativeLoadOptions, NativeModel } from './native-addon';

/** An InferenceBackend backed by one compiled addon (cpu, cuda or metal). */
export class NativeInferenceBackend extends InferenceBackend {
  private readonly log = new Logger('llama.cpp');

  constructor(private readonly addon: NativeAddon) {
    super();
    // llama.cpp logs its whole loading sequence; keep it at debug level.
    addon.setLogger((level, text) => {
      const line = text.trimEnd();
      if (!line) return;
      if (level === 4) this.log.error(line);
      else if (level === 3) this.log.warn(line);
      else this.log.debug?.(line);
    });
  }

  get name(): BackendName {
    return this.addon.backend;
  }

  get gpuCount(): number {
    return this.addon.deviceCount();
  }

  systemInfo(): string {
    return this.addon.systemInfo();
  }

  loadModel(path: string, opts?: NativeLoadOptions): Promise<NativeModel> {
    return this.addon.loadModel(path, opts);
  }

  override exitNow(code: number): never {
    return this.addon.exitNow(code);
  }
}
