// trident: the command-line tool. Thin by design: parse arguments, call the library, turn
// errors into messages and exit codes (the only place that exits).
//
//   trident prepare  --out DIR [--tokenizer NAME|PATH] [--vocab DIR] [--val-fraction F] FILE...
//   trident train    [--config FILE] [--section.key=value ...] [--print-config] [--help-config]
//   trident sample   --checkpoint DIR [--prompt STR] [--tokens N] [--temperature T] [--top-k K] [--seed S]
//   trident eval     --checkpoint DIR [--batches N] [--val-file FILE]
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
// 130 a second Ctrl-C.
#include "trident_main.h"

int main(int argc, char** argv) { return trident::cli::trident_main(argc, argv); }
