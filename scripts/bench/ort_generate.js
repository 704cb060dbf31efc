// Greedy generation with a decoder exported with past/present K/V (scripts/export_decoder.py's
// inputs: input_ids, attention_mask, position_ids, past_key_values.N.key/value -> logits,
// present.N.key/value) on ONNX Runtime's CPU provider (onnxruntime-node, all graph
// optimizations): the prompt's prefill, then one token per run with the presents fed back as the
// past. Prints one JSON line: the generated ids, the time to the first token and each decode
// step's milliseconds (session.run only). For scripts/bench_decoder.py.
//
//   node scripts/bench/ort_generate.js model.onnx --prompt 1,2,3 --tokens 64 [--threads 1]
'use strict';
const ort = require('onnxruntime-node');

async function main() {
  const args = process.argv.slice(2);
  const model = args[0];
  const flag = (name, fallback) => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : fallback;
  };
  if (!model || model.startsWith('--'))
    throw new Error('usage: ort_generate.js MODEL.onnx --prompt IDS --tokens N [--threads T]');
  const prompt = flag('--prompt', '1').split(',').map((v) => BigInt(v));
  const tokens = Number(flag('--tokens', '16')), threads = Number(flag('--threads', '1'));
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const pastNames = session.inputNames.filter((n) => n.startsWith('past_key_values'));
  const meta = session.inputMetadata ? session.inputMetadata : null;
  // K/V heads and head size: from the input metadata when the runtime gives it, else flags.
  let heads = Number(flag('--kv-heads', '0')), headDim = Number(flag('--head-dim', '0'));
  if ((!heads || !headDim) && meta) {
    const m = Array.isArray(meta) ? meta.find((x) => x.name === pastNames[0]) : meta[pastNames[0]];
    if (m && m.shape) {
      heads = Number(m.shape[1]);
      headDim = Number(m.shape[3]);
    }
  }
  if (!heads || !headDim) throw new Error('give --kv-heads and --head-dim');
  let past = {};
  for (const n of pastNames) past[n] = new ort.Tensor('float32', new Float32Array(0), [1, heads, 0, headDim]);
  let ids = prompt, pastLen = 0;
  const out = [], times = [];
  for (let step = 0; step < tokens; ++step) {
    const n = ids.length;
    const feeds = {
      input_ids: new ort.Tensor('int64', BigInt64Array.from(ids), [1, n]),
      attention_mask: new ort.Tensor('int64', new BigInt64Array(pastLen + n).fill(1n), [1, pastLen + n]),
      ...past,
    };
    // A model with GroupQueryAttention counts the positions from the mask: no position_ids.
    if (session.inputNames.includes('position_ids'))
      feeds.position_ids = new ort.Tensor('int64', BigInt64Array.from({length: n}, (_, i) => BigInt(pastLen + i)), [1, n]);
    const t0 = process.hrtime.bigint();
    const y = await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
    const logits = y.logits, vocab = logits.dims[2];
    const last = logits.data.subarray((n - 1) * vocab, n * vocab);
    let best = 0;
    for (let v = 1; v < vocab; ++v) if (last[v] > last[best]) best = v;
    out.push(best);
    past = {};
    for (const name of pastNames) past[name] = y[name.replace('past_key_values', 'present')];
    pastLen += n;
    ids = [BigInt(best)];
  }
  console.log(JSON.stringify({tokens: out, ttft_ms: times[0], decode_ms: times.slice(1)}));
}

main().catch((e) => { console.error(`ort_generate.js: ${e.message}`); process.exit(1); });
