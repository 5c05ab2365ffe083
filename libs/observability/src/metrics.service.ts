import { Inject, Injectable } from '@nestjs/common';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { ModelManager } from '../../engine/src/models/model-manager';
import { LoadedModel } from '../../engine/src/models/loaded-model';

/**
 * How often the event-loop lag histogram samples (prom-client's default is 10 ms). Its timer
 * wakes the JavaScript thread even when the server is idle; at 100 Hz, on a CPU whose cores
 * all run decode threads, each wake-up takes a core from a compute thread the others then wait
 * for (measured: the JS thread's CPU per 64-token 0.5B request 20-26 -> 13-15 ms, idle CPU
 * 8 ms/s -> 0). A lag sample every 100 ms still catches a blocked loop.
 */
const EVENT_LOOP_SAMPLE_MS = 100;

/**
 * Prometheus metrics. Engine counters are read from the schedulers' plain stats
 * when scraped; per-step and per-request observations come through their observers.
 */
@Injectable()
export class MetricsService {
  readonly registry = new Registry();
  private readonly httpRequests = new Counter({ name: 'svc_http_requests_total', help: 'HTTP requests answered', labelNames: ['method', 'route', 'status'], registers: [this.registry] });
  private readonly httpLatency = new Histogram({
    name: 'svc_http_request_duration_seconds',
    help: 'HTTP request latency (until the last byte)',
    labelNames: ['route'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [this.registry],
  });
  private readonly ttft = new Histogram({
    name: 'svc_time_to_first_token_seconds',
    help: 'Queue wait plus prefill until the first generated token',
    labelNames: ['model'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  private readonly batchTokens = new Histogram({
    name: 'svc_batch_tokens',
    help: 'Tokens per decode step',
    labelNames: ['model'],
    buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048],
    registers: [this.registry],
  });
  private readonly batchSequences = new Histogram({
    name: 'svc_batch_sequences',
    help: 'Sequences per decode step (continuous batching)',
    labelNames: ['model'],
    buckets: [1, 2, 3, 4, 6, 8, 12, 16, 32, 64],
    registers: [this.registry],
  });

  constructor(@Inject(ModelManager) private readonly models: ModelManager) {
    collectDefaultMetrics({ register: this.registry, prefix: 'svc_', eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
    const resident = () => this.models.resident();
    // The scheduler's running totals are read at each scrape: counters (TYPE counter, as their
    // _total names say) for those, gauges for levels. A model loaded anew starts from zero, which
    // Prometheus reads as a counter reset.
    const perModel = (name: string, help: string, read: (m: LoadedModel) => number, counter = false) => {
      const config = { name, help, labelNames: ['model'], registers: [this.registry] };
      const values = async () => resident().map((m) => [{ model: m.name }, read(m)] as const);
      if (counter) {
        new Counter({
          ...config,
          async collect() {
            this.reset();
            for (const [labels, v] of await values()) this.inc(labels, v);
          },
        });
      } else {
        new Gauge({
          ...config,
          async collect() {
            this.reset();
            for (const [labels, v] of await values()) this.set(labels, v);
          },
        });
      }
    };
    perModel('svc_queue_depth', 'Requests waiting for a sequence', (m) => m.scheduler.queued);
    perModel('svc_active_sequences', 'Sequences generating now', (m) => m.scheduler.activeCount);
    perModel('svc_requests_total', 'Generation requests accepted', (m) => m.scheduler.stats.requests, true);
    perModel('svc_requests_rejected_total', 'Generation requests refused with 429', (m) => m.scheduler.stats.rejected, true);
    perModel('svc_prompt_tokens_total', 'Prompt tokens of finished requests', (m) => m.scheduler.stats.promptTokens, true);
    perModel('svc_cached_prompt_tokens_total', 'Prompt tokens reused from the prefix cache', (m) => m.scheduler.stats.cachedPromptTokens, true);
    perModel('svc_generated_tokens_total', 'Tokens generated', (m) => m.scheduler.stats.generatedTokens, true);
    perModel('svc_decode_steps_total', 'Decode steps', (m) => m.scheduler.stats.steps, true);
    perModel('svc_shared_steps_total', 'Decode steps serving more than one sequence', (m) => m.scheduler.stats.sharedSteps, true);
    this.models.onLoaded((m) =>
      m.scheduler.stats.observe({
        onStep: (s) => {
          this.batchTokens.observe({ model: m.name }, s.tokens);
          this.batchSequences.observe({ model: m.name }, s.sequences);
        },
        onFinish: (f) => this.ttft.observe({ model: m.name }, f.ttftMs / 1000),
      }),
    );
  }

  observeHttp(method: string, route: string, status: number, seconds: number): void {
    this.httpRequests.inc({ method, route, status: String(status) });
    this.httpLatency.observe({ route }, seconds);
  }
}
