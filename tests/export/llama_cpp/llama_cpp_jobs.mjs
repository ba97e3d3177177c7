// Runs GGUF files in llama.cpp (node-llama-cpp's prebuilt CPU build) for trident's tests and
// benchmarks. Reads a JSON list of jobs from the file named by the first argument and prints one
// JSON list of results, in order:
//   {"op": "generate", "model": F, "prompt": TEXT | "prompt_ids": [..], "tokens": N}
//       -> {"prompt_ids", "ids", "text"}: greedy (temperature 0), N tokens, EOG tokens included;
//          the text they add after the prompt
//   {"op": "score", "model": F, "ids": [..], "from": K}
//       -> {"steps": [{"top": id, "top_p": p, "given_p": p}]}: teacher-forced over `ids`, llama.cpp's
//          softmax (temperature 1, no top-k, top-p or min-p) before ids[k] for each k >= K: its argmax and the
//          probability of the token trident chose
//   {"op": "tokenize", "model": F, "texts": [..]} -> {"ids": [[..]], "texts": [..]} (detokenized)
//   {"op": "bench", "model": F, "prompts": [[ids]..], "tokens": N, "reps": R, "threads": T,
//    "flash_attention": bool|"auto"}
//       -> {"runs": [{"ttft_ms", "decode_tokens_per_s"}], "context": {...}}: B = prompts.length
//          sequences of one context, evaluated together (node-llama-cpp batches the sequences'
//          steps into one llama_decode), greedy, N new tokens each; the time to the first token
//          of every sequence (their prefill) and the new tokens per second after it. A warm-up run
//          first; each run starts from empty sequences.
// A job that fails gives {"error": message}; the process still answers the rest.
//
//   node llama_cpp_jobs.mjs JOBS.json --tools DIR [--threads N]
// DIR holds node_modules/node-llama-cpp (scripts/install-npm-tool.sh tests/export/llama_cpp DIR).
import {readFileSync} from "node:fs";
import path from "node:path";
import {pathToFileURL} from "node:url";

import {answerJobs, option, readJobs} from "../node_jobs.mjs";

const jobs = readJobs();
const threads = Number(option("--threads", "1"));
const packageDir = path.join(path.resolve(option("--tools", ".")), "node_modules", "node-llama-cpp");
const main = JSON.parse(readFileSync(path.join(packageDir, "package.json"), "utf8")).main ?? "index.js";
const {getLlama} = await import(pathToFileURL(path.join(packageDir, main)).href);
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const models = new Map();

async function load(path) {
  if (!models.has(path)) models.set(path, await llama.loadModel({modelPath: path}));
  return models.get(path);
}

async function withSequence(model, size, fn) {
  const context = await model.createContext({contextSize: Math.max(64, size), threads, sequences: 1});
  try {
    return await fn(context.getSequence());
  } finally {
    await context.dispose();
  }
}

async function run(job) {
  const model = await load(job.model);
  if (job.op === "tokenize") {
    const ids = job.texts.map((t) => Array.from(model.tokenize(t, false)));
    return {ids, texts: ids.map((x) => model.detokenize(x))};
  }
  if (job.op === "generate") {
    const prompt = job.prompt_ids ?? Array.from(model.tokenize(job.prompt, false));
    const ids = await withSequence(model, prompt.length + job.tokens, async (seq) => {
      const out = [];
      for await (const t of seq.evaluate(prompt, {temperature: 0, yieldEogToken: true})) {
        out.push(t);
        if (out.length >= job.tokens) break;
      }
      return out;
    });
    // The text the tokens add after the prompt (a SentencePiece piece's leading space included).
    const before = model.detokenize(prompt), all = model.detokenize([...prompt, ...ids]);
    return {prompt_ids: prompt, ids, text: all.startsWith(before) ? all.slice(before.length) : model.detokenize(ids)};
  }
  if (job.op === "score") {
    const steps = await withSequence(model, job.ids.length, async (seq) => {
      const input = job.ids.slice(0, -1).map((t, k) =>
        k + 1 >= job.from ? [t, {generateNext: {probabilities: true, options: {temperature: 1, topK: 0, topP: 1, minP: 0}}}] : t);
      const out = await seq.controlledEvaluate(input);
      const result = [];
      for (let k = job.from - 1; k < job.ids.length - 1; ++k) {
        const probs = out[k].next.probabilities;
        const [top, topP] = probs.entries().next().value;
        result.push({top, top_p: topP, given_p: probs.get(job.ids[k + 1]) ?? 0});
      }
      return result;
    });
    return {steps};
  }
  if (job.op === "bench") {
    const B = job.prompts.length, longest = Math.max(...job.prompts.map((p) => p.length));
    const context = await model.createContext({
      contextSize: B * (longest + job.tokens), sequences: B,
      threads: {ideal: job.threads ?? threads, min: job.threads ?? threads},
      flashAttention: job.flash_attention ?? "auto"});
    try {
      const sequences = job.prompts.map(() => context.getSequence());
      const once = async () => {
        await Promise.all(sequences.map((s) => s.clearHistory()));
        const start = performance.now();
        const firsts = [];
        await Promise.all(sequences.map(async (seq, b) => {
          let n = 0;
          for await (const t of seq.evaluate(job.prompts[b], {temperature: 0, yieldEogToken: true})) {
            if (++n === 1) firsts.push(performance.now());
            if (n >= job.tokens) break;
          }
        }));
        const end = performance.now(), first = Math.max(...firsts);
        return {ttft_ms: first - start, decode_tokens_per_s: (B * (job.tokens - 1)) / ((end - first) / 1e3)};
      };
      await once();  // warm-up: the weights paged in, llama.cpp's graphs built
      const runs = [];
      for (let r = 0; r < (job.reps ?? 3); ++r) runs.push(await once());
      return {runs, context: {size: context.contextSize, sequences: B, batch_size: context.batchSize,
                              flash_attention: context.flashAttention, threads: job.threads ?? threads}};
    } finally {
      await context.dispose();
    }
  }
  throw new Error(`unknown op ${JSON.stringify(job.op)}`);
}

await answerJobs(jobs, run);
process.exit(0);
