// GPU probe: one JSON object per visible GPU on stdout (index, uuid, model, memory, compute capability, clocks, driver
// and runtime versions), as the CUDA runtime sees them. cuda/check-on-gpu.sh prints it with its figures.
// Exit status 0 with at least one GPU, 4 when no GPU can be used (the message says why, on stderr).
#include <cuda_runtime.h>

#include <cstdio>

int main() {
  int n = 0, driver = 0, runtime = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n < 1) {
    fprintf(stderr, "gpu-probe: no usable GPU: %s\n", e != cudaSuccess ? cudaGetErrorString(e) : "none visible");
    return 4;
  }
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) return 4;
    int sm_khz = 0, mem_khz = 0;
    cudaDeviceGetAttribute(&sm_khz, cudaDevAttrClockRate, i);
    cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, i);
    char uuid[37];
    const unsigned char* u = reinterpret_cast<const unsigned char*>(p.uuid.bytes);
    snprintf(uuid, sizeof uuid, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2],
             u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
    char name[257];
    int k = 0;
    for (const char* s = p.name; *s && k < 256; ++s) name[k++] = (*s == '"' || *s == '\\' || *s < 0x20) ? '?' : *s;
    name[k] = 0;
    printf(
        "{\"index\":%d,\"uuid\":\"GPU-%s\",\"model\":\"%s\",\"memory_mib\":%zu,\"cc\":\"%d.%d\",\"sms\":%d,"
        "\"sm_clock_mhz\":%d,\"mem_clock_mhz\":%d,\"l2_bytes\":%d,\"driver\":%d,\"runtime\":%d}\n",
        i, uuid, name, p.totalGlobalMem >> 20, p.major, p.minor, p.multiProcessorCount, sm_khz / 1000, mem_khz / 1000,
        p.l2CacheSize, driver, runtime);
  }
  return 0;
}
