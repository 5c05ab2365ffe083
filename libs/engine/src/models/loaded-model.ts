import { CatalogEntry } from '../../../store/src/catalog';
import { NativeContext, NativeModel } from '../backend/native-addon';
import { Scheduler } from '../scheduler/scheduler';

/** One model resident in memory: weights, its KV context and its scheduler. */
export class LoadedModel {
  lastUsed = Date.now();

  constructor(
    readonly entry: CatalogEntry,
    readonly native: NativeModel,
    readonly ctx: NativeContext,
    readonly scheduler: Scheduler,
    /** sha256 of the model file: identifies the weights. */
    readonly contentHash: string,
    readonly loadMs: number,
    readonly loadedAt: Date,
  ) {}

  get name(): string {
    return this.entry.name;
  }

  get isEncoder(): boolean {
    return this.entry.capabilities.includes('embeddings');
  }

  get hasChatTemplate(): boolean {
    return this.native.info.chatTemplate !== null;
  }
}
