import { fixtureModel, STORIES } from './helpers/fixtures';
import { postJson, RunningServer, startServer } from './helpers/server';

jest.setTimeout(60_000);

describe('POST /v1/redact (the real server process)', () => {
  let srv: RunningServer;

  beforeAll(async () => {
    srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '1', '-concurrency', '2', '-api-key', 'k']);
  });
  afterAll(async () => {
    await srv?.stop();
  });

  const post = (body: unknown, key = 'k') => postJson(`${srv.url}/v1/redact`, body, key ? { authorization: `Bearer ${key}` } : {});

  it('answers the redact object: tags in the text, findings with offsets into the original', async () => {
    const text = 'Write to jo@example.org, card 4111-1111-1111-1111, from 10.0.0.7.';
    const r = await post({ text });
    expect(r.status).toBe(200);
    expect(r.json.text).toBe('Write to [EMAIL], card [CREDIT_CARD], from [IP_ADDRESS].');
    expect(r.json.findings.map((f: { type: string; start: number; end: number }) => [f.type, text.slice(f.start, f.end)])).toEqual([
      ['email', 'jo@example.org'],
      ['credit_card', '4111-1111-1111-1111'],
      ['ip_address', '10.0.0.7'],
    ]);
    const only = await post({ text, types: ['email'] });
    expect(only.json).toEqual({ text: 'Write to [EMAIL], card 4111-1111-1111-1111, from 10.0.0.7.', findings: [{ type: 'email', start: 9, end: 23 }] });
  });

  it('finds a card after another number, and a card after an IBAN (both were left in the text)', async () => {
    const text = 'Row 1 4111 1111 1111 1111 exp 12/27; IBAN DE89 3704 0044 0532 0130 00 4111 1111 1111 1111';
    const r = await post({ text });
    expect(r.status).toBe(200);
    expect(r.json.text).toBe('Row 1 [CREDIT_CARD] exp 12/27; IBAN [IBAN] [CREDIT_CARD]');
    expect(r.json.findings.map((f: { type: string; start: number; end: number }) => [f.type, text.slice(f.start, f.end)])).toEqual([
      ['credit_card', '4111 1111 1111 1111'],
      ['iban', 'DE89 3704 0044 0532 0130 00'],
      ['credit_card', '4111 1111 1111 1111'],
    ]);
  });

  it('answers 200 for a long unbroken token (the address pattern overflowed the stack: a 500)', async () => {
    const token = 'a'.repeat(5_700_000);
    const r = await post({ text: token });
    expect([r.status, r.json?.findings]).toEqual([200, []]);
    expect(r.json.text).toBe(token);
    const mail = `${token}@example.com`;
    const m = await post({ text: `to ${mail}` });
    expect([m.status, m.json?.text, m.json?.findings]).toEqual([200, 'to [EMAIL]', [{ type: 'email', start: 3, end: 3 + mail.length }]]);
  });

  it('refuses bad input in the service error shape, and needs the key like every route', async () => {
    const cases: Array<[unknown, string]> = [
      [{}, 'text is required'],
      [{ text: 5 }, 'cannot parse request: text must be a string'],
      [{ text: 'x', types: 'email' }, 'cannot parse request: types must be an array of strings'],
      [{ text: 'x', types: ['email', 'passport'] }, 'unknown redaction type "passport"; known: email, iban, credit_card, ssn, ip_address, phone'],
    ];
    for (const [body, message] of cases) {
      const r = await post(body);
      expect([r.status, r.json]).toEqual([400, { error: { message, type: 'Bad Request' } }]);
    }
    expect((await post({ text: 'x' }, '')).status).toBe(401);
  });
});
