// libtorch's C++ print of tensors (TensorPrintStyle::libtorch, what a program
// built through the compatibility header gets from `std::cout << tensor`).
// Each expected text is what libtorch 1.13 printed for the same tensor.
#include <sstream>

#include "frontend/print.h"
#include "test_util.h"

namespace kiln {
namespace {

std::string printed(const Tensor& t) {
  const TensorPrintStyle before = tensor_print_style();
  set_tensor_print_style(TensorPrintStyle::libtorch);
  std::ostringstream os;
  os << t;
  set_tensor_print_style(before);
  return os.str();
}

Tensor rows_of(const Tensor& t, Shape s) { return t.reshape(s); }

TEST_CASE("libtorch's print: scalars, vectors, matrices and their types") {
  CHECK(printed(tensor(3.5)) == "3.5\n[ CPUFloatType{} ]");
  CHECK(printed(tensor(std::vector<float>{1.5f, -2.25f, 3.0f})) ==
        " 1.5000\n-2.2500\n 3.0000\n[ CPUFloatType{3} ]");
  CHECK(printed(rows_of(arange(6), {2, 3})) == " 0  1  2\n 3  4  5\n[ CPULongType{2,3} ]");
  CHECK(printed(rows_of(arange(6).to(kFloat), {2, 3})) == " 0  1  2\n 3  4  5\n[ CPUFloatType{2,3} ]");
  CHECK(printed(arange(4).gt(Scalar(1))) == " 0\n 0\n 1\n 1\n[ CPUBoolType{4} ]");
  CHECK(printed(arange(4).to(kDouble).div(Scalar(3.0))) ==
        " 0.0000\n 0.3333\n 0.6667\n 1.0000\n[ CPUDoubleType{4} ]");
  CHECK(printed(zeros({0})) == "[ CPUFloatType{0} ]");
  CHECK(printed(arange(3).to(kInt32)) == " 0\n 1\n 2\n[ CPUIntType{3} ]");
  CHECK(printed(Tensor()) == "[ Tensor (undefined) ]");
}

TEST_CASE("libtorch's print: scale lines, scientific notation, nan and inf") {
  Tensor grid = rows_of(arange(6).to(kFloat), {2, 3});
  CHECK(printed(grid.mul(Scalar(0.001))) ==
        "0.001 *\n 0.0000  1.0000  2.0000\n  3.0000  4.0000  5.0000\n[ CPUFloatType{2,3} ]");
  CHECK(printed(grid.mul(Scalar(12345.6))) ==
        "     0.0000  12345.5996  24691.1992\n 37036.7969  49382.3984  61728.0000\n[ CPUFloatType{2,3} ]");
  Tensor powers = rows_of(arange(1, 7).to(kFloat), {2, 3}).pow(Scalar(8)).mul(Scalar(1e-6));
  CHECK(printed(powers) ==
        " 1.0000e-06  2.5600e-04  6.5610e-03\n 6.5536e-02  3.9062e-01  1.6796e+00\n[ CPUFloatType{2,3} ]");
  CHECK(printed(tensor(std::vector<float>{-1.0f, NAN, INFINITY, 0.5f})) ==
        "-1.0000\n    nan\n    inf\n 0.5000\n[ CPUFloatType{4} ]");
  CHECK(printed(tensor(std::vector<float>{1e10f, 2.0f})) == " 1.0000e+10\n 2.0000e+00\n[ CPUFloatType{2} ]");
  CHECK(printed(tensor(std::vector<float>{123456789.0f, 1.0f})) == "1.23457e+08\n         1\n[ CPUFloatType{2} ]");
  CHECK(printed(tensor(std::vector<float>{-0.000123f, 0.5f})) == "-0.0001\n 0.5000\n[ CPUFloatType{2} ]");
}

TEST_CASE("libtorch's print: slices of higher ranks and column blocks") {
  Tensor cube = rows_of(arange(24).to(kFloat), {2, 3, 4}).sub(Scalar(5.5));
  CHECK(printed(cube) ==
        "(1,.,.) = \n -5.5000 -4.5000 -3.5000 -2.5000\n -1.5000 -0.5000  0.5000  1.5000\n"
        "  2.5000  3.5000  4.5000  5.5000\n\n(2,.,.) = \n   6.5000   7.5000   8.5000   9.5000\n"
        "  10.5000  11.5000  12.5000  13.5000\n  14.5000  15.5000  16.5000  17.5000\n[ CPUFloatType{2,3,4} ]");
  CHECK(printed(rows_of(arange(30).to(kFloat).sin(), {2, 15})) ==
        "Columns 1 to 10 0.0000  0.8415  0.9093  0.1411 -0.7568 -0.9589 -0.2794  0.6570  0.9894  0.4121\n"
        " 0.6503 -0.2879 -0.9614 -0.7510  0.1499  0.9129  0.8367 -0.0089 -0.8462 -0.9056\n\n"
        "Columns 11 to 15-0.5440 -1.0000 -0.5366  0.4202  0.9906\n"
        "-0.1324  0.7626  0.9564  0.2709 -0.6636\n[ CPUFloatType{2,15} ]");
  // Four dims: the first leading dim counts fastest, as libtorch's counter.
  CHECK(printed(rows_of(arange(8), {2, 2, 1, 2})) ==
        "(1,1,.,.) = \n  0  1\n\n(2,1,.,.) = \n  4  5\n\n(1,2,.,.) = \n  2  3\n\n(2,2,.,.) = \n  6  7\n"
        "[ CPULongType{2,2,1,2} ]");
}

TEST_CASE("Kiln's own style stays PyTorch's repr") {
  std::ostringstream os;
  os << tensor(std::vector<float>{1.5f, 2.0f});
  CHECK(os.str() == "tensor([1.5000, 2.0000])");
}

}  // namespace
}  // namespace kiln
