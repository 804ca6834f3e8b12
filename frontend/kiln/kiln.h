// Kiln's public header: tensors, autograd, nn, optim, data (and, as they land, the
// tracing JIT). See README.md for the API and DESIGN.md for the architecture.
#pragma once

#include "frontend/autograd.h"
#include "frontend/data.h"
#include "frontend/data_pipeline.h"
#include "frontend/function.h"
#include "frontend/generator.h"
#include "frontend/nn.h"
#include "frontend/nn_adaptive.h"
#include "frontend/nn_conv.h"
#include "frontend/nn_parity.h"
#include "frontend/nn_rnn.h"
#include "frontend/optim.h"
#include "frontend/tensor.h"
#include "frontend/jit.h"
#include "frontend/distributed.h"
#include "frontend/npy.h"
#include "frontend/serialize.h"
#include "frontend/checkpoint.h"
#include "frontend/archive.h"
#include "frontend/safetensors.h"
