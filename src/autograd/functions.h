// The differentiable operations: everything a model is written with. Each function computes
// its result through src/ops and, when grad mode is on and an input requires a gradient,
// records a node whose backward rule lives in autograd/derivatives/<family>.cc.
#pragma once

#include "autograd/engine.h"
#include "autograd/functions/attention.h"
#include "autograd/functions/activation_checkpoint.h"
#include "autograd/functions/aux_loss.h"
#include "autograd/functions/backward_hook.h"
#include "autograd/functions/dropout.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/embedding.h"
#include "autograd/functions/join.h"
#include "autograd/functions/linalg.h"
#include "autograd/functions/loss.h"
#include "autograd/functions/moe.h"
#include "autograd/functions/norm.h"
#include "autograd/functions/pointwise.h"
#include "autograd/functions/reduce.h"
#include "autograd/functions/rope.h"
#include "autograd/functions/shape.h"
#include "autograd/functions/softmax.h"
#include "autograd/functions/swiglu.h"
#include "autograd/grad_mode.h"
