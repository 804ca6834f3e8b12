// torch::data on Kiln: the pipeline of frontend/data_pipeline.h under
// libtorch's names (DataLoaderOptions is kiln::data::LoaderOptions).
#pragma once

#include "torch/functions.h"

namespace torch::data {

using kiln::data::Example;
using kiln::data::make_data_loader;
using kiln::data::StatelessDataLoader;
using kiln::data::TensorExample;
using DataLoaderOptions = kiln::data::LoaderOptions;
namespace datasets = kiln::data::datasets;
namespace samplers = kiln::data::samplers;
namespace transforms = kiln::data::transforms;
namespace example {
using kiln::data::NoTarget;
}  // namespace example

}  // namespace torch::data
