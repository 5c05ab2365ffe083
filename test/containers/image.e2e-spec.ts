// The CPU image, built from docker/Dockerfile.cpu and run through testcontainers: health,
// chat completions through the official OpenAI client, the store volume across a restart
// and across a new container, the non-root user, the HEALTHCHECK, the speech addon and the
// media tools (ffmpeg, poppler) that read video and PDF parts.
//
// Needs a Docker-compatible engine. Here that is podman's API socket:
//   eval "$(bash scripts/podman-setup.sh up)"     (installs, configures, starts; see the script)
// Without an engine these tests FAIL; SVC_SKIP_CONTAINERS=1 skips them on purpose.
// The first build compiles llama.cpp inside the image (about 10 min on 2 cores); later builds
// reuse the engine's layer cache. DEBUG=testcontainers:build prints the build log.
import { GenericContainer, getContainerRuntimeClient, ImageName, StartedTestContainer, Wait } from 'testcontainers';
import { syntheticModel } from '../e2e/helpers/fixtures';
import { pdf, video } from '../e2e/helpers/media';
import { defaultToPodman, engine, execOk, expectAllProcessesAs10001, health, MODEL_FILE, MODELS_DIR, modelIds, neverPull, openai, PORT, requireModel, ROOT, SKIP } from './support';

const IMAGE = process.env.SVC_TEST_IMAGE ?? 'localhost/svc-test:cpu';

const suite = SKIP ? describe.skip : describe;
if (SKIP) console.warn('SVC_SKIP_CONTAINERS=1: the container image tests are skipped');

