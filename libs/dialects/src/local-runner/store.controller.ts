import { BeforeApplicationShutdown, Body, Controller, Delete, Head, HttpCode, HttpException, Inject, Post, Req, Res } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { FastifyReply, FastifyRequest } from 'fastify';
import { ServerConfig, SERVER_CONFIG } from '../../../../apps/server/src/config/server-config';
import { InvalidRequestError, NoModelError, ServerShuttingDownError } from '../../../engine/src/core/errors';
import { EncoderPool } from '../../../engine/src/embeddings/encoder-pool';
import { loadDefaultModel } from '../../../engine/src/models/default-model';
import { LoadedModel } from '../../../engine/src/models/loaded-model';
import { ModelManager } from '../../../engine/src/models/model-manager';
import { StreamWriter } from '../../../http/src/sse';
import { toHttpFailure } from '../../../http/src/http-errors';
import { jsonObject } from '../../../http/src/json-body';
import { BootState } from '../../../observability/src/boot-state';
import { ModelCatalog } from '../../../store/src/catalog';
import { parseModelRef } from '../../../store/src/model-ref';
import { PullProgress, PullService } from '../../../store/src/pull/pull-service';
import { StoreAdmin } from '../../../store/src/store-admin';

type Json = Record<string, unknown>;

const SHUTDOWN_PULL = 'the server is shutting down: the pull stopped (pull again to resume it)';

/**
 * The local-runner's model-store routes: pull, copy, delete (svc's own store
 * only); push, create and blob uploads are not offered (501).
 */
@Controller('api')
export class StoreController implements BeforeApplicationShutdown {
  private readonly puller: PullService;
  private readonly admin: StoreAdmin;
  /** Pulls in flight: a shutdown ends them (a download of gigabytes outlasts any grace period; its parts resume). */
  private readonly pulling = new Set<AbortController>();
  private closing = false;

  constructor(
    @Inject(ModelCatalog) private readonly catalog: ModelCatalog,
    @Inject(ModelManager) private readonly models: ModelManager,
    @Inject(EncoderPool) private readonly encoders: EncoderPool,
    @Inject(SERVER_CONFIG) private readonly config: ServerConfig,
    @Inject(ModuleRef) private readonly moduleRef: ModuleRef,
  ) {
    this.puller = new PullService(catalog.store);
    this.admin = new StoreAdmin(catalog);
  }

