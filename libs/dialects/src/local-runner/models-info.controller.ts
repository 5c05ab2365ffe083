import { Body, Controller, Get, HttpCode, Inject, Post } from '@nestjs/common';
import { statSync } from 'node:fs';
import { InferenceBackend } from '../../../engine/src/backend/inference-backend';
import { InvalidRequestError } from '../../../engine/src/core/errors';
import { EncoderPool } from '../../../engine/src/embeddings/encoder-pool';
import { LoadedModel } from '../../../engine/src/models/loaded-model';
import { ModelManager } from '../../../engine/src/models/model-manager';
import { CatalogEntry, ModelCatalog } from '../../../store/src/catalog';
import { readGgufMetadata } from '../../../store/src/gguf-metadata';
import { ShowRequestDto } from './protocol/local-runner.dto';
import { encoderPsEntry, psEntry, showAnswer, tagsEntry } from './rendering/model-info';

/** GET /api/tags, GET /api/ps, POST /api/show. Pull, copy and delete belong to the model-store work. */
@Controller('api')
export class ModelsInfoController {
  constructor(
    @Inject(ModelCatalog) private readonly catalog: ModelCatalog,
    @Inject(ModelManager) private readonly models: ModelManager,
    @Inject(EncoderPool) private readonly encoders: EncoderPool,
    @Inject(InferenceBackend) private readonly backend: InferenceBackend,
  ) {}

  @Get('tags')
  async tags(): Promise<unknown> {
    const resident = this.models.resident();
    // Newest first, as the local runner lists them.
    const entries = [...this.catalog.list()].sort((a, b) => b.modifiedAt.getTime() - a.modifiedAt.getTime());
    return { models: entries.map((e) => tagsEntry(e, residentFor(resident, e))) };
  }

  @Get('ps')
  async ps(): Promise<unknown> {
    const onGpu = this.backend.name !== 'cpu';
    // Latest expiry first, as the local runner lists them (kept forever: first of all).
    const until = (lm: LoadedModel) => lm.expiresAt?.getTime() ?? Infinity;
    const loaded = this.models.resident().sort((a, b) => until(b) - until(a) || 0);
    const encoders = await this.encoders.resident();
    return { models: [...encoders.map((enc) => encoderPsEntry(enc, onGpu)), ...loaded.map((lm) => psEntry(lm, this.models.listedName(lm), onGpu))] };
  }

  @Post('show')
  @HttpCode(200)
  async show(@Body() dto: ShowRequestDto): Promise<unknown> {
    const name = dto.model ?? dto.name;
    // An empty name is the server's default model (spec rule 1); none at all is the runner's 400.
    if (name === undefined || name === null) throw new InvalidRequestError('model is required');
    // Unknown names: the catalog's ModelNotFoundError (404, with the available names).
    const entry = this.catalog.resolve(name);
    const fullKv = dto.verbose ? fullMetadata(entry.path) : undefined;
    return showAnswer(entry, residentFor(this.models.resident(), entry), { defaults: this.catalog.defaults(entry), fullKv });
  }
}

/**
 * Every array read whole (megabytes for a 150k-token vocabulary, read on the event loop): the
 * last file's answer is kept while its size and time are unchanged, so repeated verbose calls
 * (a UI polling one model) cost one read. A file that cannot be read again falls back to the
 * listing's metadata.
 */
let lastFull: { key: string; kv: Record<string, unknown> } | undefined;
function fullMetadata(path: string): Record<string, unknown> | undefined {
  try {
    const st = statSync(path);
    const key = `${path}\0${st.size}\0${st.mtimeMs}`;
    if (lastFull?.key === key) return lastFull.kv;
    const kv = readGgufMetadata(path, { allArrays: true })?.kv;
    if (kv) lastFull = { key, kv };
    return kv;
  } catch {
    return undefined;
  }
}

function residentFor(resident: LoadedModel[], e: CatalogEntry): LoadedModel | undefined {
  return resident.find((lm) => lm.entry.path === e.path);
}
