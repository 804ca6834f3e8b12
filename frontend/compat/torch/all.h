// Everything torch/torch.h gives: tensors, nn, optim, autograd, data, serialize.
#pragma once

#include "torch/autograd.h"
#include "torch/cuda.h"
#include "torch/data.h"
#include "torch/nn.h"
#include "torch/optim.h"
#include "torch/serialize.h"
#include "torch/functions.h"
