// Streaming OpenAI /v1/completions client, and svc's /v1/stats.
import http from 'node:http';
import { HOST } from '../net.mjs';

/**
 * A client whose settings are fixed at creation:
 * keepAlive: completion requests open a new connection each by default; --keep-alive reuses
 * connections, as the official OpenAI/Anthropic/Ollama clients do.
 * cachePrompt: the cache_prompt field every completion body carries.
 */
export function createClient({ keepAlive = false, cachePrompt = false } = {}) {
  const agent = keepAlive ? new http.Agent({ keepAlive: true }) : false;
  return {
    streamCompletion: (port, body, timeoutMs) => streamCompletion(agent, port, body, timeoutMs),
    completionBody: (prompt, maxTokens) => completionBody(prompt, maxTokens, cachePrompt),
  };
}

/**
 * POST /v1/completions with stream: true; returns timings (ms, relative to send) and counts.
 * tFirst: first chunk carrying generated text; tLast: final chunk (finish_reason / usage / [DONE]).
 */
function streamCompletion(completionAgent, port, body, timeoutMs, retried = false) {
  // The retry takes a new connection: the pool may hold more sockets the server closed.
  const agent = retried ? false : completionAgent;
  return new Promise((resolve, reject) => {
    const payload = JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } });
    const t0 = performance.now();
    const r = {
      tFirst: null, tFirstChunk: null, tLast: null, tDone: null, chunks: 0, textChunks: 0,
      text: '', usage: null, finishReason: null, serverTimings: null,
    };
    const req = http.request({
      host: HOST, port, path: '/v1/completions', method: 'POST', agent,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload), accept: 'text/event-stream' },
    }, (res) => {
      if (res.statusCode !== 200) {
        let err = '';
        res.setEncoding('utf8');
        res.on('data', (d) => { err += d; });
        res.on('end', () => reject(new Error(`HTTP ${res.statusCode}: ${err.slice(0, 500)}`)));
        return;
      }
      res.setEncoding('utf8');
      let buf = '';
      const onEvent = (data) => {
        const now = performance.now() - t0;
        if (data === '[DONE]') { r.tDone = now; return; }
        let j;
        try { j = JSON.parse(data); } catch { return; }
        if (j.error) { reject(new Error(`stream error: ${JSON.stringify(j.error)}`)); return; }
        r.chunks++;
        if (r.tFirstChunk === null) r.tFirstChunk = now;
        const ch = j.choices?.[0];
        if (ch) {
          if (typeof ch.text === 'string' && ch.text.length > 0) {
            r.textChunks++;
            r.text += ch.text;
            if (r.tFirst === null) r.tFirst = now;
            r.tLast = now;
          }
          if (ch.finish_reason) {
            r.finishReason = ch.finish_reason;
            if (r.tFirst === null) r.tFirst = now;
            r.tLast = now;
          }
        }
        if (j.usage) r.usage = j.usage;
        if (j.timings) r.serverTimings = j.timings;
      };
      res.on('data', (d) => {
        buf += d;
        let idx;
        while ((idx = buf.search(/\r?\n\r?\n/)) >= 0) {
          const block = buf.slice(0, idx);
          buf = buf.slice(idx).replace(/^\r?\n\r?\n/, '');
          const data = block.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart()).join('\n');
          if (data) onEvent(data);
        }
      });
      res.on('end', () => {
        r.tEnd = performance.now() - t0;
        if (r.tFirst === null) { reject(new Error('stream ended without any generated token')); return; }
        r.promptTokens = r.usage?.prompt_tokens ?? null;
        // completion tokens: from usage when the server reports it, else one per text chunk
        r.completionTokens = r.usage?.completion_tokens ?? r.textChunks;
        resolve(r);
      });
      res.on('error', reject);
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`request timed out after ${timeoutMs} ms`)));
    // A kept-alive socket the server closed meanwhile (llama-server: Keep-Alive max=100): once more.
    req.on('error', (e) => (req.reusedSocket && e.code === 'ECONNRESET' && !retried ? streamCompletion(completionAgent, port, body, timeoutMs, true).then(resolve, reject) : reject(e)));
    req.end(payload);
  });
}

function completionBody(prompt, maxTokens, cachePrompt) {
  return {
    prompt,
    max_tokens: maxTokens,
    temperature: 0,
    ignore_eos: true, // llama-server honours it; servers that do not are measured on real token counts
    // Both servers: no prompt cache (the distinct tags leave nothing to reuse; keeping would only cost);
    // --cache-prompt measures them with their caches on.
    cache_prompt: cachePrompt,
  };
}

/** svc's /v1/stats (null elsewhere). */
export async function serverStats(port) {
  return new Promise((resolve) => {
    const req = http.get({ host: HOST, port, path: '/v1/stats', agent: false, timeout: 2000 }, (res) => {
      let b = '';
      res.on('data', (d) => (b += d));
      res.on('end', () => {
        try {
          const j = JSON.parse(b);
          resolve(res.statusCode === 200 && typeof j.decode_ms === 'number' ? j : null);
        } catch {
          resolve(null);
        }
      });
    });
    req.on('error', () => resolve(null));
    req.on('timeout', () => req.destroy());
  });
}