  @Post('pull')
  async pull(@Body() raw: unknown, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    this.guard(req);
    const body = jsonObject(raw);
    const source = nameField(body).trim();
    for (const k of ['stream', 'insecure'] as const) {
      if (body[k] != null && typeof body[k] !== 'boolean') throw new InvalidRequestError(`cannot parse request: ${k} must be a boolean`);
    }
    // Refuse a hostile or empty name before a stream (and its 200) begins.
    if (!/^https?:\/\//i.test(source)) parseModelRef(source);
    const ac = new AbortController();
    this.pulling.add(ac);
    reply.raw.on('close', () => {
      this.pulling.delete(ac);
      if (!reply.raw.writableFinished) ac.abort();
    });
    const opts = { insecure: body.insecure === true, signal: ac.signal };
    if (body.stream === false) {
      await this.puller.pull(source, opts).catch((err) => {
        if (this.closing) throw new ServerShuttingDownError(SHUTDOWN_PULL);
        const f = toHttpFailure(err);
        throw new HttpException(`pull ${source}: ${f.message}`, f.status >= 400 ? f.status : 500);
      });
      this.afterPull();
      this.freeUnlisted();
      await reply.status(200).send({ status: 'success' });
      return;
    }
    const out = new StreamWriter(reply, 'application/x-ndjson');
    try {
      await this.puller.pull(source, { ...opts, onProgress: (p: PullProgress) => out.line(p) });
      this.afterPull();
      this.freeUnlisted();
    } catch (err) {
      out.line({ error: this.closing ? SHUTDOWN_PULL : (err as Error).message });
    }
    out.end();
  }

  beforeApplicationShutdown(): void {
    this.closing = true;
    for (const ac of this.pulling) ac.abort();
  }

  @Post('copy')
  @HttpCode(200)
  async copy(@Body() raw: unknown, @Req() req: FastifyRequest): Promise<void> {
    this.guard(req);
    const body = jsonObject(raw);
    if (typeof body.source !== 'string' || typeof body.destination !== 'string') {
      const wrong = ['source', 'destination'].find((k) => body[k] !== undefined && body[k] !== null && typeof body[k] !== 'string');
      throw new InvalidRequestError(wrong ? `cannot parse request: ${wrong} must be a string` : 'copy needs source and destination');
    }
    await this.admin.copy(body.source, body.destination);
    // A copy onto a loaded name leaves its old weights named by nothing.
    this.freeUnlisted();
  }

  @Delete('delete')
  async delete(@Body() raw: unknown, @Req() req: FastifyRequest): Promise<void> {
    this.guard(req);
    const body = jsonObject(raw);
    const gone = this.admin.delete(nameField(body));
    this.freeUnlisted(gone.path ? [gone.path] : []);
  }

  /**
   * Loaded weights that no listed name refers to any more go, with their contexts. A copy shares
   * its blob with the original: those stay loaded (and their contexts kept) while any listed name
   * still refers to them. Answers once they are out of service, without waiting for their running
   * requests to finish (a delete, copy or pull would otherwise hang behind a long generation).
   */
  private freeUnlisted(gone: string[] = []): void {
    this.models.retireUnlisted(gone);
    const boot = this.moduleRef.get(BootState, { strict: false });
    const was = boot?.model;
    // The default model left (deleted, or its name copied over), or one that failed to load may
    // have: /healthz reports the next default, or the no-model state.
    if (boot && (was ? was.entry.path !== this.defaultPath() : boot.state === 'failed')) {
      // Weights another name still has stop staying loaded.
      if (was instanceof LoadedModel && this.models.inService(was)) this.models.endStay(was);
      boot.model = undefined;
      boot.state = 'loading';
      this.afterPull(true);
    }
  }

  /** The weights '' stands for now (undefined: none). */
  private defaultPath(): string | undefined {
    try {
      return this.catalog.resolve('', { generating: true }).path;
    } catch {
      return undefined;
    }
  }

  private listedPaths(): Set<string> {
    return new Set(this.catalog.list().map((e) => e.path));
  }

  @Post(['push', 'create', 'blobs/:digest'])
  @HttpCode(501)
  refused(@Req() req: FastifyRequest): never {
    throw new HttpException(`${req.url.split('?')[0]} is not offered by this server: svc does not push, create models or take blob uploads`, 501);
  }

  @Head('blobs/:digest')
  refusedHead(@Req() req: FastifyRequest): never {
    return this.refused(req);
  }

  /** -pull=false turns the store routes off (browser origins are refused once, in libs/auth). */
  private guard(_req: FastifyRequest): void {
    if (!this.config.pull) throw new HttpException('model-store routes are off on this server (-pull=false)', 501);
  }

  /** The no-model state ends with the first pulled model: serve it without a restart. */
  private afterPull(afterDelete = false): void {
    const boot = this.moduleRef.get(BootState, { strict: false });
    if (!boot || (!afterDelete && boot.state !== 'no-model' && boot.state !== 'failed')) return;
    loadDefaultModel(this.models, this.encoders).then(
      (lm) => {
        // Deleted again while it loaded: /healthz would report retired weights.
        if (!this.listedPaths().has(lm.entry.path) || (lm instanceof LoadedModel && !this.models.inService(lm))) return this.afterPull(true);
        boot.model = lm;
        boot.error = undefined;
        boot.state = 'ready';
      },
      (err: Error) => {
        if (!afterDelete) return;
        // Only an empty store is the no-model state; a default that failed to load is a failed load.
        if (err instanceof NoModelError) {
          boot.state = 'no-model';
          boot.noModel = err.message;
        } else {
          boot.state = 'failed';
          boot.error = `loading the default model failed: ${err.message}`;
        }
      },
    );
  }
}

/** The model a store route names (`model`, or the older `name`): a string, or a 400. */
function nameField(body: Json): string {
  const v = body.model ?? body.name;
  if (v == null) return '';
  if (typeof v !== 'string') throw new InvalidRequestError('cannot parse request: model must be a string');
  return v;
}
