/**
 * The studio page's script: plain browser JavaScript, inline (allowed by its hash in the
 * Content-Security-Policy), talking only to this server's own routes with relative URLs.
 *
 * Two parts. `svcStudio` holds what needs no DOM (the SSE parser, the chat stream, the API
 * calls, formatting); the tests run it in node against the real server. `boot()` wires it to
 * the page and runs only where there is a document. It is written without backquotes, since
 * the TypeScript module carries it in a template literal.
 */
export const STUDIO_SCRIPT = String.raw`
'use strict';
var svcStudio = (function () {
  /** Splits server-sent-event text into complete events; rest is what the next chunk continues. */
  function parseSse(buffer) {
    var text = buffer, hold = '';
    // A CR at the very end may be the first half of a CRLF still in flight.
    if (text.endsWith('\r')) { hold = '\r'; text = text.slice(0, -1); }
    text = text.replace(/\r\n?/g, '\n');
    var events = [], start = 0;
    for (;;) {
      var end = text.indexOf('\n\n', start);
      if (end < 0) break;
      var ev = parseBlock(text.slice(start, end));
      if (ev) events.push(ev);
      start = end + 2;
    }
    return { events: events, rest: text.slice(start) + hold };
  }

  function parseBlock(block) {
    var data = [], event = 'message';
    block.split('\n').forEach(function (line) {
      if (line === '' || line[0] === ':') return;
      var i = line.indexOf(':');
      var field = i < 0 ? line : line.slice(0, i);
      var value = i < 0 ? '' : line.slice(i + 1);
      if (value[0] === ' ') value = value.slice(1);
      if (field === 'data') data.push(value);
      else if (field === 'event') event = value;
    });
    return data.length ? { event: event, data: data.join('\n') } : null;
  }

  /** The request headers for the current credentials. */
  function authHeaders(creds, json) {
    var h = {};
    if (json) h['content-type'] = 'application/json';
    if (creds && creds.key) h.authorization = 'Bearer ' + creds.key;
    if (creds && creds.marking) h['x-classification'] = creds.marking;
    return h;
  }

  /** An Error for a failed answer, with the service's message (both error shapes) and the status. */
  async function apiError(res) {
    var text = '';
    try { text = await res.text(); } catch (e) { /* the body is gone */ }
    var message = text || res.statusText || 'request failed';
    try {
      var j = JSON.parse(text);
      if (j && j.error) message = typeof j.error === 'string' ? j.error : j.error.message || message;
    } catch (e) { /* not JSON: the text itself */ }
    var err = new Error(res.status + ': ' + message);
    err.status = res.status;
    return err;
  }

  /** One JSON call to this server; body undefined makes it a GET. */
  async function call(fetchFn, creds, path, body, signal) {
    var init = { method: body === undefined ? 'GET' : 'POST', headers: authHeaders(creds, body !== undefined), signal: signal };
    if (body !== undefined) init.body = JSON.stringify(body);
    var res = await fetchFn(path, init);
    if (!res.ok) throw await apiError(res);
    return res.json();
  }

  /** Folds one chunk of a chat stream into the answer so far; onDelta(kind, text) sees each piece. */
  function applyChunk(out, data, onDelta) {
    if (data === '[DONE]') { out.done = true; return; }
    var c = JSON.parse(data);
    if (c.error) throw new Error(c.error.message || String(c.error));
    if (c.usage) out.usage = c.usage;
    var ch = c.choices && c.choices[0];
    if (!ch) return;
    var d = ch.delta || {};
    if (d.reasoning_content) { out.reasoning += d.reasoning_content; if (onDelta) onDelta('reasoning', d.reasoning_content); }
    if (d.content) { out.text += d.content; if (onDelta) onDelta('content', d.content); }
    if (ch.finish_reason) out.finish = ch.finish_reason;
  }

  /**
   * POST /v1/chat/completions with stream: true, read as it arrives. Resolves with
   * {text, reasoning, finish, usage, done, ttftMs, totalMs}; done is false when the stream
   * ended without its [DONE] frame (the spec's sign of a truncated answer).
   */
  async function streamChat(fetchFn, creds, body, opts) {
    opts = opts || {};
    var t0 = Date.now();
    var out = { text: '', reasoning: '', finish: null, usage: null, done: false, ttftMs: null, totalMs: null };
    var payload = Object.assign({}, body, { stream: true });
    var res = await fetchFn('/v1/chat/completions', { method: 'POST', headers: authHeaders(creds, true), body: JSON.stringify(payload), signal: opts.signal });
    if (!res.ok) throw await apiError(res);
    var reader = res.body.getReader(), decoder = new TextDecoder(), buf = '';
    var onDelta = function (kind, text) {
      if (out.ttftMs === null) out.ttftMs = Date.now() - t0;
      if (opts.onDelta) opts.onDelta(kind, text);
    };
    for (;;) {
      var r = await reader.read();
      if (r.done) break;
      var parsed = parseSse(buf + decoder.decode(r.value, { stream: true }));
      buf = parsed.rest;
      parsed.events.forEach(function (ev) { applyChunk(out, ev.data, onDelta); });
    }
    parseSse(buf + decoder.decode() + '\n\n').events.forEach(function (ev) { applyChunk(out, ev.data, onDelta); });
    out.totalMs = Date.now() - t0;
    return out;
  }

  /** The chat request the settings describe. */
  function chatBody(s) {
    var messages = [];
    if (s.system && s.system.trim()) messages.push({ role: 'system', content: s.system });
    var body = { model: s.model || '', messages: messages.concat(s.history) };
    var t = parseFloat(s.temperature);
    if (!isNaN(t)) body.temperature = t;
    var n = parseInt(s.maxTokens, 10);
    if (n > 0) body.max_tokens = n;
    var stop = (s.stop || '').split('\n').filter(function (x) { return x !== ''; });
    if (stop.length) body.stop = stop;
    return body;
  }

  function ms(v) { return (Math.round(v * 10) / 10) + ' ms'; }

  /** One line about an answer: tokens, the server's prefill and decode times, the client's clock. */
  function usageLine(out) {
    var parts = [], u = out.usage;
    if (u) {
      var cached = u.prompt_tokens_details && u.prompt_tokens_details.cached_tokens;
      parts.push(u.prompt_tokens + ' prompt' + (cached ? ' (' + cached + ' cached)' : '') + ' + ' + u.completion_tokens + ' completion tokens');
      if (typeof u.svc_prefill_ms === 'number') parts.push('prefill ' + ms(u.svc_prefill_ms));
      if (typeof u.svc_decode_ms === 'number') {
        var rate = u.svc_decode_ms > 0 && u.completion_tokens > 1 ? ' (' + ((u.completion_tokens - 1) / (u.svc_decode_ms / 1000)).toFixed(1) + ' tok/s)' : '';
        parts.push('decode ' + ms(u.svc_decode_ms) + rate);
      }
    }
    if (out.ttftMs !== null && out.ttftMs !== undefined) parts.push('first token after ' + ms(out.ttftMs));
    if (out.totalMs !== null && out.totalMs !== undefined) parts.push(ms(out.totalMs) + ' in all');
    if (out.finish) parts.push('finish: ' + out.finish);
    if (!out.done) parts.push('stream ended without [DONE]: truncated');
    return parts.join(' · ');
  }

  function cosine(a, b) {
    var dot = 0, na = 0, nb = 0;
    for (var i = 0; i < a.length; i++) { dot += a[i] * b[i]; na += a[i] * a[i]; nb += b[i] * b[i]; }
    return na && nb ? dot / Math.sqrt(na * nb) : 0;
  }

  /** Non-empty lines of a text box. */
  function lines(text) {
    return text.split('\n').map(function (l) { return l.trim(); }).filter(function (l) { return l !== ''; });
  }

  /** What a POST /studio/exec answer says after its output. */
  function execSummary(r) {
    var s = r.signal ? 'killed by ' + r.signal : 'exit ' + r.exit_code;
    if (r.timed_out) s += ', timed out';
    if (r.truncated) s += ', output truncated';
    return '[' + s + ' · ' + r.duration_ms + ' ms]';
  }

  return { parseSse: parseSse, authHeaders: authHeaders, call: call, streamChat: streamChat, chatBody: chatBody, usageLine: usageLine, cosine: cosine, lines: lines, execSummary: execSummary };
})();

function boot(S) {
  var $ = function (id) { return document.getElementById(id); };
  var store = { get: function (k) { try { return sessionStorage.getItem(k) || ''; } catch (e) { return ''; } },
                set: function (k, v) { try { if (v) sessionStorage.setItem(k, v); else sessionStorage.removeItem(k); } catch (e) { /* storage off */ } } };
  var creds = { key: store.get('svc.key'), marking: store.get('svc.marking') };
  var f = function (path, init) { return fetch(path, init); };
  var api = function (path, body, signal) { return S.call(f, creds, path, body, signal); };
  var el = function (tag, cls, text) { var e = document.createElement(tag); if (cls) e.className = cls; if (text !== undefined) e.textContent = text; return e; };
  var status = function (text, bad) { $('status').textContent = text; $('status').className = bad ? 'bad' : ''; };
  var fail = function (box, err) {
    $(box).textContent = err && err.name === 'AbortError' ? '' : String(err && err.message || err);
    if (err && err.status === 401) { $('keybox').open = true; status('this server needs an API key', true); }
  };

  // Tabs.
  document.querySelectorAll('#tabs button').forEach(function (b) {
    b.addEventListener('click', function () {
      document.querySelectorAll('#tabs button').forEach(function (o) { o.setAttribute('aria-selected', String(o === b)); $('tab-' + o.dataset.tab).hidden = o !== b; });
    });
  });

  // Credentials.
  $('key').value = creds.key; $('marking').value = creds.marking;
  $('key-save').addEventListener('click', function () {
    creds.key = $('key').value.trim(); creds.marking = $('marking').value.trim();
    store.set('svc.key', creds.key); store.set('svc.marking', creds.marking);
    $('keybox').open = false; connect();
  });
  $('key-forget').addEventListener('click', function () { $('key').value = ''; $('marking').value = ''; $('key-save').click(); });

  function fill(select, models, wanted, fallback, ranks) {
    var keep = select.value;
    select.textContent = '';
    select.appendChild(el('option', '', fallback)).value = '';
    // Encoders and cross-encoders both list as embeddings: svc_reranker tells them apart.
    models.filter(function (m) { return !m.capabilities || !m.capabilities.length || m.capabilities.some(function (c) { return wanted.indexOf(c) >= 0; }); })
      .filter(function (m) { return ranks === undefined || !!m.svc_reranker === ranks; })
      .forEach(function (m) { select.appendChild(el('option', '', m.id)).value = m.id; });
    select.value = keep;
    if (select.value !== keep) select.value = '';
  }

  async function connect() {
    status('connecting…');
    try {
      var cfg = await api('/studio/config');
      $('term-tab').hidden = !cfg.exec;
      var list = await api('/v1/models');
      var models = list.data || [];
      fill($('chat-model'), models, ['chat', 'completion'], '(default model)');
      fill($('embed-model'), models, ['embeddings'], "(the server's -embed encoder)", false);
      fill($('rerank-model'), models, ['embeddings'], "(the server's -rerank cross-encoder)", true);
      status('connected · ' + models.length + ' model' + (models.length === 1 ? '' : 's') + (cfg.exec ? ' · command execution on' : ''));
    } catch (err) {
      status(err.status === 401 ? 'this server needs an API key' : err.status ? 'the server refused: ' + err.message : 'cannot reach the server: ' + err.message, true);
      if (err.status === 401) $('keybox').open = true;
    }
  }

  // Chat.
  var history = [], controller = null;
  function bubble(role, text) {
    var m = el('div', 'msg ' + role);
    m.appendChild(el('span', 'who', role));
    var thinking = m.appendChild(el('span', 'thinking', ''));
    var body = m.appendChild(el('span', 'body', text));
    $('transcript').appendChild(m);
    $('transcript').scrollTop = $('transcript').scrollHeight;
    return { thinking: thinking, body: body };
  }
  async function send() {
    var text = $('prompt').value;
    if (!text.trim() || controller) return;
    $('prompt').value = ''; $('chat-error').textContent = ''; $('chat-meta').textContent = '';
    // This answer belongs to this conversation, even if New chat replaces it while it streams.
    var convo = history;
    convo.push({ role: 'user', content: text });
    bubble('user', text);
    var view = bubble('assistant', '');
    controller = new AbortController();
    $('send').disabled = true; $('stop').disabled = false;
    var body = S.chatBody({ model: $('chat-model').value, system: $('system').value, temperature: $('temperature').value, maxTokens: $('max-tokens').value, stop: $('stop-strings').value, history: convo });
    var partial = '';
    try {
      var out = await S.streamChat(f, creds, body, { signal: controller.signal, onDelta: function (kind, piece) {
        if (kind === 'content') { partial += piece; view.body.textContent += piece; } else view.thinking.textContent += piece;
        $('transcript').scrollTop = $('transcript').scrollHeight;
      } });
      convo.push({ role: 'assistant', content: out.text });
      $('chat-meta').textContent = S.usageLine(out);
    } catch (err) {
      if (err.name === 'AbortError') { $('chat-meta').textContent = 'stopped'; convo.push({ role: 'assistant', content: partial }); }
      else { convo.pop(); fail('chat-error', err); }
    } finally {
      controller = null; $('send').disabled = false; $('stop').disabled = true;
    }
  }
  $('send').addEventListener('click', send);
  $('prompt').addEventListener('keydown', function (e) { if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); send(); } });
  $('stop').addEventListener('click', function () { if (controller) controller.abort(); });
  $('chat-clear').addEventListener('click', function () { if (controller) controller.abort(); history = []; $('transcript').textContent = ''; $('chat-meta').textContent = ''; $('chat-error').textContent = ''; });

  // The small panels: one request each, the answer drawn with textContent.
  // A failed run clears the panel's results: the last success's stayed under the error.
  function panel(button, errorBox, outputs, run) {
    $(button).addEventListener('click', async function () {
      $(errorBox).textContent = ''; $(button).disabled = true;
      try { await run(); } catch (err) { outputs.forEach(function (id) { $(id).textContent = ''; }); fail(errorBox, err); } finally { $(button).disabled = false; }
    });
  }
  function table(head, rows) {
    var t = el('table'), tr = t.appendChild(el('tr'));
    head.forEach(function (h) { tr.appendChild(el('th', '', h)); });
    rows.forEach(function (r) { var row = t.appendChild(el('tr')); r.forEach(function (c) { row.appendChild(el('td', typeof c === 'number' ? 'num' : '', typeof c === 'number' ? c.toFixed(4) : String(c))); }); });
    return t;
  }
  panel('embed-run', 'embed-error', ['embed-meta', 'embed-out'], async function () {
    var inputs = S.lines($('embed-input').value);
    var r = await api('/v1/embeddings', { model: $('embed-model').value, input: inputs });
    var vecs = r.data.map(function (d) { return d.embedding; });
    $('embed-meta').textContent = r.model + ' · ' + vecs.length + ' vector' + (vecs.length === 1 ? '' : 's') + ' of ' + (vecs[0] ? vecs[0].length : 0) + ' dimensions' + (r.usage ? ' · ' + r.usage.prompt_tokens + ' tokens' : '');
    var out = $('embed-out'); out.textContent = '';
    out.appendChild(table(['input', 'first values'], vecs.map(function (v, i) { return [inputs[i], v.slice(0, 6).map(function (x) { return x.toFixed(4); }).join(' ') + ' …']; })));
    if (vecs.length > 1) {
      out.appendChild(el('p', 'meta', 'Cosine similarity'));
      out.appendChild(table([''].concat(inputs.map(function (_, i) { return '#' + (i + 1); })), vecs.map(function (a, i) { return ['#' + (i + 1) + ' ' + inputs[i]].concat(vecs.map(function (b) { return S.cosine(a, b); })); })));
    }
  });
  panel('rerank-run', 'rerank-error', ['rerank-out'], async function () {
    var docs = S.lines($('rerank-docs').value);
    var r = await api('/v1/rerank', { model: $('rerank-model').value, query: $('rerank-query').value, documents: docs });
    $('rerank-out').textContent = '';
    $('rerank-out').appendChild(table(['#', 'relevance', 'score', 'document'], r.results.map(function (x) { return [x.index + 1, x.relevance_score, x.score, docs[x.index]]; })));
  });
  panel('redact-run', 'redact-error', ['redact-out', 'redact-findings'], async function () {
    var r = await api('/v1/redact', { text: $('redact-input').value });
    $('redact-out').textContent = r.text;
    var src = $('redact-input').value;
    $('redact-findings').textContent = '';
    $('redact-findings').appendChild(table(['type', 'found', 'at'], r.findings.map(function (x) { return [x.type, src.slice(x.start, x.end), x.start + '–' + x.end]; })));
  });
  panel('tokens-run', 'tokens-error', ['tokens-out'], async function () {
    var body = { model: $('chat-model').value, messages: [{ role: 'user', content: $('tokens-input').value }] };
    if ($('system').value.trim()) body.system = $('system').value;
    var r = await api('/v1/messages/count_tokens', body);
    $('tokens-out').textContent = r.input_tokens + ' input tokens on ' + r.svc_model;
  });

  // Terminal (shown only when the server allows it).
  var term = null, past = [], back = 0;
  function print(cls, text) { if (text) $('term-out').appendChild(el('span', cls, text.endsWith('\n') ? text : text + '\n')); $('term-out').scrollTop = $('term-out').scrollHeight; }
  async function run() {
    var command = $('term-cmd').value;
    if (!command.trim() || term) return;
    past.push(command); back = past.length; $('term-cmd').value = '';
    print('cmd', '$ ' + command);
    term = new AbortController(); $('term-run').disabled = true; $('term-stop').disabled = false;
    var body = { command: command, timeout_ms: Math.round(parseFloat($('term-timeout').value || '30') * 1000) };
    if ($('term-cwd').value.trim()) body.cwd = $('term-cwd').value.trim();
    try {
      var r = await api('/studio/exec', body, term.signal);
      print('', r.stdout); print('err', r.stderr); print('note', S.execSummary(r));
    } catch (err) {
      print('err', err.name === 'AbortError' ? '[stopped: the command was killed]' : String(err.message));
      if (err.status === 401) $('keybox').open = true;
    } finally {
      term = null; $('term-run').disabled = false; $('term-stop').disabled = true;
    }
  }
  $('term-run').addEventListener('click', run);
  $('term-stop').addEventListener('click', function () { if (term) term.abort(); });
  $('term-clear').addEventListener('click', function () { $('term-out').textContent = ''; });
  $('term-cmd').addEventListener('keydown', function (e) {
    if (e.key === 'Enter') { e.preventDefault(); run(); }
    else if (e.key === 'ArrowUp' && back > 0) { e.preventDefault(); $('term-cmd').value = past[--back]; }
    else if (e.key === 'ArrowDown' && back < past.length) { e.preventDefault(); back++; $('term-cmd').value = past[back] || ''; }
  });

  connect();
}

if (typeof document !== 'undefined') boot(svcStudio);
`;
