/**
 * The studio page's body. Static: every value shown in it is set by the script with
 * textContent (model output, command output and error messages are never parsed as HTML), and
 * no element carries an inline handler or style (the Content-Security-Policy refuses both).
 */
export const STUDIO_MARKUP = String.raw`
<header>
  <h1>svc studio</h1>
  <span id="status">connecting…</span>
  <details class="keybox" id="keybox">
    <summary>Credentials</summary>
    <div class="drop">
      <label for="key">API key (sent as Authorization: Bearer; kept in this tab only)</label>
      <input id="key" type="password" autocomplete="off" spellcheck="false">
      <label for="marking">X-Classification (servers with markings only)</label>
      <input id="marking" type="text" autocomplete="off" spellcheck="false">
      <div class="row"><button id="key-save" class="primary">Use</button><button id="key-forget">Forget</button></div>
    </div>
  </details>
</header>
<nav id="tabs" role="tablist">
  <button role="tab" data-tab="chat" aria-selected="true">Chat</button>
  <button role="tab" data-tab="embed" aria-selected="false">Embeddings</button>
  <button role="tab" data-tab="rerank" aria-selected="false">Rerank</button>
  <button role="tab" data-tab="redact" aria-selected="false">Redact</button>
  <button role="tab" data-tab="tokens" aria-selected="false">Tokens</button>
  <button role="tab" data-tab="term" aria-selected="false" id="term-tab" hidden>Terminal</button>
</nav>
<main>
  <section id="tab-chat">
    <div class="grid">
      <div class="card">
        <label for="chat-model">Model</label>
        <select id="chat-model"></select>
        <label for="system">System prompt</label>
        <textarea id="system" rows="4" placeholder="(none)"></textarea>
        <label for="temperature">Temperature</label>
        <input id="temperature" type="number" min="0" max="2" step="0.1" value="0.7">
        <label for="max-tokens">max_tokens</label>
        <input id="max-tokens" type="number" min="1" step="1" value="256">
        <label for="stop-strings">Stop strings (one per line)</label>
        <textarea id="stop-strings" rows="2"></textarea>
        <div class="row"><button id="chat-clear">New chat</button></div>
      </div>
      <div class="card">
        <div id="transcript" aria-live="polite"></div>
        <div class="meta" id="chat-meta"></div>
        <div class="error" id="chat-error"></div>
        <textarea id="prompt" rows="3" placeholder="Message (Enter sends, Shift+Enter for a new line)"></textarea>
        <div class="row"><button id="send" class="primary">Send</button><button id="stop" disabled>Stop</button></div>
      </div>
    </div>
  </section>

  <section id="tab-embed" hidden>
    <div class="card">
      <label for="embed-model">Encoder</label>
      <select id="embed-model"></select>
      <label for="embed-input">Inputs (one per line)</label>
      <textarea id="embed-input" rows="5"></textarea>
      <div class="row"><button id="embed-run" class="primary">Embed</button></div>
      <div class="error" id="embed-error"></div>
      <div class="meta" id="embed-meta"></div>
      <div id="embed-out"></div>
    </div>
  </section>

  <section id="tab-rerank" hidden>
    <div class="card">
      <label for="rerank-model">Cross-encoder</label>
      <select id="rerank-model"></select>
      <label for="rerank-query">Query</label>
      <input id="rerank-query" type="text">
      <label for="rerank-docs">Documents (one per line)</label>
      <textarea id="rerank-docs" rows="6"></textarea>
      <div class="row"><button id="rerank-run" class="primary">Rerank</button></div>
      <div class="error" id="rerank-error"></div>
      <div id="rerank-out"></div>
    </div>
  </section>

  <section id="tab-redact" hidden>
    <div class="card">
      <label for="redact-input">Text</label>
      <textarea id="redact-input" rows="6"></textarea>
      <div class="row"><button id="redact-run" class="primary">Redact</button></div>
      <div class="error" id="redact-error"></div>
      <pre class="out" id="redact-out"></pre>
      <div id="redact-findings"></div>
    </div>
  </section>

  <section id="tab-tokens" hidden>
    <div class="card">
      <p class="meta">Counts the prompt the chat's model would read: the chat's system prompt, and this text as one user message (POST /v1/messages/count_tokens).</p>
      <label for="tokens-input">Text</label>
      <textarea id="tokens-input" rows="6"></textarea>
      <div class="row"><button id="tokens-run" class="primary">Count</button></div>
      <div class="error" id="tokens-error"></div>
      <div class="meta" id="tokens-out"></div>
    </div>
  </section>

  <section id="tab-term" hidden>
    <div class="card">
      <p class="warn">Commands run on this machine as the server's user (/bin/sh -c), killed with everything they started when they time out, when you press Stop, or when the shell exits.</p>
      <div class="row">
        <input id="term-cmd" type="text" placeholder="command" autocomplete="off" spellcheck="false">
        <input id="term-cwd" type="text" placeholder="working directory (server's)" autocomplete="off" spellcheck="false">
        <input id="term-timeout" class="narrow" type="number" min="1" max="300" value="30" title="timeout, seconds">
        <button id="term-run" class="primary">Run</button><button id="term-stop" disabled>Stop</button><button id="term-clear">Clear</button>
      </div>
      <pre class="out" id="term-out"></pre>
    </div>
  </section>
</main>
`;
