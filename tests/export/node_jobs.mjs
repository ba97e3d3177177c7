// What tests/export's job scripts share (llama_cpp/llama_cpp_jobs.mjs, onnxruntime/onnx_jobs.mjs):
// the command line `node SCRIPT JOBS.json --tools DIR [...]`, and answering a JSON list of jobs
// with one JSON list of results, in order, where a job that fails gives {"error": message} and
// the rest still run.
import {readFileSync} from "node:fs";

// The value after `name` on the command line, or `fallback`.
export const option = (name, fallback) => {
  const at = process.argv.indexOf(name);
  return at > 0 ? process.argv[at + 1] : fallback;
};

// The jobs of the file named by the first argument.
export const readJobs = () => JSON.parse(readFileSync(process.argv[2], "utf8"));

// Runs each job through `run` (async) and prints the results as one line of JSON.
export async function answerJobs(jobs, run) {
  const results = [];
  for (const job of jobs) {
    try {
      results.push(await run(job));
    } catch (e) {
      results.push({error: String(e?.message ?? e)});
    }
  }
  console.log(JSON.stringify(results));
}
