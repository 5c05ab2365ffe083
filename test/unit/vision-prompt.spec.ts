import { NativeMediaChunk, NativeMediaPrompt, NativeProjector } from '../../libs/engine/src/backend/native-addon';
import { InvalidRequestError } from '../../libs/engine/src/core/errors';
import { CoreMessage } from '../../libs/engine/src/core/generation-request';
import { checkImagePixels, imageBytes, imageDimensions } from '../../libs/engine/src/media/media-bytes';
import { png } from '../e2e/helpers/images';
import { IMAGE_POSITION, readVisionPrompt, textTokens, visionPrompt } from '../../libs/engine/src/media/vision-prompt';
import { withMediaMarkers } from '../../libs/engine/src/prompt/media-markers';
import { Sequence } from '../../libs/engine/src/scheduler/sequence';
import { BatchBuilder } from '../../libs/engine/src/scheduler/batch-builder';
import { chatToCore, generateToCore } from '../../libs/dialects/src/local-runner/mapping/runner-request.mapper';

const M = '<__media__>';

describe('withMediaMarkers', () => {
  it('puts the marker where each image sits and returns the images in marker order', () => {
    const a = { type: 'media' as const, kind: 'image' as const, data: 'AAAA' };
    const b = { type: 'media' as const, kind: 'image' as const, url: 'http://x/b.png' };
    const messages: CoreMessage[] = [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: [{ type: 'text', text: 'first' }, a] },
      { role: 'assistant', content: 'ok' },
      { role: 'user', content: [b, { type: 'text', text: 'second' }] },
    ];
    const out = withMediaMarkers(messages, M);
    expect(out.media).toEqual([a, b]);
    expect(out.messages[1].content).toEqual([{ type: 'text', text: 'first' }, { type: 'text', text: M }]);
    expect(out.messages[3].content).toEqual([{ type: 'text', text: M }, { type: 'text', text: 'second' }]);
    expect(out.messages[0]).toBe(messages[0]);
  });

  it('refuses audio and the marker typed as text', () => {
    expect(() => withMediaMarkers([{ role: 'user', content: [{ type: 'media' as const, kind: 'audio' }] }], M)).toThrow('audio parts are not read by this model');
    expect(() => withMediaMarkers([{ role: 'user', content: `look ${M}` }], M)).toThrow(InvalidRequestError);
    // In an earlier call's arguments it reached mtmd, which counted more markers than images.
    const call = { id: 'c1', type: 'function' as const, function: { name: 'f', arguments: `{"x":"${M}"}` } };
    expect(() => withMediaMarkers([{ role: 'assistant', content: null, tool_calls: [call] }], M)).toThrow(`messages[0] holds the text ${M}`);
  });
});

describe('imageBytes', () => {
  it('reads base64, data URLs and a data URL in a base64 field', async () => {
    const bytes = Buffer.from([1, 2, 3, 250]);
    const b64 = bytes.toString('base64');
    expect(await imageBytes({ type: 'media', kind: 'image', data: b64 }, 1)).toEqual(bytes);
    expect(await imageBytes({ type: 'media', kind: 'image', url: `data:image/png;base64,${b64}` }, 1)).toEqual(bytes);
    expect(await imageBytes({ type: 'media', kind: 'image', data: `data:image/png;base64,${b64}` }, 1)).toEqual(bytes);
  });

  it('refuses what is not base64, and more than the cap', async () => {
    await expect(imageBytes({ type: 'media', kind: 'image', data: '***' }, 2)).rejects.toThrow('image 2: the data is not base64');
    await expect(imageBytes({ type: 'media', kind: 'image', data: Buffer.alloc(100).toString('base64') }, 1, { maxBytes: 10 })).rejects.toThrow('larger than 10 bytes');
    await expect(imageBytes({ type: 'media', kind: 'image', url: 'ftp://x/y.png' }, 1)).rejects.toThrow('http(s) or a base64 data: URL');
  });
});

/** A projector that splits "<text>M<text>" into text / 3-position image / text chunks. */
function fakeProjector(chunks: NativeMediaChunk[]): NativeProjector & { disposed: number } {
  const p = {
    marker: M,
    usesMrope: false,
    nonCausalImages: false,
    disposed: 0,
    tokenize: async (): Promise<NativeMediaPrompt> => ({ chunks, dispose: () => void p.disposed++ }),
    dispose: () => undefined,
  };
  return p;
}

