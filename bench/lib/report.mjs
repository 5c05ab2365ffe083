// Console output: the per-server summary line and the comparison table.

export function fmt(x, d = 1) {
  return x === null || x === undefined ? '-' : Number(x).toFixed(d);
}

/** One server's medians for one model, as printed (to stderr) after its runs. */
export function summaryLine(model, server, r, parallel) {
  return `[${model}] ${server}: prefill ${fmt(r.prefill_tps)} t/s, decode ${fmt(r.decode_tps)} t/s, ttft ${fmt(r.ttft_ms)} ms (engine ${fmt(r.ttft_engine_ms, 2)}, rest ${fmt(r.ttft_rest_ms, 2)}), agg ${fmt(r[`agg${parallel}_tps`])} t/s, engine ${fmt(r.engine_ms_per_token, 3)} ms/token${r.engine_idle_ms_per_token != null ? `, engine idle ${fmt(r.engine_idle_ms_per_token, 3)} ms/token` : ''}${r.peak_rss_mib != null ? `, peak RSS ${fmt(r.peak_rss_mib, 0)} MiB` : ''}${r.huge_pages_mib != null ? ` (${fmt(r.huge_pages_mib, 0)} MiB on huge pages)` : ''}`;
}

export function printTable(results, servers, parallel) {
  const aggKey = `agg${parallel}_tps`;
  const metrics = [
    ['prefill t/s', 'prefill_tps', 1, 'higher'],
    ['decode t/s', 'decode_tps', 1, 'higher'],
    ['TTFT ms (short)', 'ttft_ms', 1, 'lower'],
    [`${parallel}-stream agg t/s`, aggKey, 1, 'higher'],
    ['peak RSS MiB', 'peak_rss_mib', 0, 'lower'],
    ['on 2 MiB pages MiB', 'huge_pages_mib', 0, 'info'],
  ];
  const rows = [['model', 'metric', ...servers.map((s) => (s === 'llama' ? 'llama-server' : 'svc')), ...(servers.length === 2 ? ['svc/llama'] : [])]];
  for (const [model, r] of Object.entries(results)) {
    for (const [label, key, d] of metrics) {
      const vals = servers.map((s) => r[s]?.[key] ?? null);
      const row = [model, label, ...vals.map((v) => fmt(v, d))];
      if (servers.length === 2) row.push(vals[0] && vals[1] !== null ? `${(vals[1] / vals[0]).toFixed(2)}x` : '-');
      rows.push(row);
    }
  }
  const w = rows[0].map((_, c) => Math.max(...rows.map((r) => String(r[c]).length)));
  const line = (r) => r.map((v, c) => (c < 2 ? String(v).padEnd(w[c]) : String(v).padStart(w[c]))).join('  ');
  console.log(line(rows[0]));
  console.log(w.map((n) => '-'.repeat(n)).join('  '));
  for (const r of rows.slice(1)) console.log(line(r));
}
