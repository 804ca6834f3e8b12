// The CUDA entry points of a build without the CUDA toolkit: CUDA is never
// available, and every use of it says why. (With the toolkit, cuda_driver.cpp
// and cublas.cpp provide them.)
#if !KILN_HAVE_CUDA_TOOLKIT
#include "ir/error.h"
#include "runtime/cublas.h"
#include "runtime/cuda_driver.h"

namespace kiln {
namespace cuda {
namespace {

const char* kReason =
    "CUDA is not available: this build of Kiln has no CUDA support (the CUDA toolkit was not "
    "found when it was built); kCUDA tensors need a build with the toolkit and an NVIDIA driver";

[[noreturn]] void unavailable() {
  throw Error(kReason);
}

}  // namespace

bool available() {
  return false;
}
std::string unavailable_reason() {
  return kReason;
}
void require(const char* what, int) {
  throw Error(std::string(what) + ": " + kReason);
}
int device_count() {
  return 0;
}
std::string DeviceInfo::str() const {
  return name;
}
const DeviceInfo& device_info(int) {
  unavailable();
}
void* mem_alloc(size_t, int) {
  unavailable();
}
void mem_free(void*, int) {
  unavailable();
}
std::pair<size_t, size_t> mem_info(int) {
  unavailable();
}
void* host_alloc_pinned(size_t) {
  unavailable();
}
void host_free_pinned(void*) {
  unavailable();
}
void copy_to_device(void*, const void*, size_t, int) {
  unavailable();
}
void copy_to_host(void*, const void*, size_t, int) {
  unavailable();
}
void copy_device(void*, const void*, size_t, int) {
  unavailable();
}
void memset_zero(void*, size_t, int) {
  unavailable();
}
void synchronize(int) {
  unavailable();
}
void* stream(int) {
  unavailable();
}
void* collective_stream(int) {
  unavailable();
}
Function load_function(const std::string&, const std::string&, int) {
  unavailable();
}
void launch(Function, unsigned, unsigned, unsigned, void**, int) {
  unavailable();
}
Event::Event(int device, bool) : device_(device) {
  unavailable();
}
Event::~Event() = default;
void Event::record() {
  unavailable();
}
void Event::record_on(void*) {
  unavailable();
}
void Event::wait_on(void*) const {
  unavailable();
}
bool Event::done() const {
  return true;
}
void Event::wait() const {}
float Event::ms_since(const Event&) const {
  unavailable();
}
std::vector<EntryPoint> driver_entry_points() {
  return {};
}
std::string driver_library() {
  return "";
}
void reload_driver_for_testing(const std::string&) {}

}  // namespace cuda

void matmul_cuda(const View&, const View&, const View&, int) {
  cuda::unavailable();
}
bool cublaslt_supports(const View&, const View&, const View&) {
  return false;
}
void matmul_cuda_epilogue(const View&, const View&, const View&, const GemmEpilogue&, int) {
  cuda::unavailable();
}
bool cublas_available() {
  return false;
}
std::string cublas_unavailable_reason() {
  return cuda::unavailable_reason();
}
std::string cublas_info() {
  return cuda::unavailable_reason();
}
std::vector<cuda::EntryPoint> cublas_entry_points() {
  return {};
}

}  // namespace kiln
#endif
