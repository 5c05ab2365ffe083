import OpenAI from 'openai';
import { fixtureModel, STORIES } from './helpers/fixtures';
import { postJson, RunningServer, startServer } from './helpers/server';

jest.setTimeout(120_000);

const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';

/** Content parts: validated in the dialect, refused by a model without a vision projector. */
describe('multimodal content parts (stories260K, no vision projector)', () => {
  let srv: RunningServer;
  let client: OpenAI;

  beforeAll(async () => {
    srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '2']);
    client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x' });
  });
  afterAll(async () => {
    await srv?.stop();
  });

  const chat = (parts: unknown[]) => postJson(`${srv.url}/v1/chat/completions`, { max_tokens: 2, messages: [{ role: 'user', content: parts }] });
  const text = { type: 'text', text: 'What is this?' };

  it('text parts alone are a plain prompt (joined with a newline, as llama.cpp joins them)', async () => {
    const r = await client.chat.completions.create({ model: '', max_tokens: 4, messages: [{ role: 'user', content: [{ type: 'text', text: 'Once upon' }, { type: 'text', text: 'a time' }] }] });
    expect(r.choices[0].finish_reason).toBeDefined();
    const same = await client.chat.completions.create({ model: '', max_tokens: 4, messages: [{ role: 'user', content: 'Once upon\na time' }] });
    expect(r.usage!.prompt_tokens).toBe(same.usage!.prompt_tokens);
  });

  it('well-formed image and video parts reach the engine, which says it has no vision projector (PDFs are read as text: media-input)', async () => {
    const parts: Array<[unknown, string]> = [
      [{ type: 'image_url', image_url: { url: `data:image/png;base64,${PNG}`, detail: 'low' } }, 'image'],
      [{ type: 'image_url', image_url: { url: 'https://example.com/cat.png' } }, 'image'],
      [{ type: 'video_url', video_url: { url: 'https://example.com/clip.mp4' } }, 'video'],
      [{ type: 'video', video: 'data:video/mp4;base64,AAAA' }, 'video'],
    ];
    for (const [part, kind] of parts) {
      const r = await chat([text, part]);
      expect(r.status).toBe(400);
      expect(r.json.error).toEqual({ message: `this model has no vision projector; it cannot read ${kind} parts`, type: 'Bad Request' });
    }
    // Through the official client too.
    await expect(
      client.chat.completions.create({ model: '', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: `data:image/png;base64,${PNG}` } }] }] }),
    ).rejects.toMatchObject({ status: 400, message: expect.stringContaining('no vision projector') });
  });

  it('malformed parts are a 400 naming the part and the problem', async () => {
    const cases: Array<[unknown, string]> = [
      [{ type: 'picture', url: 'x' }, 'messages[0].content[1].type must be one of text, image_url, file, video_url, video'],
      ['just a string', 'messages[0].content[1] must be an object with a type'],
      [{ type: 'text', text: 7 }, 'messages[0].content[1].text must be a string'],
      [{ type: 'image_url' }, 'messages[0].content[1].image_url.url must be a string'],
      [{ type: 'image_url', image_url: { url: 'ftp://example.com/a.png' } }, 'messages[0].content[1].image_url.url must be an http(s) URL or a data:image/...;base64 URL'],
      [{ type: 'image_url', image_url: { url: `data:text/plain;base64,${PNG}` } }, 'messages[0].content[1].image_url.url is a data URL of text/plain; expected image/*'],
      [{ type: 'image_url', image_url: { url: 'data:image/png;base64,***' } }, 'messages[0].content[1].image_url.url data is not base64'],
      [{ type: 'file', file: { file_id: 'file-123' } }, 'messages[0].content[1].file.file_id is not supported (this server stores no files); send file_data'],
      [{ type: 'file', file: { file_data: `data:image/png;base64,${PNG}` } }, 'messages[0].content[1].file.file_data is image/png; file parts take a PDF (application/pdf)'],
      [{ type: 'file' }, 'messages[0].content[1].file must be an object with file_data'],
      [{ type: 'video_url', video_url: { url: `data:image/png;base64,${PNG}` } }, 'messages[0].content[1].video_url.url is a data URL of image/png; expected video/*'],
      [{ type: 'video', video: 42 }, 'messages[0].content[1].video.url must be a string'],
    ];
    for (const [part, message] of cases) {
      const r = await chat([text, part]);
      expect(r.status).toBe(400);
      expect(r.json.error).toEqual({ message: `cannot parse request: ${message}`, type: 'Bad Request' });
    }
    const notArray = await postJson(`${srv.url}/v1/chat/completions`, { messages: [{ role: 'user', content: { type: 'text', text: 'x' } }] });
    expect(notArray.status).toBe(400);
    expect(notArray.json.error.message).toBe('cannot parse request: messages[0].content must be a string or an array of parts');
  });
});
