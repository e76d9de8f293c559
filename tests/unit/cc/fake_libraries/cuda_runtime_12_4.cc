// A CUDA runtime of version 12.4 (older than the 12.5 tf_hvd needs), for
// runtime_library_test: the version query is all the loader asks of it before refusing.
extern "C" {
int cudaRuntimeGetVersion(int* version) {
  *version = 12040;
  return 0;  // cudaSuccess
}
}
