// The main demo: the course exercises in order (README's first command runs it).
#include <exception>
#include <iostream>

#include "course.h"

int main(int argc, char** argv) {
  try {
    kiln::examples::tensor_basics();
    kiln::examples::tangent_lines(argc > 1 ? argv[1] : "tangent_lines.svg");
    kiln::examples::two_layer_net();
    const char* dump = argc > 2 ? argv[2] : "kiln_dump";
    kiln::examples::eager_vs_traced(dump);
    kiln::examples::compiled_training(dump);
    kiln::examples::digits_cnn(3, argc > 3 ? argv[3] : "digits_cnn.svg");
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