suite('CPU image (docker/Dockerfile.cpu) under testcontainers', () => {
  const volume = `svc-test-store-${process.pid}-${Date.now().toString(36)}`;
  let image: GenericContainer;
  let started: StartedTestContainer | undefined;
  let dockerode: { createVolume(o: object): Promise<unknown>; getVolume(n: string): { remove(o?: object): Promise<unknown> } } | undefined;

  const container = (cmd: string[], extra: Array<{ source: string; target: string }> = []): GenericContainer =>
    image
      .withCommand(cmd)
      .withEnvironment({ SVC_THREADS: '2', SVC_LOG_LEVEL: 'log' })
      .withBindMounts([
        { source: volume, target: '/data', mode: 'rw' },
        { source: MODELS_DIR, target: '/models', mode: 'ro' },
        ...extra.map((m) => ({ ...m, mode: 'ro' as const })),
      ])
      .withExposedPorts(PORT)
      .withWaitStrategy(Wait.forHttp('/healthz', PORT).forStatusCode(200).withStartupTimeout(180_000));

  beforeAll(async () => {
    requireModel();
    defaultToPodman();
    const client = await engine();
    dockerode = (client.container as unknown as { dockerode: typeof dockerode }).dockerode;
    const t0 = Date.now();
    try {
      image = await GenericContainer.fromDockerfile(ROOT, 'docker/Dockerfile.cpu')
        .withPullPolicy(neverPull)
        .withCache(true)
        .build(IMAGE, { deleteOnExit: false });
    } catch (err) {
      throw new Error(
        `building docker/Dockerfile.cpu failed: ${(err as Error).message}. ` +
          'See the log with DEBUG=testcontainers:build, or run: podman build -f docker/Dockerfile.cpu .',
      );
    }
    console.log(`image ${IMAGE} built in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    // A named volume (created empty: the engine copies the image's /data into it, owner included).
    await dockerode!.createVolume({ Name: volume });
  }, 60 * 60_000);

  afterAll(async () => {
    await started?.stop({ timeout: 10, removeVolumes: false }).catch(() => undefined);
    await dockerode?.getVolume(volume).remove({ force: true }).catch(() => undefined);
  }, 120_000);

  it('serves /healthz and chat completions through the official openai client', async () => {
    started = await container(['-m', `/models/${MODEL_FILE}`, '-concurrency', '2']).start();
    const h = await health(started);
    expect(h.code).toBe(200);
    expect(h.body).toMatchObject({ status: 'ok', model: 'stories260K', backend: 'cpu' });

    const client = openai(started);
    const r = await client.chat.completions.create({
      model: 'stories260K',
      messages: [{ role: 'user', content: 'Once upon a time' }],
      max_tokens: 16,
      temperature: 0,
    });
    expect(r.object).toBe('chat.completion');
    expect(typeof r.choices[0].message.content).toBe('string');
    expect(r.choices[0].message.content!.length).toBeGreaterThan(0);
    expect(r.usage!.completion_tokens).toBeGreaterThan(0);

    const stream = await client.chat.completions.create({
      model: '',
      messages: [{ role: 'user', content: 'Once upon a time' }],
      max_tokens: 16,
      temperature: 0,
      stream: true,
    });
    let text = '';
    let finish: string | null = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    // Greedy: the stream says what the non-streaming answer said.
    expect(text).toBe(r.choices[0].message.content);
    expect(['stop', 'length']).toContain(finish);
  }, 300_000);

  it('runs as the non-root user 10001, server and init alike', async () => {
    const c = started!;
    expect(await execOk(c, ['id', '-u'])).toBe('10001');
    // `svc` is on the PATH (docker/README's `docker exec … svc pull` found no such command).
    expect(await execOk(c, ['svc', '-version'])).toContain('0.3.0');
    // Every process in the container, PID 1 (tini) and the node server included.
    await expectAllProcessesAs10001(c);
    const client = await getContainerRuntimeClient();
    const info = await client.image.inspect(ImageName.fromString(IMAGE));
    expect(info.Config.User).toBe('10001:10001');
    expect(Object.keys(info.Config.ExposedPorts ?? {})).toContain(`${PORT}/tcp`);
    expect(Object.keys(info.Config.Volumes ?? {})).toContain('/data');
  });

  it('has a HEALTHCHECK that passes against the running server', async () => {
    const client = await getContainerRuntimeClient();
    const info = await client.container.inspect(client.container.getById(started!.getId()));
    const hc = (info.Config as { Healthcheck?: { Test?: string[]; StartPeriod?: number } }).Healthcheck;
    expect(hc?.Test?.length).toBeGreaterThan(1);
    const [kind, ...rest] = hc!.Test!;
    expect(['CMD', 'CMD-SHELL']).toContain(kind);
    const cmd = kind === 'CMD' ? rest : ['sh', '-c', rest.join(' ')];
    expect(cmd.join(' ')).toContain('/app/docker/healthcheck.cjs');
    expect(await started!.exec(cmd)).toMatchObject({ exitCode: 0 });
  });

  it('keeps the store volume across a restart', async () => {
    const c = started!;
    // Put a model in the store, as a pull would: a GGUF file in $SVC_STORE.
    await execOk(c, ['sh', '-c', 'test -w "$SVC_STORE" && cp /models/stories260K.gguf "$SVC_STORE/tiny-story.gguf.part" && mv "$SVC_STORE/tiny-story.gguf.part" "$SVC_STORE/tiny-story.gguf"']);
    expect(await modelIds(c)).toEqual(expect.arrayContaining(['stories260K', 'tiny-story']));
    const before = (await health(c)).body.instance;

    await c.restart({ timeout: 10 });
    const h = await health(c);
    expect(h.code).toBe(200);
    expect(h.body.instance).not.toBe(before); // a new server process
    expect(await modelIds(c)).toContain('tiny-story');
    const r = await openai(c).chat.completions.create({ model: 'tiny-story', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, temperature: 0 });
    expect(r.model).toMatch(/^tiny-story/);
  }, 300_000);

  it('serves the store of a previous container from the volume, with no -m', async () => {
    await started!.stop({ timeout: 10, removeVolumes: false });
    started = undefined;
    started = await container([]).start();
    const h = await health(started);
    expect(h.code).toBe(200);
    expect(h.body.model).toBe('tiny-story');
    expect(await modelIds(started)).toEqual(['tiny-story']);
    const r = await openai(started).chat.completions.create({ model: '', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, temperature: 0 });
    expect(r.choices[0].message.content).toEqual(expect.any(String));
  }, 300_000);

  it('carries the speech addon: -whisper loads a whisper.cpp model beside the engine', async () => {
    await started!.stop({ timeout: 10, removeVolumes: false });
    started = undefined;
    // The synthetic whisper model (random weights on whisper's real vocabulary): the addon and its
    // ggml load in the image next to the engine's. (whisper.cpp's weightless test file is refused.)
    const whisper = syntheticModel('whisper-tiny');
    started = await container(['-m', `/models/${MODEL_FILE}`, '-whisper', '-whisper-model', '/whisper/whisper-tiny.bin'], [{ source: whisper, target: '/whisper/whisper-tiny.bin' }]).start();
    const h = await health(started);
    expect(h.code).toBe(200);
    expect(h.body).toMatchObject({ status: 'ok', model: 'stories260K', transcription: 'whisper-tiny' });
    const r = await openai(started).chat.completions.create({ model: '', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, temperature: 0 });
    expect(r.choices[0].message.content).toEqual(expect.any(String));
  }, 300_000);

  it('reads video and PDF parts: ffmpeg and poppler are in the image, run by the non-root user', async () => {
    await started!.stop({ timeout: 10, removeVolumes: false });
    started = undefined;
    const vision = syntheticModel('vision-tiny');
    started = await container(['-m', '/vision/vision-tiny.gguf', '-mmproj', '/models/mmproj-tinygemma3.gguf'], [{ source: vision, target: '/vision/vision-tiny.gguf' }]).start();
    const chat = (part: Record<string, unknown>) =>
      openai(started!).chat.completions.create({ model: '', max_tokens: 4, temperature: 0, messages: [{ role: 'user', content: [part as never, { type: 'text', text: 'What is this?' }] }] });
    // Two seconds: two frames of 256 positions each (the gemma3 projector).
    const v = await chat({ type: 'video_url', video_url: { url: `data:video/mp4;base64,${video(2).toString('base64')}` } });
    expect(v.usage!.prompt_tokens).toBeGreaterThan(2 * 256);
    const p = await chat({ type: 'file', file: { file_data: `data:application/pdf;base64,${pdf(['Words on a page']).toString('base64')}`, filename: 'a.pdf' } });
    expect(p.usage!.prompt_tokens).toBeGreaterThan(10);
  }, 300_000);
});
