// Runs an ONNX model on ONNX Runtime's CPU provider (the onnxruntime-node package:
//   npm install onnxruntime-node@1.30.0 --ignore-scripts
// then NODE_PATH=<that folder>/node_modules), one thread, on inputs from .npy files; prints one
// JSON line with the median and best latency of --runs runs, and writes the first output to
// --output as .npy (f32) when given; --opt-level sets ONNX Runtime's graph optimization level
// (default all). For scripts/bench_int8.py.
//
//   node scripts/bench/ort_run.js model.onnx input_ids=ids.npy --runs 20 --output y.npy
'use strict';
const fs = require('fs');
const ort = require('onnxruntime-node');

function readNpy(path) {
  const buf = fs.readFileSync(path);
  if (buf.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(`${path}: not a .npy file`);
  const headerLen = buf[6] === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = buf[6] === 1 ? 10 : 12;
  const header = buf.toString('latin1', start, start + headerLen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').filter((s) => s.trim()).map(Number);
  if (/'fortran_order':\s*True/.test(header)) throw new Error(`${path}: Fortran order`);
  const data = buf.subarray(start + headerLen);
  const copy = (Type) => new Type(data.buffer.slice(data.byteOffset, data.byteOffset + data.length));
  if (descr === '<f4') return new ort.Tensor('float32', copy(Float32Array), shape);
  if (descr === '<i8') return new ort.Tensor('int64', copy(BigInt64Array), shape);
  if (descr === '<i4') return new ort.Tensor('int32', copy(Int32Array), shape);
  throw new Error(`${path}: dtype ${descr} is not f4, i8 or i4`);
}

function writeNpy(path, tensor) {
  const shape = tensor.dims.length === 1 ? `(${tensor.dims[0]},)` : `(${tensor.dims.join(', ')})`;
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': ${shape}, }`;
  header += ' '.repeat(63 - ((10 + header.length) % 64)) + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  const data = Buffer.from(Float32Array.from(tensor.data).buffer);
  fs.writeFileSync(path, Buffer.concat([head, Buffer.from(header, 'latin1'), data]));
}

async function main() {
  const args = process.argv.slice(2);
  let runs = 20, output = null, level = 'all';
  const feeds = {};
  let model = null;
  for (let i = 0; i < args.length; ++i) {
    if (args[i] === '--runs') runs = Number(args[++i]);
    else if (args[i] === '--output') output = args[++i];
    else if (args[i] === '--opt-level') level = args[++i];
    else if (args[i].includes('=')) {
      const [name, file] = args[i].split('=');
      feeds[name] = readNpy(file);
    } else model = args[i];
  }
  if (!model) throw new Error('usage: ort_run.js MODEL.onnx NAME=FILE.npy... [--runs N] [--output Y.npy] [--opt-level disabled|basic|extended|all]');
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: level,
  });
  let result = await session.run(feeds); // warm up
  const times = [];
  for (let r = 0; r < runs; ++r) {
    const t0 = process.hrtime.bigint();
    result = await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  times.sort((a, b) => a - b);
  if (output) writeNpy(output, result[session.outputNames[0]]);
  console.log(JSON.stringify({median_ms: times[Math.floor(times.length / 2)], min_ms: times[0]}));
}

main().catch((e) => { console.error(`ort_run.js: ${e.message}`); process.exit(1); });
