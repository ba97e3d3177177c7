// trident's command line: parse arguments, call the library, turn errors into messages and
// exit codes (the only place that exits). trident_cli.cc's main() is this; a test program
// calls it too, after installing what it tests with (tests/support/trident_with_faults.cc).
//
//   trident prepare  --out DIR [--tokenizer NAME|PATH] [--vocab DIR] [--val-fraction F] FILE...
//   trident train    [--config FILE] [--section.key=value ...] [--print-config] [--help-config]
//   trident sample   --checkpoint DIR [--prompt STR] [--tokens N] [--temperature T] [--top-k K] [--seed S]
//   trident eval     --checkpoint DIR [--batches N] [--val-file FILE]
//   trident quantize --checkpoint DIR --scheme int8|int4|nf4 --out DIR [--skip LAYERS]
//   trident tokenize [--tokenizer NAME|PATH] [--vocab DIR] (--text STR | --file FILE) [--allow-special]
//   trident launch   -n N [--hostfile F] [--mpirun PATH] [--dry-run] -- COMMAND...
//   trident gemm-rates [--config FILE] [--section.key=value ...] [--dtype all|f32|bf16] [--json]
//   trident ctl      URL status|pause|resume|checkpoint|stop [--token-file F] [--reason TEXT]
//   trident report   RUN_DIR [--out FILE]
//   trident plan     [--config FILE] [--ranks N] [--cluster FILE] [--json] [--top K] [--offload]
//                    [--tokens N --price-per-device-hour P] [--section.key=value ...]
//   trident calibrate [--config FILE] [--out FILE] [--section.key=value ...]
//
// Exit status: 0 done; 1 an error (its message on stderr); 75 a training run that stopped
// early with a checkpoint (a signal, or train.max_runtime): the same command resumes it;
// 76 a hang rule's stop; 78 a config error; 79 an alert rule's stop; 80 diverged; 130 a second
// Ctrl-C (Note [Exit statuses] in train/stop_request.h; the README's table has them all).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string_view>

#include "trident_main.h"

#include "commands.h"
#include "core/check.h"
#include "train/stop_request.h"

namespace trident::cli {

int trident_main(int argc, char** argv) {
  // A training rank's first act: a SIGTERM or a forwarded SIGUSR1 that comes while the job
  // starts must ask for a stop, not kill the rank (Note [Preemption]).
  if (argc > 1 && std::string_view(argv[1]) == "train") {
    trident::train::install_stop_handlers();
    trident::train::route_stop_signals_to_own_thread();  // Note [Stop signals on their own thread]
  }
  CLI::App app{"trident: train GPT-class language models"};
  app.require_subcommand(1);
  PrepareArgs prepare;
  TrainArgs train;
  SampleArgs sample;
  ServeArgs serve;
  EvalArgs eval;
  ExportArgs export_args;
  QuantizeArgs quantize;
  TokenizeArgs tokenize;
  LaunchArgs launch;
  GemmRatesArgs gemm_rates;
  CtlArgs ctl;
  ReportArgs report;
  PlanArgs plan;
  CalibrateArgs calibrate;
  CLI::App* cmd_prepare = add_prepare(app, prepare);
  CLI::App* cmd_train = add_train(app, train);
  CLI::App* cmd_sample = add_sample(app, sample);
  CLI::App* cmd_serve = add_serve(app, serve);
  CLI::App* cmd_eval = add_eval(app, eval);
  CLI::App* cmd_export = add_export(app, export_args);
  CLI::App* cmd_quantize = add_quantize(app, quantize);
  CLI::App* cmd_tokenize = add_tokenize(app, tokenize);
  CLI::App* cmd_launch = add_launch(app, launch);
  CLI::App* cmd_gemm_rates = add_gemm_rates(app, gemm_rates);
  CLI::App* cmd_ctl = add_ctl(app, ctl);
  CLI::App* cmd_report = add_report(app, report);
  CLI::App* cmd_plan = add_plan(app, plan);
  CLI::App* cmd_calibrate = add_calibrate(app, calibrate);
  if (trident::Status s = check_command_names(app, argc, argv); !s.is_ok()) {
    std::fprintf(stderr, "error: %s\n", s.to_string().c_str());
    return 1;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    trident::Status s = trident::Status::ok();
    int exit_code = 0;  // a status other than an error's 1 (a stopped run's 75, launch's mpirun's)
    if (*cmd_prepare) s = run_prepare(prepare);
    else if (*cmd_train) s = run_train(train, cmd_train->remaining(), &exit_code);
    else if (*cmd_sample) s = run_sample(sample);
    else if (*cmd_serve) s = run_serve(serve);
    else if (*cmd_eval) s = run_eval(eval);
    else if (*cmd_export) s = run_export(export_args);
    else if (*cmd_quantize) s = run_quantize(quantize);
    else if (*cmd_tokenize) s = run_tokenize(tokenize);
    else if (*cmd_launch) s = run_launch(launch, &exit_code);
    else if (*cmd_gemm_rates) s = run_gemm_rates(gemm_rates, cmd_gemm_rates->remaining());
    else if (*cmd_ctl) s = run_ctl(ctl);
    else if (*cmd_report) s = run_report(report);
    else if (*cmd_plan) s = run_plan(plan, cmd_plan->remaining());
    else if (*cmd_calibrate) s = run_calibrate(calibrate, cmd_calibrate->remaining());
    if (!s.is_ok()) {
      std::fprintf(stderr, "%s%s\n", error_prefix().c_str(), s.to_string().c_str());
      exit_after_error(exit_code != 0 ? exit_code : 1);  // train's 78 and 80 (Note [Exit statuses])
    }
    if (exit_code != 0) {
      std::fflush(stdout);
      std::fflush(stderr);
      std::exit(exit_code);  // MPI_Finalize runs at exit: every rank stopped at the same step
    }
  } catch (const trident::Error& e) {
    std::fprintf(stderr, "%s%s\n", error_prefix().c_str(), e.what());
    exit_after_error(1);
  }
  return 0;
}

}  // namespace trident::cli
