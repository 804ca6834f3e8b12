// ATen's header on Kiln: the at:: names (the same as torch::'s).
#pragma once

#include "torch/functions.h"
