// The course exercises as functions, so the demo runs them in sequence and
// each also builds as its own program (see CMakeLists.txt).
#pragma once

namespace kiln::examples {
int tensor_basics();
int tangent_lines(const char* svg_path);
int two_layer_net();
int eager_vs_traced(const char* dump_dir);
int compiled_training(const char* dump_dir);
int digits_cnn(int epochs, const char* svg_path);
}  // namespace kiln::examples
