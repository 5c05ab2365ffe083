import { Body, Controller, HttpCode, Inject, Post, Res } from '@nestjs/common';
import { parseKeepAlive } from '../../../engine/src/models/residency';
import { FastifyReply } from 'fastify';
import { EngineService } from '../../../engine/src/engine.service';
import { EncoderPool } from '../../../engine/src/embeddings/encoder-pool';
import { LoadedModel } from '../../../engine/src/models/loaded-model';
import { isEncoderEntry } from '../../../store/src/catalog';
import { GenerationRequest, RequestScope } from '../../../engine/src/core/generation-request';
import { ScopeOfRequest } from '../../../http/src/request-scope.decorator';
import { StreamWriter } from '../../../http/src/sse';
import { setMediaHeader } from '../shared/media-header';
import { chatToCore, generateToCore } from './mapping/runner-request.mapper';
import { ChatRequestDto, GenerateRequestDto } from './protocol/local-runner.dto';
import { ns, RunnerAnswerKind, RunnerRenderer } from './rendering/runner-renderer';

/** The local-runner's generation routes: DTO → core request → engine → NDJSON renderer. Streaming is on unless stream:false. */
@Controller('api')
export class RunnerController {
  constructor(
    @Inject(EngineService) private readonly engine: EngineService,
    @Inject(EncoderPool) private readonly encoders: EncoderPool,
  ) {}

  @Post('generate')
  @HttpCode(200)
  async generate(@Body() dto: GenerateRequestDto, @ScopeOfRequest() scope: RequestScope, @Res() reply: FastifyReply): Promise<void> {
    const started = performance.now();
    // The local-runner's way to preload a model: an empty prompt loads it and answers done_reason "load".
    // A suffix alone is an insertion at the start of a text.
    if (!dto.prompt && !dto.images?.length && !dto.suffix) return this.loadOnly(dto, started, reply);
    await this.run('generate', generateToCore(dto, scope), dto, started, reply);
  }

  @Post('chat')
  @HttpCode(200)
  async chat(@Body() dto: ChatRequestDto, @ScopeOfRequest() scope: RequestScope, @Res() reply: FastifyReply): Promise<void> {
    await this.run('chat', chatToCore(dto, scope), dto, performance.now(), reply);
  }

  private async run(kind: RunnerAnswerKind, req: GenerationRequest, dto: GenerateRequestDto | ChatRequestDto, started: number, reply: FastifyReply): Promise<void> {
    const startedWall = Date.now();
    // keep_alive is set on acquire (the engine's generate() re-acquires without touching it).
    await this.engine.models.acquire(req.model, { keepAlive: dto.keep_alive });
    const handle = await this.engine.generate(req);
    const lm = handle.model;
    setMediaHeader(reply, handle.media);
    const loadNs = loadWaitNs(lm, startedWall);
    // /api/generate answers a `context` (not for raw), as the local runner.
    const contextOf = kind === 'generate' && !(dto as GenerateRequestDto).raw ? handle.tokensWith : undefined;
    const r = new RunnerRenderer(kind, handle.modelName, started, loadNs, { contextOf, topLogprobs: (dto.top_logprobs ?? 0) > 0 });
    if (dto.stream ?? true) await r.stream(handle.events, new StreamWriter(reply, 'application/x-ndjson'));
    else await reply.send(await r.complete(handle.events));
  }

  private async loadOnly(dto: GenerateRequestDto, started: number, reply: FastifyReply): Promise<void> {
    const startedWall = Date.now();
    // keep_alive 0 with no prompt is how the local-runner's clients unload a model.
    const unload = parseKeepAlive(dto.keep_alive) === 0;
    const got = unload ? undefined : await this.engine.models.acquireNamed(dto.model ?? '', { keepAlive: dto.keep_alive });
    const lm = got?.lm;
    const body = {
      model: got ? got.name : await this.unload(dto.model ?? ''),
      created_at: new Date().toISOString(),
      response: '',
      done: true,
      done_reason: unload ? 'unload' : 'load',
      total_duration: ns(performance.now() - started),
      load_duration: lm ? loadWaitNs(lm, startedWall) : 0,
    };
    if (dto.stream ?? true) {
      const out = new StreamWriter(reply, 'application/x-ndjson');
      out.line(body);
      out.end();
    } else await reply.send(body);
  }

  /** `ollama stop`: a generating model or an encoder (the -embed one too) expires once idle. */
  private async unload(model: string): Promise<string> {
    const entry = await this.engine.models.expire(model);
    if (isEncoderEntry(entry)) await this.encoders.expire(entry);
    return entry.name;
  }
}

/**
 * The part of the model's load this request waited for: a load that began before the request
 * (another request's, or the default model's after a pull) counts only from the request's
 * start, so load_duration never exceeds total_duration (clients subtract one from the other).
 */
function loadWaitNs(lm: LoadedModel, startedWall: number): number {
  const end = lm.loadedAt.getTime();
  if (end < startedWall) return 0;
  return ns(Math.min(lm.loadMs, end - startedWall));
}
