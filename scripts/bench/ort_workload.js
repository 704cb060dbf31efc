// Runs a workload of text requests on ONNX Runtime's CPU provider (onnxruntime-node, one thread,
// all graph optimizations): the requests [from, to) of LENGTHS.json (a JSON array of sequence
// lengths), each a batch of one with random token ids below --vocab, an attention mask of ones
// and token type 0 (the inputs input_ids, attention_mask and token_type_ids); prints one JSON
// line with the total milliseconds of the session runs. For scripts/bench_mixed_lengths.py.
//
//   node scripts/bench/ort_workload.js model.onnx lengths.json --from 0 --to 500 --vocab 30522
'use strict';
const fs = require('fs');
const ort = require('onnxruntime-node');

async function main() {
  const args = process.argv.slice(2);
  const [model, lengthsPath] = args.filter((a, i) => !a.startsWith('--') && !(i > 0 && args[i - 1].startsWith('--')));
  const flag = (name, fallback) => {
    const i = args.indexOf(name);
    return i >= 0 ? Number(args[i + 1]) : fallback;
  };
  if (!model || !lengthsPath) throw new Error('usage: ort_workload.js MODEL.onnx LENGTHS.json [--from I] [--to J] [--vocab V]');
  const lengths = JSON.parse(fs.readFileSync(lengthsPath, 'utf8'));
  const from = flag('--from', 0), to = flag('--to', lengths.length), vocab = flag('--vocab', 30522);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: 'sequential', graphOptimizationLevel: 'all',
  });
  let seed = 12345;
  const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  const feeds = (n) => {
    const ids = new BigInt64Array(n), mask = new BigInt64Array(n).fill(1n), types = new BigInt64Array(n);
    for (let i = 0; i < n; ++i) ids[i] = BigInt(1 + Math.floor(random() * (vocab - 1)));
    return {input_ids: new ort.Tensor('int64', ids, [1, n]), attention_mask: new ort.Tensor('int64', mask, [1, n]),
            token_type_ids: new ort.Tensor('int64', types, [1, n])};
  };
  await session.run(feeds(16)); // warm up
  let total = 0;
  for (let r = from; r < to; ++r) {
    const f = feeds(lengths[r]);
    const t0 = process.hrtime.bigint();
    await session.run(f);
    total += Number(process.hrtime.bigint() - t0) / 1e6;
  }
  console.log(JSON.stringify({total_ms: total, requests: to - from}));
}

main().catch((e) => { console.error(`ort_workload.js: ${e.message}`); process.exit(1); });
