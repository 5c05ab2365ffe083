import { CatalogEntry } from '../../../store/src/catalog';
import { NativeContext, NativeModel, NativeProjector } from '../backend/native-addon';
import type { MediaRendering } from '../prompt/prompt-renderer';
import { ContextRegistry } from '../contexts/context-registry';
import { Scheduler } from '../scheduler/scheduler';
import { holding } from './holds';

/** One model resident in memory: weights, its KV context and its scheduler. */
export class LoadedModel {
  lastUsed = Date.now();
  /** When keep_alive runs out (undefined: never; it is pushed on while requests run). */
  expiresAt?: Date;
  /** keep_alive in ms (Infinity: forever), as the last request that named it asked. */
  keepAliveMs = Infinity;
  /** Estimated memory (weights + KV cache) counted against -memory-budget. */
  estimatedBytes = 0;
  /** The vision projector loaded beside the weights (-mmproj, a store model's projector layer). */
  projector?: NativeProjector;
  /** Why a store model's projector was skipped: the 400 its image requests get. */
  visionRefusal?: string;
  /** Requests preparing to run on it (images being fetched, prompts tokenized): it is busy meanwhile. */
  holds = 0;

  /**
   * Runs fn with the model held: keep_alive or a memory budget does not unload it under a request
   * still preparing (an image fetch of seconds unloaded it, and the request failed "projector is
   * disposed"). The scheduler's queue holds it from submit on.
   */
  held<T>(fn: () => Promise<T>): Promise<T> {
    return holding(this, fn);
  }

  constructor(
    readonly entry: CatalogEntry,
    readonly native: NativeModel,
    readonly ctx: NativeContext,
    readonly scheduler: Scheduler,
    readonly contexts: ContextRegistry,
    /** sha256 of the model file: identifies the weights. */
    readonly contentHash: string,
    readonly loadMs: number,
    readonly loadedAt: Date,
  ) {}

  get name(): string {
    return this.entry.name;
  }

  /** How prompts' images are read: through the projector's markers, or refused (none loaded). */
  get vision(): MediaRendering {
    if (this.projector) return { marker: this.projector.marker };
    return this.visionRefusal ? { refusal: this.visionRefusal } : {};
  }

  get hasChatTemplate(): boolean {
    return this.native.info.chatTemplate !== null;
  }
}