describe('visionPrompt and the prefill it drives', () => {
  const chunks: NativeMediaChunk[] = [
    { type: 'text', nTokens: 2, nPos: 2, tokens: Int32Array.from([10, 11]) },
    { type: 'image', nTokens: 3, nPos: 3, id: 'abc' },
    { type: 'text', nTokens: 2, nPos: 2, tokens: Int32Array.from([12, 13]) },
  ];

  it('lays out image positions as placeholders and counts them', async () => {
    const { tokens, media } = await visionPrompt(fakeProjector(chunks), 'x', [Buffer.alloc(1)]);
    expect([...tokens]).toEqual([10, 11, IMAGE_POSITION, IMAGE_POSITION, IMAGE_POSITION, 12, 13]);
    expect(media.spans).toEqual([{ start: 2, length: 3, chunk: 1 }]);
    expect([...textTokens(tokens)]).toEqual([10, 11, 12, 13]);
  });

  it('a prompt ending on an image is refused (nothing to sample from)', async () => {
    const p = fakeProjector(chunks.slice(0, 2));
    await expect(visionPrompt(p, 'x', [Buffer.alloc(1)])).rejects.toThrow('the prompt ends with an image');
    expect(p.disposed).toBe(1);
  });

  it('batches text up to the image, never the placeholders', async () => {
    const { tokens, media } = await visionPrompt(fakeProjector(chunks), 'x', [Buffer.alloc(1)]);
    const model = { isEog: () => false } as never;
    const s = new Sequence({ modelName: 'm', promptTokens: tokens, media, sampler: {} as never, maxTokens: 4, stop: [], logprobs: 0, retainPrefix: true }, model);
    s.seq = 0;
    const builder = new BatchBuilder(64, 100);
    const first = builder.build([s]);
    expect([...first.batch.tokens]).toEqual([10, 11]);
    expect(first.samples).toHaveLength(0);
    expect(s.pendingMedia).toEqual({ start: 2, length: 3, chunk: 1 });
    expect(builder.build([s]).batch.tokens.length).toBe(0);
    s.nPast = 5; // the scheduler wrote the image (evalMedia)
    const rest = builder.build([s]);
    expect([...rest.batch.tokens]).toEqual([12, 13]);
    expect([...rest.batch.pos]).toEqual([5, 6]);
    expect(rest.samples).toHaveLength(1);
  });
});

describe('the local runner\'s images', () => {
  it('go before the message\'s text, as the local runner places them (they went after it)', () => {
    const chat = chatToCore({ model: '', messages: [{ role: 'user', content: 'What is this?', images: ['AAAA', 'BBBB'] }] } as never);
    const gen = generateToCore({ model: '', prompt: 'What is this?', images: ['CCCC'] } as never);
    const kinds = (m: CoreMessage | undefined) => (Array.isArray(m?.content) ? m!.content.map((p) => (p.type === 'text' ? `text:${p.text}` : `image:${(p as { data?: string }).data}`)) : m?.content);
    const last = (r: { prompt: { kind: string; messages?: CoreMessage[] } }) => (r.prompt.kind === "chat" ? r.prompt.messages!.at(-1) : undefined);
    expect(kinds(last(chat as never))).toEqual(['image:AAAA', 'image:BBBB', 'text:What is this?']);
    expect(kinds(last(gen as never))).toEqual(['image:CCCC', 'text:What is this?']);
  });
});

describe('image limits per request', () => {
  it('reads sizes from PNG, GIF, BMP and JPEG headers, and refuses more pixels than 4096 x 4096 before decoding', () => {
    const big = png(1, 1, () => [0, 0, 0]);
    big.writeUInt32BE(12000, 16);
    big.writeUInt32BE(12000, 20);
    expect(imageDimensions(big)).toEqual({ width: 12000, height: 12000 });
    expect(() => checkImagePixels(big, 2)).toThrow('image 2 is 12000x12000 pixels; images are taken up to 16777216 pixels (4096x4096)');
    expect(() => checkImagePixels(png(32, 32, () => [1, 2, 3]), 1)).not.toThrow();
    const gif = Buffer.alloc(16);
    gif.write('GIF89a', 0, 'latin1');
    gif.writeUInt16LE(640, 6);
    gif.writeUInt16LE(480, 8);
    expect(imageDimensions(gif)).toEqual({ width: 640, height: 480 });
    const bmp = Buffer.alloc(30);
    bmp.write('BM', 0, 'latin1');
    bmp.writeInt32LE(100, 18);
    bmp.writeInt32LE(-50, 22);
    expect(imageDimensions(bmp)).toEqual({ width: 100, height: 50 });
    // SOI, an APP0 segment of 16 bytes, then SOF0: length, precision, height 300, width 400.
    const jpeg = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, ...Array(14).fill(0), 0xff, 0xc0, 0x00, 0x11, 0x08, 0x01, 0x2c, 0x01, 0x90, 0x03]);
    expect(imageDimensions(jpeg)).toEqual({ width: 400, height: 300 });
    expect(imageDimensions(Buffer.from('not an image'))).toBeUndefined();
    // PNM (with a comment) and Radiance HDR: a 5000 x 4000 PGM was decoded unchecked.
    expect(imageDimensions(Buffer.from('P5\n# made by hand\n5000 4000\n255\n'))).toEqual({ width: 5000, height: 4000 });
    expect(() => checkImagePixels(Buffer.from('P5\n5000 4000\n255\n'), 1)).toThrow('image 1 is 5000x4000 pixels');
    expect(imageDimensions(Buffer.from('#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 200 +X 300\n'))).toEqual({ width: 300, height: 200 });
    // A format whose size cannot be read first (TGA: no magic) is refused, not decoded unchecked.
    const tga = Buffer.alloc(18);
    tga[2] = 2;
    tga.writeUInt16LE(65535, 12);
    tga.writeUInt16LE(65535, 14);
    expect(() => checkImagePixels(tga, 3)).toThrow('image 3 cannot be decoded: not a PNG, JPEG, GIF, BMP, PSD, PNM or HDR image');
  });
});
